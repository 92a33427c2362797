"""Paired analyses of two arms (prompts, models): :func:`compare` over tasks, :func:`flips` per task."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from passk_nb.stats._grouping import distinct_codes, group_ids, group_means, group_sums, shared_columns
from passk_nb.stats.checks import check_k, check_options, require_columns
from passk_nb.stats.counts import Counts, as_counts, counts, unit_codes
from passk_nb.stats.estimators import pass_at_k, pass_hat_k
from passk_nb.stats.exact import boschloo_exact_2x2, fisher_exact_2x2, unique_rows
from passk_nb.stats.intervals import (
    check_method,
    fixed_interval,
    fixed_task_variance,
    group_corr,
    korn_graubard_paired_p_value,
    nan_interval,
    population_interval,
    units,
)
from passk_nb.stats.params import (
    CI,
    CLUSTER,
    INFRA,
    MIN_TASKS,
    N_BOOT,
    PAIRED_METHOD,
    PAIRED_METHODS,
    SEED,
    default_by,
    share_docs,
)
from passk_nb.stats.result import described
from passk_nb.stats.summary import DECLINED, METRICS, warn_declined

#: Per-task tests of :func:`flips`; the first is the default.
TESTS: tuple[str, ...] = ("fisher", "boschloo")
#: The vectorised two-sided test behind each name of ``TESTS``.
_EXACT = {"fisher": fisher_exact_2x2, "boschloo": boschloo_exact_2x2}
#: Multiple-testing families of :func:`flips`; the first is the default.
FAMILIES: tuple[str, ...] = ("tarone", "all")


@share_docs
def compare(
    df: Counts | pd.DataFrame | str | os.PathLike[str],
    *,
    on: str = "prompt_hash",
    a: object,
    b: object,
    k: int,
    by: str | Sequence[str] | None = None,
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    infra: str = INFRA,
    method: str = PAIRED_METHOD,
    min_tasks: int = MIN_TASKS,
    cluster: str | None = CLUSTER,
) -> pd.DataFrame:
    """Paired comparison of arm ``b`` against arm ``a`` (values of column ``on``), over tasks.

    {df_or_folder}
    on: the column whose values ``a`` and ``b`` name the two arms.
    {k}
    {paired_by}
    {ci}
    {n_boot}
    {seed}
    {infra}
    {paired_method}
    {min_tasks}
    {cluster}

    Only tasks with at least k usable trials under both arms are paired (a warning says how many
    were left out). For each group and metric: ``n_tasks`` paired tasks, the arm means ``a`` and
    ``b``, ``diff`` = b − a; ``lo``/``hi``, the ``ci`` interval of the mean per-task difference
    for new tasks like these (Korn–Graubard on (d + 1)/2, the per-task differences' spread
    floored at the fixed-task variance of both arms: the headline interval's method; it covered
    ≥ 93 % of simulated suites and flagged ≤ 5 % of equal arms, with families too, where the
    paired t flagged up to 6 %; declined below ``min_tasks``);
    ``se_fixed``, the difference's standard error for these tasks re-rolled, and ``fixed_lo``/
    ``fixed_hi``, its ``ci`` interval (a difference these tasks show whenever it excludes 0); ``corr``, the
    correlation of the per-task values between arms (high correlation is what makes pairing
    narrow the interval); ``ci_method``. For one task at a time use :func:`flips`.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": list("aabbcc") * 2, "model": "m", "prompt_hash": ["p1"] * 6 + ["p2"] * 6,
    ...                    "passed": [1, 1, 1, 0, 0, 0] + [1, 1, 1, 1, 1, 0]}).astype({"passed": bool})
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> out = compare(df, a="p1", b="p2", k=2, n_boot=0)
    >>> out[["model", "metric", "n_tasks", "a", "b", "diff"]].round(4)
      model  metric  n_tasks       a       b    diff
    0     m  pass@k        3  0.6667  1.0000  0.3333
    1     m  pass^k        3  0.3333  0.6667  0.3333
    """
    check_options(ci=ci, n_boot=n_boot, seed=seed)
    check_method(method, PAIRED_METHODS, min_tasks)
    check_k(k)
    tasks = paired_tasks(df, on=on, a=a, b=b, k=k, by=by, infra=infra, cluster=cluster)
    out = paired_frame(tasks, ci=ci, n_boot=n_boot, seed=seed, method=method, min_tasks=min_tasks)
    return described(out, "compare", by=tasks.by, k=k, ci=ci, method=method, infra=infra, cluster=cluster)


@dataclass(frozen=True)
class PairedTasks:
    """What :func:`compare` computes before it chooses a level: the paired tasks' per-task values
    and fixed-task variances of both arms (columns pass@k, pass^k), grouped by ``by``. :func:`rank`
    builds one per pair and reads compare's interval at several levels from it. ``unit``: each
    task's family (:func:`~passk_nb.stats.counts.unit_codes`), the sampling unit of the interval
    for new tasks, or None (each task its own)."""

    by: tuple[str, ...]
    k: int
    gid: np.ndarray
    groups: pd.DataFrame
    va: np.ndarray
    vb: np.ndarray
    var_a: np.ndarray
    var_b: np.ndarray
    unit: np.ndarray | None = None

    @classmethod
    def from_counts(
        cls,
        by: tuple[str, ...],
        k: int,
        gid: np.ndarray,
        groups: pd.DataFrame,
        n_a: np.ndarray,
        c_a: np.ndarray,
        n_b: np.ndarray,
        c_b: np.ndarray,
        unit: np.ndarray | None = None,
    ) -> PairedTasks:
        """The paired tasks from both arms' trials ``n`` and successes ``c`` per task (n ≥ k), task
        i in group ``gid[i]`` (a row of ``groups``): what :func:`compare` decides on, and what
        :func:`~passk_nb.stats.design.planner.plan` simulates its power through."""

        def arm(n: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            # computed once per distinct (n, c), then spread to the tasks: simulated suites repeat them
            codes, where = distinct_codes(n, c)
            n, c = np.divmod(codes, int(c.max(initial=0)) + 1)
            values = np.column_stack([pass_at_k(n, c, k), pass_hat_k(n, c, k)])
            variances = np.column_stack([fixed_task_variance(n, n - c, k), fixed_task_variance(n, c, k)])
            return values[where], variances[where]

        (va, var_a), (vb, var_b) = arm(n_a, c_a), arm(n_b, c_b)
        return cls(by, k, gid, groups, va, vb, var_a, var_b, unit)


def paired_tasks(
    df: Counts | pd.DataFrame | str | os.PathLike[str],
    *,
    on: str,
    a: object,
    b: object,
    k: int,
    by: str | Sequence[str] | None,
    infra: str,
    cluster: str | None = CLUSTER,
) -> PairedTasks:
    """The tasks with at least k usable trials under both arms, paired (see :func:`compare`), with
    each task's family when ``cluster`` names one (a task has one family in both arms)."""
    counted = as_counts(df, by=by, infra=infra, on=on, cluster=cluster)
    arm_a, arm_b = _arms(counted.table, on, a, b)
    by = _default_by(by, on, arm_a, arm_b)
    if "task" in by or on in by:
        raise ValueError(
            f"by={list(by)} must not contain 'task' or on={on!r}; for per-task differences use flips()"
        )
    keys = [*by, "task"]
    family = [] if cluster is None else [cluster]
    tables = (
        counts(arm_a, by=[*by, *family], infra=infra)[[*keys, *family, "n", "c"]],
        counts(arm_b, by=[*by, *family], infra=infra)[[*keys, *family, "n", "c"]],
    )
    paired = pd.merge(*tables, on=keys, how="outer", suffixes=("_a", "_b"))
    if cluster is not None:
        paired[cluster] = _one_family(paired, cluster, on, a, b)
    usable = (paired["n_a"] >= k) & (paired["n_b"] >= k)
    if not usable.all():
        warnings.warn(
            f"{int((~usable).sum())} of {len(paired)} tasks lack {k} usable trials under both "
            f"{on}={a!r} and {on}={b!r} and are left out of the comparison",
            UserWarning,
            stacklevel=3,
        )
    paired = paired[usable].sort_values(keys, kind="stable").reset_index(drop=True)
    if paired.empty:
        raise ValueError(
            f"no task has {k} usable trials under both arms; run more trials or choose a smaller k"
        )
    gid, groups = group_ids(paired, by)
    groups = counted.restore(groups)
    n_a, c_a, n_b, c_b = (paired[col].to_numpy().astype(np.int64) for col in ("n_a", "c_a", "n_b", "c_b"))
    unit = None if cluster is None else unit_codes(paired[cluster])
    return PairedTasks.from_counts(by, k, gid, groups, n_a, c_a, n_b, c_b, unit)


