"""Robustness: what pass^k loses under tool faults or reworded requests, paired by task.

Runs of one agent that differ only in their fault plan (the ``faults`` column, ``run(faults=)``)
or their request perturbation (``perturbation``) are arms of a paired comparison: the same tasks
under the same conditions but one. :func:`robustness` compares every arm with the base arm
(:func:`~passk_nb.stats.paired.compare`: the mean per-task difference with its intervals) and names
the tasks that break; :func:`robustness_tasks` gives the per-task values a heatmap draws.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from passk_nb.data.faults import fault_classes
from passk_nb.data.records import NOTHING_APPLIED
from passk_nb.stats.checks import check_k, require_columns
from passk_nb.stats.counts import Counts, as_counts, counts
from passk_nb.stats.estimators import pass_at_k, pass_hat_k
from passk_nb.stats.paired import _arms, _default_by, compare
from passk_nb.stats.params import CI, INFRA, MIN_TASKS, N_BOOT, PAIRED_METHOD, SEED, share_docs
from passk_nb.stats.result import described, result_by

__all__ = ["robustness", "robustness_tasks", "ROBUSTNESS_ON"]

#: The columns :func:`robustness` compares along, and the base arm of each.
ROBUSTNESS_ON: dict[str, str] = dict(NOTHING_APPLIED)


def _counted(
    df: Counts | pd.DataFrame | str | os.PathLike[str],
    on: str,
    base: object | None,
    by: str | Sequence[str] | None,
    infra: str,
) -> tuple[Counts, object]:
    """The counts of ``df`` grouped by ``by`` and ``on``, and the base arm."""
    if on not in ROBUSTNESS_ON:
        raise ValueError(
            f"on must be one of {list(ROBUSTNESS_ON)} (the fault plan or the request perturbation "
            f"of a run); got {on!r}"
        )
    if isinstance(df, pd.DataFrame):
        require_columns(df, (on,))
    return as_counts(df, by=by, infra=infra, on=on), ROBUSTNESS_ON[on] if base is None else base


def _arm_values(df: pd.DataFrame, on: str, base: object) -> list[object]:
    values = [v for v in pd.unique(df[on].dropna()) if v != base]
    if base not in set(df[on].dropna()):
        raise ValueError(
            f"the base arm {on}={base!r} is not in the frame (values: {sorted(map(str, df[on].unique()))}); "
            f"run the same agent without {on} too, or pass base= one of them"
        )
    if not values:
        raise ValueError(f"the frame holds only {on}={base!r}: nothing to compare it with")
    return sorted(values, key=str)


@share_docs
def robustness_tasks(
    df: Counts | pd.DataFrame | str | os.PathLike[str],
    *,
    k: int,
    on: str = "faults",
    base: object | None = None,
    by: str | Sequence[str] | None = None,
    infra: str = INFRA,
) -> pd.DataFrame:
    """Per arm and task: the task's pass@k and pass^k at ``base`` and under the arm.

    {df_or_folder}
    {k}
    on: ``"faults"`` (the runs' fault plans) or ``"perturbation"`` (their request perturbations).
    base: the arm the others are compared with (default: ``"none"``, the runs without).
    {paired_by}
    {infra}

    One row per group, arm and task with at least k usable trials under both: the ``by``
    columns, ``on`` (the arm), ``fault_class`` (the classes of the arm's faults; for
    ``on="faults"``), ``task``, the trials and successes of both (``n_base``, ``c_base``, ``n``,
    ``c``), ``pass@k_base``, ``pass@k``, ``pass^k_base``, ``pass^k`` (unbiased per-task estimates),
    ``delta`` (pass^k − pass^k_base) and ``breaks`` (``delta < 0``: the task is less reliable under
    the arm; descriptive, for a test per task use :func:`~passk_nb.stats.paired.flips`).

    >>> import pandas as pd
    >>> rows = [{"task": t, "model": "m", "faults": f, "passed": ok}
    ...         for t in "abcde" for f in ("none", "noop:*") for ok in (True, f == "none" or t != "a")]
    >>> df = pd.DataFrame(rows)
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> robustness_tasks(df, k=2)[["task", "pass^k_base", "pass^k", "breaks"]].head(2)
      task  pass^k_base  pass^k  breaks
    0    a          1.0     0.0    True
    1    b          1.0     1.0   False
    """
    check_k(k)
    counted, base = _counted(df, on, base, by, infra)
    table = counted.table
    frames = []
    for arm in _arm_values(table, on, base):
        arm_base, arm_b = _arms(table, on, base, arm)
        columns = _default_by(by, on, arm_base, arm_b)
        if "task" in columns or on in columns:
            raise ValueError(f"by={list(columns)} must not contain 'task' or on={on!r}")
        keys = [*columns, "task"]
        paired = pd.merge(
            counts(arm_base, by=columns, infra=infra)[[*keys, "n", "c"]],
            counts(arm_b, by=columns, infra=infra)[[*keys, "n", "c"]],
            on=keys,
            suffixes=("_base", ""),
        )
        paired = counted.restore(paired[(paired["n_base"] >= k) & (paired["n"] >= k)].reset_index(drop=True))
        if paired.empty:
            continue
        paired.insert(len(columns), on, arm)
        if on == "faults":
            paired.insert(len(columns) + 1, "fault_class", ", ".join(fault_classes(str(arm))))
        for suffix in ("_base", ""):
            n = paired[f"n{suffix}"].to_numpy(np.int64)
            c = paired[f"c{suffix}"].to_numpy(np.int64)
            paired[f"pass@k{suffix}"] = pass_at_k(n, c, k)
            paired[f"pass^k{suffix}"] = pass_hat_k(n, c, k)
        paired["delta"] = paired["pass^k"] - paired["pass^k_base"]
        paired["breaks"] = paired["delta"] < -1e-12
        frames.append(paired)
    if not frames:
        raise ValueError(
            f"no task has {k} usable trials under both the base and another {on}; choose a smaller k"
        )
    ordered = ["pass@k_base", "pass@k", "pass^k_base", "pass^k", "delta", "breaks"]
    out = pd.concat(frames, ignore_index=True)
    front = [col for col in out.columns if col not in ("n_base", "c_base", "n", "c", *ordered)]
    out = out[[*front, "n_base", "c_base", "n", "c", *ordered]]
    by_ = [col for col in front if col in table.columns and col not in (on, "task")]
    return described(out, "robustness_tasks", by=by_, k=k, infra=infra)


@share_docs
def robustness(
    df: Counts | pd.DataFrame | str | os.PathLike[str],
    *,
    k: int,
    on: str = "faults",
    base: object | None = None,
    by: str | Sequence[str] | None = None,
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    infra: str = INFRA,
    method: str = PAIRED_METHOD,
    min_tasks: int = MIN_TASKS,
) -> pd.DataFrame:
    """What each fault plan (or perturbation) costs: pass@k and pass^k with and without, paired by task.

    {df_or_folder}
    {k}
    on: ``"faults"`` (the runs' fault plans, ``run(faults=)``) or ``"perturbation"`` (their request
    perturbations).
    base: the arm the others are compared with (default: ``"none"``, the runs without).
    {paired_by}
    {ci}
    {n_boot}
    {seed}
    {infra}
    {paired_method}
    {min_tasks}

    One row per arm, group and metric (pass@k, pass^k): the ``by`` columns, ``on`` (the arm),
    ``fault_class`` (for ``on="faults"``), then :func:`~passk_nb.stats.paired.compare`'s columns
    with ``a`` the base and ``b`` the arm — ``n_tasks``, ``a``, ``b``, ``diff`` (b − a), ``lo``/``hi``
    (for new tasks like these), ``se_fixed``, ``fixed_lo``/``fixed_hi`` (these tasks re-rolled),
    ``corr``, ``ci_method`` — and ``n_broken`` and ``broken``: how many and which tasks have a lower
    per-task value of the row's metric under the arm (:func:`robustness_tasks`).

    >>> import pandas as pd
    >>> rows = [{"task": t, "model": "m", "faults": f, "passed": ok}
    ...         for t in "abcde" for f in ("none", "noop:*") for ok in (True, f == "none" or t not in "ab")]
    >>> df = pd.DataFrame(rows)
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> out = robustness(df, k=2, n_boot=0)
    >>> out[["faults", "fault_class", "metric", "a", "b", "diff", "broken"]]
       faults         fault_class  metric    a    b  diff broken
    0  noop:*  implicit permanent  pass@k  1.0  1.0   0.0
    1  noop:*  implicit permanent  pass^k  1.0  0.6  -0.4   a, b
    """
    check_k(k)
    counted, base = _counted(df, on, base, by, infra)
    tasks = robustness_tasks(counted, k=k, on=on, base=base, by=by, infra=infra)
    frames = []
    for arm in _arm_values(counted.table, on, base):
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message=".*lack .* usable trials under both", category=UserWarning
            )
            try:
                paired = compare(
                    counted,
                    on=on,
                    a=base,
                    b=arm,
                    k=k,
                    by=by,
                    ci=ci,
                    n_boot=n_boot,
                    seed=seed,
                    infra=infra,
                    method=method,
                    min_tasks=min_tasks,
                )
            except ValueError as exc:
                if "usable trials under both arms" not in str(exc):
                    raise
                continue  # no task of this arm has k trials at both: robustness_tasks has none either
        columns = [col for col in paired.columns if col in counted.table.columns and col != on]
        paired.insert(len(columns), on, arm)
        if on == "faults":
            paired.insert(len(columns) + 1, "fault_class", ", ".join(fault_classes(str(arm))))
        mine = tasks[tasks[on] == arm]
        broken = []
        for row in paired.itertuples(index=False):
            group = mine
            for col in columns:
                group = group[group[col] == getattr(row, col)]
            metric = "pass^k" if row.metric == "pass^k" else "pass@k"
            lower = group.loc[group[metric] < group[f"{metric}_base"] - 1e-12, "task"]
            broken.append(sorted(map(str, lower)))
        paired["n_broken"] = [len(b) for b in broken]
        paired["broken"] = [", ".join(b) for b in broken]
        frames.append(paired)
    out = pd.concat(frames, ignore_index=True)
    by_ = result_by(frames[0], "compare()")  # every arm's compare groups alike
    return described(out, "robustness", by=by_, k=k, ci=ci, method=method, infra=infra)
