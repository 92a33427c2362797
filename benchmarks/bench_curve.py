"""Benchmark: curve() over k = 1..10 against one summarize() at a single k, same run.

2,000 tasks × 10 models × 5 prompts × 10 trials (1,000,000 trial rows; ``--tasks`` scales it),
1 % infra errors. ``curve(ks=1..10, n_boot=2000)`` counts the trials once and evaluates every k,
and every bootstrap resample, from the same counts and the same draw; the target is at most 2×
the time of one ``summarize(k=2, n_boot=2000)``. Timed for the default interval (Korn–Graubard)
and for ``method="bootstrap"`` (2,000 resamples of tasks), interleaved, best of ``--repeats``
(wall and CPU time; CPU is steadier on a shared machine). Also the old way for reference: one
``summarize`` per k (ten passes over the trials, ten draws). Checks that curve's values and
intervals equal the per-k summarize ones exactly. Exits 1 if the target is missed.

    python benchmarks/bench_curve.py [--tasks 2000]
"""

from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np
from bench_counts import best_of  # noqa: E402  (benchmarks/ is on sys.path)
from bench_summarize import MODELS, PROMPTS, TASKS, TRIALS, trial_frame  # noqa: E402

from passk_nb.stats.summary import curve, summarize

KS, N_BOOT, BY = list(range(1, 11)), 2_000, ("model", "prompt_hash")
MAX_RATIO = 2.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=TASKS, help=f"tasks per arm (default {TASKS})")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (default 3)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # infra errors leave some tasks below k = 10: partial curves

    df = trial_frame(tasks=args.tasks)
    print(
        f"{len(df):,} trial rows: {args.tasks} tasks × {MODELS} models × {PROMPTS} prompts × {TRIALS} trials"
    )
    failures = []
    for method in ("korn-graubard", "bootstrap"):
        options = {"by": BY, "n_boot": N_BOOT, "method": method}
        curve(df.head(10_000), ks=KS, **options)  # warm-up
        got = curve(df, ks=KS, **options)
        for k in (1, 2, 10):
            expected = summarize(df, k=k, **options)
            for metric in ("pass@k", "pass^k"):
                rows = got[(got["k"] == k) & (got["metric"] == metric)]
                np.testing.assert_array_equal(rows["value"].to_numpy(), expected[metric].to_numpy())
                for end in ("lo", "hi"):  # the intervals too: the same draw for every k
                    np.testing.assert_array_equal(
                        rows[end].to_numpy(), expected[f"{metric}_{end}"].to_numpy()
                    )
        t = best_of(
            {
                f"curve(ks=1..10, n_boot={N_BOOT})": lambda options=options: curve(df, ks=KS, **options),
                f"summarize(k=2, n_boot={N_BOOT})": lambda options=options: summarize(df, k=2, **options),
            },
            args.repeats,
        )
        t.update(
            best_of({"summarize per k, k=1..10": lambda o=options: [summarize(df, k=k, **o) for k in KS]}, 1)
        )
        print(f"\nmethod={method!r}:{'':28s} {'wall':>10s} {'CPU':>10s}")
        for name, (wall, cpu) in t.items():
            print(f"  {name:40s} {wall * 1000:8.1f} ms {cpu * 1000:8.1f} ms")
        names = list(t)
        wall, cpu = (t[names[0]][i] / t[names[1]][i] for i in (0, 1))
        old_wall, old_cpu = (t[names[2]][i] / t[names[0]][i] for i in (0, 1))
        print(f"  curve / one summarize: wall {wall:.2f}×  CPU {cpu:.2f}×  (target ≤ {MAX_RATIO:.0f}×)")
        print(f"  summarize per k / curve: wall {old_wall:.1f}×  CPU {old_cpu:.1f}×")
        if cpu > MAX_RATIO:
            failures.append(
                f"method={method}: curve took {cpu:.2f}× (CPU) one summarize, target ≤ {MAX_RATIO}×"
            )
    for failure in failures:
        print(f"MISSED: {failure}", file=sys.stderr)
    print("all targets met" if not failures else "targets missed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
