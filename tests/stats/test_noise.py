"""noise_floor and g_pass_at_k: exact expectations and simulation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from passk_nb.stats.estimators import pass_at_k, pass_hat_k
from passk_nb.stats.noise import g_pass_at_k, icc, noise_floor, run_variance


def frame(c: np.ndarray, n: int) -> pd.DataFrame:
    passed = np.arange(n)[None, :] < np.asarray(c)[:, None]
    return pd.DataFrame(
        {
            "task": np.repeat([f"t{t:03d}" for t in range(len(c))], n),
            "passed": passed.ravel(),
            "outcome": np.where(passed.ravel(), "pass", "wrong_state"),
        }
    )


def expectation(estimate, n: int, p: float) -> float:
    """Exact E over c ~ Binomial(n, p) of estimate(c)."""
    c = np.arange(n + 1)
    return float(np.sum(sps.binom.pmf(c, n, p) * estimate(c)))


def test_g_pass_at_k_ends_are_pass_hat_k_and_pass_at_k() -> None:
    n, c = np.full(9, 8), np.arange(9)
    assert np.allclose(g_pass_at_k(n, c, 4, 1.0), pass_hat_k(n, c, 4))
    assert np.allclose(g_pass_at_k(n, c, 4, 0.25), pass_at_k(n, c, 4))
    assert np.isnan(g_pass_at_k(3, 2, 4, 0.5))


@pytest.mark.parametrize(("p", "k", "tau"), [(0.3, 4, 0.5), (0.8, 5, 0.6), (0.55, 3, 0.34)])
def test_g_pass_at_k_is_unbiased(p: float, k: int, tau: float) -> None:
    need = int(np.ceil(tau * k - 1e-9))
    truth = sps.binom.sf(need - 1, k, p)
    assert expectation(lambda c: g_pass_at_k(np.full(c.size, 10), c, k, tau), 10, p) == pytest.approx(truth)


def test_g_pass_at_k_refuses_bad_tau() -> None:
    with pytest.raises(ValueError, match="tau"):
        g_pass_at_k(4, 2, 2, 0.0)


@pytest.mark.parametrize(("p", "k"), [(0.5, 1), (0.9, 2), (0.7, 3), (1.0, 1), (0.0, 2)])
def test_flip_rate_never_falls_below_the_truth_on_average(p: float, k: int) -> None:
    """Per task the larger of the unbiased estimate and the Jeffreys mean: its exact expectation
    is at least the true 2(p^k − p^2k), and at most 0.1 above it at n = 8."""
    n = 8
    estimate = [noise_floor(frame(np.array([c]), n), k=k, by=())["flip_rate"].iloc[0] for c in range(n + 1)]
    got = expectation(lambda c: np.array(estimate)[c], n, p)
    truth = 2 * (p**k - p ** (2 * k))
    assert truth - 1e-12 <= got <= truth + 0.1


@pytest.mark.parametrize("c", [0, 4])
def test_all_pass_and_all_fail_suites_are_never_zero_wide(c: int) -> None:
    """4/4 (or 0/4) on every task is not proof the outcome never flips: nothing is 0."""
    out = noise_floor(frame(np.full(10, c), 4), k=2, by=()).iloc[0]
    assert out["flip_rate"] > 0 and out["sd_run"] > 0 and out["min_difference"] > 0


TRUTHS = {
    "all pass": lambda rng, t: np.ones(t),
    "one flaky among certain ones": lambda rng, t: np.r_[np.ones(t - 1), 0.5],
    "mostly easy": lambda rng, t: rng.beta(5, 1, t),
    "U-shaped": lambda rng, t: rng.beta(0.3, 0.3, t),
}


@pytest.mark.parametrize("truth", TRUTHS)
def test_two_re_runs_exceed_min_difference_at_most_five_percent(truth: str) -> None:
    """Pilots of 4 trials on 10 tasks (k = 2): over pilots and pairs of independent re-runs of
    k trials per task, |difference| > min_difference in at most 5 % of pairs (Monte-Carlo
    tolerance 1.5 points for 150 pilots × 200 pairs). The unbiased variance alone gave 10.6 %
    with one flaky task among certain ones."""
    rng = np.random.default_rng(sum(map(ord, truth)))
    n, k, tasks = 4, 2, 10
    exceed = []
    for _ in range(150):
        p = TRUTHS[truth](rng, tasks)
        pilot = pd.DataFrame({"task": np.arange(tasks), "n": n, "c": rng.binomial(n, p)})
        floor = noise_floor(pilot, k=k, by=())["min_difference"].iloc[0]
        runs = np.asarray(pass_hat_k(k, rng.binomial(k, p, size=(2, 200, tasks)), k), float).mean(-1)
        exceed.append(np.mean(np.abs(runs[0] - runs[1]) > floor + 1e-12))
    assert np.mean(exceed) <= 0.05 + 0.015


@pytest.mark.parametrize(("k", "trials"), [(1, 1), (1, 3), (2, 4)])
def test_run_variance_is_unbiased(k: int, trials: int) -> None:
    n, p = 8, 0.7
    x = np.asarray(pass_hat_k(trials, np.arange(trials + 1), k))
    pmf = sps.binom.pmf(np.arange(trials + 1), trials, p)
    truth = np.sum(pmf * x**2) - np.sum(pmf * x) ** 2
    got = expectation(lambda c: run_variance(np.full(c.size, n), c, k, trials), n, p)
    assert got == pytest.approx(truth)


def test_min_difference_matches_simulated_run_to_run_differences() -> None:
    rng = np.random.default_rng(50)
    p = rng.beta(0.7, 0.4, 60)
    pilot = frame(rng.binomial(20, p), 20)
    floor = noise_floor(pilot, by=(), k=1, trials=2)["min_difference"].iloc[0]
    runs = rng.binomial(2, p, size=(2, 20000, p.size)) / 2
    diffs = np.abs(runs[0].mean(1) - runs[1].mean(1))
    # an upper bound for these tasks (issue 49), not far above the simulated 95 % quantile
    assert np.quantile(diffs, 0.95) <= floor <= 1.4 * np.quantile(diffs, 0.95)


def test_icc_of_a_beta_population() -> None:
    rng = np.random.default_rng(51)
    a, b = 2.0, 3.0
    n = np.full(3000, 6)
    assert icc(n, rng.binomial(n, rng.beta(a, b, n.size))) == pytest.approx(1 / (a + b + 1), abs=0.03)


def test_noise_floor_needs_enough_trials_and_says_so() -> None:
    out = noise_floor(frame(np.array([3, 1, 2]), 3), k=2, by=())
    assert np.isnan(out["flip_rate"].iloc[0]) and "at least 4 trials" in out["note"].iloc[0]
    with pytest.raises(ValueError, match="trials per run must be ≥ k"):
        noise_floor(frame(np.array([3]), 3), k=2, trials=1, by=())


def test_min_difference_holds_for_the_pilot_in_hand_not_only_on_average():
    """Issue 49: for one pilot the re-run variance read at the posterior mean was exceeded by up to
    21 % of re-run pairs (Beta(½, 2), T = 10, k = 2); with the upper bound over each task's 80 %
    interval, the share of re-run pairs beyond min_difference stays at most 5 % (with Monte-Carlo
    room) for every pilot but a few."""
    from passk_nb.stats.estimators import pass_hat_k

    rng = np.random.default_rng(0)
    tasks, n, k, pairs = 10, 8, 2, 3000
    rates = []
    for _ in range(100):
        p = rng.beta(0.5, 2, tasks)
        c = rng.binomial(n, p)
        floor = noise_floor(pd.DataFrame({"task": np.arange(tasks), "n": n, "c": c}), k=k, by=())
        x1, x2 = (pass_hat_k(k, rng.binomial(k, p, (pairs, tasks)), k).mean(axis=1) for _ in range(2))
        rates.append(np.mean(np.abs(x1 - x2) > floor["min_difference"].iloc[0] + 1e-12))
    rates = np.array(rates)
    assert np.mean(rates > 0.05) <= 0.03 and rates.max() < 0.07, (np.mean(rates > 0.05), rates.max())
