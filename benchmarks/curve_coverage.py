"""Coverage of ``curve()``'s bands with and without the monotone envelope: docs/methods/intervals.md.

``curve()`` makes its bands monotone in k where the truth is (pass@k's bounds the running max, pass^k's
the running min over k' ≤ k; :func:`passk_nb.stats.summary.monotone_bounds`), both for new tasks
(``lo``/``hi``) and for these tasks re-rolled (``fixed_lo``/``fixed_hi``). An envelope of several
intervals can cover less than each of them; this measures by how much. For each cell (per-task p
distribution, T tasks, n trials) it simulates suites (p_i from the distribution, c_i ~ Binomial(n,
p_i)), runs the shipped ``curve(ks=1..n)`` on them (one group per suite) and the same intervals
without the envelope, and reports, over every k and both metrics:

- ``raw``: the lowest coverage of the separate intervals (what curve gave before the envelope);
- ``shipped``: the lowest coverage of curve()'s bands;
- ``bent``: the share of suites whose separate bands were not monotone where the estimand is
  (pass@k's lower or pass^k's upper bound, new-task or fixed-task, moving against the truth's
  direction between two k);
- ``other``: the same for the other edge (pass@k's upper bound falling, pass^k's lower bound
  rising), which the envelope widens;
- ``after``: the share of suites whose shipped bands still move against the truth (either edge).

New-task bands are checked against the population value (1 − E[(1 − p)^k], E[p^k]), fixed-task
bands against the simulated tasks' own mean.

    python benchmarks/curve_coverage.py                 # docs/methods/intervals.md (about a minute)
    python benchmarks/curve_coverage.py --suites 300 --tasks 5
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from coverage import PRIORS  # noqa: E402  (benchmarks/ is on sys.path)

from passk_nb.stats.summary import METRICS, curve, separate_intervals


@dataclass(frozen=True)
class Truth:
    """Per-task success probabilities of a suite of T tasks: a draw of (suites, T)."""

    name: str
    draw: Callable[[np.random.Generator, tuple[int, int]], np.ndarray]


def _flaky_among_certain(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    p = np.ones(shape)
    p[:, 0] = 0.5
    return p


TRUTHS = (
    *(Truth(prior.name, prior.draw) for prior in PRIORS),
    Truth("Beta(5,1)", lambda rng, shape: rng.beta(5, 1, size=shape)),
    Truth("one p = 0.5 among p = 1", _flaky_among_certain),
    Truth("all p = 0.9", lambda rng, shape: np.full(shape, 0.9)),
)
BANDS = (("lo", "hi"), ("fixed_lo", "fixed_hi"))


def table(c: np.ndarray, n: int) -> pd.DataFrame:
    suites, tasks = c.shape
    return pd.DataFrame(
        {"sim": np.repeat(np.arange(suites), tasks), "task": np.tile(np.arange(tasks), suites), "n": n}
        | {"c": c.ravel()}
    )


EDGES = ("lo", "hi", "fixed_lo", "fixed_hi")


def raw_bands(counts: pd.DataFrame, ks: list[int]) -> dict[str, np.ndarray]:
    """Each band edge, (suites, metric, k), from the separate intervals at each k (no envelope)."""
    wide = separate_intervals(
        counts, ks, by="sim", ci=0.95, n_boot=2000, seed=0, method="korn-graubard", min_tasks=5
    )
    return {
        edge: np.stack(
            [wide[f"{metric}_{edge}"].to_numpy(dtype=float).reshape(len(ks), -1).T for metric in METRICS],
            axis=1,
        )
        for edge in EDGES
    }


def curve_bands(counts: pd.DataFrame, ks: list[int]) -> dict[str, np.ndarray]:
    """Each band edge of the shipped curve(), (suites, metric, k)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        frame = curve(counts, ks, by="sim")  # sorted by sim, metric, k
    return {edge: frame[edge].to_numpy(dtype=float).reshape(-1, len(METRICS), len(ks)) for edge in EDGES}


