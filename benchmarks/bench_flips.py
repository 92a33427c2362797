"""Benchmark: per-task Fisher exact tests for 10,000 task pairs (200,000 trial rows).

10,000 tasks × 2 prompts × 10 trials; for each task the two-sided p-value of "prompt A vs
prompt B" and the smallest p-value its trial counts allow (``min_p``), as ``flips()`` reports.

- vectorised: :func:`passk_nb.stats.exact.fisher_exact_2x2` on the per-task counts;
- loop: one ``scipy.stats.fisher_exact`` call per task and per quantity (what ``flips()`` does
  today, ``passk_nb.stats.paired._fisher``).

Also the whole path from trial rows (``counts()`` of each arm, pairing, both tests), and the
public call ``flips(df, on="prompt_hash", a=..., b=...)`` (p-value, min_p and Tarone's bound of
every task with ``fisher_exact_2x2``) against the same call with the per-task scipy loop it
replaced (scipy per table and per margin, with their lru caches cleared
before the run; target ≥ 100×). Checks that the p-values are equal to scipy's (rtol 1e-12;
reports how many are bit-identical) and the flips frames equal. Prints times and ratios
measured in this run.

Then flips() beside summarize() on the same rows of the leaderboard shape of
``bench_scale.py`` (1,000 tasks × 20 configurations × n trials, ``--scale-rows``, default 1M:
50 trials per task and arm; 10M: 500), both timed in this run. Target (issue 47): linear in the
rows, ≤ 2× one summarize. Before #47, Tarone's screen tested every split of every margin: at 200
trials per arm (400k rows of two arms) flips took 41 s against 0.09 s for summarize.

    python benchmarks/bench_flips.py [--tasks 10000] [--scale-rows 1000000]
"""

from __future__ import annotations

import argparse
import time
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import stats as sps

from passk_nb.stats import paired
from passk_nb.stats.counts import counts
from passk_nb.stats.exact import fisher_exact_2x2

TASKS, TRIALS = 10_000, 10


def trial_frame(seed: int = 0, tasks: int = TASKS) -> pd.DataFrame:
    """Two prompts, each task's success rate redrawn for prompt B in a tenth of the tasks."""
    rng = np.random.default_rng(seed)
    p_a = rng.beta(2, 1, tasks)
    p_b = np.where(rng.random(tasks) < 0.1, rng.beta(1, 2, tasks), p_a)
    passed = rng.random((2, tasks, TRIALS)) < np.stack([p_a, p_b])[:, :, None]
    return pd.DataFrame(
        {
            "model": "m",
            "prompt_hash": np.repeat(["prompt-a", "prompt-b"], tasks * TRIALS),
            "task": np.tile(np.repeat([f"task-{t:05d}" for t in range(tasks)], TRIALS), 2),
            "passed": passed.ravel(),
            "outcome": np.where(passed.ravel(), "pass", "wrong_state"),
        }
    ).astype({"model": "str", "prompt_hash": "str", "task": "str", "outcome": "str"})


def paired_counts(df: pd.DataFrame) -> np.ndarray:
    """(c_a, n_a, c_b, n_b) per task with trials under both prompts."""
    table = counts(df, by=("model", "prompt_hash"))
    a = table[table["prompt_hash"] == "prompt-a"]
    b = table[table["prompt_hash"] == "prompt-b"]
    paired = a.merge(b, on=["model", "task"], suffixes=("_a", "_b"))
    return paired[["c_a", "n_a", "c_b", "n_b"]].to_numpy()


