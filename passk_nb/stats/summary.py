"""Suite statistics from trial records: :func:`summarize` (one k) and :func:`curve` (every k).

Every function takes trial records (one row per trial, :mod:`passk_nb.data.records`) or a counts
table (one row per group and task with ``n`` and ``c``). Each task keeps its own n; a group's
value is the mean of the tasks' unbiased estimates (:mod:`passk_nb.stats.estimators`), and a k
above a task's n leaves it out (``n_tasks_covered``), never lowered silently.

Two intervals answer two questions: ``*_lo``/``*_hi`` for *new tasks like these*
(Korn–Graubard by default; declined below five tasks) and ``*_fixed_lo``/``*_fixed_hi`` for
*these tasks, re-rolled*. The same ``seed`` gives the same intervals. ``infra_error`` trials are
left out of n by default (``infra="exclude"``) and counted; ``infra="fail"`` counts them as failures.

Why these intervals, and their coverage measured by simulation: ``docs/methods/intervals.md``.
"""

from __future__ import annotations

import html
import os
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from passk_nb.stats._grouping import group_ids, group_sums
from passk_nb.stats.checks import check_k, check_options
from passk_nb.stats.counts import Counts, as_counts
from passk_nb.stats.estimators import pass_at_k, pass_hat_k
from passk_nb.stats.exact import unique_rows
from passk_nb.stats.intervals import (
    cell_bootstrap,
    cell_spread,
    check_method,
    clopper_pearson,
    fixed_interval,
    fixed_task_variances,
    kg_interval,
    plugin_task_variance,
    t_interval,
    unit_bootstrap,
    unit_spread,
    units,
)
from passk_nb.stats.params import (
    CI,
    CLUSTER,
    INFRA,
    METHOD,
    METHODS,
    MIN_TASKS,
    N_BOOT,
    SEED,
    TooFewTasksWarning,
    share_docs,
)
from passk_nb.stats.result import Result, described, result_by

#: The metrics, in the order they appear in long frames.
METRICS: tuple[str, ...] = ("pass@k", "pass^k")
#: Population-interval methods of :func:`summarize` and :func:`curve`; the first is the default.
#: ``ci_method`` of a group whose population interval was declined (fewer than ``min_tasks`` tasks).
DECLINED = "declined: too few tasks"


class Summary(Result):
    """What :func:`summarize` returns: a DataFrame whose notebook display leads with what
    ``passk report`` prints — the grouping columns that differ, pass@k and pass^k with their
    intervals, the fixed-task interval and the trials — and names the other columns, which
    pandas would hide behind "…". A part without those columns displays as any DataFrame.

    >>> table = pd.DataFrame({"model": "m", "task": list("abcde"), "n": 4, "c": [4, 3, 2, 1, 0]})
    >>> out = summarize(table, k=2)
    >>> isinstance(out, pd.DataFrame), "0.333 [0.031, 0.813]" in out._repr_html_()
    (True, True)
    >>> out[["model", "pass^k"]]._repr_html_() == pd.DataFrame(out[["model", "pass^k"]])._repr_html_()
    True
    """

    @property
    def _constructor(self) -> type[Summary]:
        return Summary

    def _repr_html_(self) -> str | None:
        needed = {"k", "pass@k", "pass^k", "pass^k_fixed_lo", "trials", "successes", "n_tasks"}
        if not needed <= set(self.columns) or len(self) > _HTML_ROWS:
            return pd.DataFrame(self)._repr_html_()
        try:
            by = list(result_by(self, "summarize()"))
        except ValueError:  # a frame that does not say, or lost a grouping column: shown as it is
            return pd.DataFrame(self)._repr_html_()
        varying = [col for col in by if self[col].nunique(dropna=False) > 1] or by
        shown = pd.DataFrame({col: self[col] for col in varying})
        k = self["k"].iloc[0]
        for metric in METRICS:
            shown[metric.replace("k", str(k))] = [
                estimate_text(row[metric], row.get(f"{metric}_lo"), row.get(f"{metric}_hi"))
                for _, row in self.iterrows()
            ]
        shown["these tasks"] = [
            interval_text(lo, hi)
            for lo, hi in zip(self["pass^k_fixed_lo"], self["pass^k_fixed_hi"], strict=True)
        ]
        shown["tasks"] = self["n_tasks"]
        passes = zip(self["successes"], self["trials"], strict=True)
        shown["trials"] = [f"{int(c)}/{int(n)} pass" for c, n in passes]
        shown["interval"] = self["ci_method"] if "ci_method" in self else ""
        hidden = [col for col in self.columns if col not in set(varying) | {"k"}]
        note = (
            f"<p style='font-size:smaller'>pass@{k}, pass^{k}: value [interval for new tasks]; these "
            f"tasks: pass^{k}'s interval for these tasks re-run. {len(self.columns)} columns in all: "
            f"{html.escape(', '.join(hidden))}. <code>pd.DataFrame(summary)</code> shows every one.</p>"
        )
        return shown.to_html(escape=True) + note


