"""Argument checks every analysis shares, beside the vocabulary of :mod:`passk_nb.stats.params`.

Each check raises a ValueError that says what was wrong and how to fix it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from passk_nb.data.records import COLUMNS as RECORD_COLUMNS
from passk_nb.data.records import OUTCOMES, outcome_text
from passk_nb.stats.params import NOT_CLUSTERS, default_by

#: Columns every analysis needs, besides the grouping columns.
ANALYSIS_COLUMNS: tuple[str, ...] = ("task", "passed", "outcome")
#: The outcome of a trial that infrastructure, not the agent, ended.
INFRA_OUTCOME = "infra_error"
#: What ``infra=`` accepts.
INFRA_MODES: tuple[str, ...] = ("exclude", "fail")
#: Outcomes counted per (group, task) besides ``c`` (passes) and ``n_infra``: one ``n_<outcome>``
#: column each, in this order.
COUNTED_OUTCOMES: tuple[str, ...] = tuple(o for o in OUTCOMES if o not in ("pass", INFRA_OUTCOME))


#: The identity of one trial (as in passk_nb.data.records.KEY).
TRIAL_KEY: tuple[str, ...] = ("run_id", "task", "trial")


def refuse_wrong_outcomes(
    passed: np.ndarray, is_pass: np.ndarray, known: np.ndarray, outcome: pd.Series
) -> None:
    """Raise when records carry what passk never writes: an ``outcome`` outside
    :data:`~passk_nb.data.records.OUTCOMES` (``known`` False) or ``passed`` disagreeing with
    ``outcome == "pass"``. Counting them would report a number no trial had.

    >>> import numpy as np, pandas as pd
    >>> out = pd.Series(["pass", "PASS!"])
    >>> refuse_wrong_outcomes(np.array([True, True]), np.array([True, False]), np.array([True, False]), out)
    Traceback (most recent call last):
    ...
    ValueError: records that passk never writes: 1 row has an outcome that is not one of passk's (first: 'PASS!', row 1); set 'passed' to outcome == "pass" with an outcome from passk_nb.data.records.OUTCOMES, or build the frame with passk_nb.data.records.frame_from_records
    """  # noqa: E501
    what = outcome_text(
        np.flatnonzero(~known),
        np.flatnonzero(passed != is_pass),
        lambda i: outcome.iloc[i],
        lambda i: bool(passed[i]),
    )
    if what is None:
        return
    raise ValueError(
        f"records that passk never writes: {what}; set 'passed' to outcome == \"pass\" with an outcome "
        "from passk_nb.data.records.OUTCOMES, or build the frame with "
        "passk_nb.data.records.frame_from_records"
    )


def refuse_repeated_trials(df: pd.DataFrame, by: Sequence[str] = ()) -> None:
    """Raise when a trial appears twice (same ``run_id``, ``task``, ``trial`` and ``by`` columns):
    it would be counted twice. Frames without those three columns are not checked.

    >>> import pandas as pd
    >>> refuse_repeated_trials(pd.DataFrame({"run_id": ["r", "r"], "task": ["t", "t"], "trial": [0, 0]}))
    Traceback (most recent call last):
    ...
    ValueError: 1 trial appears more than once (same run_id, task, trial; e.g. ('r', 't', 0)), and would be counted twice. Read records with passk_nb.load(folder), which keeps one row per trial, or drop the repeats: df.drop_duplicates(['run_id', 'task', 'trial'])
    """  # noqa: E501
    if not all(col in df.columns for col in TRIAL_KEY):
        return
    repeated = df.duplicated(list(dict.fromkeys([*by, *TRIAL_KEY])), keep="first")
    if repeated.any():
        n = int(repeated.sum())
        example = tuple(
            v.item() if hasattr(v, "item") else v for v in df.loc[repeated, list(TRIAL_KEY)].iloc[0]
        )
        raise ValueError(
            f"{n} trial{' appears' if n == 1 else 's appear'} more than once (same run_id, task, trial; "
            f"e.g. {example}), and would be counted twice. Read records with passk_nb.load(folder), which "
            f"keeps one row per trial, or drop the repeats: df.drop_duplicates({list(TRIAL_KEY)})"
        )


def as_records(df: pd.DataFrame | str | os.PathLike[str]) -> pd.DataFrame:
    """Trial records: ``df`` itself, or every record stored under the folder (or file) it names."""
    if isinstance(df, pd.DataFrame):
        return df
    from passk_nb.data.store import load  # here: a frame in hand never loads the store

    return load(df)


def two_arms(df: pd.DataFrame, on: str, a: object, b: object, what: str) -> pd.DataFrame:
    """The trials of ``df`` with ``df[on]`` ``a`` or ``b``; an error naming ``what`` (the function)
    and the values present when either has none.

    >>> two_arms(pd.DataFrame({"p": ["x", "y", "z"]}), "p", "x", "y", "f")["p"].tolist()
    ['x', 'y']
    """
    if on not in df.columns or not {a, b} <= set(df[on]):
        have = sorted(map(str, set(df[on])))[:10] if on in df.columns else f"no column {on!r}"
        raise ValueError(f"{what} needs trials with {on} = {a!r} and with {on} = {b!r}; found {have}")
    return df[df[on].isin([a, b])]


def require_columns(df: pd.DataFrame, columns: Iterable[str]) -> None:
    """Raise ValueError listing the columns ``df`` lacks.

    >>> import pandas as pd
    >>> require_columns(pd.DataFrame({"task": []}), ("task", "passed", "outcome"))
    Traceback (most recent call last):
    ...
    ValueError: the frame lacks columns ['passed', 'outcome']; trial records need at least ['task', 'passed', 'outcome'] plus the grouping columns. Build them with passk_nb.data.records.frame_from_records
    """  # noqa: E501
    missing = [col for col in dict.fromkeys(columns) if col not in df.columns]
    if missing:
        raise ValueError(
            f"the frame lacks columns {missing}; trial records need at least {list(ANALYSIS_COLUMNS)} "
            "plus the grouping columns. Build them with passk_nb.data.records.frame_from_records"
        )


def as_columns(by: str | Sequence[str]) -> tuple[str, ...]:
    columns = (by,) if isinstance(by, str) else tuple(by)
    if len(set(columns)) != len(columns):
        raise ValueError(f"by={list(columns)} repeats a column")
    return columns


def check_k(k: object) -> None:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a whole number ≥ 1; got k={k!r}")


def check_options(*, ci: float, n_boot: int, seed: int) -> None:
    if not 0 < ci < 1:
        raise ValueError(f"ci must be between 0 and 1 (e.g. 0.95); got ci={ci}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int | np.integer) or n_boot < 0:
        raise ValueError(f"n_boot must be a whole number ≥ 0 (0: no intervals); got n_boot={n_boot!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a whole number ≥ 0; got seed={seed!r}")


def check_infra(infra: object) -> None:
    if infra not in INFRA_MODES:
        raise ValueError(f"infra must be one of {list(INFRA_MODES)}; got infra={infra!r}")


def check_cluster(cluster: object, by: Sequence[str] = ()) -> None:
    """ValueError unless ``cluster`` is None or a column name that is neither a grouping column nor
    one of :data:`~passk_nb.stats.params.NOT_CLUSTERS` (a family groups tasks; it is not a group).

    >>> check_cluster("task")
    Traceback (most recent call last):
    ...
    ValueError: cluster='task' cannot name a task's family (not one of ['task', 'trial', 'passed', 'outcome', 'n', 'c', 'n_infra']); pass the column that names each task's family, e.g. cluster='task_family', or None
    """  # noqa: E501
    if cluster is None:
        return
    if not isinstance(cluster, str) or cluster in NOT_CLUSTERS:
        raise ValueError(
            f"cluster={cluster!r} cannot name a task's family (not one of {list(NOT_CLUSTERS)}); pass "
            "the column that names each task's family, e.g. cluster='task_family', or None"
        )
    if cluster in by:
        raise ValueError(
            f"cluster={cluster!r} is also a grouping column (by={list(by)}): a family groups the tasks "
            "inside one row, so leave it out of by, or drop cluster= to report each family on its own"
        )


def records_by(by: str | Sequence[str] | None) -> tuple[str, ...]:
    """``by`` for records stored in the record schema (a parquet folder, before reading it): None
    is every identity column the schema has.

    >>> records_by(None)[:3], records_by("model")
    (('suite', 'suite_hash', 'provider'), ('model',))
    """
    return default_by(pd.DataFrame(columns=list(RECORD_COLUMNS)), by)
