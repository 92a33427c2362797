"""Measure how often forecast()'s interval covers the true pass^K, and the point forecast's error.

Simulates suites of T tasks from known populations (the mixture the model assumes, and ones it
does not: a two-point mixture, a uniform, a cluster just below p = 1), runs n trials per task, fits,
and compares with the population's true pass^K at K = 16 and 64. Also: fit on the first 4 of 16
trials and compare with the unbiased pass^16 from all 16.

    python benchmarks/forecast_validation.py                 # 200 suites, T = 40, n = 4
    python benchmarks/forecast_validation.py --tasks 10 20   # the decline threshold
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.forecast import Mixture, bootstrap_mixtures, fit_mixture, pass_hat_interval

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
    args = parser.parse_args()
    start = time.perf_counter()
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