_HTML_ROWS = 200


def estimate_text(value: float, lo: float | None, hi: float | None) -> str:
    """An estimate as tables print it: ``0.333 [0.008, 0.909]``, ``n/a`` for NaN, no brackets without bounds.

    >>> estimate_text(1 / 3, 0.008, 0.909), estimate_text(float("nan"), None, None)
    ('0.333 [0.008, 0.909]', 'n/a')
    """
    text = "n/a" if pd.isna(value) else f"{value:.3f}"
    if lo is not None and not pd.isna(lo):
        text += f" [{lo:.3f}, {hi:.3f}]"
    return text


def interval_text(lo: float, hi: float) -> str:
    """An interval as tables print it, held to [0, 1]; ``–`` when it is missing.

    >>> interval_text(0.1, 1.0000001), interval_text(float("nan"), 1.0)
    ('[0.100, 1.000]', '–')
    """
    if pd.isna(lo) or pd.isna(hi):
        return "–"
    return f"[{max(lo, 0.0):.3f}, {min(hi, 1.0):.3f}]"


#: What a report's rows can be sorted by (``passk report --sort``): its two metrics.
SORTS: tuple[str, ...] = ("pass^k", "pass@k")


def best_first(summary: pd.DataFrame, metric: str = "pass^k") -> pd.DataFrame:
    """The rows of a :func:`summarize` (or report) frame from the highest ``metric`` to the lowest,
    NaN last, ties in their order; numbered again from 0.

    >>> frame = pd.DataFrame({"model": ["a", "b", "c", "d"], "pass^k": [0.5, float("nan"), 0.9, 0.5]})
    >>> best_first(frame)["model"].tolist()
    ['c', 'a', 'd', 'b']
    """
    if metric not in SORTS:
        raise ValueError(f"sort by one of {', '.join(SORTS)}; got {metric!r}")
    return summary.sort_values(metric, ascending=False, na_position="last", kind="stable").reset_index(
        drop=True
    )


