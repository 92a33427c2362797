"""plan's predictions against simulation of the intervals passk-nb ships: docs/methods/planning.md.

Half-widths. For each truth (a population of tasks), ``--pilots`` pilots of 40 tasks × 8 trials,
and of 400 tasks (where the pilot's own noise is small, so what is left is plan's), are drawn and
``plan`` predicts, for every design (T tasks × n trials, k), the mean half-width of
``summarize``'s pass^k intervals for new tasks (Korn–Graubard, the default) and for these tasks
re-rolled. The measured value is the mean half-width of those very intervals over ``--suites``
suites drawn from the truth. The error, predicted / measured − 1, includes the pilot's own noise.
The ``t formula`` column is what plan predicted before (t(T − 1)·√((between + within)/T) from the
same pilot), against the same shipped interval.

Power. Two arms: arm a from the truth, arm b failing a third less often on every task
(1 − p_b = ⅔(1 − p_a)) or fixing 30 % of arm a's tasks (p_b = 1). A two-arm pilot (40 or 400
tasks × 8) gives plan its rho; ``power_new`` is checked against the share of simulated suites whose
``compare`` interval excludes 0, ``power_these`` against the share whose fixed-task interval
excludes 0 (both read by ``differs``, compare's decision), at the true difference (for these
tasks: task sets whose own difference is within 5 % of it). ``default rho`` is plan's prediction
from arm a alone (rho = 0.5). plan predicts ``power_new`` by simulating compare on suites from the
pilot's populations (``simulated_power``; the arms' true relation here, b = f(a), is not plan's
copula) and ``power_these`` by the fixed-task z formula. Besides each column's lowest to highest
gap, the root mean square gap over all cells (which includes the Monte-Carlo error of both the
simulated power, 1,000 suites, and plan's own simulation, 800 suites).

    python benchmarks/plan_validation.py              # docs/methods/planning.md's tables (a few minutes)
    python benchmarks/plan_validation.py --suites 300 --pilots 1
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd
from scipy import optimize
from scipy import stats as sps

from passk_nb.stats.design import plan
from passk_nb.stats.forecast import Mixture
from passk_nb.stats.paired import compare, differs
from passk_nb.stats.summary import summarize

TRUTHS = {
    "mixture (30 % always, 10 % never, Beta(2,1))": Mixture(0.3, 0.1, 2.0, 1.0),
    "Beta(2,1)": Mixture(0.0, 0.0, 2.0, 1.0),
    "Beta(½,½)": Mixture(0.0, 0.0, 0.5, 0.5),
    "Beta(5,1)": Mixture(0.0, 0.0, 5.0, 1.0),
    "hard, Beta(½,2)": Mixture(0.0, 0.0, 0.5, 2.0),
}
ARM_B: dict[str, Callable[[np.ndarray, np.random.Generator], np.ndarray]] = {
    "fails a third less often": lambda p, rng: 1 - (1 - p) * 2 / 3,
    "fixes 30 % of tasks": lambda p, rng: np.where(rng.random(p.shape) < 0.3, 1.0, p),
}
#: The same two kinds of arm b at strength s in [0, 1] (s = ⅓ and 0.3 above): for mdd_new.
#: ``u``: one uniform per task, so that the difference rises with s.
ARM_B_AT: dict[str, Callable[[np.ndarray, float, np.ndarray], np.ndarray]] = {
    "fails a third less often": lambda p, s, u: 1 - (1 - p) * (1 - s),
    "fixes 30 % of tasks": lambda p, s, u: np.where(u < s, 1.0, p),
}
PILOT_TRIALS = 8


def records(p: np.ndarray, n: int, rng: np.random.Generator, arm: str = "a") -> pd.DataFrame:
    """Trial records of one pilot: p (tasks,)."""
    passed = rng.random((p.size, n)) < p[:, None]
    return pd.DataFrame(
        {
            "task": np.repeat(np.arange(p.size), n),
            "prompt": arm,
            "passed": passed.ravel(),
            "outcome": np.where(passed.ravel(), "pass", "wrong_state"),
        }
    )


def suites(p: np.ndarray, n: int, rng: np.random.Generator, arm: str = "a") -> pd.DataFrame:
    """A counts table of simulated suites: p (suites, tasks); suite s is group sim = s."""
    count, tasks = p.shape
    return pd.DataFrame(
        {
            "sim": np.repeat(np.arange(count), tasks),
            "prompt": arm,
            "task": np.tile(np.arange(tasks), count),
            "n": n,
            "c": rng.binomial(n, p).ravel(),
        }
    )


def measured_halfwidths(
    truth: Mixture, tasks: int, n: int, k: int, count: int, seed: int
) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    out = summarize(suites(truth.sample((count, tasks), rng), n, rng), k=k, by="sim")
    new = float((out["pass^k_hi"] - out["pass^k_lo"]).mean()) / 2
    return new, float((out["pass^k_fixed_hi"] - out["pass^k_fixed_lo"]).mean()) / 2


def halfwidth_rows(args: argparse.Namespace) -> list[dict[str, object]]:
    rows = []
    for i, (name, truth) in enumerate(TRUTHS.items()):
        if args.truth and not any(part.lower() in name.lower() for part in args.truth):
            continue
        measured = {
            (t, n, k): measured_halfwidths(
                truth, t, n, k, args.suites, args.seed + 1000 * i + 100 * t + 10 * n + k
            )
            for t in args.tasks
            for n in args.trials
            for k in args.ks
            if k <= n
        }
        for size, pilot in itertools.product(args.pilot_tasks, range(args.pilots)):
            rng = np.random.default_rng([args.seed, i, size, pilot])
            frame = records(truth.sample((size,), rng), PILOT_TRIALS, rng)
            for k in args.ks:
                predicted = plan(frame, k=k, tasks=args.tasks, trials=[n for n in args.trials if n >= k])
                for _, row in predicted.iterrows():
                    t, n = int(row["tasks"]), int(row["trials_per_task"])
                    new, these = measured[(t, n, k)]
                    formula = sps.t.ppf(0.975, t - 1) * np.sqrt((row["between"] + row["within"]) / t)
                    rows.append(
                        {
                            "truth": name,
                            "k": k,
                            "pilot": size,
                            "new": row["halfwidth_new"] / new - 1,
                            "these": row["halfwidth_these"] / these - 1,
                            "t formula": formula / new - 1,
                        }
                    )
    return rows


def power_rows(args: argparse.Namespace, seconds: list[float]) -> list[dict[str, object]]:
    """The power table's rows; ``seconds`` gets each two-arm plan call's wall time."""
    rows = []
    truth = TRUTHS["mixture (30 % always, 10 % never, Beta(2,1))"]
    for j, (name, arm_b) in enumerate(ARM_B.items()):
        rng = np.random.default_rng([args.seed, 99, j])
        big = truth.sample((400_000,), rng)
        for k in args.ks:
            diff = float(np.mean(arm_b(big, rng) ** k - big**k))
            simulated = {}
            for t, n in itertools.product(args.power_tasks, [n for n in args.trials if n >= k]):
                p = truth.sample((args.suites, t), rng)
                out = paired(p, arm_b(p, rng), n, k, rng)
                # these tasks: task sets whose own difference is the difference asked about
                p = truth.sample((30 * args.suites, t), rng)
                p_b = arm_b(p, rng)
                near = np.abs(np.mean(p_b**k - p**k, axis=1) - diff) <= max(0.005, 0.05 * diff)
                fixed = paired(p[near][: args.suites], p_b[near][: args.suites], n, k, rng)
                simulated[(t, n)] = (float(differs(out)[0].mean()), float(differs(fixed)[1].mean()))
            grid = {"tasks": args.power_tasks, "trials": [n for n in args.trials if n >= k], "diff": diff}
            for size, pilot_i in itertools.product(args.pilot_tasks, range(args.pilots)):
                rng_pilot = np.random.default_rng([args.seed, 99, j, k, size, pilot_i])
                p_a = truth.sample((size,), rng_pilot)
                pilot = pd.concat(
                    [
                        records(p_a, PILOT_TRIALS, rng_pilot, "a"),
                        records(arm_b(p_a, rng_pilot), PILOT_TRIALS, rng_pilot, "b"),
                    ]
                )
                started = time.perf_counter()
                two = plan(pilot, on="prompt", a="a", b="b", k=k, **grid).set_index(
                    ["tasks", "trials_per_task"]
                )
                seconds.append(time.perf_counter() - started)
                one = plan(pilot[pilot["prompt"] == "a"], k=k, **grid).set_index(["tasks", "trials_per_task"])
                for (t, n), row in two.iterrows():
                    new, these = simulated[(t, n)]
                    rows.append(
                        {
                            "arm b": name,
                            "k": k,
                            "pilot": size,
                            "rho": row["rho"],
                            "simulated_new": new,
                            "gap_new": row["power_new"] - new,
                            "gap_default": one.loc[(t, n), "power_new"] - new,
                            "gap_these": row["power_these"] - these,
                            "at_mdd_new": power_at(
                                truth, name, k, t, n, row["mdd_new"], args.suites, [args.seed, 98, j, k, t, n]
                            ),
                        }
                    )
    return rows


def power_at(
    truth: Mixture, arm: str, k: int, tasks: int, n: int, diff: float, count: int, seed: list[int]
) -> float:
    """compare's new-task power when arm b (of kind ``arm``, at the strength whose true difference
    in pass^k is ``diff``) meets arm a from ``truth``: what plan's mdd_new promises is ``power``."""
    if not np.isfinite(diff):
        return np.nan
    rng = np.random.default_rng(seed)
    big = truth.sample((200_000,), rng)
    u = rng.random(big.shape)

    def gap(s: float) -> float:
        return float(np.mean(ARM_B_AT[arm](big, s, u) ** k - big**k)) - diff

    if gap(1.0) < 0:
        return np.nan
    strength = optimize.brentq(gap, 0.0, 1.0, xtol=1e-6)
    p = truth.sample((count, tasks), rng)
    p_b = ARM_B_AT[arm](p, strength, rng.random(p.shape))
    return float(differs(paired(p, p_b, n, k, rng))[0].mean())


