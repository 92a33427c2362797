"""Measure how often forecast()'s interval covers the true pass^K, and the point forecast's error.

Simulates suites of T tasks from known populations (the mixture the model assumes, and ones it
does not: a two-point mixture, a uniform, a cluster just below p = 1), runs n trials per task, fits,
and compares with the population's true pass^K at K = 16 and 64. Also: fit on the first 4 of 16
trials and compare with the unbiased pass^16 from all 16.

    python benchmarks/forecast_validation.py                 # 200 suites, T = 40, n = 4
    python benchmarks/forecast_validation.py --tasks 10 20   # the decline threshold
    python benchmarks/forecast_validation.py --bounds --suites 100   # model-free bounds' coverage
    python benchmarks/forecast_validation.py --plan          # plan(): predicted vs simulated
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from scipy import stats as sps

from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.forecast import Mixture, bootstrap_mixtures, data_bounds, fit_mixture, pass_hat_interval
from passk_nb.stats.planning import Population, components, paired_power, plan

KS = np.array([16, 64])


def two_point(lo: float, hi: float, share_hi: float):
    def sample(size: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return np.where(rng.random(size) < share_hi, hi, lo)

    truth = (1 - share_hi) * lo**KS + share_hi * hi**KS
    return sample, truth


POPULATIONS = {
    "mixture (0.3 always, 0.1 never, Beta(2,1))": (
        Mixture(0.3, 0.1, 2.0, 1.0).sample,
        Mixture(0.3, 0.1, 2.0, 1.0).pass_hat(KS),
    ),
    "pure Beta(0.6, 0.3)": (Mixture(0.0, 0.0, 0.6, 0.3).sample, Mixture(0.0, 0.0, 0.6, 0.3).pass_hat(KS)),
    "uniform p": (Mixture(0.0, 0.0, 1.0, 1.0).sample, Mixture(0.0, 0.0, 1.0, 1.0).pass_hat(KS)),
    "two-point p ∈ {0.5, 0.97} (not beta-binomial)": two_point(0.5, 0.97, 0.5),
    "two-point p ∈ {0.3, 1.0} + 0 (in model)": two_point(0.3, 1.0, 0.6),
}


def run(sample, truth: np.ndarray, tasks: int, trials: int, suites: int, n_boot: int, ci: float, seed: int):
    rng = np.random.default_rng(seed)
    covered, errors, widths, declined = [], [], [], 0
    n = np.full(tasks, trials)
    for _ in range(suites):
        c = rng.binomial(n, sample((tasks,), rng))
        if int(((c > 0) & (c < n)).sum()) < 2:
            declined += 1
            continue
        fit = fit_mixture(n, c)
        point = fit.pass_hat(KS)
        lo, hi = pass_hat_interval(point, bootstrap_mixtures(fit, n, n_boot, rng), KS, ci)
        covered.append((lo <= truth) & (truth <= hi))
        errors.append(point - truth)
        widths.append(hi - lo)
    cov, err, wid = np.mean(covered, 0), np.array(errors), np.mean(widths, 0)
    return cov, np.mean(err, 0), np.sqrt(np.mean(err**2, 0)), wid, declined


def first_of_sixteen(tasks: int, suites: int, n_boot: int, seed: int) -> None:
    """Fit on trials 1-4 of 16, compare the forecast of pass^16 with the unbiased value from all 16."""
    rng = np.random.default_rng(seed)
    pop = Mixture(0.3, 0.1, 2.0, 1.0)
    hits, errs = [], []
    for _ in range(suites):
        p = pop.sample((tasks,), rng)
        passed = rng.random((tasks, 16)) < p[:, None]
        n4, c4 = np.full(tasks, 4), passed[:, :4].sum(1)
        target = float(np.mean(pass_hat_k(16, passed.sum(1), 16)))
        fit = fit_mixture(n4, c4)
        point = fit.pass_hat(np.array([16]))
        lo, hi = pass_hat_interval(point, bootstrap_mixtures(fit, n4, n_boot, rng), np.array([16]), 0.95)
        hits.append(bool(lo[0] <= target <= hi[0]))
        point = float(point[0])
        errs.append(point - target)
    print(
        f"first 4 of 16 trials, T={tasks}: forecast pass^16 vs unbiased pass^16 of all 16 trials: "
        f"interval contains it {np.mean(hits):.1%}, mean error {np.mean(errs):+.3f}, "
        f"RMSE {np.sqrt(np.mean(np.square(errs))):.3f}"
    )


def bounds_coverage(sample, truth: np.ndarray, tasks: int, trials: int, suites: int, seed: int):
    rng = np.random.default_rng(seed)
    n = np.full(tasks, trials)
    hits, widths = [], []
    for _ in range(suites):
        b = data_bounds(n, rng.binomial(n, sample((tasks,), rng)), KS, 0.95)
        hits.append((b[:, 0] <= truth) & (truth <= b[:, 1]))
        widths.append(b[:, 1] - b[:, 0])
    return np.mean(hits, 0), np.mean(widths, 0)


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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, nargs="+", default=[40])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--suites", type=int, default=200)
    parser.add_argument("--n-boot", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=None, help="run only populations whose name contains this")
    parser.add_argument("--bounds", action="store_true", help="coverage of the model-free bounds instead")
    parser.add_argument(
        "--plan", action="store_true", help="plan(): predicted vs simulated half-width and power"
    )
    args = parser.parse_args()
    start = time.perf_counter()
    if args.plan:
        plan_validation(args.seed)
        print(f"({time.perf_counter() - start:.0f} s)")
        return
    if args.bounds:
        for tasks in args.tasks:
            print(f"model-free bounds: T={tasks}, n={args.trials}, {args.suites} suites, 95%")
            for name, (sample, truth) in POPULATIONS.items():
                cov, width = bounds_coverage(sample, truth, tasks, args.trials, args.suites, args.seed)
                parts = [
                    f"K={k}: coverage {c:.1%} width {w:.3f}" for k, c, w in zip(KS, cov, width, strict=True)
                ]
                print(f"  {name}: " + " | ".join(parts))
        print(f"({time.perf_counter() - start:.0f} s)")
        return
    for tasks in args.tasks:
        print(
            f"T={tasks} tasks, n={args.trials} trials, {args.suites} suites, "
            f"{args.n_boot} bootstrap fits, 95% interval"
        )
        for name, (sample, truth) in POPULATIONS.items():
            if args.only and args.only not in name:
                continue
            cov, bias, rmse, width, declined = run(
                sample, truth, tasks, args.trials, args.suites, args.n_boot, 0.95, args.seed
            )
            parts = [
                f"K={k}: true {t:.3f} coverage {c:.1%} bias {b:+.3f} RMSE {r:.3f} width {w:.3f}"
                for k, t, c, b, r, w in zip(KS, truth, cov, bias, rmse, width, strict=True)
            ]
            print(f"  {name}: " + " | ".join(parts) + (f" ({declined} suites declined)" if declined else ""))
    if args.only is None:
        first_of_sixteen(args.tasks[0], args.suites // 2, args.n_boot, args.seed)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