@share_docs
def summarize(
    df: Counts | pd.DataFrame | str | os.PathLike[str],
    *,
    k: int,
    by: str | Sequence[str] | None = None,
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    infra: str = INFRA,
    method: str = METHOD,
    min_tasks: int = MIN_TASKS,
    cluster: str | None = CLUSTER,
) -> Summary:
    """pass@k and pass^k with both intervals, one row per group of ``by``.

    {df_or_folder}
    {k}
    {by}
    {ci}
    {n_boot}
    {seed}
    {infra}
    {method}
    {min_tasks}
    {cluster}

    Columns, after the ``by`` columns:

    - ``k``; ``n_tasks`` tasks in the group; ``n_tasks_covered`` tasks with at least k
      usable trials (only those enter the values); ``trials`` usable trials;
      ``successes``; ``n_infra_excluded`` infra_error trials left out of n.
    - ``pass@k``, ``pass^k``: mean over covered tasks of the unbiased per-task values.
    - ``pass@k_lo``, ``pass@k_hi``, ``pass^k_lo``, ``pass^k_hi``: the ``ci`` interval for *new
      tasks like these* (module docstring). For a per-task row (``"task"`` in ``by``) it is the
      exact Clopper–Pearson interval for the task's success probability p mapped through
      p ↦ p^k and p ↦ 1 − (1 − p)^k; at the edges the unbiased point estimate can sit outside it
      (3 of 4 trials passed: pass^4 = 0, yet p^4 > 0 for sure).
    - ``pass^k_se_fixed``, ``pass@k_se_fixed``: standard errors for *these tasks, re-rolled*;
      positive whenever the covered tasks have n ≥ k.
    - ``pass@k_fixed_lo``, ``pass@k_fixed_hi``, ``pass^k_fixed_lo``, ``pass^k_fixed_hi``: the ``ci``
      interval for *these tasks, re-rolled* (:func:`~passk_nb.stats.intervals.fixed_interval`); tables,
      plots and the gate read these bounds and compute none of their own.
    - Every bound is the running max (pass@k) or min (pass^k) of that bound over k' = 1..k
      (:func:`monotone_bounds`): pass@k cannot fall as k rises, nor pass^k rise, so the bounds
      do not either; they equal :func:`curve`'s at k.
    - ``pass@k_infra_fail``, ``pass^k_infra_fail``: the values had the excluded infrastructure
      errors counted as failures (NaN where none were excluded): the sensitivity of the headline
      to the assumption that infrastructure errors are unrelated to task difficulty.
    - ``ci_method``: the interval each row has: ``"korn-graubard"``, ``"t"``,
      ``"bootstrap"``, ``"clopper-pearson"``, ``"declined: too few tasks"`` or ``"none"``
      (``n_boot=0``).
    - With ``cluster``: ``n_clusters``, the families of the covered tasks (the interval for new
      tasks resamples them).

    A group where k exceeds every task's n is NaN with a warning; k above every n in the whole
    frame is a ValueError.

    >>> import pandas as pd
    >>> marks = {"a": "1111", "b": "1110", "c": "1010", "d": "1000", "e": "0000"}
    >>> df = pd.DataFrame([{"task": t, "model": "m", "passed": m == "1"}
    ...                    for t, ms in marks.items() for m in ms])
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> out = summarize(df, k=2)  # by default: one row per model, prompt and configuration
    >>> out[["model", "n_tasks", "pass^k", "pass^k_lo", "pass^k_hi", "pass^k_se_fixed", "ci_method"]].round(3)
      model  n_tasks  pass^k  pass^k_lo  pass^k_hi  pass^k_se_fixed      ci_method
    0     m        5   0.333      0.031      0.813            0.133  korn-graubard
    >>> summarize(df, k=2, by="task")[["task", "pass^k", "pass^k_lo", "pass^k_hi"]].head(2).round(3)
      task  pass^k  pass^k_lo  pass^k_hi
    0    a     1.0      0.158      1.000
    1    b     0.5      0.038      0.987

    A counts table gives the same result: per-task counts from elsewhere, or counts computed
    once and summarised at many k without touching the trials again.

    >>> table = pd.DataFrame({"model": "m", "task": list("abcde"), "n": 4, "c": [4, 3, 2, 1, 0]})
    >>> summarize(table, k=2)[["model", "n_tasks", "pass^k", "pass^k_lo", "pass^k_hi"]].round(3)
      model  n_tasks  pass^k  pass^k_lo  pass^k_hi
    0     m        5   0.333      0.031      0.813

    So does a folder of parquet records, counted without loading them (what ``passk run --out``
    writes; DuckDB does the counting when installed):

    >>> import tempfile
    >>> from passk_nb.data.store import write_part
    >>> folder = tempfile.mkdtemp()
    >>> records = df.assign(run_id="r1", suite="demo", trial=df.groupby("task").cumcount())
    >>> _ = write_part(records.to_dict("records"), folder, "r1")
    >>> summarize(folder, k=2)[["model", "n_tasks", "pass^k", "pass^k_lo", "pass^k_hi"]].round(3)
      model  n_tasks  pass^k  pass^k_lo  pass^k_hi
    0     m        5   0.333      0.031      0.813
    """
    warn_adaptive(df)
    check_options(ci=ci, n_boot=n_boot, seed=seed)
    check_method(method, METHODS, min_tasks)
    check_k(k)
    counted = as_counts(df, by=by, infra=infra, cluster=cluster)
    by, table = counted.by, counted.table
    n_max = int(table["n"].max())
    if n_max == 0 and table["n_infra"].sum() > 0:
        raise ValueError(
            f"all {int(table['n_infra'].sum())} trials were infrastructure errors, which are excluded "
            "(infra='exclude'): there is nothing to estimate. Check the backend (is it running? the URL? "
            "the key?) and run again, or pass infra='fail' to count them as failures"
        )
    if k > n_max:
        n = f"n={n_max}" if table["n"].eq(n_max).all() else f"n (at most {n_max})"
        raise ValueError(f"k={k} is larger than {n} for every task; run more trials or choose k ≤ {n_max}")
    options: dict[str, Any] = {
        "ci": ci,
        "n_boot": n_boot,
        "seed": seed,
        "method": method,
        "min_tasks": min_tasks,
        "unit": counted.units(),
    }
    grouping = counted.groups()
    out = _monotone_summary(table, by, [k], grouping=grouping, **options)
    _warn_coverage(out, by, k)
    warn_declined(out, by, min_tasks)
    summary = Summary(_with_infra_bound(out, table, by, k, infra, grouping))
    return described(
        summary, "summarize", by=by, k=k, ci=ci, method=method, infra=infra, records=df, cluster=cluster
    )


def _with_infra_bound(
    out: pd.DataFrame,
    table: pd.DataFrame,
    by: tuple[str, ...],
    k: int,
    infra: str,
    grouping: tuple[np.ndarray, pd.DataFrame],
) -> pd.DataFrame:
    """Add ``pass@k_infra_fail`` / ``pass^k_infra_fail``: the values had the excluded infrastructure
    errors been failures (NaN where none were excluded). Excluding them assumes they are unrelated to
    how hard a task is; this is the sensitivity bound beside the headline."""
    has_infra = out["n_infra_excluded"].to_numpy() > 0
    if infra != "exclude" or not has_infra.any():
        return out.assign(**{"pass@k_infra_fail": np.nan, "pass^k_infra_fail": np.nan})
    failed = _summary(
        table,
        by,
        [k],
        grouping=grouping,
        n=table["n"].to_numpy() + table["n_infra"].to_numpy(),  # the counts had infra="fail"
        ci=CI,
        n_boot=0,
        seed=SEED,
        method=METHOD,
        min_tasks=MIN_TASKS,
    )
    return out.assign(
        **{
            f"{metric}_infra_fail": np.where(has_infra, failed[metric].to_numpy(), np.nan)
            for metric in METRICS
        }
    )