def cell(truth: Truth, tasks: int, n: int, suites: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    p = truth.draw(rng, (suites, tasks))
    c = rng.binomial(n, p)
    ks = list(range(1, n + 1))
    k = np.array(ks, dtype=float)
    # truths (suites, metric, k): pass@k, pass^k; population from a large draw of the same truth
    big = truth.draw(np.random.default_rng(seed + 1), (200_000 // tasks, tasks)).ravel()
    population = np.stack([1 - np.mean((1 - big[:, None]) ** k, 0), np.mean(big[:, None] ** k, 0)])
    these = np.stack([1 - ((1 - p[:, :, None]) ** k).mean(1), (p[:, :, None] ** k).mean(1)], axis=1)
    counts = table(c, n)
    shipped, raw = curve_bands(counts, ks), raw_bands(counts, ks)
    out: dict[str, float] = {}
    for name, bands in (("raw", raw), ("shipped", shipped)):
        worst = 1.0
        for (lo_col, hi_col), target in zip(BANDS, (population[None], these), strict=True):
            lo, hi = bands[lo_col], bands[hi_col]
            covered = (lo <= target + 1e-12) & (target - 1e-12 <= hi)
            worst = min(worst, float(covered.mean(0).min()))
        out[name] = worst

    def moves(bands: dict[str, np.ndarray], edges: tuple[tuple[int, str, int], ...]) -> float:
        bent = np.zeros(suites, dtype=bool)
        for metric, column, sign in edges:
            step = np.diff(bands[column][:, metric], axis=1) * sign
            bent |= (step < -1e-12).any(axis=1)
        return float(bent.mean())

    known = tuple(
        (m, col, s) for m, s, pos in ((0, 1, 0), (1, -1, 1)) for col in (BANDS[0][pos], BANDS[1][pos])
    )
    other = tuple(
        (m, col, s) for m, s, pos in ((0, 1, 1), (1, -1, 0)) for col in (BANDS[0][pos], BANDS[1][pos])
    )
    out["bent"] = moves(raw, known)
    out["other"] = moves(raw, other)
    out["after"] = moves(shipped, known + other)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suites", type=int, default=1000, help="simulated suites per cell")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--tasks", type=int, nargs="+", default=[5, 10, 30])
    parser.add_argument("--trials", type=int, nargs="+", default=[4, 8])
    args = parser.parse_args(argv)
    start = time.perf_counter()
    print(
        f"{args.suites} suites per cell, nominal 95 %, curve(ks=1..n); lowest coverage over k, both metrics"
    )
    print("and both bands (new tasks, these tasks)\n")
    print("| p | T | n | separate intervals | curve (envelope) | bent | other edge bent | bent after |")
    print("|---|---|---|---|---|---|---|---|")
    worst, still = 1.0, 0.0
    rows = []
    for i, truth in enumerate(TRUTHS):
        for tasks in args.tasks:
            for n in args.trials:
                res = cell(truth, tasks, n, args.suites, args.seed + 100 * i + 10 * tasks + n)
                rows.append({"truth": truth.name, **res})
                worst, still = min(worst, res["shipped"]), max(still, res["after"])
                print(
                    f"| {truth.name} | {tasks} | {n} | {res['raw']:.1%} | {res['shipped']:.1%} | "
                    f"{res['bent']:.0%} | {res['other']:.0%} | {res['after']:.0%} |"
                )
    print("\n| p | separate intervals | curve (envelope) | suites bent before | after |")
    print("|---|---|---|---|---|")
    for name in dict.fromkeys(row["truth"] for row in rows):
        mine = [row for row in rows if row["truth"] == name]
        low = {key: min(row[key] for row in mine) for key in ("raw", "shipped")}
        bent = [row["bent"] for row in mine]
        after = max(row["after"] for row in mine)
        print(
            f"| {name} | {low['raw']:.1%} | {low['shipped']:.1%} | "
            f"{min(bent):.0%}–{max(bent):.0%} | {after:.0%} |"
        )
    print(f"\nworst coverage of curve's bands: {worst:.1%}; suites still bent: {still:.0%}")
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0 if still == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
