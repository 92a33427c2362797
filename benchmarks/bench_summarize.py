"""Benchmark: summarize() on 1,000,000 trial rows against what a user would write instead.

2,000 tasks × 10 models × 5 prompts × 10 trials (``--tasks`` scales it), 1 % infra errors.

1. Point estimates, ``summarize(k=2, by=("model", "prompt_hash"), n_boot=0)`` (the whole
   public call: counts, estimators, fixed-task errors, the infra-error bound) against a pandas
   ``pivot_table`` + the same estimators + ``groupby().mean()``, and a per-group Python loop
   with ``math.comb``, timed in the same run (interleaved, best of ``--repeats``); values equal
   (rtol 1e-12). Twice: with string key columns (the dtypes ``passk_nb.load()`` returns) and with
   categorical ones, every route given the same frame. Targets: ≥ 5× the pandas route, ≥ 50× the
   loop.
2. With bootstrap intervals, ``summarize(k=5, n_boot=2000, method="bootstrap")`` against a Python
   loop with a list-based bootstrap. Targets: under 3 s, ≥ 50× the loop.

The loops are timed on a few groups and scaled to all 50 (their cost is linear in the groups;
``--full-baseline`` times all of them). Exits 1 if a target is missed.

    python benchmarks/bench_summarize.py [--tasks 2000]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time

import numpy as np
import pandas as pd
from bench_counts import best_of, with_loop, with_pandas  # noqa: E402  (benchmarks/ is on sys.path)

from passk_nb.stats.summary import summarize

TASKS, MODELS, PROMPTS, TRIALS = 2_000, 10, 5, 10
K, N_BOOT, CI = 5, 2_000, 0.95
MAX_SECONDS, MIN_SPEEDUP = 3.0, 50.0
POINT_K, MIN_OVER_PANDAS = 2, 5.0


def trial_frame(seed: int = 0, tasks: int = TASKS) -> pd.DataFrame:
    """The 1M-row frame, with the record dtypes of the columns summarize reads; 1 % infra errors."""
    rng = np.random.default_rng(seed)
    rows = tasks * MODELS * PROMPTS * TRIALS
    p = rng.beta(2, 1, size=(MODELS * PROMPTS, tasks))
    passed = rng.random((MODELS * PROMPTS, tasks, TRIALS)) < p[:, :, None]
    infra = rng.random(rows) < 0.01
    outcome = np.where(infra, "infra_error", np.where(passed.ravel(), "pass", "wrong_state"))
    return pd.DataFrame(
        {
            "model": np.repeat([f"model-{m}" for m in range(MODELS)], PROMPTS * tasks * TRIALS),
            "prompt_hash": np.tile(np.repeat([f"{p:012x}" for p in range(PROMPTS)], tasks * TRIALS), MODELS),
            "task": np.tile(np.repeat([f"task-{t:04d}" for t in range(tasks)], TRIALS), MODELS * PROMPTS),
            # one run per model and prompt, as passk_nb.load() returns them: the counts check that no
            # (run_id, task, trial) is repeated
            "run_id": np.repeat([f"{r:012x}" for r in range(MODELS * PROMPTS)], tasks * TRIALS),
            "trial": np.tile(np.arange(TRIALS), MODELS * PROMPTS * tasks),
            "passed": passed.ravel() & ~infra,
            "outcome": outcome,
        }
    ).astype({"model": "str", "prompt_hash": "str", "run_id": "str", "task": "str", "outcome": "str"})


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


def categorical(df: pd.DataFrame) -> pd.DataFrame:
    """The frame with categorical key columns (what ``df.astype("category")`` or a parquet dictionary
    column read as categorical gives): one integer code per row, no strings to factorise."""
    return df.astype({col: "category" for col in ("model", "prompt_hash", "run_id", "task", "outcome")})


def point_estimates(df: pd.DataFrame, args: argparse.Namespace) -> list[str]:
    """Section 1: summarize(n_boot=0) against pandas and the loop, for string key columns (the
    dtypes ``passk_nb.load()`` returns) and categorical ones, each route given the same frame;
    returns missed targets."""
    import bench_counts

    bench_counts.K = POINT_K  # the routes of bench_counts read their k from there
    by = ["model", "prompt_hash"]
    n_groups = MODELS * PROMPTS
    loop_groups = n_groups if args.full_baseline else min(args.baseline_groups, n_groups)
    failures = []
    for label, frame in (
        ("string key columns (as load() returns them)", df),
        ("categorical key columns", categorical(df)),
    ):
        ours = lambda frame=frame: summarize(frame, k=POINT_K, by=by, n_boot=0)  # noqa: E731
        summarize(frame.head(10_000), k=POINT_K, by=by, n_boot=0), with_pandas(frame.head(10_000))  # warm-up
        got = ours()
        for other in (with_pandas(frame), with_loop(frame, loop_groups)):
            other = other.astype({col: str for col in by})
            merged = other.merge(got.astype({col: str for col in by}), on=by, suffixes=("_other", ""))
            assert len(merged) == len(other)
            for metric in ("pass@k", "pass^k"):
                np.testing.assert_allclose(merged[f"{metric}_other"], merged[metric], rtol=1e-12)
        t = best_of(
            {
                "summarize(n_boot=0)": ours,
                "pandas pivot + estimators": lambda frame=frame: with_pandas(frame),
            },
            args.repeats,
        )
        loop = best_of({"loop": lambda frame=frame: with_loop(frame, loop_groups)}, 1)["loop"]
        t["Python loop, math.comb"] = tuple(x * n_groups / loop_groups for x in loop)
        print(f"\n1. point estimates, k={POINT_K}, by=(model, prompt_hash), {label}:")
        print(f"  {'':44s} {'wall':>10s} {'CPU':>10s}")
        for name, (wall, cpu) in t.items():
            print(f"  {name:44s} {wall * 1000:8.1f} ms {cpu * 1000:8.1f} ms")
        print(f"  (the loop timed on {loop_groups} of {n_groups} groups, scaled)")
        for name, target in (
            ("pandas pivot + estimators", MIN_OVER_PANDAS),
            ("Python loop, math.comb", MIN_SPEEDUP),
        ):
            wall, cpu = (t[name][i] / t["summarize(n_boot=0)"][i] for i in (0, 1))
            print(f"  summarize vs {name:31s} wall {wall:6.1f}×  CPU {cpu:6.1f}×  (target ≥ {target:.0f}×)")
            if cpu < target:
                failures.append(
                    f"point estimates, {label}: {cpu:.1f}× (CPU) faster than {name}, target ≥ {target:.0f}×"
                )
    return failures


def with_bootstrap(df: pd.DataFrame, args: argparse.Namespace) -> list[str]:
    """Section 2: summarize with bootstrap intervals against a Python bootstrap loop."""
    summarize(df.head(10_000), k=K, by=("model", "prompt_hash"), n_boot=10, method="bootstrap")  # warm-up
    timings = []
    for _ in range(3):
        start = time.perf_counter()
        fast = summarize(df, k=K, by=("model", "prompt_hash"), n_boot=N_BOOT, method="bootstrap")
        timings.append(time.perf_counter() - start)
    fast_s = min(timings)
    print(
        f"\n2. summarize(by=('model', 'prompt_hash'), k={K}, n_boot={N_BOOT}, method='bootstrap'): "
        f"best of 3 {fast_s:.2f} s (runs: {', '.join(f'{t:.2f}' for t in timings)})"
    )

    n_groups = MODELS * PROMPTS
    timed_groups = n_groups if args.full_baseline else min(args.baseline_groups, n_groups)
    start = time.perf_counter()
    slow = baseline(df, None if args.full_baseline else timed_groups)
    slow_s = (time.perf_counter() - start) * n_groups / timed_groups
    scaled = "" if timed_groups == n_groups else f" (timed on {timed_groups} groups, scaled to {n_groups})"
    print(f"  Python loop with math.comb and a list bootstrap: {slow_s:.1f} s{scaled}")

    merged = slow.merge(fast, on=["model", "prompt_hash"], suffixes=("_loop", ""))
    for metric in ("pass@k", "pass^k"):
        np.testing.assert_allclose(merged[f"{metric}_loop"], merged[metric], rtol=1e-12)
        for end in ("lo", "hi"):  # different random draws: the intervals agree only roughly
            np.testing.assert_allclose(merged[f"{metric}_{end}_loop"], merged[f"{metric}_{end}"], atol=0.01)

    speedup = slow_s / fast_s
    print(f"  speed-up: {speedup:.0f}×")
    failures = []
    if fast_s >= MAX_SECONDS:
        failures.append(f"summarize with bootstrap took {fast_s:.2f} s, target < {MAX_SECONDS} s")
    if speedup < MIN_SPEEDUP:
        failures.append(f"bootstrap speed-up {speedup:.0f}×, target ≥ {MIN_SPEEDUP:.0f}×")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=TASKS, help=f"tasks per arm (default {TASKS})")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds of the fast routes")
    parser.add_argument("--full-baseline", action="store_true", help="time the Python loops on all 50 groups")
    parser.add_argument(
        "--baseline-groups", type=int, default=3, help="groups the loops are timed on (default 3)"
    )
    args = parser.parse_args()

    df = trial_frame(tasks=args.tasks)
    print(
        f"{len(df):,} trial rows: {args.tasks} tasks × {MODELS} models × {PROMPTS} prompts × {TRIALS} trials"
    )
    failures = point_estimates(df, args) + with_bootstrap(df, args)
    for failure in failures:
        print(f"MISSED: {failure}", file=sys.stderr)
    print("all targets met" if not failures else "targets missed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