@share_docs
def curve(
    df: Counts | pd.DataFrame | str | os.PathLike[str],
    ks: Iterable[int] | None = None,
    *,
    by: str | Sequence[str] | None = None,
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    infra: str = INFRA,
    method: str = METHOD,
    min_tasks: int = MIN_TASKS,
    cluster: str | None = CLUSTER,
) -> pd.DataFrame:
    """pass@k and pass^k against k, as a tidy long frame.

    {df_or_folder}
    {ks}
    {by}
    {ci}
    {n_boot}
    {seed}
    {infra}
    {method}
    {min_tasks}
    {cluster}

    Columns: the ``by`` columns, ``k``, ``metric`` (``"pass@k"`` or ``"pass^k"``), ``value``,
    ``lo``, ``hi`` (the :func:`summarize` interval for new tasks), ``se_fixed``, ``fixed_lo``,
    ``fixed_hi`` (the interval for these tasks re-rolled; both bands monotone in k where the truth
    is, the bounds of :func:`summarize` at each k),
    ``n_tasks``, ``n_tasks_covered``, ``partial`` (True where k exceeds some tasks' n, so
    those tasks are left out of the value) and ``ci_method``. Then the curve is over fewer tasks and can rise:
    pass^k falls with k only where ``partial`` is False. Add ``"task"`` to ``by`` for per-task
    curves. Where a k covers only part of a group's tasks one warning says so.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": ["hard"] * 3 + ["easy"] * 5, "model": "m",
    ...                    "passed": [False] * 3 + [True] * 5})
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> c = curve(df, n_boot=0)  # warns: k = 4, 5 leave the hard task out
    >>> hat = c[c["metric"] == "pass^k"]
    >>> hat["value"].tolist(), hat["partial"].tolist()
    ([0.5, 0.5, 0.5, 1.0, 1.0], [False, False, False, True, True])

    From a counts table (here :func:`~passk_nb.stats.counts.counts` of the same trials):

    >>> from passk_nb.stats.counts import counts
    >>> table = counts(df)
    >>> table[["model", "task", "n", "c"]]
      model  task  n  c
    0     m  easy  5  5
    1     m  hard  3  0
    >>> curve(table, ks=[1, 2], n_boot=0).equals(curve(df, ks=[1, 2], n_boot=0))
    True
    """
    check_options(ci=ci, n_boot=n_boot, seed=seed)
    check_method(method, METHODS, min_tasks)
    counted = as_counts(df, by=by, infra=infra, cluster=cluster)
    by, table = counted.by, counted.table
    ks = list(range(1, int(table["n"].max()) + 1)) if ks is None else list(ks)
    if not ks:
        raise ValueError("no k to evaluate: every task has 0 usable trials, or ks is empty")
    for k in ks:
        check_k(k)
    options: dict[str, Any] = {
        "ci": ci,
        "n_boot": n_boot,
        "seed": seed,
        "method": method,
        "min_tasks": min_tasks,
        "unit": counted.units(),
    }
    wide = _monotone_summary(table, by, ks, grouping=counted.groups(), **options)
    partial = wide["n_tasks_covered"] < wide["n_tasks"]
    if partial.any():
        ks_partial = sorted(set(wide.loc[partial, "k"]))
        warnings.warn(
            f"for k in {ks_partial} some groups have tasks with fewer than k usable trials; "
            "those tasks are left out of the values, so the curve there is over fewer tasks and "
            "can rise (see the partial and n_tasks_covered columns)",
            UserWarning,
            stacklevel=2,
        )
    warn_declined(wide, by, min_tasks)
    long = [
        wide[[*by, "k"]].assign(
            metric=metric,
            value=wide[metric],
            lo=wide[f"{metric}_lo"],
            hi=wide[f"{metric}_hi"],
            se_fixed=wide[f"{metric}_se_fixed"],
            fixed_lo=wide[f"{metric}_fixed_lo"],
            fixed_hi=wide[f"{metric}_fixed_hi"],
            n_tasks=wide["n_tasks"],
            n_tasks_covered=wide["n_tasks_covered"],
            partial=partial,
            ci_method=wide["ci_method"],
        )
        for metric in METRICS
    ]
    out = pd.concat(long, ignore_index=True)
    out = out.sort_values([*by, "metric", "k"], kind="stable").reset_index(drop=True)
    return described(
        out, "curve", by=by, k=ks, ci=ci, method=method, infra=infra, records=df, cluster=cluster
    )