def paired(p_a: np.ndarray, p_b: np.ndarray, n: int, k: int, rng: np.random.Generator) -> pd.DataFrame:
    """compare's pass^k rows of simulated two-arm suites (one group per suite)."""
    table = pd.concat([suites(p_a, n, rng, "a"), suites(p_b, n, rng, "b")], ignore_index=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = compare(table, on="prompt", a="a", b="b", k=k, by="sim")
    return out[out["metric"] == "pass^k"]


def totals(
    frame: pd.DataFrame, sizes: list[int], labels: dict[str, str], show: Callable[[pd.Series], str]
) -> None:
    """One line per pilot size: each column's lowest to highest."""
    for size in sizes:
        mine = frame[frame["pilot"] == size]
        print(
            f"all, {size}-task pilots: "
            + ", ".join(f"{label} {show(mine[col])}" for col, label in labels.items())
        )


def span(values: pd.Series) -> str:
    return f"{values.min():+.0%} to {values.max():+.0%}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suites", type=int, default=1000, help="simulated suites per design")
    parser.add_argument("--pilots", type=int, default=3, help="pilots per truth and size")
    parser.add_argument("--pilot-tasks", type=int, nargs="+", default=[40, 400], help="pilot sizes")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--tasks", type=int, nargs="+", default=[10, 20, 40])
    parser.add_argument("--power-tasks", type=int, nargs="+", default=[20, 40])
    parser.add_argument("--trials", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--truth", nargs="+", help="only the truths whose names contain one of these")
    parser.add_argument("--halfwidths-only", action="store_true", help="skip the power table")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    half = pd.DataFrame(halfwidth_rows(args))
    sizes = args.pilot_tasks
    print(
        f"Half-widths: predicted / measured − 1, lowest to highest over T = {args.tasks}, n = {args.trials} "
        f"and {args.pilots} pilots of {' or '.join(map(str, sizes))} tasks × {PILOT_TRIALS} trials per "
        f"truth; {args.suites} suites per design\n"
    )
    head = [f"{what}, {size}-task pilot" for size in sizes for what in ("new tasks", "these tasks")]
    print("| truth | k | " + " | ".join(head) + f" | t formula (before), {sizes[0]}-task pilot |")
    print("|---|---|" + "---|" * (len(head) + 1))
    for (name, k), rows in half.groupby(["truth", "k"], sort=False):
        cells = [span(rows.loc[rows["pilot"] == size, what]) for size in sizes for what in ("new", "these")]
        formula = span(rows.loc[rows["pilot"] == sizes[0], "t formula"])
        print(f"| {name} | {k} | " + " | ".join(cells) + f" | {formula} |")
    totals(half, sizes, {"new": "new tasks", "these": "these tasks", "t formula": "t formula"}, span)
    if args.halfwidths_only:
        print(f"({time.perf_counter() - start:.0f} s)")
        return 0
    seconds: list[float] = []
    power = pd.DataFrame(power_rows(args, seconds))
    print(
        "\nPower to detect the true pass^k difference (two-sided 5 %), arm a from the mixture: predicted − "
        f"simulated, lowest to highest over T = {args.power_tasks}, n = {args.trials} and {args.pilots} "
        "two-arm pilots\n"
    )
    head = [
        f"{what}, {size}-task pilot"
        for size in sizes
        for what in ("rho", "power_new − compare", "power_these − fixed test", "compare's power at mdd_new")
    ]
    print("| arm b | k | simulated power (compare) | " + " | ".join(head) + f" | default rho, {sizes[0]} |")
    print("|---|---|---|" + "---|" * (len(head) + 1))

    def gap(values: pd.Series) -> str:
        return f"{values.min():+.2f} to {values.max():+.2f}"

    for (name, k), rows in power.groupby(["arm b", "k"], sort=False):
        cells = []
        for size in sizes:
            mine = rows[rows["pilot"] == size]
            rho = f"{mine['rho'].min():.2f}–{mine['rho'].max():.2f}"
            at_mdd = f"{mine['at_mdd_new'].min():.2f}–{mine['at_mdd_new'].max():.2f}"
            cells += [rho, gap(mine["gap_new"]), gap(mine["gap_these"]), at_mdd]
        simulated = f"{rows['simulated_new'].min():.2f}–{rows['simulated_new'].max():.2f}"
        default = gap(rows.loc[rows["pilot"] == sizes[0], "gap_default"])
        print(f"| {name} | {k} | {simulated} | " + " | ".join(cells) + f" | {default} |")
    labels = {"gap_new": "new tasks", "gap_these": "these tasks", "gap_default": "default rho"}
    totals(power, sizes, labels, gap)
    totals(
        power,
        sizes,
        {"at_mdd_new": "compare's power at the plan's mdd_new (target 0.80)"},
        lambda values: f"{values.min():.2f} to {values.max():.2f} (mean {values.mean():.2f})",
    )
    totals(power, sizes, labels, lambda values: f"RMS {np.sqrt(np.mean(values**2)):.3f}")
    print(
        f"one two-arm plan call ({len(args.power_tasks)} × {len(args.trials)} designs at most): median "
        f"{np.median(seconds):.2f} s, longest {max(seconds):.2f} s"
    )
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
