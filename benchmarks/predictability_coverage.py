"""Coverage of :func:`passk_nb.stats.predictability`'s intervals, measured by simulation: the numbers
``docs/methods/predictability.md`` and ``predictability.MIN_TASKS`` quote.

For each cell (task-success shape, agent, T tasks, n trials per task) it simulates suites: each
task's p from the shape, each trial passes with probability p and states the agent's confidence
for p (calibrated: p; overconfident: p^0.3; uninformative: a uniform draw to two decimals), and
counts how often each 95 % interval (a bootstrap over tasks) contains the population's Brier
score, ECE (same bins) and AUROC, computed from a million tasks with E[passed | p] = p exactly.
Intervals are computed at every task count (``min_tasks=2``), to show why passk-nb declines
them below ``MIN_TASKS``.

    python benchmarks/predictability_coverage.py                      # 5, 10, 15, 30 tasks (~2 min)
    python benchmarks/predictability_coverage.py --tasks 30 --suites 400
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd

from passk_nb.stats import predictability

SHAPES = {"u-shaped": (0.5, 0.5), "mostly-easy": (4.0, 1.0)}
AGENTS = {
    "calibrated": lambda p, rng: p,
    "overconfident": lambda p, rng: p**0.3,
    "uninformative": lambda p, rng: np.round(rng.random(p.shape), 2),
}
BINS = 10


def truth(shape: str, agent: str) -> dict[str, float]:
    """The population's Brier score, ECE and AUROC."""
    rng = np.random.default_rng(2024)
    p = rng.beta(*SHAPES[shape], 1_000_000)
    c = AGENTS[agent](p, rng)
    b = np.minimum((c * BINS).astype(int), BINS - 1)
    out = {
        "brier": float(np.mean(c**2 - 2 * c * p + p)),
        "ece": float(np.abs(np.bincount(b, weights=c - p, minlength=BINS)).sum() / p.size),
        "auroc": 0.5,
    }
    if agent != "uninformative":
        ps = p[np.argsort(c, kind="stable")]
        out["auroc"] = float(np.sum(ps * (np.cumsum(1 - ps) - (1 - ps))) / (ps.sum() * (1 - ps).sum()))
    return out


def suites(shape: str, agent: str, *, reps: int, tasks: int, trials: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frames = []
    for r in range(reps):
        p = np.repeat(rng.beta(*SHAPES[shape], tasks), trials)
        frames.append(
            pd.DataFrame(
                {
                    "config": f"suite-{r:04d}",
                    "task": np.repeat(np.arange(tasks), trials).astype(str),
                    "confidence": AGENTS[agent](p, rng),
                    "passed": rng.random(p.size) < p,
                }
            )
        )
    df = pd.concat(frames, ignore_index=True)
    df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
    return df


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[5, 10, 15, 30])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--suites", type=int, default=200)
    parser.add_argument("--n-boot", type=int, default=400)
    args = parser.parse_args()
    print("| tasks | shape | agent | Brier | ECE | AUROC |")
    print("|---|---|---|---|---|---|")
    for tasks in args.tasks:
        for shape in SHAPES:
            for agent in AGENTS:
                true = truth(shape, agent)
                df = suites(shape, agent, reps=args.suites, tasks=tasks, trials=args.trials, seed=7)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out = predictability(df, by="config", n_boot=args.n_boot, min_tasks=2)
                cells = []
                for metric in ("brier", "ece", "auroc"):
                    rows = out[out["metric"] == metric]
                    hit = (rows["lo"] <= true[metric] + 1e-9) & (rows["hi"] >= true[metric] - 1e-9)
                    cells.append(f"{hit.mean():.0%}")
                print(f"| {tasks} | {shape} | {agent} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()
