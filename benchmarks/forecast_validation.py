"""Measure how often forecast()'s interval covers the true pass^K, and the point forecast's error.

Simulates suites of T tasks from known populations — the mixture the model assumes, and shapes it
does not describe (clusters of p, a logit-normal, a U-shaped Beta, one flaky task among certain
ones, every task at p = 0.9, tasks nearly but not quite certain) — runs n trials per task, calls
forecast() on the counts exactly as a user would, and compares what it returns with the
population's true pass^K at K = 16 and 64:
how often it declines, the coverage of the interval a user reads (the model's lo/hi when given,
the model-free bounds when declined), the model interval's own coverage, bias, RMSE and width.

    python benchmarks/forecast_validation.py --tasks 20 40 # docs/methods/forecast.md (T 20, 40; n 4, 8)
    python benchmarks/forecast_validation.py                       # also T = 5 and 10
    python benchmarks/forecast_validation.py --tasks 40 --trials 8 --only three
    python benchmarks/forecast_validation.py --trials 8 --only Beta --save a.json   # split a run ...
    python benchmarks/forecast_validation.py --tables a.json b.json                # ... and join its tables
    python benchmarks/forecast_validation.py --plan                # plan(): predicted vs simulated
    python benchmarks/forecast_validation.py --bias --tasks 20 40 --suites 60 --n-boot 100
        # the point's bias per K (K <= n, n+1 .. 2n, 3n, 4n, 16, 64): docs/methods/forecast.md

With --bias the point is the models' Akaike-weighted average (weight_with_always ·
pass^k_with_always + the rest · pass^k_without_always), measured also where forecast() does not
show it (K beyond point_horizon(n)): the table says how biased it would be there; below it, for
a cell whose shown points are off by more than 0.05, the unbiased observed pass^k's bias in the
same suites (what the suites forecast() gives are, not the model).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import integrate, special
from scipy import stats as sps

from passk_nb.stats.design import Population, components, paired_power, plan
from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.forecast import Mixture, forecast, point_horizon

KS = np.array([16, 64])
Sampler = Callable[[tuple[int, ...], np.random.Generator], np.ndarray]


@dataclass(frozen=True)
class Truth:
    """A population of tasks: how to draw a suite's p (size (suites, tasks)) and its true pass^K."""

    sample: Sampler
    pass_hat: Callable[[np.ndarray, int], np.ndarray]  # (ks, tasks) -> true suite pass^K


def mixture(fit: Mixture) -> Truth:
    return Truth(fit.sample, lambda ks, tasks: fit.pass_hat(ks))