def _one_family(paired: pd.DataFrame, cluster: str, on: str, a: object, b: object) -> pd.Series:
    """Each paired task's family: the one both arms give it (an arm without the task gives none)."""
    fam_a, fam_b = paired[f"{cluster}_a"].astype(object), paired[f"{cluster}_b"].astype(object)
    clash = fam_a.notna() & fam_b.notna() & (fam_a != fam_b)
    if clash.any():
        i = int(np.flatnonzero(clash.to_numpy())[0])
        raise ValueError(
            f"task {paired['task'].iloc[i]!r} is in family {fam_a.iloc[i]!r} under {on}={a!r} and "
            f"{fam_b.iloc[i]!r} under {on}={b!r}; a task has one {cluster!r} in both arms"
        )
    return fam_a.where(fam_a.notna(), fam_b)


def paired_frame(
    tasks: PairedTasks, *, ci: float, n_boot: int, seed: int, method: str, min_tasks: int
) -> pd.DataFrame:
    """:func:`compare`'s frame from its paired tasks, at level ``ci``."""
    by, k, gid, groups = tasks.by, tasks.k, tasks.gid, tasks.groups
    va, vb, var_a, var_b = tasks.va, tasks.vb, tasks.var_a, tasks.var_b
    n_groups = len(groups)
    n_tasks = np.bincount(gid, minlength=n_groups)
    mean_a, mean_b = group_means(gid, va, n_tasks), group_means(gid, vb, n_tasks)
    se_fixed = np.sqrt(group_sums(gid, var_a + var_b, n_groups)) / n_tasks[:, None]
    lo, hi = nan_interval(n_groups, len(METRICS))
    ci_method = np.full(n_groups, "none", dtype=object)
    if n_boot:
        lo, hi, declined = population_interval(
            gid,
            vb - va,
            var_a + var_b,  # the fixed-task variance: with the plug-in's, pass@k at p = 0.9 covered 79 %
            n_groups,
            method=method,
            ci=ci,
            n_boot=n_boot,
            seed=seed,
            min_tasks=min_tasks,
            lower=-1.0,
            unit=tasks.unit,
        )
        ci_method[:] = method
        ci_method[declined] = DECLINED
    corr = group_corr(gid, va, vb, mean_a, mean_b, n_groups)
    fixed_lo, fixed_hi = fixed_interval(mean_b - mean_a, se_fixed, ci, lower=-1.0)
    m = len(METRICS)

    def stacked(values: np.ndarray) -> np.ndarray:  # (groups, metrics) -> metric-major rows
        return values.T.reshape(-1)

    columns = {
        "metric": np.repeat(np.asarray(METRICS, dtype=object), n_groups),
        "k": np.full(n_groups * m, k),
        "n_tasks": np.tile(n_tasks, m),
        "a": stacked(mean_a),
        "b": stacked(mean_b),
        "diff": stacked(mean_b - mean_a),
        "lo": stacked(lo),
        "hi": stacked(hi),
        "se_fixed": stacked(se_fixed),
        "fixed_lo": stacked(fixed_lo),
        "fixed_hi": stacked(fixed_hi),
        "corr": stacked(corr),
        "ci_method": np.tile(ci_method, m),
    }
    keys = groups.iloc[np.tile(np.arange(n_groups), m)].reset_index(drop=True)
    out = pd.concat([keys, pd.DataFrame(columns)], axis=1)
    warn_declined(out.rename(columns={"n_tasks": "n_tasks_covered"}), by, min_tasks)
    return out.sort_values([*by, "metric"], kind="stable").reset_index(drop=True)


