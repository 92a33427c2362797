"""Run until decided, measured: error rates at every look and trials spent against plan()'s design.

Python-simulated agents of known per-task success (the truths of ``benchmarks/coverage.py``: one
flaky task (p = ½) among certain ones, U-shaped Beta(0.3, 0.3), the three-point mixture, all
p = 0.9) run in rounds: a first round of k trials per task, then each round the allocator of
:mod:`passk_nb.stats.design` (:func:`status`, :func:`gains`, :func:`spread`: the numbers behind
``decide`` and ``allocate``) gives a round of trials (``--round`` × k per cell, 2 by default) to
the cells where they move the deciding bound most, until the question is decided or the safety
cap (8 × the fixed design) is spent.
Per replication the tasks' p are drawn afresh; "these tasks" truths are the drawn tasks' own
mean of p^k.

Questions (k, level 95 %):

- ``precision=H``: error = the interval missed the truth at *any* look (the final one included);
- ``gate=m`` with m = truth + 0.05 (or halfway to 1 when that is nearer; the configuration is
  below the gate): error = the gate passed;
  and with m = truth − 0.10 (above): the trials it takes to pass;
- ``compare=arm:a,b precision=H`` under the null (arm b = arm a, task by task): error = a
  difference declared.

The fixed design is what :func:`passk_nb.plan` recommends for the same question and level, from
a pilot of the same truth (T tasks × 8 trials): the fewest trials per task (from k, 2k, 3k, …,
64k) whose predicted half-width of the these-tasks interval ``halfwidth_these`` is at most H; for
a comparison at most H/√2 per arm (two independent arms' widths add in quadrature), × 2 arms; for
a gate, decided with plan's power (80 %), at most :func:`~passk_nb.stats.design.gate_halfwidth`
of |truth − m| (the estimate may err z_β standard errors toward the gate and the interval still
clears it; ``ratio to power ½`` is against the design whose half-width is |truth − m|, which
decides only about half the time).
Its cost is T × n (× 2).

With ``--final`` each question is asked with ``final=N``, N the fixed design's trials per task:
no cell runs past N unless the run gives its last look up (``docs/methods/sequential.md``), and
once every cell has N the last look is the fixed-n interval (at 96 %, intersected with the
anytime-valid one at 99 %). A cell whose fixed design :func:`plan_trials` refuses (no n up to
64k reaches its half-width: the gate just above the one-flaky suite) is reported as "no fixed
design" with plan_trials' message, with or without ``--final``.

    python benchmarks/sequential_validation.py            # 200 replications per cell, k = 2
    python benchmarks/sequential_validation.py --final    # the same, capped at the fixed design
    python benchmarks/sequential_validation.py --reps 50 --ks 1
    python benchmarks/sequential_validation.py --stop fixed   # the same allocator, fixed-n stopping
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

import numpy as np
import pandas as pd
from coverage import PRIORS, Prior  # benchmarks/coverage.py (benchmarks/ is on sys.path)

from passk_nb.stats.design import (
    Question,
    decision,
    fixed_look,
    gains,
    gate_halfwidth,
    plan_trials,
    round_trials,
    shrink,
    status,
)

TRUTHS = ("one flaky (½) among certain", "U-shaped Beta(0.3,0.3)", "three-point", "all p = 0.9")
PILOT_TRIALS = 8
#: The table's measured columns (after truth, question, k, T, reps, E[p^k], fixed n).
COLUMNS = (
    "fixed trials",
    "mean trials",
    "ratio",
    "ratio to power ½",
    "p90 trials",
    "decided",
    "missed any look",
    "missed final",
    "gate passed",
    "difference declared",
    "mean halfwidth",
    "mean rounds",
    "max trials of a task",
)
CAP = 8  # safety cap: 8 × the fixed design's trials


def prior(name: str) -> Prior:
    return next(p for p in PRIORS if p.name == name)


def simulate(
    p: np.ndarray,
    w: np.ndarray,
    q: Question,
    cap: int,
    rng: np.random.Generator,
    truth: float,
    rounds_of: int = 2,
    stop: str = "anytime",
) -> dict[str, float]:
    """One sequential run over cells of success probability ``p`` and weights ``w``; with
    ``stop="fixed"`` the same allocation stops on the fixed-n these-tasks interval instead (not
    valid for stopping: measured only, to split the cost into allocation and anytime validity)."""
    n = np.full((p.size, 1), q.k, dtype=float)  # counts per cell and round (columns: rounds)
    c = rng.binomial(q.k, p).astype(float)[:, None]
    rounds, missed = 1, False
    round_steps = rounds_of * p.size  # a round: rounds_of × k trials per cell, concentrated
    while True:
        state = status(n, c, w, q)
        if stop == "fixed":
            _, lo, hi = fixed_look(n.sum(axis=1), c.sum(axis=1), w, q.k, q.ci)
            decided, verdict = decision(q, state.estimate, lo, hi)
            state = replace(state, lo=lo, hi=hi, decided=decided, verdict=verdict)
        missed |= not state.lo <= truth <= state.hi
        spent = int(n.sum())
        if state.decided or state.final or spent >= cap:
            break
        total = n.sum(axis=1)
        size = min(round_steps, (cap - spent) // q.k or 1)
        extra = round_trials(gains(n, c, w, q, state, q.k), total, size, q.k, q.final, shrink(q, state))
        if extra.sum() == 0:
            break
        c = np.hstack([c, rng.binomial(extra.astype(int), p)[:, None].astype(float)])
        n = np.hstack([n, extra[:, None].astype(float)])
        rounds += 1
    n = n.sum(axis=1)
    return {
        "trials": float(n.sum()),
        "rounds": rounds,
        "decided": state.decided,
        "missed": missed,
        "final_missed": not state.lo <= truth <= state.hi,
        "passed": state.verdict.startswith("passes"),
        "declared": state.decided and not state.verdict.startswith("no difference"),
        "halfwidth": (state.hi - state.lo) / 2,
        "max_task_trials": float(n.max()),
    }


def fixed_trials(name: str, tasks: int, k: int, target: float, seed: int) -> int:
    """Trials per task of the fixed design plan() recommends: :func:`plan_trials` of the half-width
    ``target`` (the fewest n among k, 2k, …, 64k whose predicted these-tasks half-width is at most
    it), from a pilot of the truth (T tasks × 8 trials)."""
    rng = np.random.default_rng([seed, tasks, k, 99])
    p = prior(name).draw(rng, (tasks,))
    passed = rng.random((tasks, PILOT_TRIALS)) < p[:, None]
    pilot = pd.DataFrame({"task": np.repeat(np.arange(tasks), PILOT_TRIALS), "passed": passed.ravel()})
    pilot["outcome"] = np.where(pilot["passed"], "pass", "wrong_state")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return plan_trials(pilot, Question(kind="precision", k=k, precision=target), n_sim=4000, seed=seed)


def designs(
    name: str, kind: str, tasks: int, k: int, h: float, seed: int, theta_pop: float
) -> tuple[int, int, int]:
    """The fixed design's trials per task, its cost, and the cost of the design of power ½."""
    if kind == "precision":
        per_task = fixed_trials(name, tasks, k, h, seed)
        return per_task, tasks * per_task, tasks * per_task
    if kind.startswith("gate"):
        gap = min(0.05, (1 - theta_pop) / 2) if kind == "gate-below" else 0.10
        # decided with plan's power: the interval's end clears the gate when the estimate errs
        # by up to z_β standard errors toward it
        per_task = fixed_trials(name, tasks, k, gate_halfwidth(gap), seed)
        coin = tasks * fixed_trials(name, tasks, k, gap, seed)  # half-width = the gap: power ~½
        return per_task, tasks * per_task, coin
    per_task = fixed_trials(name, tasks, k, h / math.sqrt(2), seed)
    return per_task, 2 * tasks * per_task, 2 * tasks * per_task