def atoms(p: list[float], share: list[float]) -> Truth:
    """Tasks at the values ``p`` in shares ``share``."""
    values, weights = np.array(p), np.array(share)

    def sample(size: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return rng.choice(values, size=size, p=weights)

    return Truth(sample, lambda ks, tasks: (weights[:, None] * values[:, None] ** ks[None, :]).sum(0))


def logit_normal(mu: float, sd: float) -> Truth:
    def sample(size: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return special.expit(rng.normal(mu, sd, size))

    def truth(ks: np.ndarray, tasks: int) -> np.ndarray:
        def moment(k: int) -> float:
            return integrate.quad(
                lambda z: special.expit(z) ** k * sps.norm.pdf(z, mu, sd), -40, 40, limit=400
            )[0]

        return np.array([moment(int(k)) for k in ks])

    return Truth(sample, truth)


def one_flaky(p: float = 0.5) -> Truth:
    """Every task certain (p = 1) but one, at ``p``: the suite's truth depends on its size."""

    def sample(size: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        out = np.ones(size)
        out[..., 0] = p
        return out

    return Truth(sample, lambda ks, tasks: (tasks - 1 + p ** ks.astype(float)) / tasks)


def with_uniform(always: float, never: float, lo: float, hi: float) -> Truth:
    """Shares at p = 1 and p = 0, the rest Uniform(lo, hi)."""
    rest = 1.0 - always - never

    def sample(size: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        u = rng.random(size)
        return np.where(u < always, 1.0, np.where(u < always + never, 0.0, rng.uniform(lo, hi, size)))

    def truth(ks: np.ndarray, tasks: int) -> np.ndarray:
        k1 = ks.astype(float) + 1
        return always + rest * (hi**k1 - lo**k1) / (k1 * (hi - lo))

    return Truth(sample, truth)


POPULATIONS = {
    "mixture 0.3 always, 0.1 never, Beta(2,1)": mixture(Mixture(0.3, 0.1, 2.0, 1.0)),
    "Beta(0.6,0.3)": mixture(Mixture(0.0, 0.0, 0.6, 0.3)),
    "uniform p": mixture(Mixture(0.0, 0.0, 1.0, 1.0)),
    "Beta(5,1)": mixture(Mixture(0.0, 0.0, 5.0, 1.0)),
    "U-shaped Beta(0.3,0.3)": mixture(Mixture(0.0, 0.0, 0.3, 0.3)),
    "logit-normal(1,1.5)": logit_normal(1.0, 1.5),
    "two-point {0.5, 0.97}": atoms([0.5, 0.97], [0.5, 0.5]),
    "two-point {0.3: 40%, 1: 60%}": atoms([0.3, 1.0], [0.4, 0.6]),
    "three-point {0: 15%, 0.6: 50%, 0.95: 35%}": atoms([0.0, 0.6, 0.95], [0.15, 0.5, 0.35]),
    "all tasks p = 0.9": atoms([0.9], [1.0]),
    "one flaky task (p = 0.5) among certain ones": one_flaky(0.5),
    "near-certain {0.02: 40%, 0.98: 60%}": atoms([0.02, 0.98], [0.4, 0.6]),
    "25% always, 10% never, rest Uniform(0.5, 0.95)": with_uniform(0.25, 0.1, 0.5, 0.95),
    "near-certain {0.99: 50%, 0.9: 30%, 0.5: 20%}": atoms([0.99, 0.9, 0.5], [0.5, 0.3, 0.2]),
    "near-certain Uniform(0.9, 1)": with_uniform(0.0, 0.0, 0.9, 1.0),
    "all tasks p = 0.995": atoms([0.995], [1.0]),
}


def counts_table(c: np.ndarray, trials: int) -> pd.DataFrame:
    """A counts table, one row per (suite, task), as forecast() accepts it."""
    suites, tasks = c.shape
    return pd.DataFrame(
        {
            "sim": np.repeat(np.arange(suites), tasks),
            "task": np.tile(np.arange(tasks), suites),
            "n": trials,
            "c": c.ravel(),
        }
    )


def simulate(
    truth: Truth, tasks: int, trials: int, suites: int, n_boot: int, seed: int
) -> dict[str, np.ndarray]:
    """forecast() on ``suites`` simulated suites: per K, the share declined, the coverage of what a
    user reads and of the model interval when given, the point's bias and RMSE, the mean widths."""
    rng = np.random.default_rng(seed)
    c = rng.binomial(trials, truth.sample((suites, tasks), rng))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = forecast(counts_table(c, trials), ks=tuple(KS), by="sim", n_boot=n_boot, seed=seed)
    true = truth.pass_hat(KS, tasks)
    out["truth"] = np.tile(true, suites)
    given = out["given"].to_numpy()
    lo = np.where(given, out["lo"], out["bound_lo"])
    hi = np.where(given, out["hi"], out["bound_hi"])
    out["read_covers"] = (lo <= out["truth"]) & (out["truth"] <= hi)
    out["read_width"] = hi - lo
    out["model_covers"] = (out["lo"] <= out["truth"]) & (out["truth"] <= out["hi"])
    out["bounds_covers"] = (out["bound_lo"] <= out["truth"]) & (out["truth"] <= out["bound_hi"])
    out["error"] = out["pass^k"] - out["truth"]
    out["squared_error"] = out["error"] ** 2
    rows = out.groupby("k")
    fitted = out[given].groupby("k")
    return {
        "truth": true,
        "declined": 1 - rows["given"].mean().to_numpy(),
        "read": rows["read_covers"].mean().to_numpy(),
        "read_width": rows["read_width"].mean().to_numpy(),
        "model": fitted["model_covers"].mean().reindex(KS).to_numpy(),
        "bias": fitted["error"].mean().reindex(KS).to_numpy(),
        "rmse": np.sqrt(fitted["squared_error"].mean()).reindex(KS).to_numpy(),
        "width": (fitted["hi"].mean() - fitted["lo"].mean()).reindex(KS).to_numpy(),
        "bounds": rows["bounds_covers"].mean().to_numpy(),
    }


def bias_ks(trials: int) -> np.ndarray:
    """The K of the bias table: 1 .. 2n, 3n, 4n, 16 and 64."""
    return np.array(sorted(set(range(1, 2 * trials + 1)) | {3 * trials, 4 * trials, 16, 64}))


def simulate_bias(
    truth: Truth, tasks: int, trials: int, suites: int, n_boot: int, seed: int
) -> dict[str, np.ndarray]:
    """The point's mean error per K of :func:`bias_ks` over the suites where forecast() gives that K
    (the point rebuilt from the two readings, so also where it is not shown), how many, and the
    unbiased observed pass^k's mean error over the same suites (K ≤ n: what selection alone does)."""
    ks = bias_ks(trials)
    rng = np.random.default_rng(seed)
    c = rng.binomial(trials, truth.sample((suites, tasks), rng))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = forecast(counts_table(c, trials), ks=tuple(ks), by="sim", n_boot=n_boot, seed=seed)
    weight = out["weight_with_always"]
    point = weight * out["pass^k_with_always"] + (1 - weight) * out["pass^k_without_always"]
    true = np.tile(truth.pass_hat(ks, tasks), suites)
    out["error"], out["observed_error"] = point - true, out["observed"] - true
    given = out[out["given"]].groupby("k")
    return {
        "ks": ks.astype(float),
        "bias": given["error"].mean().reindex(ks).to_numpy(),
        "given": given["error"].count().reindex(ks).fillna(0).to_numpy(),
        "observed_bias": given["observed_error"].mean().reindex(ks).to_numpy(),
        "suites": np.array([float(suites)]),
    }


#: The bias table's columns: a name and which K of n (None: every K <= n; below: max |bias|).
BIAS_COLUMNS: list[tuple[str, Callable[[int], list[int]]]] = [
    ("K ≤ n (max \\|bias\\|)", lambda n: list(range(1, n + 1))),
    ("n + 1", lambda n: [n + 1]),
    ("1.5n", lambda n: [int(1.5 * n)]),
    ("2n", lambda n: [2 * n]),
    ("3n", lambda n: [3 * n]),
    ("4n", lambda n: [4 * n]),
    ("K = 16", lambda n: [16]),
    ("K = 64", lambda n: [64]),
]


def bias_markdown(results: dict[tuple[str, int, int], dict[str, np.ndarray]]) -> None:
    """The methods page's bias table: per population, the range over the cells of the point's bias
    at each K, and the largest |bias| of the points forecast() shows (K ≤ point_horizon(n))."""
    names = list(dict.fromkeys(key[0] for key in results))
    tasks = sorted({key[1] for key in results})
    trials = sorted({key[2] for key in results})
    print(f"\nT = {', '.join(map(str, tasks))}; n = {', '.join(map(str, trials))} (ranges over those cells)")
    print(f"| population | {' | '.join(name for name, _ in BIAS_COLUMNS)} | shown points, max \\|bias\\| |")
    print("|---" * (len(BIAS_COLUMNS) + 2) + "|")
    worst = 0.0
    for name in names:
        cells = [(n, r) for (pop, _, n), r in results.items() if pop == name]
        parts = []
        for column, which in BIAS_COLUMNS:
            values = []
            for n, r in cells:
                at = np.isin(r["ks"], which(n)) & (r["given"] > 0)
                if at.any():
                    b = r["bias"][at]
                    values.append(np.abs(b).max() if len(which(n)) > 1 else b[0])
            parts.append(span(np.array(values), ".2f" if column.startswith("K ≤") else "+.2f"))
        shown = np.concatenate(
            [np.abs(r["bias"][(r["ks"] <= point_horizon(n)) & (r["given"] > 0)]) for n, r in cells]
        )
        worst = max(worst, shown.max(initial=0.0))
        largest = span(shown.max(keepdims=True) if shown.size else shown, ".3f")
        print(f"| {name} | {' | '.join(parts)} | {largest} |")
    print(f"\nlargest |bias| of a shown point over every truth and cell: {worst:.3f}")
    for (name, t, n), r in results.items():
        at = (r["ks"] <= point_horizon(n)) & (r["given"] > 0)
        if at.any() and np.abs(r["bias"][at]).max() > 0.05 and "observed_bias" in r:
            print(
                f"{name}, T = {t}, n = {n}: given in {int(r['given'][0])} of {int(r['suites'][0])} suites; "
                f"there the point's bias at K ≤ n reaches {np.abs(r['bias'][at]).max():.3f}, "
                f"the unbiased observed pass^k's {np.abs(r['observed_bias'][at]).max():.3f}"
            )


def first_of_sixteen(tasks: int, suites: int, n_boot: int, seed: int) -> None:
    """Fit on trials 1-4 of 16, compare the forecast of pass^16 with the unbiased value from all 16."""
    rng = np.random.default_rng(seed)
    passed = (
        rng.random((suites, tasks, 16)) < Mixture(0.3, 0.1, 2.0, 1.0).sample((suites, tasks), rng)[..., None]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = forecast(counts_table(passed[..., :4].sum(-1), 4), ks=(16,), by="sim", n_boot=n_boot, seed=seed)
    target = np.asarray(pass_hat_k(16, passed.sum(-1), 16)).mean(1)
    given = out["given"].to_numpy()
    hits = (out["lo"] <= target) & (target <= out["hi"])
    errors = (out["pass^k"] - target)[given]
    print(
        f"first 4 of 16 trials, T={tasks}: forecast pass^16 vs unbiased pass^16 of all 16 trials "
        f"({given.sum()} of {suites} suites forecast): interval contains it {hits[given].mean():.1%}, "
        f"mean error {errors.mean():+.3f}, RMSE {np.sqrt(np.mean(errors**2)):.3f}"
    )


def plan_validation(seed: int) -> None:
    """Predicted half-widths (from a 100-task, 8-trial pilot) and power against simulation."""
    rng = np.random.default_rng(seed)
    truth = Mixture(0.3, 0.1, 2.0, 1.0)
    p = truth.sample((100,), rng)
    passed = rng.random((100, 8)) < p[:, None]
    pilot = pd.DataFrame({"task": np.repeat(np.arange(100), 8), "passed": passed.ravel()})
    pilot["outcome"] = np.where(pilot["passed"], "pass", "wrong_state")
    print("plan(): predicted / simulated half-width (pilot: 100 tasks x 8 trials; 4000 simulated suites)")
    for k in (1, 4):
        table = plan(pilot, k=k, tasks=[10, 20, 40], trials=[4, 8, 16]).set_index(
            ["tasks", "trials_per_task"]
        )
        for tasks, n in [(10, 4), (20, 8), (40, 16), (40, 4)]:
            c = rng.binomial(n, truth.sample((4000, tasks), rng))
            x = np.asarray(pass_hat_k(n, c, k))
            new = np.mean(sps.t.ppf(0.975, tasks - 1) * x.std(axis=1, ddof=1) / np.sqrt(tasks))
            pt = truth.sample((100, 1, tasks), rng)
            xr = np.asarray(pass_hat_k(n, rng.binomial(n, np.broadcast_to(pt, (100, 200, tasks))), k)).mean(
                axis=2
            )
            these = 1.959964 * np.sqrt(np.mean(xr.var(axis=1, ddof=1)))
            row = table.loc[(tasks, n)]
            print(
                f"  k={k} T={tasks} n={n}: new tasks {row['halfwidth_new']:.3f} / {new:.3f} "
                f"({row['halfwidth_new'] / new - 1:+.0%}), "
                f"these tasks {row['halfwidth_these']:.3f} / {these:.3f} "
                f"({row['halfwidth_these'] / these - 1:+.0%})"
            )
    print("plan(): predicted vs simulated power of the paired t-test (arm B fixes a share of A's tasks)")
    for k, n, tasks, improved in [(1, 4, 30, 0.3), (2, 4, 20, 0.4), (4, 8, 40, 0.2), (1, 8, 15, 0.2)]:
        arm_b = Mixture(improved + (1 - improved) * 0.3, (1 - improved) * 0.1, 2.0, 1.0)
        pop = Population(mixture=truth)
        gap, gap2 = 1 - pop.moment(k), 1 - 2 * pop.moment(k) + pop.moment(2 * k)
        diff = improved * gap
        within = components(pop, k, n)[2] + components(Population(mixture=arm_b), k, n)[2]
        predicted = paired_power(diff, improved * gap2 - diff**2 + within, tasks)
        p_a = truth.sample((4000, tasks), rng)
        p_b = np.where(rng.random(p_a.shape) < improved, 1.0, p_a)
        d = np.asarray(pass_hat_k(n, rng.binomial(n, p_b), k)) - np.asarray(
            pass_hat_k(n, rng.binomial(n, p_a), k)
        )
        t = d.mean(1) / (d.std(1, ddof=1) / np.sqrt(tasks))
        simulated = np.mean(np.abs(t) > sps.t.ppf(0.975, tasks - 1))
        print(
            f"  k={k} n={n} T={tasks} diff={diff:.3f}: predicted {predicted:.1%}, simulated {simulated:.1%} "
            f"({(predicted - simulated) * 100:+.1f} points)"
        )


def span(values: np.ndarray, fmt: str) -> str:
    """'lo–hi' of the finite values (one value when they agree)."""
    values = values[np.isfinite(values)]
    if values.size == 0:
        return "—"
    lo, hi = format(values.min(), fmt), format(values.max(), fmt)
    return lo if lo == hi else f"{lo}–{hi}"


def gather(cells: list[dict[str, np.ndarray]], field: str, k: int | None = None) -> np.ndarray:
    """One field of every cell, at K index ``k`` (None: both K)."""
    return np.concatenate([np.atleast_1d(r[field] if k is None else r[field][k]) for r in cells])


def markdown(
    results: dict[tuple[str, int, int], dict[str, np.ndarray]], tasks: list[int], trials: list[int]
) -> None:
    """The methods page's tables: per population, ranges over the cells with T ≥ 20, then the small suites."""
    names = list(dict.fromkeys(key[0] for key in results))
    big, small = [t for t in tasks if t >= 20], [t for t in tasks if t < 20]
    cells = f"T = {', '.join(map(str, big))}; n = {', '.join(map(str, trials))}"
    print(f"\n{cells} (ranges over those cells), 95% intervals")
    print(
        "| population | declined | covers, K = 16 | covers, K = 64 | model interval alone "
        "| bias, K = 16 | bias, K = 64 | width, K = 64 |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        cells = [r for (pop, t, _), r in results.items() if pop == name and t in big]
        if cells:
            print(
                f"| {name} | {span(gather(cells, 'declined', 0), '.0%')} "
                f"| {span(gather(cells, 'read', 0), '.0%')} "
                f"| {span(gather(cells, 'read', 1), '.0%')} | {span(gather(cells, 'model'), '.0%')} "
                f"| {span(gather(cells, 'bias', 0), '+.2f')} | {span(gather(cells, 'bias', 1), '+.2f')} "
                f"| {span(gather(cells, 'width', 1), '.2f')} |"
            )
    if small:
        print(
            f"\nT = {', '.join(map(str, small))}, n = {', '.join(map(str, trials))}: "
            "share declined, coverage of what a user reads"
        )
        print("| population | declined | covers, K = 16 | covers, K = 64 |")
        print("|---|---|---|---|")
        for name in names:
            cells = [r for (pop, t, _), r in results.items() if pop == name and t in small]
            print(
                f"| {name} | {span(gather(cells, 'declined', 0), '.0%')} "
                f"| {span(gather(cells, 'read', 0), '.0%')} "
                f"| {span(gather(cells, 'read', 1), '.0%')} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, nargs="+", default=[5, 10, 20, 40])
    parser.add_argument("--trials", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--suites", type=int, default=100)
    parser.add_argument("--n-boot", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="+", help="run only populations whose name contains one of these")
    parser.add_argument("--save", help="also write the cells' results to this JSON file")
    parser.add_argument("--tables", nargs="+", help="print the methods tables of saved runs (--save), stop")
    parser.add_argument(
        "--plan", action="store_true", help="plan(): predicted vs simulated half-width and power"
    )
    parser.add_argument("--bias", action="store_true", help="the point's bias per K, K <= n to 64")
    args = parser.parse_args()
    start = time.perf_counter()
    if args.plan:
        plan_validation(args.seed)
        print(f"({time.perf_counter() - start:.0f} s)")
        return
    if args.tables:
        saved = [json.loads(Path(path).read_text()) for path in args.tables]
        loaded = {
            (cell["population"], cell["tasks"], cell["trials"]): {
                k: np.array(v, float) for k, v in cell["result"].items()
            }
            for run in saved
            for cell in run
        }
        # In the order of POPULATIONS, whichever run each cell came from.
        order = {name: i for i, name in enumerate(POPULATIONS)}
        results = dict(sorted(loaded.items(), key=lambda item: (order[item[0][0]], item[0][1], item[0][2])))
        if "bias" in saved[0][0]["result"] and "read" not in saved[0][0]["result"]:
            bias_markdown(results)
        else:
            markdown(results, sorted({key[1] for key in results}), sorted({key[2] for key in results}))
        return
    print(f"{args.suites} suites per cell, {args.n_boot} bootstrap refits per model, 95% intervals")
    results = {}
    for i, (name, truth) in enumerate(POPULATIONS.items()):
        if args.only and not any(part in name for part in args.only):
            continue
        for tasks in args.tasks:
            for trials in args.trials:
                seed = args.seed + 1000 * i + 10 * tasks + trials
                if args.bias:
                    r = simulate_bias(truth, tasks, trials, args.suites, args.n_boot, seed)
                    results[name, tasks, trials] = r
                    parts = [
                        f"{int(k)}: {b:+.3f} ({int(g)})"
                        for k, b, g in zip(r["ks"], r["bias"], r["given"], strict=True)
                    ]
                    print(
                        f"  {name} T={tasks} n={trials} bias (suites given): " + ", ".join(parts), flush=True
                    )
                    continue
                r = simulate(truth, tasks, trials, args.suites, args.n_boot, seed)
                results[name, tasks, trials] = r
                parts = [
                    f"K={k}: true {r['truth'][j]:.3f} declined {r['declined'][j]:.0%} "
                    f"covers {r['read'][j]:.0%} "
                    f"(model {r['model'][j]:.0%}, bounds {r['bounds'][j]:.0%}) bias {r['bias'][j]:+.3f} "
                    f"RMSE {r['rmse'][j]:.3f} width {r['width'][j]:.3f}"
                    for j, k in enumerate(KS)
                ]
                print(f"  {name} T={tasks} n={trials}: " + " | ".join(parts), flush=True)
    if args.save:
        cells = [
            {"population": name, "tasks": t, "trials": n, "result": {k: v.tolist() for k, v in r.items()}}
            for (name, t, n), r in results.items()
        ]
        Path(args.save).write_text(json.dumps(cells, indent=1))
    if args.bias:
        bias_markdown(results)
    else:
        markdown(results, args.tasks, args.trials)
    if args.only is None and not args.bias:
        first_of_sixteen(40, args.suites, args.n_boot, args.seed)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
