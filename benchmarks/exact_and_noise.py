"""Benchmark: do flips' exact tests hold their size, and does noise_floor's min_difference hold?

1. Exact size of the per-task tests of ``flips``: for n trials in each arm, the largest chance,
   over the common success rate (a grid of 4001 rates), that the test rejects at alpha = 0.05
   two arms that share that rate (the null probability of the rejected tables, summed exactly).
   Fisher's and Boschloo's tests of :mod:`passk_nb.stats.exact`, and, for contrast,
   ``scipy.stats.boschloo_exact`` with its default nuisance search.
2. What a complete flip n/n → 0/n can reach: each test's p-value and the largest family of
   tasks in which Benjamini–Hochberg still flags it alone (floor(alpha / p)).
3. Family-wise error of ``flips`` (each test with Tarone's screen and Benjamini–Hochberg) when no
   task changed: suites of T tasks drawn from a truth, n trials per arm, both arms at each task's
   rate; the share of suites with any flip, with its Monte Carlo standard error (``--family-only``).
4. ``noise_floor``: pilots of n trials on T tasks drawn from a truth; for each pilot, the share
   of pairs of independent re-runs (k trials per task each) whose suite pass^k differ by more
   than ``min_difference`` (promised: 5 % for the pilot in hand), averaged over pilots, the share
   of pilots for which it exceeds 5 %, and the average with the unbiased per-task variance alone
   (what noise_floor used before).

    python benchmarks/exact_and_noise.py [--pilots 200] [--pairs 2000]
    python benchmarks/exact_and_noise.py --noise-only
    python benchmarks/exact_and_noise.py --family-only [--suites 1000000]

Prints three markdown tables (docs/methods/comparisons.md's) with the figures measured in this run.
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np
import pandas as pd
from scipy import stats as sps

from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.exact import boschloo_exact_2x2, fisher_exact_2x2
from passk_nb.stats.noise import noise_floor, run_variance
from passk_nb.stats.paired import exact_tests, tarone_screen

ALPHA = 0.05
GRID = np.linspace(0, 1, 4001)
TRUTHS = {
    "all pass": lambda rng, t: np.ones(t),
    "one flaky among certain ones": lambda rng, t: np.r_[np.ones(t - 1), 0.5],
    "mostly easy, Beta(5, 1)": lambda rng, t: rng.beta(5, 1, t),
    "U-shaped, Beta(0.3, 0.3)": lambda rng, t: rng.beta(0.3, 0.3, t),
    "all p = 0.9": lambda rng, t: np.full(t, 0.9),
    "hard, Beta(0.5, 2)": lambda rng, t: rng.beta(0.5, 2, t),
}
CELLS = [(5, 4, 1), (10, 4, 2), (10, 8, 1), (30, 8, 2)]  # (tasks, pilot trials, k)


def scipy_boschloo(c_a: np.ndarray, n_a: int, c_b: np.ndarray, n_b: int) -> np.ndarray:
    tables = ([[a, n_a - a], [b, n_b - b]] for a, b in zip(c_a, c_b, strict=True))
    return np.array(
        [min(1.0, sps.boschloo_exact(t).pvalue) if 0 < t[0][0] + t[1][0] < n_a + n_b else 1.0 for t in tables]
    )


def size(test, n_a: int, n_b: int) -> float:
    x, y = (g.ravel() for g in np.meshgrid(np.arange(n_a + 1), np.arange(n_b + 1), indexing="ij"))
    rejected = test(x, n_a, y, n_b) <= ALPHA
    chance = sps.binom.pmf(x[rejected, None], n_a, GRID) * sps.binom.pmf(y[rejected, None], n_b, GRID)
    return float(chance.sum(axis=0).max(initial=0.0))


def size_table() -> str:
    tests = {
        "Fisher": fisher_exact_2x2,
        "Boschloo (ours)": boschloo_exact_2x2,
        "scipy boschloo_exact": scipy_boschloo,
    }
    sizes = list(range(3, 13))
    lines = [
        "| test | " + " | ".join(f"n = {n}" for n in sizes) + " | worst n_a, n_b ≤ 12 |",
        "|---|" + "---|" * (len(sizes) + 1),
    ]
    for name, test in tests.items():
        same = [size(test, n, n) for n in sizes]
        pairs = itertools.product(range(1, 13), repeat=2) if name != "scipy boschloo_exact" else ()
        worst = max((size(test, a, b) for a, b in pairs), default=float("nan"))
        cells = " | ".join(f"{s:.1%}" for s in same)
        lines.append(f"| {name} | {cells} | {'—' if np.isnan(worst) else f'{worst:.1%}'} |")
    return "\n".join(lines)


def _p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.01 else np.format_float_positional(p, precision=2, fractional=False, trim="k")


def _family(p: float) -> str:
    m = int(ALPHA / p + 1e-9)
    return "never" if m < 1 else "1 task" if m == 1 else f"{m:,} tasks"


def reach_table() -> str:
    lines = [
        "| trials per arm | Fisher p | flagged among up to | Boschloo p | flagged among up to |",
        "|---|---|---|---|---|",
    ]
    for n in (3, 4, 5, 6, 8):
        cells = []
        for test in (fisher_exact_2x2, boschloo_exact_2x2):
            p = float(test(np.array([n]), n, np.array([0]), n)[0])
            cells += [_p(p), _family(p)]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


FAMILY_CELLS = [(5, 8), (5, 4), (10, 8), (30, 8)]  # (tasks, trials per arm)
#: The truths of TRUTHS drawn for many suites at once (suites × tasks).
FAMILY_TRUTHS = {
    "all pass": lambda rng, shape: np.ones(shape),
    "one flaky among certain ones": lambda rng, shape: np.broadcast_to(
        np.r_[np.ones(shape[1] - 1), 0.5], shape
    ),
    "mostly easy, Beta(5, 1)": lambda rng, shape: rng.beta(5, 1, shape),
    "U-shaped, Beta(0.3, 0.3)": lambda rng, shape: rng.beta(0.3, 0.3, shape),
    "all p = 0.9": lambda rng, shape: np.full(shape, 0.9),
    "hard, Beta(0.5, 2)": lambda rng, shape: rng.beta(0.5, 2, shape),
}


def family_wise(rng: np.random.Generator, truth, tasks: int, n: int, test: str, suites: int) -> float:
    """Share of null suites in which flips(test=, family="tarone") flags any task: every table's
    p-value and Tarone bound from flips' own :func:`exact_tests`, then BH over the screened tasks."""
    c_a, c_b = (g.ravel() for g in np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij"))
    table = np.column_stack([c_a, np.full(c_a.size, n), c_b, np.full(c_a.size, n)]).astype(np.int64)
    p_value, _, reachable = exact_tests(test, table)
    screened = np.where(tarone_screen(reachable, ALPHA), p_value, np.inf)
    hits, done = 0, 0
    while done < suites:
        m = min(100_000, suites - done)
        p = truth(rng, (m, tasks))
        sorted_p = np.sort(screened[rng.binomial(n, p) * (n + 1) + rng.binomial(n, p)], axis=1)
        family = np.maximum(np.isfinite(sorted_p).sum(axis=1), 1)[:, None]
        hits += int(np.any(sorted_p <= np.arange(1, tasks + 1) * ALPHA / family, axis=1).sum())
        done += m
    return hits / suites


def family_table(suites: int) -> str:
    rng = np.random.default_rng(2026)
    header = " | ".join(f"T = {t}, n = {n}" for t, n in FAMILY_CELLS)
    lines = [f"| truth | test | {header} |", "|---|---|" + "---|" * len(FAMILY_CELLS)]
    for name, truth in FAMILY_TRUTHS.items():
        for test in ("fisher", "boschloo"):
            cells = []
            for tasks, n in FAMILY_CELLS:
                f = family_wise(rng, truth, tasks, n, test, suites)
                cells.append(f"{f:.2%} ± {np.sqrt(f * (1 - f) / suites):.2%}")
            lines.append(f"| {name} | {test} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def exceedance(rng: np.random.Generator, truth, tasks: int, n: int, k: int, pilots: int, pairs: int):
    new, old = [], []
    for _ in range(pilots):
        p = truth(rng, tasks)
        c = rng.binomial(n, p)
        floor = noise_floor(pd.DataFrame({"task": np.arange(tasks), "n": n, "c": c}), k=k, by=())
        unbiased = np.sqrt(max(float(run_variance(np.full(tasks, n), c, k, k).sum()), 0.0)) / tasks
        runs = np.asarray(pass_hat_k(k, rng.binomial(k, p, size=(2, pairs, tasks)), k), float).mean(-1)
        gap = np.abs(runs[0] - runs[1])
        new.append(np.mean(gap > floor["min_difference"].iloc[0] + 1e-12))
        old.append(np.mean(gap > sps.norm.ppf(0.975) * np.sqrt(2) * unbiased + 1e-12))
    return np.mean(new), np.mean(np.array(new) > 0.05), np.mean(old)


def noise_table(pilots: int, pairs: int) -> str:
    rng = np.random.default_rng(2026)
    header = " | ".join(f"T = {t}, n = {n}, k = {k}" for t, n, k in CELLS)
    lines = [f"| truth | {header} |", "|---|" + "---|" * len(CELLS)]
    for name, truth in TRUTHS.items():
        cells = []
        for tasks, n, k in CELLS:
            mean, above, old = exceedance(rng, truth, tasks, n, k, pilots, pairs)
            cells.append(f"{mean:.1%}; {above:.0%} of pilots > 5 % (was {old:.1%})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pilots", type=int, default=200, help="pilot suites per cell")
    parser.add_argument("--pairs", type=int, default=2000, help="pairs of re-runs per pilot")
    parser.add_argument("--noise-only", action="store_true", help="only the noise_floor table")
    parser.add_argument("--suites", type=int, default=200_000, help="null suites per family-wise cell")
    parser.add_argument("--family-only", action="store_true", help="only the family-wise table of flips")
    args = parser.parse_args()
    if args.family_only:
        print(family_table(args.suites))
        return
    if args.noise_only:
        print(noise_table(args.pilots, args.pairs))
        return
    print(f"Exact size at alpha = {ALPHA} (n trials in each arm; worst common rate of {GRID.size}):\n")
    print(size_table())
    print("\nA complete flip n/n → 0/n:\n")
    print(reach_table())
    print(
        f"\nRe-run pairs beyond min_difference ({args.pilots} pilots × {args.pairs} pairs; promised ≤ 5 %):\n"
    )
    print(noise_table(args.pilots, args.pairs))
    print(
        f"\nFamily-wise error of flips when no task changed ({args.suites} suites per cell; alpha {ALPHA}):\n"
    )
    print(family_table(args.suites))


if __name__ == "__main__":
    main()