def paired_p_values(tasks: PairedTasks, *, min_tasks: int) -> np.ndarray:
    """Per group and metric (groups, METRICS): the two-sided p-value of compare's default interval
    (Korn–Graubard, :func:`~passk_nb.stats.intervals.korn_graubard_paired_p_value`) for a zero
    difference: p ≤ 1 − ci exactly when compare's interval at ``ci`` excludes 0. 1 where compare
    declines (fewer than ``min_tasks`` tasks, or families with ``unit``), as a declined pair never
    differs. :func:`~passk_nb.stats.rank.rank` corrects these for multiplicity."""
    n_groups = len(tasks.groups)
    diff, floor = tasks.vb - tasks.va, tasks.var_a + tasks.var_b
    p = korn_graubard_paired_p_value(tasks.gid, diff, floor, n_groups, tasks.unit)
    group = tasks.gid if tasks.unit is None else units(tasks.gid, tasks.unit)[1]
    sizes = np.bincount(group, minlength=n_groups)
    p[sizes < min_tasks] = 1.0
    return p


def differs(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """:func:`compare`'s two decisions per row of its frame: does the difference hold for new tasks
    like these (``lo``/``hi`` exclude 0; never where the interval was declined) and for these tasks
    re-rolled (``fixed_lo``/``fixed_hi`` exclude 0)?

    >>> frame = pd.DataFrame({"lo": [0.1, -0.2, np.nan], "hi": [0.3, 0.1, np.nan],
    ...                       "fixed_lo": [0.2, 0.05, 0.1], "fixed_hi": [0.25, 0.1, 0.2]})
    >>> [x.tolist() for x in differs(frame)]
    [[True, False, False], [True, True, True]]
    """
    lo, hi, fixed_lo, fixed_hi = (frame[col].to_numpy() for col in ("lo", "hi", "fixed_lo", "fixed_hi"))
    return (lo > 0) | (hi < 0), (fixed_lo > 0) | (fixed_hi < 0)


@share_docs
def flips(
    df: Counts | pd.DataFrame | str | os.PathLike[str],
    *,
    on: str = "prompt_hash",
    a: object,
    b: object,
    by: str | Sequence[str] | None = None,
    alpha: float = 0.05,
    infra: str = INFRA,
    test: str = TESTS[0],
    family: str = FAMILIES[0],
) -> pd.DataFrame:
    """Per task: did its success rate change between arm ``a`` and arm ``b`` of column ``on``?

    {df_or_folder}
    on: the column whose values ``a`` and ``b`` name the two arms.
    {paired_by} Each group is its own multiple-testing family.
    {alpha}
    {infra}
    test: the per-task two-sided test: ``"fisher"`` (Fisher's exact, default) or ``"boschloo"``
    (Boschloo's exact unconditional test, more powerful at small n: 4/4 → 0/4 gives p = 0.0078
    where Fisher gives 0.029; its p-value is a rigorous supremum over the nuisance rate, so
    neither test ever rejects more than alpha of tasks whose rate did not change).
    family: ``"tarone"`` (default): Benjamini–Hochberg across only the tasks whose trial counts
    and total successes can reach p ≤ alpha at all (Tarone's screen, which uses only the margins,
    on which Fisher's test conditions; a task that passed every trial under both arms cannot show
    a flip and does not dilute the others); ``"all"``: every task.

    One row per task with usable trials under both arms: ``successes_a``/``trials_a``,
    ``successes_b``/``trials_b``, their success rates ``rate_a``/``rate_b`` (what
    :func:`~passk_nb.view.plots.plot_flips` draws), ``delta`` (b − a), ``p_value``, ``min_p`` (the
    smallest p these trial counts allow, reached by a complete flip such as 4/4 → 0/4),
    ``tested`` (in the family), ``q_value`` (Benjamini–Hochberg within the family; NaN outside)
    and ``flip`` (q < ``alpha``). Warnings say when no flip can be significant at these trial
    counts (3 per arm cannot reach p < 0.05 with Fisher), and when Benjamini–Hochberg across the
    family cannot flag a single complete flip (a lone flip needs p ≤ alpha/m among m tasks).

    >>> import pandas as pd
    >>> marks = {("p1", "t1"): "1111", ("p2", "t1"): "0000"}
    >>> marks |= {(p, t): "1111" for p in ("p1", "p2") for t in ("t2", "t3", "t4", "t5")}
    >>> df = pd.DataFrame([{"task": t, "model": "m", "prompt_hash": p, "passed": m == "1"}
    ...                    for (p, t), ms in marks.items() for m in ms])
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> out = flips(df, a="p1", b="p2")  # the four steady tasks cannot flip: not in the family
    >>> out[["task", "successes_a", "successes_b", "tested", "flip"]]
      task  successes_a  successes_b  tested   flip
    0   t1            4            0    True   True
    1   t2            4            4   False  False
    2   t3            4            4   False  False
    3   t4            4            4   False  False
    4   t5            4            4   False  False
    >>> round(float(out.loc[0, "q_value"]), 4)
    0.0286
    """
    counted = as_counts(df, by=by, infra=infra, on=on)
    arm_a, arm_b = _arms(counted.table, on, a, b)
    by = _default_by(by, on, arm_a, arm_b)
    if on in by:
        raise ValueError(f"by={list(by)} must not contain on={on!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1; got alpha={alpha}")
    if test not in TESTS:
        raise ValueError(f"test must be one of {list(TESTS)}; got test={test!r}")
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {list(FAMILIES)}; got family={family!r}")
    by = tuple(col for col in by if col != "task")
    keys = [*by, "task"]
    tables = (
        counts(arm_a, by=by, infra=infra)[[*keys, "n", "c"]],
        counts(arm_b, by=by, infra=infra)[[*keys, "n", "c"]],
    )
    paired = pd.merge(*tables, on=keys, suffixes=("_a", "_b"))
    paired = paired[(paired["n_a"] > 0) & (paired["n_b"] > 0)].sort_values(keys, kind="stable")
    if paired.empty:
        raise ValueError(f"no task has usable trials under both {on}={a!r} and {on}={b!r}")
    table = paired[["c_a", "n_a", "c_b", "n_b"]].to_numpy().astype(np.int64)
    p_value, min_p, reachable = exact_tests(test, table)
    out = counted.restore(paired[keys].reset_index(drop=True))
    out["successes_a"], out["trials_a"], out["successes_b"], out["trials_b"] = table.T
    out["rate_a"], out["rate_b"] = table[:, 0] / table[:, 1], table[:, 2] / table[:, 3]
    out["delta"] = out["rate_b"] - out["rate_a"]
    out["p_value"] = p_value
    out["min_p"] = min_p
    gid, _ = group_ids(out, by)
    tested = tarone_screen(reachable, alpha) if family == "tarone" else np.ones(len(out), dtype=bool)
    q_value = np.full(len(out), np.nan)
    for rows in _group_rows(gid, tested):
        q_value[rows] = sps.false_discovery_control(p_value[rows], method="bh")
    out["tested"] = tested
    out["q_value"] = q_value
    out["flip"] = np.nan_to_num(q_value, nan=1.0) < alpha
    _warn_power(out, gid, reachable, alpha, test)
    return described(out, "flips", by=by, method=test, infra=infra, records=df, on=on, a=a, b=b, alpha=alpha)


def _group_rows(gid: np.ndarray, keep: np.ndarray) -> list[np.ndarray]:
    """The rows of each group (``gid``) where ``keep`` holds, in order, from one sort: a loop
    over groups masking every row each time costs groups × rows."""
    rows = np.flatnonzero(keep)
    rows = rows[np.argsort(gid[rows], kind="stable")]
    return np.split(rows, np.flatnonzero(np.diff(gid[rows])) + 1) if rows.size else []


def tarone_screen(reachable: np.ndarray, alpha: float) -> np.ndarray:
    """The testable tasks: those whose margins let some split reach p ≤ alpha at all (Tarone's screen).

    The screen uses only the margins (each task's trials per arm and total successes), and Fisher's
    p-value is valid conditional on them, so Benjamini–Hochberg over the screened tasks keeps its
    false discovery rate; tasks that could never be significant no longer dilute the family.
    """
    return reachable <= alpha


def exact_tests(test: str, table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row (c_a, n_a, c_b, n_b) of ``table``: the p-value, the smallest p of a complete flip
    (``min_p``) and the smallest p any split of the row's total successes could give (Tarone's
    bound). Every table of every task in one call of the vectorised test of
    :mod:`~passk_nb.stats.exact` (Fisher's equals scipy's; Boschloo's holds its size).

    Tarone's bound needs only the two ends of each distinct margin's support: both tests' p-values
    grow with the table's hypergeometric probability (a table's Fisher p sums the tables at most as
    probable; Boschloo's region grows with Fisher's p), and that probability is unimodal in the
    split, so its smallest value lies at an end: the less probable end is tested (both where they
    all but tie). One test per margin instead of one per split keeps the cost linear in the tasks
    whatever the trial counts (every split: cubic in them)."""
    exact = _EXACT[test]
    c_a, n_a, c_b, n_b = table.T
    margins, inverse = unique_rows(np.column_stack([n_a, n_b, c_a + c_b]))
    m_a, m_b, m_s = margins.T
    low, high = np.maximum(0, m_s - m_b), np.minimum(m_a, m_s)
    # the less probable end only (both where their probabilities all but tie)
    log_low, log_high = (sps.hypergeom.logpmf(x, m_a + m_b, m_a, m_s) for x in (low, high))
    near = np.abs(log_low - log_high) <= _END_TIE
    take_low, take_high = near | (log_low < log_high), near | (log_high < log_low)
    x = np.r_[low[take_low], high[take_high]]
    margin = np.r_[np.flatnonzero(take_low), np.flatnonzero(take_high)]
    bound = np.full(len(margins), np.inf)
    np.minimum.at(bound, margin, exact(x, m_a[margin], m_s[margin] - x, m_b[margin]))
    return exact(c_a, n_a, c_b, n_b), exact(n_a, n_a, 0, n_b), bound[inverse.ravel()]


#: Log-probability difference below which both ends of a margin's support are tested (Tarone's bound).
_END_TIE = 1e-9


def _trials_needed(test: str, p_max: float) -> int | None:
    """Fewest trials per arm for which a complete flip n/n → 0/n has p ≤ p_max (None above 60)."""
    n = np.arange(1, 61)
    reach = np.flatnonzero(_EXACT[test](n, n, 0, n) <= p_max)
    return int(n[reach[0]]) if reach.size else None


def _warn_power(out: pd.DataFrame, gid: np.ndarray, reachable: np.ndarray, alpha: float, test: str) -> None:
    """Warn when trial counts are too small for a flip to be flagged, alone or within its family."""
    hopeless = (out["min_p"] >= alpha).to_numpy()
    name = "Boschloo" if test == "boschloo" else "Fisher"
    if hopeless.any():
        n_needed = _trials_needed(test, alpha)
        smallest = out.loc[hopeless, ["trials_a", "trials_b"]].min(axis=None)
        where = "no task can" if hopeless.all() else f"{int(hopeless.sum())} of {len(out)} tasks cannot"
        warnings.warn(
            f"{where} reach p < {alpha}: with as few as {smallest} trials in an arm, even a complete "
            f"flip has two-sided {name} p ≥ {out.loc[hopeless, 'min_p'].min():.3g}; "
            f"run at least {n_needed} trials per arm",
            UserWarning,
            stacklevel=3,
        )
    tested, min_p = out["tested"].to_numpy(), out["min_p"].to_numpy()
    for rows in _group_rows(gid, np.ones(len(out), dtype=bool)):
        m = int(tested[rows].sum())
        if m >= 2:
            best = float(min_p[rows][tested[rows]].min())
        else:  # Tarone left at most one task: say so when several could reach p < alpha alone
            m, best = int((reachable[rows] < alpha).sum()), float("inf")
        if m < 2 or best <= alpha / m:
            continue
        n_needed = _trials_needed(test, alpha / m)
        warnings.warn(
            f"Benjamini–Hochberg across {m} tasks cannot flag a single flip at these trial counts: "
            f"a lone flip needs p ≤ {alpha}/{m} = {alpha / m:.3g} (smallest possible {name} p here: "
            f"{float(min_p[rows].min()):.3g}). Run at least {n_needed} trials per arm, "
            "try test='boschloo', or read p_value task by task knowing the risk of false flips",
            UserWarning,
            stacklevel=3,
        )


def _arms(df: pd.DataFrame, on: str, a: object, b: object) -> tuple[pd.DataFrame, pd.DataFrame]:
    require_columns(df, (on,))
    if a == b:
        raise ValueError(f"a and b must differ; both are {a!r}")
    present = df[on].unique()
    missing = [arm for arm in (a, b) if arm not in set(present)]
    if missing:
        raise ValueError(
            f"{on}={missing} not in the frame; values of {on!r} present: {sorted(map(str, present))}"
        )
    return df[df[on] == a], df[df[on] == b]


def _default_by(
    by: str | Sequence[str] | None, on: str, arm_a: pd.DataFrame, arm_b: pd.DataFrame
) -> tuple[str, ...]:
    """``by`` as columns; by default the identity columns (see :func:`~passk_nb.stats.params.default_by`)
    except ``on`` and any column whose values never overlap between the arms (``prompt_hash`` when
    comparing by ``prompt_name``, ``run_id`` always): grouping by such a column would leave no pair."""
    if by is not None:
        return default_by(arm_a, by)
    return tuple(shared_columns((col for col in default_by(arm_a, None) if col != on), [arm_a, arm_b]))
