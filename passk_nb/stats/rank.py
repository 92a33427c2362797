"""Rank many arms (models, prompts) at once, and say which of them are tied.

Each arm's pass^k and interval are :func:`~passk_nb.stats.summary.summarize`'s, and every pair of
arms is compared by :func:`~passk_nb.stats.paired.compare` over the same tasks; a pair differs
when compare's interval at the multiplicity-corrected level (Holm, or Benjamini–Hochberg) excludes
0. Tiers are the finest split of the ranking that keeps every pair that does not differ inside one
tier, so two arms whose compare interval contains 0 are never in different tiers. Rank intervals
come from the same decisions: an arm ranks below the arms that differ from it from above, and
above those that differ from it from below (simultaneous, as the correction is).
"""

from __future__ import annotations

import itertools
import os
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from passk_nb.stats._grouping import shared_columns
from passk_nb.stats.checks import check_k, check_options
from passk_nb.stats.counts import Counts, as_counts
from passk_nb.stats.paired import PairedTasks, differs, paired_frame, paired_tasks
from passk_nb.stats.params import CI, INFRA, MIN_TASKS, N_BOOT, PAIRED_METHOD, SEED, default_by, share_docs
from passk_nb.stats.result import described
from passk_nb.stats.summary import summarize

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
) -> pd.DataFrame:
    """Rank the arms (values of column ``on``) by pass^k, with tiers of tied arms.

    Only tasks with at least k usable trials under every arm are used (a warning says how
    many were left out). One row per (group, arm), best first: ``pass^k`` with its ``ci``
    interval (``lo``, ``hi``, ``ci_method``: summarize's on these tasks), ``rank`` (1 = best),
    ``rank_lo`` / ``rank_hi`` (1 + the arms that differ from it from above; the arms less those
    that differ from it from below: a bootstrap of ranks over few tasks is too narrow), ``tier`` (a new
    tier starts only where every arm above differs from every arm below: compare's interval of
    the pair at the level that ``correction``, "holm" or "bh", gives ``alpha`` excludes 0),
    ``n_tasks``. With ``pairs=True``: one row per pair of arms instead, with ``diff`` (b − a),
    compare's ``lo``/``hi`` at ``ci``, ``ci_adjusted`` (the corrected level the decision used)
    and ``significant``. Pairs compare declines (fewer than its ``min_tasks``) never differ.

    {df_or_folder}
    on: the column whose values are the arms.
    {k}
    {paired_by}
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
    if n_boot == 0:
        raise ValueError(
            "rank decides ties and tiers from compare's intervals, and n_boot=0 asks for none: "
            "every pair would read as tied. Pass n_boot ≥ 1 (compare's paired t interval does not "
            "resample; n_boot only switches intervals on)"
        )
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {list(CORRECTIONS)}; got correction={correction!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1; got alpha={alpha}")
    if isinstance(df, pd.DataFrame) and on not in df.columns:
        raise ValueError(f"on={on!r} is not a column; the arms are the values of a column such as 'model'")
    counted = as_counts(df, by=by, infra=infra, on=on)
    by_ = _shared_by(counted.table, by, on)
    counted = as_counts(counted, by=(*by_, on), infra=infra)
    table = counted.table
    gid, keys = counted.groups(by_)
    options = {"k": k, "ci": ci, "n_boot": n_boot, "seed": seed}
    frames = []
    for g in range(len(keys)):
        sub = table[gid == g]
        group = {col: keys.iloc[g][col] for col in by_}
        arms, data = _common_tasks(sub, on, k)
        if len(arms) < 2:
            raise ValueError(
                f"rank needs at least two arms (values of {on!r}) sharing tasks; got {list(arms)}"
            )
        data = data[[*by_, on, "task", "n", "c"]]
        tests = _pairs(data, arms, on, by_, options, alpha, correction)
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


def _common_tasks(sub: pd.DataFrame, on: str, k: int) -> tuple[list[object], pd.DataFrame]:
    """The arms and the counts of the tasks every arm ran at least k times."""
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
    return arms, usable[usable["task"].isin(common)].sort_values([on, "task"])


def _pairs(
    data: pd.DataFrame,
    arms: list[object],
    on: str,
    by: tuple[str, ...],
    options: dict[str, int | float],
    alpha: float,
    correction: str,
) -> pd.DataFrame:
    """Every pair of arms by :func:`compare` (pass^k), decided at Holm's or Benjamini–Hochberg's
    level. Both are run on compare's intervals alone: a pair's p ≤ level exactly when its
    interval at ``ci = 1 − level`` excludes 0, so no p-value is computed here."""
    pair_list = list(itertools.combinations(arms, 2))
    m = len(pair_list)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # declines and left-out tasks: said once by rank
        prepared = [
            paired_tasks(
                data[data[on].isin(pair)],
                on=on,
                a=pair[0],
                b=pair[1],
                k=int(options["k"]),
                by=by,
                infra=INFRA,
            )
            for pair in pair_list
        ]  # data is counted already (with rank's infra=): compare's default reads it as it is

    def excludes_zero(chosen: list[int], level: float) -> dict[int, bool]:
        out = {}
        for i in chosen:
            row = _compare_row(prepared[i], {**options, "ci": 1 - level})
            out[i] = bool(differs(row.to_frame().T)[0][0])  # compare's own decision; declined: never
        return out

    significant, level_used = np.zeros(m, dtype=bool), np.full(m, alpha / m)
    if correction == "holm":  # step down: reject all p ≤ alpha/(remaining), until none is
        while not significant.all():
            remaining = [int(j) for j in np.flatnonzero(~significant)]
            level = alpha / len(remaining)
            level_used[remaining] = level
            new = [i for i, rejected in excludes_zero(remaining, level).items() if rejected]
            if not new:
                break
            significant[new] = True
    else:  # step up: the largest i with #(p ≤ i·alpha/m) ≥ i, found by i ← #(p ≤ i·alpha/m)
        i = m
        while i > 0:
            decided = excludes_zero(list(range(m)), i * alpha / m)
            count = sum(decided.values())
            if count >= i:
                significant[[j for j, rejected in decided.items() if rejected]] = True
                break
            i = count
        level_used[:] = max(i, 1) * alpha / m
    rows = [_compare_row(tasks, options) for tasks in prepared]
    return pd.DataFrame(
        {
            "a": [a for a, _ in pair_list],
            "b": [b for _, b in pair_list],
            "diff": [row["diff"] for row in rows],
            "lo": [row["lo"] for row in rows],
            "hi": [row["hi"] for row in rows],
            "ci_adjusted": 1 - level_used,
            "significant": significant,
        }
    )


def _compare_row(tasks: PairedTasks, options: dict[str, int | float]) -> pd.Series:
    """compare()'s pass^k row for one pair of arms (b − a), from the pair's paired tasks: the same
    code as :func:`~passk_nb.stats.paired.compare`, which prepares the tasks once per pair."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # declines: said once by rank
        out = paired_frame(
            tasks,
            ci=float(options["ci"]),
            n_boot=int(options["n_boot"]),
            seed=int(options["seed"]),
            method=PAIRED_METHOD,
            min_tasks=MIN_TASKS,
        )
    return out[out["metric"] == "pass^k"].iloc[0]


