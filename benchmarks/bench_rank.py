"""Benchmark: ``rank`` over a leaderboard against ``compare`` measured in the same run.

A ladder of arms whose pass^1 is spread evenly from 0.59 to 0.13 (issue 47's leaderboard: tasks of
shared difficulty, trials independent), given as trial records. For each size ``arms×tasks×trials``:

- ``rank(df, k=1)``: every pair compared on the tasks both ran, p-values computed once, Holm;
- peers: one ``compare(df, a, b, k=1)`` on the same records (rank cost 26 of them before), and
  ``pairs`` single compare calls, what ranking by calling compare per pair costs at the least
  (timed on up to ``--sample`` pairs and scaled to all of them);
- a check that rank's decisions are compare's: on the sampled pairs, ``significant`` equals
  "compare's interval at ``ci_adjusted`` excludes 0", and ``lo``/``hi`` equal compare's at 95 %.

Targets (issue 47): 13×80×5 ≤ 1 s, 50×500×5 ≤ 10 s. Prints times and ratios measured in this run.

    python benchmarks/bench_rank.py [--sizes 13x80x5,50x500x5] [--sample 20]
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd
from scipy import optimize, special

from passk_nb.stats.paired import compare
from passk_nb.stats.rank import rank

TARGETS = {(13, 80, 5): 1.0, (50, 500, 5): 10.0}


def ladder(arms: int, tasks: int, trials: int, seed: int = 0) -> pd.DataFrame:
    """Trial records: arm a succeeds on task i with probability expit(θ_a − d_i), d_i ~ N(0, 1.5),
    θ_a set so that the arm's pass^1 over the tasks is its point on 0.59 … 0.13."""
    rng = np.random.default_rng(seed)
    d = rng.normal(0, 1.5, tasks)
    frames = []
    for a, target in enumerate(np.linspace(0.59, 0.13, arms)):
        theta = optimize.brentq(lambda th, target=target: special.expit(th - d).mean() - target, -30, 30)
        passed = rng.random((tasks, trials)) < special.expit(theta - d)[:, None]
        frames.append(
            pd.DataFrame(
                {
                    "model": f"m{a:02d}",
                    "task": np.repeat([f"t{t:04d}" for t in range(tasks)], trials),
                    "passed": passed.ravel(),
                }
            )
        )
    df = pd.concat(frames, ignore_index=True)
    df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
    return df


def best_of(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def quiet_compare(df: pd.DataFrame, a: str, b: str, ci: float = 0.95) -> pd.Series:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = compare(df, on="model", a=a, b=b, k=1, by=(), ci=ci)
    return out.set_index("metric").loc["pass^k"]


def run(arms: int, tasks: int, trials: int, sample: int) -> None:
    df = ladder(arms, tasks, trials)
    n_pairs = arms * (arms - 1) // 2
    t_rank, ranked = best_of(lambda: rank(df, k=1), 3 if arms * tasks <= 5_000 else 1)
    t_pairs, pairs = best_of(lambda: rank(df, k=1, pairs=True), 1)
    assert isinstance(ranked, pd.DataFrame) and isinstance(pairs, pd.DataFrame)
    t_one, _ = best_of(lambda: quiet_compare(df, "m00", f"m{arms - 1:02d}"), 3)
    chosen = pairs.sample(min(sample, n_pairs), random_state=0)
    start = time.perf_counter()
    shipped = [quiet_compare(df, row.a, row.b) for row in chosen.itertuples()]
    t_loop = (time.perf_counter() - start) / len(chosen) * n_pairs
    agree = 0
    for row, at95 in zip(chosen.itertuples(), shipped, strict=True):
        at_level = quiet_compare(df, row.a, row.b, ci=row.ci_adjusted)
        agree += row.significant == bool(at_level["lo"] > 0 or at_level["hi"] < 0)
        np.testing.assert_allclose([row.lo, row.hi], [at95["lo"], at95["hi"]], rtol=1e-9)
    target = TARGETS.get((arms, tasks, trials))
    print(
        f"{arms} arms × {tasks} tasks × {trials} trials ({len(df):,} rows, {n_pairs} pairs): "
        f"rank {t_rank:.3f} s (pairs=True {t_pairs:.3f} s); one compare {t_one:.3f} s, "
        f"rank = {t_rank / t_one:.1f}× one compare; {n_pairs} compare calls ≈ {t_loop:.1f} s "
        f"(from {len(chosen)}), rank {t_loop / t_rank:.0f}× faster"
        + (f"; target ≤ {target:g} s: {'met' if t_rank <= target else 'missed'}" if target else "")
    )
    print(
        f"  tiers: {ranked['tier'].max()} (best {ranked['tier'].iloc[0]}, worst {ranked['tier'].iloc[-1]}); "
        f"rank intervals of the ends {ranked[['rank_lo', 'rank_hi']].iloc[0].tolist()} and "
        f"{ranked[['rank_lo', 'rank_hi']].iloc[-1].tolist()}; decisions equal compare's on "
        f"{agree} of {len(chosen)} sampled pairs"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="13x80x5,50x500x5", help="arms×tasks×trials, comma-separated")
    parser.add_argument("--sample", type=int, default=20, help="pairs timed and checked against compare")
    args = parser.parse_args()
    for size in args.sizes.split(","):
        arms, tasks, trials = (int(x) for x in size.lower().split("x"))
        run(arms, tasks, trials, args.sample)


if __name__ == "__main__":
    main()
