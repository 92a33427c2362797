"""One keyword vocabulary: the defaults and the one-line documentation every analysis shares.

Every function that groups, computes an interval, plots or explores takes the same
keywords with the same defaults (``by``, ``ci``, ``n_boot``, ``seed``, ``infra``), and
documents them with the same sentence, written once here. A docstring says
``{by}`` where the shared sentence goes; :func:`share_docs` fills it in.

>>> @share_docs
... def f(df, *, ci=CI):
...     '''Toy.
...
...     {ci}
...     '''
>>> print(f.__doc__.split(chr(10))[2].strip())
ci: the interval's level (default 0.95).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # light: the CLI imports this module before any command loads pandas
    import pandas as pd

from passk_nb.data.ids import IDENTITY_COLUMNS

F = TypeVar("F", bound=Callable[..., object])

#: Default interval level.
CI = 0.95
#: Default number of bootstrap resamples.
N_BOOT = 2000
#: Default bootstrap seed (the analysis seed; ``run()``'s backend seed is ``backend_seed``).
SEED = 0
#: Default handling of infrastructure errors.
INFRA = "exclude"
#: Default sampling unit of the new-task interval: None, each task on its own. A column name (such
#: as ``task_family``) makes the tasks sharing a value one cluster, resampled together.
CLUSTER: str | None = None
#: Columns that cannot name a task's family: a task is the thing clustered, and a trial's own fields
#: vary within a task.
NOT_CLUSTERS: tuple[str, ...] = ("task", "trial", "passed", "outcome", "n", "c", "n_infra")
#: Fewest tasks for which an interval for new tasks is given. Measured with
#: ``benchmarks/coverage.py``: below five tasks the interval that keeps its coverage spans
#: nearly [0, 1] (mean width ≥ 0.95 at three tasks), so it is declined instead.
MIN_TASKS = 5


class TooFewTasksWarning(UserWarning):
    """The interval for new tasks was declined in ``declined`` of ``rows`` rows: they have fewer
    than ``min_tasks`` tasks. A warning of its own so that an interface can say it in its own
    words (the ``passk`` command's notes already say it; ``--quiet`` silences it)."""

    def __init__(self, message: str, *, declined: int, rows: int, min_tasks: int):
        super().__init__(message)
        self.declined, self.rows, self.min_tasks = declined, rows, min_tasks


#: Level of each task's Jeffreys interval for p over which the fixed-task variance takes its largest
#: value (:func:`passk_nb.stats.intervals.fixed_task_variance`).
FIXED_LEVEL = 0.8
#: Intervals for new tasks like these (``method=`` of summarize and curve); the first is the default.
METHODS: tuple[str, ...] = ("korn-graubard", "t", "bootstrap")
#: Default interval for new tasks like these: Korn–Graubard held its coverage from five tasks up.
METHOD = METHODS[0]
#: Intervals of a paired difference (``method=`` of compare); the first is the default.
PAIRED_METHODS: tuple[str, ...] = ("korn-graubard", "t", "bootstrap")
#: Default interval of a paired difference: Korn–Graubard on (d + 1)/2, as summarize's headline
#: interval; it held coverage ≥ 93 % and false positives ≤ 5 % where the paired t did not.
PAIRED_METHOD = PAIRED_METHODS[0]

DOCS: dict[str, str] = {
    "df": (
        "df: trial records, one row per trial (see :mod:`passk_nb.data.records`), or a counts table: "
        "one row per group and task with ``n`` usable trials and ``c`` successes (optionally "
        "``n_infra``), as :func:`passk_nb.counts` returns it."
    ),
    "df_or_folder": (
        "df: trial records, one row per trial (see :mod:`passk_nb.data.records`), a counts table "
        "(one row per group and task with ``n`` usable trials and ``c`` successes, optionally "
        "``n_infra``, as :func:`passk_nb.counts` returns it), the path of a folder of parquet "
        "records, counted without loading them (DuckDB with the ``duckdb`` extra installed, else "
        "only the needed columns are read), or the :class:`~passk_nb.stats.counts.Counts` "
        ":func:`~passk_nb.stats.counts.as_counts` made of any of them (counted once, used as it is)."
    ),
    "by": (
        "by: columns to group by. Default None: every identity column the frame has "
        f"({', '.join(IDENTITY_COLUMNS)}; ``run_id`` where ``config`` is missing), so "
        "configurations are never pooled; ``by=()`` pools everything on purpose."
    ),
    "paired_by": (
        "by: columns to group by. Default None: the identity columns except ``on`` and any column "
        'whose values never overlap between the arms (so ``on="prompt_name"`` does not also group '
        "by the prompt's hash)."
    ),
    "k": "k: the number of tries in pass@k and pass^k (≥ 1, at most a task's n).",
    "ks": "ks: the k values (default 1 .. the largest n of any task).",
    "ci": f"ci: the interval's level (default {CI}).",
    "n_boot": f"n_boot: bootstrap resamples (default {N_BOOT}; 0 for point estimates only).",
    "seed": f"seed: the bootstrap's seed; the same seed gives the same intervals (default {SEED}).",
    "infra": (
        'infra: "exclude" (default) leaves infra_error trials out of n, assuming they are unrelated '
        'to task difficulty; "fail" counts them as failures.'
    ),
    "method": (
        f'method: the interval for new tasks like these: "{METHOD}" (default; exact binomial '
        'with an effective number of tasks), "t" (Student-t) or "bootstrap" (percentile bootstrap '
        "over tasks, ``n_boot`` resamples)."
    ),
    "paired_method": (
        f'method: the interval of the mean paired difference: "{PAIRED_METHOD}" (default; exact '
        'binomial for (d + 1)/2 with an effective number of tasks), "t" (paired t on per-task '
        'differences) or "bootstrap" (the same draw of tasks for both arms).'
    ),
    "cluster": (
        "cluster: a column naming each task's family (e.g. ``task_family``; every trial of a task "
        'has one value; missing or "" is a family of its own). Use it when tasks come in '
        "families (variants of one scenario): the interval for new tasks, the paired comparison and "
        "the plan then resample families, not tasks, and need ``min_tasks`` families. The interval "
        "for these tasks re-rolled is conditional on the tasks and does not change. Default None: "
        "tasks are independent."
    ),
    "min_tasks": (
        f"min_tasks: fewest tasks for an interval for new tasks (default {MIN_TASKS}, measured by "
        'simulation); fewer gives NaN, a warning and ``ci_method`` "declined: too few tasks".'
    ),
    "alpha": "alpha: the false discovery rate of the flip test (default 0.05).",
    "ax": "ax: the matplotlib Axes to draw on (default: a new figure). Returns the Axes.",
    "title": 'title: the figure title (None: a default title; "" for none).',
}


def share_docs(fn: F) -> F:
    """Replace ``{name}`` placeholders of ``fn``'s docstring with the shared parameter sentences."""
    doc = fn.__doc__ or ""
    for name, text in DOCS.items():
        doc = doc.replace("{" + name + "}", text)
    fn.__doc__ = doc
    return fn


def default_by(df: pd.DataFrame, by: str | Sequence[str] | None) -> tuple[str, ...]:
    """``by`` as a tuple of columns; for None, the identity columns ``df`` has.

    >>> import pandas as pd
    >>> default_by(pd.DataFrame(columns=["task", "model", "prompt_hash", "run_id"]), None)
    ('model', 'prompt_hash', 'run_id')
    >>> default_by(pd.DataFrame(columns=["task", "model"]), "model")
    ('model',)
    """
    if by is None:
        columns = [col for col in IDENTITY_COLUMNS if col in df.columns]
        if "config" not in df.columns and "run_id" in df.columns:
            columns.append("run_id")
        return tuple(columns)
    columns_ = (by,) if isinstance(by, str) else tuple(by)
    if len(set(columns_)) != len(columns_):
        raise ValueError(f"by={list(columns_)} repeats a column")
    return columns_
