"""Coverage of :func:`passk_nb.stats.predictability`'s intervals, measured by simulation: the numbers
``docs/methods/predictability.md`` and ``predictability.MIN_TASKS`` quote.

For each cell (task-success shape, agent, T tasks, n trials per task) it simulates suites: each
task's p from the shape, each trial passes with probability p and states the agent's confidence
for p (calibrated: p; overconfident: p^0.3; uninformative: a uniform draw to two decimals), and
counts how often each 95 % interval (a bootstrap over tasks) contains the population's Brier
score, ECE (same bins) and AUROC, computed from a million tasks with E[passed | p] = p exactly.
Intervals are computed at every task count (``min_tasks=2``), to show why passk-nb declines
them below ``MIN_TASKS``.

``--paired``: :func:`passk_nb.stats.predictability_difference` instead, on pairs of suites (a
calibrated and an overconfident agent on the same tasks, outcomes drawn apart): how often its 95 %
interval of the Brier and AUROC difference (overconfident − calibrated) contains the populations'.

    python benchmarks/predictability_coverage.py                      # 5, 10, 15, 30 tasks (~2 min)
    python benchmarks/predictability_coverage.py --tasks 30 --suites 400
    python benchmarks/predictability_coverage.py --paired --tasks 30 --suites 400
"""

from __future__ import annotations

import argparse
import functools
import warnings

import numpy as np
import pandas as pd

from passk_nb.stats import predictability, predictability_difference

SHAPES = {"u-shaped": (0.5, 0.5), "mostly-easy": (4.0, 1.0)}
AGENTS = {
    "calibrated": lambda p, rng: p,
    "overconfident": lambda p, rng: p**0.3,
    "uninformative": lambda p, rng: np.round(rng.random(p.shape), 2),
}
BINS = 10


@functools.cache
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


def _trials(
    config: str,
    p: np.ndarray,
    agent: str,
    rng: np.random.Generator,
    tasks: int,
    trials: int,
    labelled: bool = False,
) -> pd.DataFrame:
    """One suite's trials (``p``: each trial's task's success probability): the agent's confidence
    drawn, then whether each trial passed; ``labelled``: with an ``agent`` column."""
    return pd.DataFrame(
        {
            "config": config,
            **({"agent": agent} if labelled else {}),
            "task": np.repeat(np.arange(tasks), trials).astype(str),
            "trial": np.tile(np.arange(trials), tasks),
            "confidence": AGENTS[agent](p, rng),
            "passed": rng.random(p.size) < p,
        }
    )


def _with_outcome(frames: list[pd.DataFrame]) -> pd.DataFrame:
    df = pd.concat(frames, ignore_index=True)
    df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
    return df


def suites(shape: str, agent: str, *, reps: int, tasks: int, trials: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frames = []
    for r in range(reps):
        p = np.repeat(rng.beta(*SHAPES[shape], tasks), trials)
        frames.append(_trials(f"suite-{r:04d}", p, agent, rng, tasks, trials))
    return _with_outcome(frames)


def paired_suites(shape: str, *, reps: int, tasks: int, trials: int, seed: int) -> pd.DataFrame:
    """``reps`` pairs of suites: a calibrated and an overconfident agent on the same ``tasks`` (one
    p per task, outcomes drawn apart), ``trials`` each."""
    rng = np.random.default_rng(seed)
    frames = []
    for r in range(reps):
        p = np.repeat(rng.beta(*SHAPES[shape], tasks), trials)
        for agent in ("calibrated", "overconfident"):
            frames.append(_trials(f"suite-{r:04d}", p, agent, rng, tasks, trials, labelled=True))
    return _with_outcome(frames)


def paired(args: argparse.Namespace) -> None:
    """The coverage of predictability_difference's Brier and AUROC intervals."""
    print("| tasks | shape | Brier difference | AUROC difference |")
    print("|---|---|---|---|")
    for tasks in args.tasks:
        for shape in SHAPES:
            calibrated, over = truth(shape, "calibrated"), truth(shape, "overconfident")
            df = paired_suites(shape, reps=args.suites, tasks=tasks, trials=args.trials, seed=7)
            hits: dict[str, list[bool]] = {"brier": [], "auroc": []}
            for _, suite in df.groupby("config"):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out = predictability_difference(
                        suite, on="agent", a="calibrated", b="overconfident", n_boot=args.n_boot, min_tasks=2
                    ).set_index("metric")
                for metric, hit in hits.items():
                    true = over[metric] - calibrated[metric]
                    lo, hi = out.loc[metric, "lo"], out.loc[metric, "hi"]
                    hit.append(bool(lo <= true + 1e-9 and true - 1e-9 <= hi))
            cells = " | ".join(f"{np.mean(hits[m]):.1%}" for m in ("brier", "auroc"))
            print(f"| {tasks} | {shape} | {cells} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[5, 10, 15, 30])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--suites", type=int, default=200)
    parser.add_argument("--n-boot", type=int, default=400)
    parser.add_argument("--paired", action="store_true", help="the paired difference of two agents")
    args = parser.parse_args()
    if args.paired:
        paired(args)
        return
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