def separate_intervals(
    df: Counts | pd.DataFrame | str | os.PathLike[str],
    ks: Iterable[int],
    *,
    by: str | Sequence[str] | None = None,
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    infra: str = INFRA,
    method: str = METHOD,
    min_tasks: int = MIN_TASKS,
) -> pd.DataFrame:
    """The :func:`summarize` columns at each k of ``ks``, each k's intervals on their own: without
    the running max/min over k' ≤ k (:func:`monotone_bounds`) that :func:`summarize` and
    :func:`curve` apply. One block of groups per k, in ``ks`` order. For measuring what that
    envelope changes (``benchmarks/curve_coverage.py``); for results use :func:`curve`.

    >>> table = pd.DataFrame({"task": range(10), "n": 8, "c": [7, 8, 8, 6, 8, 7, 8, 8, 7, 8]})
    >>> raw = separate_intervals(table, [1, 4], by=())
    >>> bool(raw.loc[1, "pass@k_lo"] < raw.loc[0, "pass@k_lo"])  # falls, though pass@4 ≥ pass@1
    True
    >>> bool(curve(table, ks=[4]).loc[0, "lo"] == raw.loc[0, "pass@k_lo"])  # the envelope lifts it
    True
    """
    check_options(ci=ci, n_boot=n_boot, seed=seed)
    check_method(method, METHODS, min_tasks)
    ks = list(ks)
    for k in ks:
        check_k(k)
    counted = as_counts(df, by=by, infra=infra)
    return _summary(
        counted.table,
        counted.by,
        ks,
        grouping=counted.groups(),
        ci=ci,
        n_boot=n_boot,
        seed=seed,
        method=method,
        min_tasks=min_tasks,
    )


#: Every bound of a curve and how it runs in k: pass@k's as running maxima, pass^k's as running
#: minima over k' ≤ k (1 − (1 − p)^k rises and p^k falls with k on every task).
MONOTONE_BOUNDS: tuple[tuple[str, Any], ...] = (
    *((f"pass@k_{edge}", np.fmax) for edge in ("lo", "hi", "fixed_lo", "fixed_hi")),
    *((f"pass^k_{edge}", np.fmin) for edge in ("lo", "hi", "fixed_lo", "fixed_hi")),
)


def _monotone_summary(
    table: pd.DataFrame,
    by: tuple[str, ...],
    ks: Sequence[int],
    *,
    grouping: tuple[np.ndarray, pd.DataFrame],
    **options: Any,
) -> pd.DataFrame:
    """:func:`_summary` at ``ks`` with every bound made monotone in k where the estimand is
    (:func:`monotone_bounds` over all k' ≤ k, whichever ``ks`` were asked), so that summarize(k=K)
    and curve() at K give the same bounds."""
    # k above every n covers no task: no bound to carry, so no need to evaluate the k' up to it
    every = sorted(set(range(1, min(max(ks), int(table["n"].to_numpy().max(initial=0))) + 1)) | set(ks))
    wide = monotone_bounds(_summary(table, by, every, grouping=grouping, **options), len(every))
    n_groups, at = len(wide) // len(every), {k: j for j, k in enumerate(every)}
    rows = np.concatenate([np.arange(n_groups) + at[k] * n_groups for k in ks])
    return wide.iloc[rows].reset_index(drop=True)


def monotone_bounds(wide: pd.DataFrame, n_ks: int) -> pd.DataFrame:
    """Each bound of :data:`MONOTONE_BOUNDS` at k replaced by its running max (pass@k) or min
    (pass^k) over k' ≤ k, while the covered tasks stay the same.

    ``wide``: :func:`_summary` at n_ks rising k from 1 (blocks of groups in k order; every k from
    1 to the largest n, then possibly some above it, where no task is covered). The true pass@k of a
    task set never falls as k rises, so if the interval at k' holds its lower bound holds at k too:
    separate intervals at each k let the band fall where the truth cannot (an upper bound that
    falls is raised, which only widens). pass^k mirrors it. Where k passes some tasks' n the
    covered tasks, hence the estimand, change, and the running bound restarts.

    >>> wide = pd.DataFrame({"n_tasks_covered": [5, 5, 5], "pass@k_lo": [0.7, 0.6, 0.8],
    ...     "pass@k_hi": 1.0, "pass@k_fixed_lo": 0.5, "pass@k_fixed_hi": 1.0,
    ...     "pass^k_lo": [0.5, 0.4, 0.3], "pass^k_hi": [0.9, 0.95, 0.8],
    ...     "pass^k_fixed_lo": 0.2, "pass^k_fixed_hi": 1.0})
    >>> monotone_bounds(wide, 3)[["pass@k_lo", "pass^k_hi"]].values.tolist()
    [[0.7, 0.9], [0.7, 0.9], [0.8, 0.8]]
    """
    covered = wide["n_tasks_covered"].to_numpy().reshape(n_ks, -1)
    same = covered[1:] == covered[:-1]  # (n_ks - 1, groups): k continues k - 1's task set
    columns = {}
    for column, running in MONOTONE_BOUNDS:
        bound = wide[column].to_numpy(dtype=float).reshape(n_ks, -1).copy()
        for j in range(1, n_ks):
            bound[j] = np.where(same[j - 1], running(bound[j], bound[j - 1]), bound[j])
        columns[column] = bound.ravel()
    return wide.assign(**columns)