def vectorised(tables: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c_a, n_a, c_b, n_b = tables.T
    return fisher_exact_2x2(c_a, n_a, c_b, n_b), fisher_exact_2x2(n_a, n_a, 0, n_b)


def scipy_loop(tables: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    def fisher(c_a: int, n_a: int, c_b: int, n_b: int) -> float:
        return float(sps.fisher_exact([[c_a, n_a - c_a], [c_b, n_b - c_b]], alternative="two-sided").pvalue)

    p = np.array([fisher(*row) for row in tables])
    min_p = np.array([fisher(n_a, n_a, 0, n_b) for _, n_a, _, n_b in tables])
    return p, min_p


@lru_cache(maxsize=4096)
def _scipy_p(c_a: int, n_a: int, c_b: int, n_b: int) -> float:
    return float(sps.fisher_exact([[c_a, n_a - c_a], [c_b, n_b - c_b]], alternative="two-sided").pvalue)


@lru_cache(maxsize=4096)
def _scipy_min_p_given_margins(n_a: int, n_b: int, successes: int) -> float:
    low, high = max(0, successes - n_b), min(n_a, successes)
    return min(_scipy_p(x, n_a, successes - x, n_b) for x in range(low, high + 1))


def loop_tests(test: str, table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What flips() computed before fisher_exact_2x2: scipy per task (lru-cached per table)."""
    p_value = np.array([_scipy_p(*map(int, row)) for row in table])
    min_p = np.array([_scipy_p(int(n_a), int(n_a), 0, int(n_b)) for _, n_a, _, n_b in table])
    reachable = np.array(
        [_scipy_min_p_given_margins(int(n_a), int(n_b), int(c_a + c_b)) for c_a, n_a, c_b, n_b in table]
    )
    return p_value, min_p, reachable


def flips_with_loop(df: pd.DataFrame) -> pd.DataFrame:
    _scipy_p.cache_clear()
    _scipy_min_p_given_margins.cache_clear()
    vectorised_tests, paired.exact_tests = paired.exact_tests, loop_tests
    try:
        return paired.flips(df, a="prompt-a", b="prompt-b")
    finally:
        paired.exact_tests = vectorised_tests


def best_time(fn, repeats: int) -> tuple[tuple[float, float], object]:
    """Best wall time and best CPU time of ``repeats`` runs (CPU time is steadier on a shared
    machine), and the result."""
    wall = cpu = float("inf")
    result = None
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return (wall, cpu), result


def beside_summarize(rows: int, repeats: int) -> None:
    """flips() and summarize(k=2, n_boot=0) on the same rows, interleaved, best CPU of ``repeats``."""
    import os
    import warnings

    from bench_counts import best_of
    from bench_scale import BY, scale_frame

    from passk_nb.stats.summary import summarize

    warnings.simplefilter("ignore")
    df = scale_frame(rows)
    a, b = "000000000000", "000000000001"
    paired.flips(df.iloc[:: max(1, rows // 20_000)], a=a, b=b)  # warm-up
    times = best_of(
        {
            "summarize": lambda: summarize(df, k=2, by=BY, n_boot=0),
            "flips": lambda: paired.flips(df, a=a, b=b),
        },
        repeats,
    )
    (s_wall, s_cpu), (f_wall, f_cpu) = times["summarize"], times["flips"]
    print(f"{rows:,} rows (1,000 tasks × 20 configurations), load {os.getloadavg()[0]:.1f}:")
    print(
        f"  summarize {s_cpu:.3f} s CPU ({s_wall:.3f} s wall); flips {f_cpu:.3f} s CPU ({f_wall:.3f} s wall)"
    )
    print(f"  flips / summarize: {f_cpu / s_cpu:.2f}× CPU (target ≤ 2×)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs of the fast routes (best taken)")
    parser.add_argument("--tasks", type=int, default=TASKS, help=f"tasks (default {TASKS:,})")
    parser.add_argument("--scale-rows", type=int, default=1_000_000, help="rows beside summarize (0: skip)")
    args = parser.parse_args()

    if args.scale_rows:
        beside_summarize(args.scale_rows, args.repeats)
    df = trial_frame(tasks=args.tasks)
    print(f"{len(df):,} trial rows: {args.tasks:,} tasks × 2 prompts × {TRIALS} trials")
    vectorised(paired_counts(df.head(2_000)))  # warm-up
    counts_s, tables = best_time(lambda: paired_counts(df), args.repeats)
    fast_s, (p, min_p) = best_time(lambda: vectorised(tables), args.repeats)
    loop_s, (p_loop, min_p_loop) = best_time(lambda: scipy_loop(tables), 1)

    paired.flips(trial_frame(tasks=200), a="prompt-a", b="prompt-b")  # warm-up
    flips_s, got = best_time(lambda: paired.flips(df, a="prompt-a", b="prompt-b"), args.repeats)
    flips_loop_s, expected = best_time(lambda: flips_with_loop(df), 1)
    pd.testing.assert_frame_equal(got, expected, rtol=1e-12)
    np.testing.assert_allclose(p, p_loop, rtol=1e-12, atol=0)
    np.testing.assert_allclose(min_p, min_p_loop, rtol=1e-12, atol=0)
    identical = np.mean(np.r_[p == p_loop, min_p == min_p_loop])
    print(f"tasks paired: {len(tables):,}; equal to scipy (rtol 1e-12), bit-identical: {identical:.1%}")
    print(f"  {'':38s} {'wall':>10s} {'CPU':>10s}")
    for name, (wall, cpu) in {
        "fisher_exact_2x2 (p and min_p)": fast_s,
        "scipy.stats.fisher_exact per task": loop_s,
        "counts() + pairing from trial rows": counts_s,
        "flips() (fisher_exact_2x2)": flips_s,
        "flips() with the per-task scipy loop": flips_loop_s,
    }.items():
        print(f"  {name:38s} {wall * 1000:7.1f} ms {cpu * 1000:7.1f} ms")
    for name, (slow, fast) in {
        "tests: vectorised vs scipy loop": (loop_s, fast_s),
        "rows to p-values: counts()+vectorised vs loop": (
            loop_s,
            tuple(a + b for a, b in zip(counts_s, fast_s, strict=True)),
        ),
        "flips(): vectorised vs per-task scipy loop": (flips_loop_s, flips_s),
    }.items():
        print(f"  {name:46s} wall {slow[0] / fast[0]:5.0f}×  CPU {slow[1] / fast[1]:5.0f}×")


if __name__ == "__main__":
    main()
