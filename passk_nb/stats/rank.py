"""Rank many arms (models, prompts) at once: an order, rank intervals and tiers.

Every pair of arms is compared by :func:`~passk_nb.stats.paired.compare` (pass^k, Korn–Graubard) on the
tasks both arms ran at least k times, all pairs at once: each pair's p-value is computed once, and
Holm's step-down (or Benjamini–Hochberg's step-up) is applied to the p-values; a pair differs when
compare's interval at the corrected level excludes 0. Each arm's pass^k and interval are
:func:`~passk_nb.stats.summary.summarize`'s on its own tasks. The order is by each arm's mean paired
difference against the others (by pass^k itself when every arm ran the same tasks). Rank intervals
come from the decisions (an arm ranks below the arms shown better, above those shown worse), and so
do tiers: tier 1 is the arms not shown worse than the top arm, each later tier the same among the
arms left, so every arm is shown worse than the top arm of each tier above its own, and no tier
claims that two tied arms differ.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from passk_nb.stats._grouping import shared_columns
from passk_nb.stats.checks import check_k, check_options
from passk_nb.stats.counts import Counts, as_counts, unit_codes
from passk_nb.stats.paired import PairedTasks, paired_frame, paired_p_values
from passk_nb.stats.params import (
    CI,
    CLUSTER,
    INFRA,
    MIN_TASKS,
    N_BOOT,
    PAIRED_METHOD,
    SEED,
    default_by,
    share_docs,
)
from passk_nb.stats.result import described
from passk_nb.stats.summary import METRICS, summarize

CORRECTIONS = ("holm", "bh")


@share_docs
def rank(
    df: Counts | pd.DataFrame | str | os.PathLike[str],
    *,
    on: str = "model",
    k: int = 1,
    by: str | Sequence[str] | None = None,
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    infra: str = INFRA,
    alpha: float = 0.05,
    correction: str = "holm",
    pairs: bool = False,
    cluster: str | None = CLUSTER,
) -> pd.DataFrame:
    """Rank the arms (values of column ``on``) by pass^k, with rank intervals and tiers.

    Each pair of arms is compared on the tasks both ran at least k times (a warning says when
    pairs use different tasks); a pair differs when compare's interval at the level that
    ``correction`` ("holm" or "bh") gives ``alpha`` over all pairs excludes 0. One row per
    (group, arm), best first: ``pass^k`` with its ``ci`` interval (``lo``, ``hi``, ``ci_method``:
    summarize's on the arm's ``n_tasks`` tasks), ``vs_field`` (the arm's mean paired difference
    against the other arms, each on the tasks both ran: the order; pass^k's order when every arm
    ran the same tasks), ``rank`` (1 = best), ``rank_lo`` / ``rank_hi`` (1 + the arms shown
    better; the arms less those shown worse), ``tier`` (tier 1 is the arms not shown worse than
    the top arm, tier 2 the same among the arms left, and so on: every arm is shown worse than
    the top arm of each tier above its own, while arms of neighbouring tiers may be tied).
    With ``pairs=True``: one row per pair of arms instead, with ``n_tasks`` (the tasks the pair
    shares), ``diff`` (b − a), compare's ``lo``/``hi`` at ``ci``, ``p_value`` (compare's interval
    at ``ci = 1 − p`` touches 0), ``ci_adjusted`` (the corrected level the decision used) and
    ``significant``. Pairs compare declines (fewer than its ``min_tasks``) never differ.

    {df_or_folder}
    on: the column whose values are the arms.
    {k}
    {paired_by}
    {ci}
    {n_boot}
    {seed}
    {infra}
    {cluster}

    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> p = {"a": 0.9, "b": 0.88, "c": 0.4}
    >>> rows = [(m, t, bool(rng.random() < p[m])) for m in p for t in range(20) for _ in range(4)]
    >>> df = pd.DataFrame(rows, columns=["model", "task", "passed"])
    >>> df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
    >>> rank(df, k=1, n_boot=200)[["arm", "rank", "tier"]].values.tolist()
    [['a', 1, 1], ['b', 2, 1], ['c', 3, 2]]
    """
    check_k(k)
    check_options(ci=ci, n_boot=n_boot, seed=seed)
    if n_boot == 0:
        raise ValueError(
            "rank decides ties and tiers from compare's intervals, and n_boot=0 asks for none: "
            "every pair would read as tied. Pass n_boot ≥ 1 (compare's Korn–Graubard interval does not "
            "resample; n_boot only switches intervals on)"
        )
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {list(CORRECTIONS)}; got correction={correction!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1; got alpha={alpha}")
    if isinstance(df, pd.DataFrame) and on not in df.columns:
        raise ValueError(f"on={on!r} is not a column; the arms are the values of a column such as 'model'")
    counted = as_counts(df, by=by, infra=infra, on=on, cluster=cluster)
    by_ = _shared_by(counted.table, by, on)
    counted = as_counts(counted, by=(*by_, on), infra=infra, cluster=cluster)
    table = counted.table
    gid, keys = counted.groups(by_)
    options = {"k": k, "ci": ci, "n_boot": n_boot, "seed": seed, "cluster": cluster}
    frames = []
    for g in range(len(keys)):
        group = {col: keys.iloc[g][col] for col in by_}
        arms, data = _usable(table[gid == g], on, k)
        tests = _pairs(data, arms, on, k, ci, alpha, correction, cluster)
        out = tests if pairs else _ranking(data, arms, on, by_, options, tests)
        frames.append(out.assign(**group)[[*by_, *out.columns]])
    out = pd.concat(frames, ignore_index=True)
    return described(out, "rank", by=by_, k=k, ci=ci, method=PAIRED_METHOD, infra=infra)


def _shared_by(df: pd.DataFrame, by: str | Sequence[str] | None, on: str) -> tuple[str, ...]:
    """``by`` as columns; by default the identity columns except ``on`` and any column no value of
    which every arm shares (an agent's fingerprint), as :func:`compare` and :func:`flips` group."""
    if by is not None:
        return tuple(col for col in default_by(df, by) if col != on)
    arms = [frame for _, frame in df.groupby(on, sort=False, dropna=False)]
    return tuple(shared_columns((col for col in default_by(df, None) if col != on), arms))


def _usable(sub: pd.DataFrame, on: str, k: int) -> tuple[list[object], pd.DataFrame]:
    """The arms with a task of at least k usable trials, and those tasks' counts; arms without one
    are left out with a warning (they have no pass^k)."""
    usable = sub[sub["n"] >= k]
    arms = list(dict.fromkeys(usable[on]))
    empty = [arm for arm in dict.fromkeys(sub[on]) if arm not in set(arms)]
    if len(arms) < 2:
        raise ValueError(
            f"rank needs at least two arms (values of {on!r}) with a task of at least k={k} usable "
            f"trials; got {arms}{f', and {empty} without one' if empty else ''}. Choose a smaller k"
        )
    if empty:
        warnings.warn(
            f"{on}={empty} have no task with {k} usable trials and are left out of the ranking",
            UserWarning,
            stacklevel=3,
        )
    return arms, usable.sort_values([on, "task"], kind="stable")


def _pairs(
    data: pd.DataFrame,
    arms: list[object],
    on: str,
    k: int,
    ci: float,
    alpha: float,
    correction: str,
    cluster: str | None = None,
) -> pd.DataFrame:
    """Every pair of arms by :func:`compare` (pass^k) on the tasks both ran, all pairs at once (the
    pairs are the groups of one :class:`PairedTasks`), decided by Holm or Benjamini–Hochberg on
    compare's p-values, each computed once; with ``cluster``, each task's family is the sampling unit."""
    index = {arm: i for i, arm in enumerate(arms)}
    task_id, tasks = pd.factorize(data["task"])
    task_unit = None if cluster is None else _task_families(data, task_id, cluster)
    arm_id = data[on].map(index).to_numpy()
    n, c = np.zeros((len(arms), len(tasks)), np.int64), np.zeros((len(arms), len(tasks)), np.int64)
    n[arm_id, task_id], c[arm_id, task_id] = data["n"].to_numpy(), data["c"].to_numpy()
    first, second = np.triu_indices(len(arms), 1)
    shared = (n[first] > 0) & (n[second] > 0)  # (pairs, tasks)
    n_tasks = shared.sum(axis=1)
    pair_id, task = np.nonzero(shared)
    ran = np.flatnonzero(n_tasks > 0)  # pairs sharing no task have no comparison
    gid = np.searchsorted(ran, pair_id)
    a, b = first[pair_id], second[pair_id]
    m = len(first)
    diff, lo, hi, p_value = (np.full(m, np.nan) for _ in range(4))
    p_value[:] = 1.0
    if ran.size:
        paired = PairedTasks.from_counts(
            ("pair",),
            k,
            gid,
            pd.DataFrame({"pair": ran}),
            n[a, task],
            c[a, task],
            n[b, task],
            c[b, task],
            None if task_unit is None else task_unit[task],
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # declines: said once by rank
            # compare's default interval does not resample: n_boot ≥ 1 only asks for it
            frame = paired_frame(paired, ci=ci, n_boot=1, seed=0, method=PAIRED_METHOD, min_tasks=MIN_TASKS)
        frame = frame[frame["metric"] == "pass^k"].sort_values("pair")
        diff[ran], lo[ran], hi[ran] = (frame[col].to_numpy(dtype=float) for col in ("diff", "lo", "hi"))
        p_value[ran] = paired_p_values(paired, min_tasks=MIN_TASKS)[:, METRICS.index("pass^k")]
    significant, level_used = _correct(p_value, alpha, correction)
    if n_tasks.min() < len(tasks):
        few = int((n_tasks < MIN_TASKS).sum())
        warnings.warn(
            f"some tasks lack {k} usable trials under some arm: each pair is compared on the "
            f"tasks both ran, {n_tasks.min()} to {n_tasks.max()} of {len(tasks)}"
            + (f"; {few} pairs share fewer than {MIN_TASKS} and never differ" if few else "")
            + " (rank(..., pairs=True) gives each pair's n_tasks)",
            UserWarning,
            stacklevel=3,
        )
    return pd.DataFrame(
        {
            "a": [arms[i] for i in first],
            "b": [arms[j] for j in second],
            "n_tasks": n_tasks,
            "diff": diff,
            "lo": lo,
            "hi": hi,
            "p_value": p_value,
            "ci_adjusted": 1 - level_used,
            "significant": significant,
        }
    )


def _task_families(data: pd.DataFrame, task_id: np.ndarray, cluster: str) -> np.ndarray:
    """The family code of each task (numbered as ``task_id``), the same under every arm."""
    first = np.unique(task_id, return_index=True)[1]
    family = data[cluster].astype(object).iloc[first].reset_index(drop=True)
    given = data[cluster].astype(object).to_numpy()
    clash = ~(pd.isna(given) & pd.isna(family.to_numpy()[task_id])) & (given != family.to_numpy()[task_id])
    if clash.any():
        task = data["task"].iloc[int(np.flatnonzero(clash)[0])]
        raise ValueError(f"task {task!r} has more than one {cluster!r} across arms; a task has one family")
    return unit_codes(family)


def _correct(p: np.ndarray, alpha: float, correction: str) -> tuple[np.ndarray, np.ndarray]:
    """Which p-values a multiple-testing correction rejects, and the level each decision used:
    Holm's step-down (the i-th smallest p is rejected, with all before it, while p ≤ alpha/(m − i))
    or Benjamini–Hochberg's step-up (the r smallest, r the largest i with p_(i) ≤ i·alpha/m)."""
    m = len(p)
    order = np.argsort(p, kind="stable")
    sorted_p = p[order]
    significant, level = np.zeros(m, dtype=bool), np.empty(m)
    if correction == "holm":
        steps = alpha / (m - np.arange(m))
        passed = sorted_p <= steps
        r = m if passed.all() else int(np.argmin(passed))
        level[order[:r]] = steps[:r]
        level[order[r:]] = alpha / (m - r) if r < m else alpha
    else:
        below = np.flatnonzero(sorted_p <= alpha * np.arange(1, m + 1) / m)
        r = int(below[-1]) + 1 if below.size else 0
        level[:] = max(r, 1) * alpha / m
    significant[order[:r]] = True
    return significant, level


def _ranking(
    data: pd.DataFrame,
    arms: list[object],
    on: str,
    by: tuple[str, ...],
    options: dict[str, int | float | str | None],
    tests: pd.DataFrame,
) -> pd.DataFrame:
    """One row per arm: summarize's pass^k on its tasks, the order, rank intervals and tiers."""
    summary = summarize(data, by=(*by, on), **options).set_index(on).loc[arms]  # type: ignore[arg-type]
    n_arms = len(arms)
    first, second = (tests[col].map({arm: i for i, arm in enumerate(arms)}).to_numpy() for col in ("a", "b"))
    diff = tests["diff"].to_numpy(dtype=float)  # b − a
    ran = ~np.isnan(diff)
    advantage, pairs_of = np.zeros(n_arms), np.zeros(n_arms)
    np.add.at(advantage, first[ran], -diff[ran])
    np.add.at(advantage, second[ran], diff[ran])
    np.add.at(pairs_of, first[ran], 1)
    np.add.at(pairs_of, second[ran], 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        vs_field = advantage / pairs_of
    # rounded: with every task shared, the mean paired difference orders exactly as pass^k does
    order = np.lexsort((np.arange(n_arms), -np.nan_to_num(np.round(vs_field, 12), nan=-np.inf)))
    point_rank = np.empty(n_arms, dtype=int)
    point_rank[order] = np.arange(1, n_arms + 1)
    # worse[i, j]: arm j is shown worse than arm i (the pair differs and its difference says so)
    worse = np.zeros((n_arms, n_arms), dtype=bool)
    sig = tests["significant"].to_numpy()
    worse[first[sig & (diff < 0)], second[sig & (diff < 0)]] = True
    worse[second[sig & (diff > 0)], first[sig & (diff > 0)]] = True
    tier, left, t = np.zeros(n_arms, dtype=int), list(order), 0
    while left:  # the arms not shown worse than the top arm left form the next tier
        t += 1
        top = left[0]
        tier[[i for i in left if not worse[top, i]]] = t
        left = [i for i in left if worse[top, i]]
    out = pd.DataFrame(
        {
            "arm": arms,
            "k": options["k"],
            "pass^k": summary["pass^k"].to_numpy(dtype=float),
            "lo": summary["pass^k_lo"].to_numpy(dtype=float),
            "hi": summary["pass^k_hi"].to_numpy(dtype=float),
            "ci_method": summary["ci_method"].to_numpy(),
            "vs_field": vs_field,
            "rank": point_rank,
            "rank_lo": 1 + worse.sum(axis=0),
            "rank_hi": n_arms - worse.sum(axis=1),
            "tier": tier,
            "n_tasks": data.groupby(on, sort=False)["task"].nunique().loc[arms].to_numpy(),
        }
    )
    return out.sort_values("rank").reset_index(drop=True)