def _summary(
    table: pd.DataFrame,
    by: tuple[str, ...],
    ks: Sequence[int],
    *,
    ci: float,
    n_boot: int,
    seed: int,
    method: str,
    min_tasks: int,
    grouping: tuple[np.ndarray, pd.DataFrame] | None = None,
    n: np.ndarray | None = None,
    unit: np.ndarray | None = None,
) -> pd.DataFrame:
    """The :func:`summarize` frame of every k in ``ks`` (one block of groups per k, in ``ks``
    order) from a counts table, in one pass: the groups are found once, and the intervals of
    every k whose covered tasks are the same come from one call (one bootstrap draw, one
    matrix product), so each k's values and intervals equal those of its own summarize.
    ``grouping``: :func:`group_ids` of the table, when known; ``n``: the usable trials in place of
    the table's (n + n_infra: the values had infra errors been failures); ``unit``: each row's
    family (:meth:`~passk_nb.stats.counts.Counts.units`), the sampling unit of the intervals for new
    tasks (cells are then per family, so a family's tasks stay together)."""
    gid, groups = group_ids(table, by) if grouping is None else grouping
    n_groups, n_ks, m = len(groups), len(ks), len(METRICS)
    n, c = table["n"].to_numpy() if n is None else n, table["c"].to_numpy()
    if unit is not None:  # cells per family; each cell's group is its family's
        unit_id, unit_group = units(gid, unit)
        (cell_unit, cn, cc), weight = _cells(unit_id, n, c, unit_group.size)
        cell_group = unit_group[cell_unit]
    # Every per-task value is a function of (n, c) alone: evaluated once per distinct (group, n, c)
    # cell (a few dozen per group, whatever the number of tasks) and summed per group weighted by
    # the cell's number of tasks. values[:, j, :], variances[:, j, :]: pass@k, pass^k at k = ks[j],
    # 0 where not covered (n < k).
    else:
        (cell_group, cn, cc), weight = _cells(gid, n, c, n_groups)
    # each distinct (n, c) evaluated once, whatever the group
    pairs, cell_pair = unique_rows(np.column_stack([cn, cc]))
    pn, pc = pairs.T
    pair_covered = np.column_stack([pn >= k for k in ks])  # (pairs, ks)
    pair_values = np.stack(
        [np.column_stack([pass_at_k(pn, pc, k), pass_hat_k(pn, pc, k)]) for k in ks], axis=1
    )

    def per_pair(both: np.ndarray) -> np.ndarray:
        # (ks, 2 × pairs) of pass@k's (n, n − c) then pass^k's (n, c) → (cells, ks, 2)
        both = both.reshape(n_ks, 2, -1).transpose(2, 0, 1)
        return np.where(pair_covered[:, :, None], both, 0.0)[cell_pair]

    pair_values = np.where(pair_covered[:, :, None], pair_values, 0.0)
    # the fixed-task interval's variance, and the floor of the spread over tasks: pass@k's and
    # pass^k's cells in one call, cells common to both computed once; every k in one call
    cell_covered, values = pair_covered[cell_pair], pair_values[cell_pair]
    both_n, both_c = np.r_[pn, pn], np.r_[pn - pc, pc]
    variances = per_pair(fixed_task_variances(both_n, both_c, ks))
    floors = per_pair(np.stack([plugin_task_variance(both_n, both_c, k) for k in ks]))
    n_covered = group_sums(cell_group, cell_covered * weight, n_groups).astype(np.int64)  # (groups, ks)
    n_units = n_covered  # the sampling units with a value: tasks, or with ``unit`` their families
    if unit is not None:
        has_value = group_sums(cell_unit, cell_covered * weight, unit_group.size) > 0
        n_units = group_sums(unit_group, has_value.astype(float), n_groups).astype(np.int64)
    flat = (-1, n_ks * m)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (
            group_sums(cell_group, values.reshape(flat) * weight, n_groups) / np.repeat(n_covered, m, axis=1)
        ).reshape(n_groups, n_ks, m)
        se = (
            np.sqrt(group_sums(cell_group, variances.reshape(flat) * weight, n_groups))
            / np.repeat(n_covered, m, axis=1)
        ).reshape(n_groups, n_ks, m)
    fixed_lo, fixed_hi = fixed_interval(means, se, ci)
    lo, hi = np.full((n_groups, n_ks, m), np.nan), np.full((n_groups, n_ks, m), np.nan)
    ci_method = np.full((n_groups, n_ks), "none", dtype=object)
    if n_boot and "task" in by:
        for j, k in enumerate(ks):
            lo[:, j], hi[:, j] = clopper_pearson(n, c, k, ci)
        ci_method[:] = "clopper-pearson"
    elif n_boot:
        if unit is not None:  # families as the sampling unit: resampled, or their clustered variance
            lo_, hi_ = _family_interval(
                cell_group,
                cell_unit,
                unit_group,
                np.repeat(cell_covered * weight, m, axis=1),
                values.reshape(flat),
                floors.reshape(flat),
                n_groups,
                method=method,
                ci=ci,
                n_boot=n_boot,
                seed=seed,
            )
        elif method == "bootstrap":
            # one draw of all the group's tasks for every k; each k's mean over the covered tasks drawn
            lo_, hi_ = cell_bootstrap(
                cell_group,
                cell_pair,
                weight[:, 0],
                pair_values.reshape(-1, n_ks * m),
                n_groups,
                ci=ci,
                n_boot=n_boot,
                seed=seed,
                covered=np.repeat(pair_covered, m, axis=1),
            )
        else:
            # the spread of the covered tasks' values, from the weighted cells: every k in one call
            interval = kg_interval if method == METHOD else t_interval
            lo_, hi_ = interval(
                *cell_spread(
                    cell_group,
                    np.repeat(cell_covered * weight, m, axis=1),
                    values.reshape(flat),
                    floors.reshape(flat),
                    n_groups,
                ),
                ci=ci,
            )
        declined = (n_covered >= 1) & (n_units < min_tasks)  # (groups, ks)
        lo, hi = (
            np.clip(lo_, 0.0, 1.0).reshape(n_groups, n_ks, m),
            np.clip(hi_, 0.0, 1.0).reshape(n_groups, n_ks, m),
        )
        lo[declined], hi[declined] = np.nan, np.nan
        ci_method = np.where(n_covered > 0, method, "none").astype(object)
        ci_method[declined] = DECLINED
    counts = _group_counts(table, gid, cell_group, weight, cn, cc, n_groups)
    return _frames(
        groups,
        ks,
        counts,
        n_covered=n_covered,
        means=means,
        bounds=(lo, hi),
        se=se,
        fixed=(fixed_lo, fixed_hi),
        ci_method=ci_method,
        n_clusters=None if unit is None else n_units,
    )