def cell(args: tuple[str, str, int, int, float, int, int, int, str, bool]) -> tuple[dict[str, object], str]:
    """One row of the table, and why it has no numbers ("" when it has): a cell whose fixed design
    plan_trials refuses (no n up to 64k reaches its half-width) has no cap, no ratio and no N."""
    name, kind, tasks, k, h, reps, seed, size, stop, final = args
    pri = prior(name)
    rng = np.random.default_rng(
        [seed, TRUTHS.index(name), ("precision", "gate-below", "gate-above", "compare").index(kind), k]
    )
    # the question's scale for the fixed design needs the truth: use the population value
    theta_pop = pri.moment(k, tasks)
    head = {"truth": name, "question": kind, "k": k, "T": tasks}
    try:
        per_task, fixed, coin = designs(name, kind, tasks, k, h, seed, theta_pop)
    except ValueError as exc:  # plan_trials' refusal: no fixed design answers this question
        return {**head, "reps": 0, "E[p^k]": theta_pop, "fixed n": "no fixed design"} | dict.fromkeys(
            COLUMNS, math.nan
        ), f"{name}, {kind}, k={k}: no fixed design: {exc}"
    last = per_task if final else None  # final=N: at most the fixed design's n per cell
    rows = []
    for _ in range(reps):
        p = pri.draw(rng, (tasks,))
        theta = float(np.mean(p**k))
        if kind == "precision":
            q = Question(kind="precision", k=k, precision=h, final=last)
            out = simulate(p, np.full(tasks, 1 / tasks), q, CAP * fixed, rng, theta, size, stop)
        elif kind.startswith("gate"):
            m = theta + min(0.05, (1 - theta) / 2) if kind == "gate-below" else theta - 0.10
            if not 0 < m < 1:
                continue
            q = Question(kind="gate", k=k, gate=round(m, 6), final=last)
            out = simulate(p, np.full(tasks, 1 / tasks), q, CAP * fixed, rng, theta, size, stop)
        else:
            q = Question(kind="compare", k=k, on="arm", a="a", b="b", precision=h, final=last)
            w = np.r_[np.full(tasks, -1 / tasks), np.full(tasks, 1 / tasks)]
            out = simulate(np.r_[p, p], w, q, CAP * fixed, rng, 0.0, size, stop)
        rows.append(out)
    df = pd.DataFrame(rows)
    row = {
        **head,
        "reps": len(df),
        "E[p^k]": theta_pop,
        "fixed n": per_task,
        "fixed trials": fixed,
        "mean trials": df["trials"].mean(),
        "ratio": df["trials"].mean() / fixed,
        "ratio to power ½": df["trials"].mean() / coin,
        "p90 trials": df["trials"].quantile(0.9),
        "decided": df["decided"].mean(),
        "missed any look": df["missed"].mean(),
        "missed final": df["final_missed"].mean(),
        # each only where it is the question's error or outcome (else it counts every decided run)
        "gate passed": df["passed"].mean() if kind.startswith("gate") else math.nan,
        "difference declared": df["declared"].mean() if kind == "compare" else math.nan,
        "mean halfwidth": df["halfwidth"].mean(),
        "mean rounds": df["rounds"].mean(),
        "max trials of a task": df["max_task_trials"].mean(),
    }
    return row, ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=200, help="replications per cell")
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--ks", type=int, nargs="+", default=[2])
    parser.add_argument("--precision", type=float, default=0.1, help="H of precision= and compare=")
    parser.add_argument(
        "--questions", nargs="+", default=["precision", "gate-below", "gate-above", "compare"]
    )
    parser.add_argument("--truths", nargs="+", type=int, default=list(range(len(TRUTHS))), help="indices")
    parser.add_argument("--round", type=int, default=2, help="a round's trials: this × k per cell")
    parser.add_argument("--skip", nargs="*", default=[], help="cells to leave out, as TRUTH_INDEX:QUESTION")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--stop",
        choices=["anytime", "fixed"],
        default="anytime",
        help="fixed: stop on the fixed-n interval (invalid for stopping; to measure the allocation alone)",
    )
    parser.add_argument(
        "--final",
        action="store_true",
        help="ask each question with final=N, N the fixed design's trials per task",
    )
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    jobs = [
        (
            TRUTHS[i],
            kind,
            args.tasks,
            k,
            args.precision,
            args.reps,
            args.seed,
            args.round,
            args.stop,
            args.final,
        )
        for i in args.truths
        for kind in args.questions
        for k in args.ks
        if f"{i}:{kind}" not in args.skip
    ]
    rows: list[dict[str, object]] = []
    notes: list[str] = []
    with ProcessPoolExecutor(args.workers) as pool:
        for row, note in pool.map(cell, jobs):
            if not rows:
                print(" | ".join(row), flush=True)
            rows.append(row)
            print(
                " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row.values()), flush=True
            )
            if note:
                notes.append(note)
                print(f"    {note}", flush=True)
    table = pd.DataFrame(rows)
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 30)
    print()
    print(
        f"T = {args.tasks} tasks, H = {args.precision}, {args.reps} replications per cell, "
        f"rounds of {args.round} × k trials per cell, "
        + ("final=N (the fixed design's n), " if args.final else "")
        + ("95 % at every look" if args.stop == "anytime" else "stopping on the fixed-n interval (invalid)")
        + f", seed {args.seed}\n"
    )
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    for note in notes:
        print(f"\n{note}")
    print(f"\n{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
