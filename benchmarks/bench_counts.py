"""Benchmark: per-task counts and point estimates on 1,000,000 trial rows, three ways.

2,000 tasks × 10 models × 5 prompts × 10 trials, 1 % infra errors. Per (model, prompt_hash):
pass@k and pass^k (k = 2) as the mean over tasks of the unbiased per-task estimators.

- ``counts()``: :func:`passk_nb.stats.counts.counts` (one pass over category codes), then the
  vectorised estimators and a bincount mean per group;
- pandas: ``pivot_table`` of size and sum per (model, prompt, task), the same estimators,
  ``groupby().mean()`` (what a pandas user writes);
- loop: ``groupby`` per (model, prompt), then per task, ``math.comb`` (timed on a few groups,
  scaled to all 50: its cost is linear in the groups).

Also ``counts()`` alone against the pandas groupby it replaced (``groupby_counts`` here). Both with the
record dtypes (``str``) and with categorical identity columns. Times are the best of several
interleaved runs; the values of all routes are checked equal (rtol 1e-12). Prints ratios.

    python benchmarks/bench_counts.py
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np
import pandas as pd

from passk_nb.stats.counts import counts
from passk_nb.stats.estimators import pass_at_k, pass_hat_k

TASKS, MODELS, PROMPTS, TRIALS = 2_000, 10, 5, 10
K = 2
BY = ("model", "prompt_hash")


def trial_frame(seed: int = 0) -> pd.DataFrame:
    """The 1M-row frame with the record dtypes of the columns the counts read; 1 % infra errors."""
    rng = np.random.default_rng(seed)
    rows = TASKS * MODELS * PROMPTS * TRIALS
    p = rng.beta(2, 1, size=(MODELS * PROMPTS, TASKS))
    passed = (rng.random((MODELS * PROMPTS, TASKS, TRIALS)) < p[:, :, None]).ravel()
    infra = rng.random(rows) < 0.01
    failure = rng.choice(["wrong_state", "format_error", "max_turns"], size=rows)
    return pd.DataFrame(
        {
            "model": np.repeat([f"model-{m}" for m in range(MODELS)], PROMPTS * TASKS * TRIALS),
            "prompt_hash": np.tile(np.repeat([f"{p:012x}" for p in range(PROMPTS)], TASKS * TRIALS), MODELS),
            "task": np.tile(np.repeat([f"task-{t:04d}" for t in range(TASKS)], TRIALS), MODELS * PROMPTS),
            # one run per model and prompt, as passk_nb.load() returns them: the counts check that no
            # (run_id, task, trial) is repeated
            "run_id": np.repeat([f"{r:012x}" for r in range(MODELS * PROMPTS)], TASKS * TRIALS),
            "trial": np.tile(np.arange(TRIALS), MODELS * PROMPTS * TASKS),
            "passed": passed & ~infra,
            "outcome": np.where(infra, "infra_error", np.where(passed, "pass", failure)),
        }
    ).astype({"model": "str", "prompt_hash": "str", "run_id": "str", "task": "str", "outcome": "str"})


def groupby_counts(df: pd.DataFrame, by: tuple[str, ...] = BY) -> pd.DataFrame:
    """n, c, n_infra per (group, task) with a pandas groupby of per-trial indicator columns
    (how passk_nb counted before counts())."""
    keys = [*by, "task"]
    is_infra = (df["outcome"] == "infra_error").to_numpy(dtype=bool)
    table = (
        df[keys]
        .reset_index(drop=True)
        .assign(
            n=(~is_infra).astype(np.int64),
            c=(df["passed"].to_numpy(dtype=bool) & ~is_infra).astype(np.int64),
            n_infra=is_infra.astype(np.int64),
        )
    )
    return (
        table.groupby(keys, sort=True, observed=True, dropna=False)[["n", "c", "n_infra"]].sum().reset_index()
    )


def with_counts(df: pd.DataFrame) -> pd.DataFrame:
    table = counts(df, by=BY)
    table = table[table["n"] >= K]
    gid = table.groupby(list(BY), sort=False, observed=True).ngroup().to_numpy()
    first = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
    out = table.iloc[first][list(BY)].reset_index(drop=True)
    n, c, tasks = table["n"].to_numpy(), table["c"].to_numpy(), np.bincount(gid)
    out["pass@k"] = np.bincount(gid, pass_at_k(n, c, K)) / tasks
    out["pass^k"] = np.bincount(gid, pass_hat_k(n, c, K)) / tasks
    return out


def with_pandas(df: pd.DataFrame) -> pd.DataFrame:
    usable = df[df["outcome"] != "infra_error"]
    table = usable.pivot_table(
        index=[*BY, "task"], values="passed", aggfunc=["count", "sum"], observed=True
    ).droplevel(1, axis=1)
    table = table[table["count"] >= K]
    n, c = table["count"].to_numpy(), table["sum"].to_numpy()
    per_task = pd.DataFrame({"pass@k": pass_at_k(n, c, K), "pass^k": pass_hat_k(n, c, K)}, index=table.index)
    return per_task.groupby(level=list(BY), observed=True).mean().reset_index()


def with_loop(df: pd.DataFrame, groups: int) -> pd.DataFrame:
    rows = []
    for i, ((model, prompt), group) in enumerate(df.groupby(list(BY), observed=True)):
        if i == groups:
            break
        at, hat = [], []
        for _, task in group[group["outcome"] != "infra_error"].groupby("task", observed=True):
            n, c = len(task), int(task["passed"].sum())
            if n >= K:
                at.append(1 - math.comb(n - c, K) / math.comb(n, K))
                hat.append(math.comb(c, K) / math.comb(n, K))
        rows.append(
            {
                "model": model,
                "prompt_hash": prompt,
                "pass@k": sum(at) / len(at),
                "pass^k": sum(hat) / len(hat),
            }
        )
    return pd.DataFrame(rows)


def best_of(routes: dict[str, Callable[[], object]], repeats: int) -> dict[str, tuple[float, float]]:
    """Best wall time and best CPU time of each route over ``repeats`` rounds, routes
    interleaved (a shared machine's load then hits every route alike; CPU time is steadier)."""
    wall, cpu = dict.fromkeys(routes, math.inf), dict.fromkeys(routes, math.inf)
    for _ in range(repeats):
        for name, route in routes.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            route()
            wall[name] = min(wall[name], time.perf_counter() - start)
            cpu[name] = min(cpu[name], time.process_time() - start_cpu)
    return {name: (wall[name], cpu[name]) for name in routes}


def same_values(*frames: pd.DataFrame) -> None:
    keyed = [f.assign(model=f["model"].astype(str), prompt_hash=f["prompt_hash"].astype(str)) for f in frames]
    merged = keyed[0]
    for other in keyed[1:]:
        merged = merged.merge(other, on=list(BY), suffixes=("", "_other"))
        assert len(merged) == len(other)
        for metric in ("pass@k", "pass^k"):
            np.testing.assert_allclose(merged[metric], merged[f"{metric}_other"], rtol=1e-12)
        merged = merged.drop(columns=["pass@k_other", "pass^k_other"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--loop-groups", type=int, default=5, help="groups the loop is timed on (of 50)")
    args = parser.parse_args()

    frames = {"str": trial_frame()}
    frames["categorical"] = frames["str"].astype(
        {c: "category" for c in ("model", "prompt_hash", "run_id", "task", "outcome")}
    )
    shape = f"{TASKS} tasks × {MODELS} models × {PROMPTS} prompts × {TRIALS} trials"
    print(f"{len(frames['str']):,} trial rows: {shape}")
    n_groups = MODELS * PROMPTS
    for dtype, df in frames.items():
        with_counts(df.head(50_000)), with_pandas(df.head(50_000))  # warm-up
        pd.testing.assert_frame_equal(counts(df, by=BY)[list(groupby_counts(df).columns)], groupby_counts(df))
        same_values(with_counts(df), with_pandas(df), with_loop(df, args.loop_groups))
        t = best_of(
            {
                "counts()": lambda df=df: counts(df, by=BY),
                "pandas groupby": lambda df=df: groupby_counts(df),
                "point estimates via counts()": lambda df=df: with_counts(df),
                "point estimates via pandas pivot": lambda df=df: with_pandas(df),
            },
            args.repeats,
        )
        t.update(
            best_of({"point estimates via Python loop": lambda df=df: with_loop(df, args.loop_groups)}, 1)
        )
        scale = n_groups / args.loop_groups
        t["point estimates via Python loop"] = tuple(x * scale for x in t["point estimates via Python loop"])
        print(f"\nidentity columns as {dtype}:  {'wall':>10s} {'CPU':>10s}")
        for name, (wall, cpu) in t.items():
            print(f"  {name:34s} {wall * 1000:8.1f} ms {cpu * 1000:8.1f} ms")
        print(f"  (the loop timed on {args.loop_groups} of {n_groups} groups, scaled)")
        ours = "point estimates via counts()"
        for name, (slow, fast) in {
            "counts() vs pandas groupby": ("pandas groupby", "counts()"),
            "estimates: counts() vs pandas pivot": ("point estimates via pandas pivot", ours),
            "estimates: counts() vs Python loop": ("point estimates via Python loop", ours),
        }.items():
            wall_ratio, cpu_ratio = (t[slow][i] / t[fast][i] for i in (0, 1))
            print(f"  {name:38s} wall {wall_ratio:6.1f}×  CPU {cpu_ratio:6.1f}×")


if __name__ == "__main__":
    main()
