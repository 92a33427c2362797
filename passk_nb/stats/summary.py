"""Suite statistics from trial records: :func:`summarize`, :func:`curve`, :func:`compare`, :func:`flips`.

Every function takes a DataFrame of trial records (one row per trial, see
:mod:`passk_nb.data.records`; the columns ``task``, ``passed`` and ``outcome`` plus any
grouping columns are needed) and works per task: each task keeps its own number of
usable trials n and successes c, the unbiased per-task estimates come from
:mod:`passk_nb.stats.estimators`, and a group's value is the mean over its tasks
(τ-bench's rule). k larger than a task's n makes that task's value NaN; the group
mean then covers fewer tasks, and ``n_tasks_covered`` says how many. k is never
lowered silently.

Intervals answer one of two questions; the columns say which:

- *Population of tasks* ("new tasks like these"): ``*_lo``/``*_hi`` of a group of
  several tasks come from a cluster bootstrap over tasks, resampling task ids with
  replacement and keeping each task's trials intact (percentile interval, ``n_boot``
  resamples). With few tasks this interval is wide by nature and coarse (five tasks
  have few distinct resamples); a group with a single task gets NaN.
- *Fixed task set* ("these tasks, re-rolled"): ``pass^k_se_fixed`` (pass^k) and
  ``pass@k_se_fixed`` are standard errors from the unbiased per-task variance
  U² − C(c, 2k)/C(n, 2k), summed over tasks and divided by T² (NaN unless every
  covered task has n ≥ 2k). Show it beside the bootstrap interval when tasks are few.

The bootstrap draw depends only on ``seed`` and the number of tasks in a group, so the
same seed gives the same intervals, and a group's interval does not change when other
groups are added to or removed from the frame.

``infra_error`` trials are not agent failures: by default (``infra="exclude"``) they
are left out of n and counted in ``n_infra_excluded``; ``infra="fail"`` counts them as
failures.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from passk_nb.stats.counts import (
    check_k,
    check_options,
    group_ids,
    group_means,
    group_sums,
    task_counts,
)
from passk_nb.stats.estimators import pass_at_k, pass_hat_k
from passk_nb.stats.intervals import (
    clopper_pearson,
    cluster_bootstrap,
    fixed_task_variance,
    nan_interval,
)
from passk_nb.stats.params import CI, INFRA, N_BOOT, SEED, default_by

#: The metrics, in the order they appear in long frames.
METRICS: tuple[str, ...] = ("pass@k", "pass^k")


def summarize(
    df: pd.DataFrame,
    *,
    k: int,
    by: str | Sequence[str] | None = None,
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    infra: str = INFRA,
) -> pd.DataFrame:
    """pass@k and pass^k with intervals, one row per group of ``by``.

    Columns, after the ``by`` columns:

    - ``k``; ``n_tasks`` tasks in the group; ``n_tasks_covered`` tasks with at least k
      usable trials (only those enter the values); ``n_trials`` usable trials;
      ``successes``; ``n_infra_excluded`` infra_error trials left out of n.
    - ``pass@k``, ``pass^k``: mean over covered tasks of the unbiased per-task values.
    - ``pass@k_lo``, ``pass@k_hi``, ``pass^k_lo``, ``pass^k_hi``: the ``ci`` interval.
      For a group of several tasks (``"task"`` not in ``by``) it is the cluster
      bootstrap over tasks ("new tasks like these"). For a per-task row (``"task"`` in
      ``by``) it is the exact Clopper–Pearson interval for the task's success
      probability p mapped through p^k and 1 − (1 − p)^k: an interval for the true
      per-task value. At the edges the unbiased point estimate can sit outside it
      (3 of 4 trials passed: pass^4 = 0, yet p^4 > 0 for sure).
    - ``pass^k_se_fixed`` (for pass^k) and ``pass@k_se_fixed``: fixed-task-set standard errors
      ("these tasks, re-rolled"); NaN unless every covered task has n ≥ 2k.
    - ``ci_method``: ``"cluster-bootstrap"``, ``"clopper-pearson"`` or ``"none"``.

    ``by=()`` treats the whole frame as one group (a task's trials are pooled across
    whatever ``by`` leaves out). ``ci`` is the interval's level (0.95: the 2.5 % and
    97.5 % percentiles). ``n_boot`` is the number of bootstrap resamples; ``n_boot=0``
    gives point estimates only (interval columns NaN). ``seed`` fixes the draw: the same
    seed gives the same intervals. ``infra`` is ``"exclude"`` or ``"fail"`` (module
    docstring). A group where k exceeds every task's n is NaN with a warning; k above
    every n in the whole frame is a ValueError.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": ["a"] * 4 + ["b"] * 4, "model": "m", "prompt_hash": "p",
    ...                    "passed": [True, True, True, True, True, True, False, False]})
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> out = summarize(df, k=2)  # by default: one row per model, prompt and configuration
    >>> out[["model", "n_tasks", "pass@k", "pass^k"]].round(4)
      model  n_tasks  pass@k  pass^k
    0     m        2  0.9167  0.5833
    >>> summarize(df, k=2, by="task")[["task", "pass^k", "pass^k_lo", "pass^k_hi"]].round(3)
      task  pass^k  pass^k_lo  pass^k_hi
    0    a   1.000      0.158      1.000
    1    b   0.167      0.005      0.869
    """
    by = default_by(df, by)
    check_options(ci=ci, n_boot=n_boot, seed=seed)
    check_k(k)
    table = task_counts(df, by, infra)
    n_max = int(table["n"].max())
    if k > n_max:
        n = f"n={n_max}" if table["n"].eq(n_max).all() else f"n (at most {n_max})"
        raise ValueError(f"k={k} is larger than {n} for every task; run more trials or choose k ≤ {n_max}")
    out = _summary(table, by, k, ci=ci, n_boot=n_boot, seed=seed)
    _warn_coverage(out, by, k)
    return out


def curve(
    df: pd.DataFrame,
    ks: Iterable[int] | None = None,
    *,
    by: str | Sequence[str] | None = None,
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    infra: str = INFRA,
) -> pd.DataFrame:
    """pass@k and pass^k against k, as a tidy long frame.

    Columns: the ``by`` columns, ``k``, ``metric`` (``"pass@k"`` or ``"pass^k"``),
    ``value``, ``lo``, ``hi`` and ``n_tasks_covered``, with values and intervals as in
    :func:`summarize` (whose docstring says which question each interval answers).
    ``ks`` defaults to 1 .. the largest n of any task. By default one curve per model
    and prompt, over tasks; add ``"task"`` to ``by`` for per-task curves. Where a k
    covers only part of a group's tasks (uneven n) one warning says so.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": ["a"] * 4 + ["b"] * 4, "model": "m", "prompt_hash": "p",
    ...                    "passed": [True, True, True, True, True, True, False, False]})
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> c = curve(df, n_boot=0)
    >>> c[c["metric"] == "pass^k"][["k", "value"]].round(4).to_string(index=False)
    ' k  value\\n 1 0.7500\\n 2 0.5833\\n 3 0.5000\\n 4 0.5000'
    """
    by = default_by(df, by)
    check_options(ci=ci, n_boot=n_boot, seed=seed)
    table = task_counts(df, by, infra)
    ks = list(range(1, int(table["n"].max()) + 1)) if ks is None else list(ks)
    if not ks:
        raise ValueError("no k to evaluate: every task has 0 usable trials, or ks is empty")
    for k in ks:
        check_k(k)
    wide = pd.concat([_summary(table, by, k, ci=ci, n_boot=n_boot, seed=seed) for k in ks], ignore_index=True)
    partial = wide["n_tasks_covered"] < wide["n_tasks"]
    if partial.any():
        ks_partial = sorted(set(wide.loc[partial, "k"]))
        warnings.warn(
            f"for k in {ks_partial} some groups have tasks with fewer than k usable trials; "
            "those tasks are left out of the values (see n_tasks_covered)",
            UserWarning,
            stacklevel=2,
        )
    long = [
        wide[[*by, "k"]].assign(
            metric=metric,
            value=wide[metric],
            lo=wide[f"{metric}_lo"],
            hi=wide[f"{metric}_hi"],
            n_tasks_covered=wide["n_tasks_covered"],
        )
        for metric in METRICS
    ]
    out = pd.concat(long, ignore_index=True)
    return out.sort_values([*by, "metric", "k"], kind="stable").reset_index(drop=True)


def _summary(
    table: pd.DataFrame, by: tuple[str, ...], k: int, *, ci: float, n_boot: int, seed: int
) -> pd.DataFrame:
    """The :func:`summarize` frame for one k from a per-(group, task) table."""
    gid, groups = group_ids(table, by)
    n_groups = len(groups)
    n, c = table["n"].to_numpy(), table["c"].to_numpy()
    covered = n >= k
    values = np.column_stack([pass_at_k(n, c, k), pass_hat_k(n, c, k)])
    # Var(pass@k estimate) = Var(C(n-c,k)/C(n,k)): the pass^k form applied to failures.
    variances = np.column_stack([fixed_task_variance(n, n - c, k), fixed_task_variance(n, c, k)])
    n_covered = np.bincount(gid[covered], minlength=n_groups)
    means = group_means(gid[covered], values[covered], n_covered)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt(group_sums(gid[covered], variances[covered], n_groups)) / n_covered[:, None]
    lo, hi = nan_interval(n_groups, len(METRICS))
    per_task = "task" in by
    if n_boot and per_task:
        lo, hi = clopper_pearson(n, c, k, ci)
    elif n_boot:
        lo, hi = cluster_bootstrap(gid[covered], values[covered], n_groups, ci=ci, n_boot=n_boot, seed=seed)
    method = "none" if not n_boot else "clopper-pearson" if per_task else "cluster-bootstrap"
    columns = {
        "k": k,
        "n_tasks": np.bincount(gid, minlength=n_groups),
        "n_tasks_covered": n_covered,
        "trials": np.bincount(gid, n, minlength=n_groups).astype(np.int64),
        "successes": np.bincount(gid, c, minlength=n_groups).astype(np.int64),
        "pass@k": means[:, 0],
        "pass^k": means[:, 1],
        "pass@k_lo": lo[:, 0],
        "pass@k_hi": hi[:, 0],
        "pass^k_lo": lo[:, 1],
        "pass^k_hi": hi[:, 1],
        "pass^k_se_fixed": se[:, 1],
        "pass@k_se_fixed": se[:, 0],
        "n_infra_excluded": np.bincount(gid, table["n_infra"], minlength=n_groups).astype(np.int64),
        "ci_method": method,
    }
    return groups.assign(**columns)


def _warn_coverage(out: pd.DataFrame, by: tuple[str, ...], k: int) -> None:
    """Warn about groups whose value covers only some, or none, of their tasks."""
    none = out["n_tasks_covered"] == 0
    some = ~none & (out["n_tasks_covered"] < out["n_tasks"])
    for mask, what in ((none, "no task has"), (some, "only some tasks have")):
        if mask.any():
            names = [_group_name(out.loc[i], by) for i in np.flatnonzero(mask)[:3]]
            more = f" and {int(mask.sum()) - 3} more" if mask.sum() > 3 else ""
            fix = "NaN" if what == "no task has" else "a mean over the covered tasks (see n_tasks_covered)"
            warnings.warn(
                f"{what} ≥ {k} usable trials in {', '.join(names)}{more}; the value is {fix}. "
                f"Run more trials or choose a smaller k",
                UserWarning,
                stacklevel=3,
            )


def _group_name(row: pd.Series, by: tuple[str, ...]) -> str:
    return " ".join(f"{col}={row[col]!r}" for col in by) or "the frame"