def _group_counts(
    table: pd.DataFrame,
    gid: np.ndarray,
    cell_group: np.ndarray,
    weight: np.ndarray,
    cn: np.ndarray,
    cc: np.ndarray,
    n_groups: int,
) -> dict[str, np.ndarray]:
    """Per group: its tasks, trials and successes (from the cells) and the infra errors left out."""
    sums = {
        name: np.bincount(cell_group, weight[:, 0] * column, minlength=n_groups).astype(np.int64)
        for name, column in (("n_tasks", 1), ("trials", cn), ("successes", cc))
    }
    sums["n_infra_excluded"] = np.bincount(gid, table["n_infra"].to_numpy(), minlength=n_groups).astype(
        np.int64
    )
    return sums


def _frames(
    groups: pd.DataFrame,
    ks: Sequence[int],
    sums: dict[str, np.ndarray],
    *,
    n_covered: np.ndarray,
    means: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    se: np.ndarray,
    fixed: tuple[np.ndarray, np.ndarray],
    ci_method: np.ndarray,
    n_clusters: np.ndarray | None,
) -> pd.DataFrame:
    """:func:`_summary`'s arrays (groups × ks × (pass@k, pass^k)) as summarize's frame, one block of
    groups per k."""
    (lo, hi), (fixed_lo, fixed_hi) = bounds, fixed
    n_groups = len(groups)
    frames = []
    for j, k in enumerate(ks):
        columns = {
            **{col: groups[col].array for col in groups.columns},
            "k": np.full(n_groups, k, dtype=np.int64),
            "n_tasks": sums["n_tasks"],
            "n_tasks_covered": n_covered[:, j],
            "trials": sums["trials"],
            "successes": sums["successes"],
            "pass@k": means[:, j, 0],
            "pass^k": means[:, j, 1],
            "pass@k_lo": lo[:, j, 0],
            "pass@k_hi": hi[:, j, 0],
            "pass^k_lo": lo[:, j, 1],
            "pass^k_hi": hi[:, j, 1],
            "pass^k_se_fixed": se[:, j, 1],
            "pass@k_se_fixed": se[:, j, 0],
            "pass@k_fixed_lo": fixed_lo[:, j, 0],
            "pass@k_fixed_hi": fixed_hi[:, j, 0],
            "pass^k_fixed_lo": fixed_lo[:, j, 1],
            "pass^k_fixed_hi": fixed_hi[:, j, 1],
            "n_infra_excluded": sums["n_infra_excluded"],
            "ci_method": ci_method[:, j],
            **({} if n_clusters is None else {"n_clusters": n_clusters[:, j]}),
        }
        frames.append(pd.DataFrame(columns, index=pd.RangeIndex(n_groups)))
    return frames[0] if len(ks) == 1 else pd.concat(frames, ignore_index=True)


