"""Rank many arms (models, prompts) at once, and say which of them are tied.

Every pair of arms is compared on pass^k over the same tasks (paired t-test on the per-task
unbiased values), the p-values are corrected for the number of pairs (Holm, or
Benjamini–Hochberg), and arms are grouped into tiers: going down the ranking, an arm starts a
new tier only when it is significantly worse than the best arm of the current tier. Rank
intervals come from a bootstrap over tasks that draws the same tasks for every arm. A
leaderboard top that is a statistical tie gets one tier and overlapping rank intervals.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from passk_nb.stats._grouping import group_ids
from passk_nb.stats.checks import check_k, check_options
from passk_nb.stats.counts import counted_folder, counts
from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.params import CI, INFRA, N_BOOT, SEED, default_by, share_docs

CORRECTIONS = ("holm", "bh")


@share_docs
def rank(
    df: pd.DataFrame | str | os.PathLike[str],
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
) -> pd.DataFrame:
    """Rank the arms (values of column ``on``) by pass^k, with tiers of tied arms.

    Only tasks with at least k usable trials under every arm are used (a warning says how
    many were left out). One row per (group, arm), best first: ``pass^k`` with its ``ci``
    Student-t interval over tasks (``lo``, ``hi``), ``rank`` (1 = best), ``rank_lo`` /
    ``rank_hi`` (bootstrap over tasks, same draw for every arm), ``tier`` (arms in one tier are
    not significantly different from the tier's best at ``alpha`` after ``correction``:
    "holm" or "bh"), ``n_tasks``. With ``pairs=True``: one row per pair of arms instead, with
    ``diff`` (a − b), ``p`` (paired t-test over tasks) and ``p_adjusted``, ``significant``.

    {df_or_folder}
    on: the column whose values are the arms.
    {k}
    {by} (Besides ``on``, which is never a grouping column here.)
    {ci}
    {n_boot}
    {seed}
    {infra}

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
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {list(CORRECTIONS)}; got correction={correction!r}")
    df = counted_folder(df, by, on)
    if on not in df.columns:
        raise ValueError(f"on={on!r} is not a column; the arms are the values of a column such as 'model'")
    by_ = tuple(col for col in default_by(df, by) if col != on)
    table = counts(df, by=(*by_, on), infra=infra)
    gid, keys = group_ids(table, by_)
    frames = []
    for g in range(len(keys)):
        sub = table[gid == g]
        group = {col: keys.iloc[g][col] for col in by_}
        x, arms = _matrix(sub, on, k)
        if len(arms) < 2:
            raise ValueError(
                f"rank needs at least two arms (values of {on!r}) sharing tasks; got {list(arms)}"
            )
        out = (
            _pairs(x, arms, alpha, correction)
            if pairs
            else _ranking(x, arms, k, ci, n_boot, seed, alpha, correction)
        )
        frames.append(out.assign(**group)[[*by_, *out.columns]])
    return pd.concat(frames, ignore_index=True)


def _matrix(sub: pd.DataFrame, on: str, k: int) -> tuple[np.ndarray, list[object]]:
    """Per-task pass^k, arms × tasks, over the tasks every arm ran at least k times."""
    usable = sub[sub["n"] >= k]
    arms = list(dict.fromkeys(sub[on]))
    tasks_per_arm = usable.groupby(on, sort=False)["task"].apply(set)
    common = set.intersection(*(tasks_per_arm.get(a, set()) for a in arms))
    all_tasks = set(sub["task"])
    if len(common) < len(all_tasks):
        warnings.warn(
            f"{len(all_tasks) - len(common)} of {len(all_tasks)} tasks lack {k} usable trials under some arm "
            "and were left out of the ranking",
            UserWarning,
            stacklevel=3,
        )
    if len(common) < 2:
        raise ValueError(
            f"rank needs at least 2 tasks every arm ran at least k={k} times; found {len(common)}"
        )
    rows = usable[usable["task"].isin(common)].sort_values([on, "task"])
    x = np.vstack(
        [
            np.asarray(pass_hat_k(r["n"].to_numpy(), r["c"].to_numpy(), k), dtype=float)
            for _, r in ((a, rows[rows[on] == a]) for a in arms)
        ]
    )
    return x, arms


def _adjust(p: np.ndarray, correction: str) -> np.ndarray:
    if correction == "bh":
        return np.asarray(sps.false_discovery_control(p, method="bh"))
    order = np.argsort(p)
    m = p.size
    adjusted = np.maximum.accumulate(np.minimum((m - np.arange(m)) * p[order], 1.0))
    out = np.empty(m)
    out[order] = adjusted
    return out


def _pairs(x: np.ndarray, arms: list[object], alpha: float, correction: str) -> pd.DataFrame:
    """Paired t-test over tasks for every pair of arms (rows of x), corrected p-values."""
    i, j = np.triu_indices(len(arms), 1)
    d = x[i] - x[j]
    tasks = x.shape[1]
    mean, sd = d.mean(1), d.std(1, ddof=1)
    constant = np.isclose(sd, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean / (sd / np.sqrt(tasks))
    p = np.where(constant, np.where(np.isclose(mean, 0.0), 1.0, 0.0), 2 * sps.t.sf(np.abs(t), tasks - 1))
    out = pd.DataFrame({"a": [arms[a] for a in i], "b": [arms[b] for b in j], "diff": mean, "p": p})
    out["p_adjusted"] = _adjust(p, correction)
    out["significant"] = out["p_adjusted"] < alpha
    return out


def _ranking(
    x: np.ndarray,
    arms: list[object],
    k: int,
    ci: float,
    n_boot: int,
    seed: int,
    alpha: float,
    correction: str,
) -> pd.DataFrame:
    tasks = x.shape[1]
    mean = x.mean(1)
    half = sps.t.ppf((1 + ci) / 2, tasks - 1) * x.std(1, ddof=1) / np.sqrt(tasks)
    order = np.argsort(-mean, kind="stable")
    point_rank = np.empty(len(arms), dtype=int)
    point_rank[order] = np.arange(1, len(arms) + 1)
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        draws = rng.integers(0, tasks, size=(n_boot, tasks))
        boot = x[:, draws].mean(2)  # arms × n_boot
        ranks = sps.rankdata(-boot, axis=0, method="min")
        rank_lo, rank_hi = np.quantile(ranks, [(1 - ci) / 2, (1 + ci) / 2], axis=1, method="nearest")
    else:
        rank_lo = rank_hi = np.full(len(arms), np.nan)
    significant = _pairs(x, arms, alpha, correction)
    differs = {(r.a, r.b): r.significant for r in significant.itertuples()}
    tier = np.empty(len(arms), dtype=int)
    current, leader = 1, order[0]
    for i in order:
        if i != leader and differs.get((arms[leader], arms[i]), differs.get((arms[i], arms[leader]), False)):
            current, leader = current + 1, i
        tier[i] = current
    out = pd.DataFrame(
        {
            "arm": arms,
            "k": k,
            "pass^k": mean,
            "lo": np.clip(mean - half, 0, 1),
            "hi": np.clip(mean + half, 0, 1),
            "rank": point_rank,
            "rank_lo": rank_lo.astype(int) if n_boot > 0 else rank_lo,
            "rank_hi": rank_hi.astype(int) if n_boot > 0 else rank_hi,
            "tier": tier,
            "n_tasks": tasks,
        }
    )
    return out.sort_values("rank").reset_index(drop=True)
