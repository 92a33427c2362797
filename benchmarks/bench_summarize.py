"""Benchmark: summarize() on 1,000,000 trial rows against a straightforward Python loop.

2,000 tasks × 10 models × 5 prompts × 10 trials; ``summarize(by=("model", "prompt_hash"),
k=K, n_boot=2000)``. Targets: under 3 s, and at least 50× faster than a per-group Python
loop with ``math.comb`` and a list-based bootstrap, measured in the same run. The loop is
timed on a few groups and scaled to all 50 (its cost is linear in the groups; pass
``--full-baseline`` to time all of them, about a minute). Exits 1 if a target is missed.

    python benchmarks/bench_summarize.py
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time

import numpy as np
import pandas as pd

from passk_nb.stats.summary import summarize

TASKS, MODELS, PROMPTS, TRIALS = 2_000, 10, 5, 10
K, N_BOOT, CI = 5, 2_000, 0.95
MAX_SECONDS, MIN_SPEEDUP = 3.0, 50.0


def trial_frame(seed: int = 0) -> pd.DataFrame:
    """The 1M-row frame, with the record dtypes of the columns summarize reads; 1 % infra errors."""
    rng = np.random.default_rng(seed)
    rows = TASKS * MODELS * PROMPTS * TRIALS
    p = rng.beta(2, 1, size=(MODELS * PROMPTS, TASKS))
    passed = rng.random((MODELS * PROMPTS, TASKS, TRIALS)) < p[:, :, None]
    infra = rng.random(rows) < 0.01
    outcome = np.where(infra, "infra_error", np.where(passed.ravel(), "pass", "wrong_state"))
    return pd.DataFrame(
        {
            "model": np.repeat([f"model-{m}" for m in range(MODELS)], PROMPTS * TASKS * TRIALS),
            "prompt_hash": np.tile(np.repeat([f"{p:012x}" for p in range(PROMPTS)], TASKS * TRIALS), MODELS),
            "task": np.tile(np.repeat([f"task-{t:04d}" for t in range(TASKS)], TRIALS), MODELS * PROMPTS),
            "trial": np.tile(np.arange(TRIALS), MODELS * PROMPTS * TASKS),
            "passed": passed.ravel() & ~infra,
            "outcome": outcome,
        }
    ).astype({"model": "str", "prompt_hash": "str", "task": "str", "outcome": "str"})


def baseline(df: pd.DataFrame, groups: int | None) -> pd.DataFrame:
    """The straightforward way: loop over groups, then tasks, then bootstrap replicates."""
    rng = random.Random(0)
    q_lo, q_hi = (1 - CI) / 2, (1 + CI) / 2
    rows = []
    for i, ((model, prompt), group) in enumerate(df.groupby(["model", "prompt_hash"])):
        if groups is not None and i == groups:
            break
        usable = group[group["outcome"] != "infra_error"]
        at, hat = [], []
        for _, task in usable.groupby("task"):
            n, c = len(task), int(task["passed"].sum())
            if n >= K:
                at.append(1 - math.comb(n - c, K) / math.comb(n, K))
                hat.append(math.comb(c, K) / math.comb(n, K))
        boot_at, boot_hat = [], []
        for _ in range(N_BOOT):
            pick = [rng.randrange(len(at)) for _ in at]
            boot_at.append(sum(at[j] for j in pick) / len(pick))
            boot_hat.append(sum(hat[j] for j in pick) / len(pick))
        boot_at.sort()
        boot_hat.sort()
        lo, hi = int(q_lo * (N_BOOT - 1)), int(q_hi * (N_BOOT - 1))
        rows.append(
            {
                "model": model,
                "prompt_hash": prompt,
                "pass@k": sum(at) / len(at),
                "pass^k": sum(hat) / len(hat),
                "pass@k_lo": boot_at[lo],
                "pass@k_hi": boot_at[hi],
                "pass^k_lo": boot_hat[lo],
                "pass^k_hi": boot_hat[hi],
            }
        )
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full-baseline", action="store_true", help="time the Python loop on all 50 groups")
    parser.add_argument(
        "--baseline-groups", type=int, default=3, help="groups the loop is timed on (default 3)"
    )
    args = parser.parse_args()

    df = trial_frame()
    print(f"{len(df):,} trial rows: {TASKS} tasks × {MODELS} models × {PROMPTS} prompts × {TRIALS} trials")
    summarize(df.head(10_000), k=K, by=("model", "prompt_hash"), n_boot=10)  # warm-up (imports, caches)
    timings = []
    for _ in range(3):
        start = time.perf_counter()
        fast = summarize(df, k=K, by=("model", "prompt_hash"), n_boot=N_BOOT)
        timings.append(time.perf_counter() - start)
    fast_s = min(timings)
    print(
        f"summarize(by=('model', 'prompt_hash'), k={K}, n_boot={N_BOOT}): best of 3 {fast_s:.2f} s "
        f"(runs: {', '.join(f'{t:.2f}' for t in timings)})"
    )

    n_groups = MODELS * PROMPTS
    timed_groups = n_groups if args.full_baseline else min(args.baseline_groups, n_groups)
    start = time.perf_counter()
    slow = baseline(df, None if args.full_baseline else timed_groups)
    slow_s = (time.perf_counter() - start) * n_groups / timed_groups
    scaled = "" if timed_groups == n_groups else f" (timed on {timed_groups} groups, scaled to {n_groups})"
    print(f"Python loop with math.comb: {slow_s:.1f} s{scaled}")

    merged = slow.merge(fast, on=["model", "prompt_hash"], suffixes=("_loop", ""))
    for metric in ("pass@k", "pass^k"):
        np.testing.assert_allclose(merged[f"{metric}_loop"], merged[metric], rtol=1e-12)
        for end in ("lo", "hi"):  # different random draws: the intervals agree only roughly
            np.testing.assert_allclose(merged[f"{metric}_{end}_loop"], merged[f"{metric}_{end}"], atol=0.01)

    speedup = slow_s / fast_s
    print(f"speed-up: {speedup:.0f}×")
    failures = []
    if fast_s >= MAX_SECONDS:
        failures.append(f"summarize took {fast_s:.2f} s, target < {MAX_SECONDS} s")
    if speedup < MIN_SPEEDUP:
        failures.append(f"speed-up {speedup:.0f}×, target ≥ {MIN_SPEEDUP:.0f}×")
    for failure in failures:
        print(f"MISSED: {failure}", file=sys.stderr)
    print("all targets met" if not failures else "targets missed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