def _ranking(
    data: pd.DataFrame,
    arms: list[object],
    on: str,
    by: tuple[str, ...],
    options: dict[str, int | float],
    tests: pd.DataFrame,
) -> pd.DataFrame:
    summary = summarize(data, by=(*by, on), **options).set_index(on).loc[arms]  # type: ignore[arg-type]
    mean = summary["pass^k"].to_numpy(dtype=float)
    order = np.argsort(-mean, kind="stable")
    point_rank = np.empty(len(arms), dtype=int)
    point_rank[order] = np.arange(1, len(arms) + 1)
    index = {arm: i for i, arm in enumerate(arms)}
    above, below = np.zeros(len(arms), dtype=int), np.zeros(len(arms), dtype=int)
    # A cut between ranking positions r − 1 and r is allowed only if no tied pair straddles it.
    cut = np.ones(len(arms), dtype=bool)
    for pair in tests.itertuples():
        i, j = index[pair.a], index[pair.b]
        better, worse = (i, j) if point_rank[i] < point_rank[j] else (j, i)
        if pair.significant:
            above[worse] += 1
            below[better] += 1
        else:
            cut[point_rank[better] : point_rank[worse]] = False
    cut[0] = True
    tier_at = np.cumsum(cut)
    out = pd.DataFrame(
        {
            "arm": arms,
            "k": options["k"],
            "pass^k": mean,
            "lo": summary["pass^k_lo"].to_numpy(dtype=float),
            "hi": summary["pass^k_hi"].to_numpy(dtype=float),
            "ci_method": summary["ci_method"].to_numpy(),
            "rank": point_rank,
            "rank_lo": 1 + above,
            "rank_hi": len(arms) - below,
            "tier": tier_at[point_rank - 1],
            "n_tasks": data["task"].nunique(),
        }
    )
    return out.sort_values("rank").reset_index(drop=True)
