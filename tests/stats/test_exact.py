"""Vectorised exact tests against scipy, table by table."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sps

from passk_nb.stats.exact import fisher_exact_2x2


def scipy_fisher(c_a: int, n_a: int, c_b: int, n_b: int) -> float:
    return float(sps.fisher_exact([[c_a, n_a - c_a], [c_b, n_b - c_b]], alternative="two-sided").pvalue)


def every_table(max_n: int) -> np.ndarray:
    return np.array(
        [
            (c_a, n_a, c_b, n_b)
            for n_a, n_b in itertools.product(range(max_n + 1), repeat=2)
            for c_a in range(n_a + 1)
            for c_b in range(n_b + 1)
        ]
    )


@pytest.mark.slow
def test_every_table_up_to_twelve_trials_per_arm_matches_scipy() -> None:
    tables = every_table(12)
    assert len(tables) == 8281  # (sum over n of n + 1)^2 = 91^2
    got = fisher_exact_2x2(*tables.T)
    expected = np.array([scipy_fisher(*t) for t in tables])
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_random_larger_tables_match_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_a, n_b = rng.integers(1, 400, size=(2, 300))
    p_a = rng.random(300)
    c_a = rng.binomial(n_a, p_a)
    # same rate in half the tables (large p), a shifted rate in the rest (tiny p)
    c_b = rng.binomial(n_b, np.where(np.arange(300) % 2, p_a, rng.random(300)))
    got = fisher_exact_2x2(c_a, n_a, c_b, n_b)
    expected = np.array([scipy_fisher(*t) for t in zip(c_a, n_a, c_b, n_b, strict=True)])
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    assert (expected < 1e-6).any() and (expected > 0.5).any()  # both regimes were exercised


def test_symmetric_tables_count_both_tails() -> None:
    """n_a == n_b: the mirror table is exactly as probable; scipy's tolerance counts it."""
    n = np.arange(1, 60)
    got = fisher_exact_2x2(n, n, 0, n)
    expected = np.array([scipy_fisher(k, k, 0, k) for k in n])
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0)


def test_many_tables_in_small_chunks_give_the_same_values(monkeypatch: pytest.MonkeyPatch) -> None:
    tables = every_table(6)
    whole = fisher_exact_2x2(*tables.T)
    monkeypatch.setattr("passk_nb.stats.exact._CHUNK_CELLS", 5)
    np.testing.assert_array_equal(fisher_exact_2x2(*tables.T), whole)


def test_shapes_broadcast() -> None:
    got = fisher_exact_2x2(np.array([[4, 0], [2, 1]]), 4, 0, 4)
    assert got.shape == (2, 2)
    assert got[0, 1] == 1.0 and got[0, 0] == pytest.approx(0.0286, abs=1e-4)
    assert fisher_exact_2x2([], [], [], []).shape == (0,)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((5, 4, 0, 4), "between 0 and the trials"),
        ((0, 4, -1, 4), "between 0 and the trials"),
        ((0.5, 4, 0, 4), "whole numbers"),
        ((np.nan, 4, 0, 4), "whole numbers"),
    ],
)
def test_impossible_tables_are_refused(args: tuple[float, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fisher_exact_2x2(*args)


@pytest.mark.parametrize("high", [3, 40, 100_000])
def test_unique_rows_equals_numpy_unique_along_rows(high: int) -> None:
    """Packed keys (a bincount for small ranges, a sort for large ones) give numpy's answer."""
    from passk_nb.stats.exact import unique_rows

    rows = np.random.default_rng(high).integers(0, high, size=(2_000, 4))
    got, inverse = unique_rows(rows)
    expected, expected_inverse = np.unique(rows, axis=0, return_inverse=True)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(inverse, expected_inverse.ravel())
    np.testing.assert_array_equal(got[inverse], rows)
