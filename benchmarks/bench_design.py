"""Benchmark: one look of a sequential run (``decide`` + ``allocate``) and ``plan()`` at 1,000 tasks.

- A look: ``decide`` then ``allocate`` on a counts table of 1,000 tasks (one configuration,
  ``precision=0.02 k=2``), first with one round of 4–11 trials per task, then with six rounds
  (half the tasks topped up by 2 each round: fewer cells alike). The peer, in the same run: the same
  look as it was before #47 (every cell searched on its own, the status computed by both calls;
  monkeypatched).
  Target ≤ 0.3 s CPU.
- ``plan()`` of a two-arm pilot, 1,000 tasks × 5 trials per arm (``on="prompt_name"``, k = 2, the
  default grid of 15 designs). Target ≤ 5 s CPU; its cost is per simulated task (designs × suites
  × T), not per pilot trial.

``rows()`` gives the table rows for ``benchmarks/table.py``.

    python benchmarks/bench_design.py
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd

import passk_nb.stats.design.decisions as decisions
import passk_nb.stats.design.sequence as sequence
from passk_nb.stats.design import allocate, decide, plan

TASKS, QUESTION = 1_000, "precision=0.02 k=2"


def look_table(rounds: int, seed: int = 0) -> pd.DataFrame:
    """Counts of 1,000 tasks, per round (``n@r``/``c@r``) when ``rounds`` > 1."""
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 1, TASKS)
    table = pd.DataFrame({"task": [f"t{i:04d}" for i in range(TASKS)]})
    if rounds == 1:
        n = rng.integers(4, 12, TASKS)
        return table.assign(n=n, c=rng.binomial(n, p))
    for r in range(rounds):
        n = np.full(TASKS, 2) if r == 0 else np.where(rng.random(TASKS) < 0.5, 2, 0)
        table[f"n@{r}"], table[f"c@{r}"] = n, rng.binomial(n, p)
    return table.assign(n=table.filter(like="n@").sum(axis=1), c=table.filter(like="c@").sum(axis=1))


def pilot(tasks: int = TASKS, trials: int = 5, seed: int = 0) -> pd.DataFrame:
    """Trial records of two prompts over the same tasks, prompt b a little better."""
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 1, tasks)
    frames = []
    for arm, shift in (("a", 0.0), ("b", 0.05)):
        passed = (rng.random((tasks, trials)) < np.clip(p + shift, 0, 1)[:, None]).ravel()
        frames.append(
            pd.DataFrame(
                {
                    "model": "m",
                    "prompt_name": arm,
                    "run_id": arm,
                    "task": np.repeat([f"t{i:04d}" for i in range(tasks)], trials),
                    "trial": np.tile(np.arange(trials), tasks),
                    "passed": passed,
                    "outcome": np.where(passed, "pass", "wrong_state"),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def cpu(fn: Callable[[], object], repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def one_look(table: pd.DataFrame) -> None:
    """decide then allocate, as a runner's look asks them (the second reads the first's status)."""
    decisions._LOOKS.clear()  # a repeat of the same look would read the last one's status
    decide(table, QUESTION)
    allocate(table, QUESTION)


def every_cell_look(table: pd.DataFrame) -> None:
    """The look as it was: every cell searched on its own, the status computed by each call."""
    distinct, kept = sequence._distinct, decisions._LOOKS_KEPT
    sequence._distinct = lambda n, c, w, lams: (np.arange(len(w)), np.arange(len(w)))
    decisions._LOOKS_KEPT = 0
    try:
        one_look(table)
    finally:
        sequence._distinct, decisions._LOOKS_KEPT = distinct, kept


def rows(quick: bool = True) -> list[dict[str, object]]:
    warnings.simplefilter("ignore")
    out = []
    for rounds in (1, 6):
        table = look_table(rounds)
        one_look(table.head(50))  # warm-up
        ours, before = cpu(lambda t=table: one_look(t)), cpu(lambda t=table: every_cell_look(t), 1)
        out.append(
            {
                "route": f"decide + allocate, 1,000 tasks, {rounds} round{'s' if rounds > 1 else ''}",
                "figure": f"{ours:.2f} s CPU",
                "peer": f"the look before #47 {before:.2f} s CPU",
                "ratio": f"{ours / before:.2f}×",
                "target": "≤ 0.3 s",
            }
        )
    df = pilot()
    plan_cpu = cpu(lambda: plan(df, on="prompt_name", a="a", b="b", k=2), 1)
    out.append(
        {
            "route": "plan(), two-arm pilot 1,000 tasks × 5 trials",
            "figure": f"{plan_cpu:.1f} s CPU",
            "peer": "— (limit)",
            "ratio": f"{plan_cpu / 5.0:.2f}× the limit",
            "target": "≤ 5 s",
        }
    )
    return out


def main() -> None:
    print(f"load average {os.getloadavg()}")
    for row in rows():
        print("  " + " | ".join(str(value) for value in row.values()))


if __name__ == "__main__":
    main()
