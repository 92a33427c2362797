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

``--null N``: instead, rank's family-wise error on N suites per null shape (equal arms: the same
per-task success, independent trials; the shapes of ``tests/stats/test_rank.py`` at a larger
scale): how often any two equal arms are presented as different, with a 95 % Wilson interval.

    python benchmarks/bench_rank.py [--sizes 13x80x5,50x500x5] [--sample 20] [--null 500]
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


NULL_SHAPES: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "u-shaped": lambda rng, t: rng.beta(0.3, 0.3, t),
    "mostly easy": lambda rng, t: rng.beta(5, 1, t),
    "one flaky among certain": lambda rng, t: np.r_[np.ones(t - 1), 0.5],
    "point masses": lambda rng, t: rng.choice([0.0, 0.5, 1.0], t),
    "uniform": lambda rng, t: rng.uniform(0, 1, t),
}


def null_error(suites: int, seed: int = 0) -> None:
    """Family-wise error of rank on equal arms: 6 arms, 10–60 tasks, 3–10 trials, k = 1 or 2."""
    rng = np.random.default_rng(seed)
    for name, shape in NULL_SHAPES.items():
        for correction in ("holm", "bh"):
            hits = 0
            for _ in range(suites):
                tasks, trials, k = (
                    int(rng.integers(10, 61)),
                    int(rng.integers(3, 11)),
                    int(rng.integers(1, 3)),
                )
                p = shape(rng, tasks)
                c = rng.binomial(trials, np.tile(p, 6))
                table = pd.DataFrame(
                    {
                        "model": np.repeat([f"m{a}" for a in range(6)], tasks),
                        "task": np.tile(np.arange(tasks), 6),
                    }
                ).assign(task=lambda f: "t" + f["task"].astype(str), n=trials, c=c)
                hits += bool(rank(table, k=k, pairs=True, correction=correction)["significant"].any())
            rate, z = hits / suites, 1.96
            centre = (rate + z**2 / (2 * suites)) / (1 + z**2 / suites)
            half = z * np.sqrt(rate * (1 - rate) / suites + z**2 / (4 * suites**2)) / (1 + z**2 / suites)
            print(
                f"{name:>24} {correction:>4}: any pair different in {hits} of {suites} "
                f"({rate:.1%}, 95 % {max(centre - half, 0):.1%}–{centre + half:.1%}; nominal ≤ 5 %)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="13x80x5,50x500x5", help="arms×tasks×trials, comma-separated")
    parser.add_argument("--sample", type=int, default=20, help="pairs timed and checked against compare")
    parser.add_argument("--null", type=int, default=0, help="suites per null shape for the error check")
    args = parser.parse_args()
    if args.null:
        null_error(args.null)
        return
    for size in args.sizes.split(","):
        arms, tasks, trials = (int(x) for x in size.lower().split("x"))
        run(arms, tasks, trials, args.sample)


if __name__ == "__main__":
    main()
