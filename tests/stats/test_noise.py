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


@pytest.mark.parametrize(("p", "k"), [(0.5, 1), (0.9, 2), (0.7, 3)])
def test_flip_rate_is_exactly_unbiased(p: float, k: int) -> None:
    n = 8
    estimate = [noise_floor(frame(np.array([c]), n), k=k, by=())["flip_rate"].iloc[0] for c in range(n + 1)]
    got = expectation(lambda c: np.array(estimate)[c], n, p)
    assert got == pytest.approx(2 * (p**k - p ** (2 * k)))


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
    assert floor == pytest.approx(np.quantile(diffs, 0.95), rel=0.2)


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