def _family_interval(
    cell_group: np.ndarray,
    cell_unit: np.ndarray,
    unit_group: np.ndarray,
    weight: np.ndarray,
    values: np.ndarray,
    floors: np.ndarray,
    n_groups: int,
    *,
    method: str,
    ci: float,
    n_boot: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The interval for new tasks with families as the sampling unit, from cells per family
    (``cell_unit``; ``weight``: the cell's tasks with a value, per column): the families resampled
    (``method="bootstrap"``) or the clustered variance with F − 1 degrees of freedom."""
    if method == "bootstrap":
        sums = group_sums(cell_unit, values * weight, unit_group.size)
        sizes = group_sums(cell_unit, weight, unit_group.size)
        return unit_bootstrap(unit_group, sums, sizes, n_groups, ci=ci, n_boot=n_boot, seed=seed)
    interval = kg_interval if method == METHOD else t_interval
    return interval(*unit_spread(cell_group, weight, values, floors, n_groups, cell_unit), ci=ci)


def _cells(
    gid: np.ndarray, n: np.ndarray, c: np.ndarray, n_groups: int
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """The distinct (group, n, c) rows, sorted: (group, n, c) of each, and the number of tasks in
    each cell (a float column)."""
    base = int(n.max(initial=0)) + 1
    if n_groups * float(base) ** 2 >= 2.0**62:
        cells, inverse = unique_rows(np.column_stack([gid, n, c]).astype(np.int64))
        return tuple(cells.T), np.bincount(inverse).astype(float)[:, None]
    key = gid.astype(np.int64) * base
    key += n
    key *= base
    key += c
    size = n_groups * base * base
    if size <= 4 * key.size + 1024:  # small range: counted, no sort
        present = np.bincount(key, minlength=size)
        at = np.flatnonzero(present)
        weight = present[at]
    else:
        at, weight = np.unique(key, return_counts=True)
    group, rest = np.divmod(at, base * base)
    return (group, *np.divmod(rest, base)), weight.astype(float)[:, None]


def warn_declined(out: pd.DataFrame, by: tuple[str, ...], min_tasks: int, *, stacklevel: int = 3) -> None:
    """One short warning when the interval for new tasks was declined, naming the rows only by the
    columns that tell them apart (:class:`~passk_nb.stats.params.TooFewTasksWarning`).

    >>> import warnings
    >>> out = pd.DataFrame({"model": ["a", "b"], "suite": "s", "ci_method": [DECLINED, "t"]})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_declined(out, ("suite", "model"), 5)
    >>> print(caught[0].message)
    no interval for new tasks in 1 of 2 rows (model='a'): fewer than min_tasks=5 tasks; quote the \
fixed-task interval (*fixed_lo/*fixed_hi) or add tasks
    """
    is_declined = (out["ci_method"] == DECLINED).to_numpy()
    if not is_declined.any():
        return
    if not by:  # one group: every row is the frame's
        groups, declined = out.head(1), out.head(1)
    else:
        groups = out.drop_duplicates(subset=list(by))
        declined = out[is_declined].drop_duplicates(subset=list(by))
    if len(declined) == len(groups):
        where = "" if len(groups) == 1 else f" in all {len(groups)} rows"
    else:
        telling = tuple(col for col in by if groups[col].nunique(dropna=False) > 1)
        names = [_group_name(row, telling) for _, row in declined.head(3).iterrows()]
        more = ", ..." if len(declined) > 3 else ""
        where = f" in {len(declined)} of {len(groups)} rows ({', '.join(names)}{more})"
    warnings.warn(
        TooFewTasksWarning(
            f"no interval for new tasks{where}: fewer than min_tasks={min_tasks} tasks; quote the "
            "fixed-task interval (*fixed_lo/*fixed_hi) or add tasks",
            declined=len(declined),
            rows=len(groups),
            min_tasks=min_tasks,
        ),
        stacklevel=stacklevel,
    )


def warn_adaptive(df: object, *, stacklevel: int = 3) -> None:
    """Warn when trial records come from a run that stopped when its question was answered
    (``run(until=)``: a ``round`` above 0): each task's n then depended on its earlier outcomes.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_adaptive(pd.DataFrame({"round": [0, 1]}))
    >>> "adaptive" in str(caught[0].message)
    True
    """
    if not isinstance(df, pd.DataFrame) or "round" not in df.columns:
        return
    if (pd.to_numeric(df["round"], errors="coerce") > 0).any():
        warnings.warn(
            "these records come from an adaptive run (run(until=): trials in rounds after the first), "
            "where each task's n depended on its earlier outcomes: pass^k here can be biased and these "
            "fixed-n intervals do not hold for the adaptive sample. Report passk_nb.decide(records, "
            "question), valid at every look, or summarize the first round: records[records['round'] == 0]",
            UserWarning,
            stacklevel=stacklevel,
        )


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
