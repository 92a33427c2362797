"""pass_at_k and pass_hat_k against exact rational arithmetic."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from passk_nb.stats.estimators import pass_at_k, pass_hat_k


def exact_pass_hat_k(n: int, c: int, k: int) -> Fraction:
    return Fraction(math.comb(c, k), math.comb(n, k))


def exact_pass_at_k(n: int, c: int, k: int) -> Fraction:
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


@st.composite
def n_c_k(draw: st.DrawFn, max_n: int = 10_000) -> tuple[int, int, int]:
    n = draw(st.integers(1, max_n))
    c = draw(st.integers(0, n))
    k = draw(st.one_of(st.integers(1, min(n, 20)), st.integers(1, n)))
    return n, c, k


def assert_close_to_exact(value: float, exact: Fraction) -> None:
    expected = float(exact)
    if expected < 1e-290:  # below what a float holds with full relative precision
        assert value == pytest.approx(expected, abs=1e-290)
    else:
        assert value == pytest.approx(expected, rel=1e-12, abs=0)


@settings(max_examples=300, deadline=None)
@given(n_c_k())
def test_pass_hat_k_matches_exact_fractions(case: tuple[int, int, int]) -> None:
    n, c, k = case
    assert_close_to_exact(pass_hat_k(n, c, k), exact_pass_hat_k(n, c, k))


@settings(max_examples=300, deadline=None)
@given(n_c_k())
def test_pass_at_k_matches_exact_fractions(case: tuple[int, int, int]) -> None:
    n, c, k = case
    assert_close_to_exact(pass_at_k(n, c, k), exact_pass_at_k(n, c, k))


@settings(max_examples=50, deadline=None)
@given(st.lists(n_c_k(max_n=300), min_size=1, max_size=40))
def test_arrays_match_exact_fractions_elementwise(cases: list[tuple[int, int, int]]) -> None:
    n, c, k = (np.array(column) for column in zip(*cases, strict=True))
    hat, at = pass_hat_k(n, c, k), pass_at_k(n, c, k)
    for i, (ni, ci, ki) in enumerate(cases):
        assert_close_to_exact(hat[i], exact_pass_hat_k(ni, ci, ki))
        assert_close_to_exact(at[i], exact_pass_at_k(ni, ci, ki))


def test_extremes_at_n_10000_are_exact() -> None:
    assert pass_at_k(10_000, 1, 1) == pytest.approx(1e-4, rel=1e-14)
    assert pass_hat_k(10_000, 9_999, 1) == pytest.approx(0.9999, rel=1e-14)
    assert_close_to_exact(pass_hat_k(10_000, 9_990, 500), exact_pass_hat_k(10_000, 9_990, 500))
    assert_close_to_exact(pass_at_k(10_000, 3, 9_000), exact_pass_at_k(10_000, 3, 9_000))
    assert pass_at_k(10_000, 1, 10_000) == 1.0
    assert pass_hat_k(10_000, 9_999, 10_000) == 0.0


@pytest.mark.parametrize(
    ("n", "k", "p"),
    [(4, 2, Fraction(3, 4)), (5, 3, Fraction(1, 2)), (8, 2, Fraction(1, 3)), (10, 7, Fraction(9, 10))],
)
def test_both_estimators_are_unbiased_by_exact_enumeration(n: int, k: int, p: Fraction) -> None:
    def binomial(c: int) -> Fraction:
        return math.comb(n, c) * p**c * (1 - p) ** (n - c)

    assert sum(binomial(c) * exact_pass_hat_k(n, c, k) for c in range(n + 1)) == p**k
    assert sum(binomial(c) * exact_pass_at_k(n, c, k) for c in range(n + 1)) == 1 - (1 - p) ** k
    # the implementation has the same expectation, to float precision
    c = np.arange(n + 1)
    weights = np.array([float(binomial(ci)) for ci in c])
    assert weights @ pass_hat_k(n, c, k) == pytest.approx(float(p**k), rel=1e-12)
    assert weights @ pass_at_k(n, c, k) == pytest.approx(float(1 - (1 - p) ** k), rel=1e-12)
    # while the plug-in (c/n)^k is biased upward
    plug_in = sum(binomial(ci) * Fraction(ci, n) ** k for ci in range(n + 1))
    assert plug_in > p**k


def test_no_plug_in_three_of_four() -> None:
    assert pass_hat_k(4, 3, 4) == 0.0  # the plug-in (3/4)^4 would be 0.316
    assert pass_hat_k(4, 3, 2) == 0.5  # C(3,2)/C(4,2) = 3/6
    assert pass_at_k(4, 3, 2) == 1.0
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5, rel=1e-15)


def test_k_above_n_is_nan_never_clamped() -> None:
    assert math.isnan(pass_hat_k(3, 3, 4))
    assert math.isnan(pass_at_k(0, 0, 1))
    out = pass_hat_k([3, 4, 5], [3, 4, 5], 4)
    assert np.isnan(out[0]) and out[1:].tolist() == [1.0, 1.0]


def test_broadcasting_and_result_types() -> None:
    assert isinstance(pass_hat_k(4, 2, 1), float)
    assert isinstance(pass_at_k(np.int64(4), np.int64(2), np.int64(1)), float)
    grid = pass_hat_k(np.array([[4], [6]]), np.array([[2], [3]]), np.array([1, 2, 3]))
    assert grid.shape == (2, 3)
    expected = [[float(exact_pass_hat_k(n, c, k)) for k in (1, 2, 3)] for n, c in ((4, 2), (6, 3))]
    np.testing.assert_allclose(grid, expected, rtol=1e-14)
    assert pass_at_k(4.0, 2.0, 1.0) == 0.5  # whole-valued floats are accepted
    assert pass_at_k(np.array([], dtype=int), np.array([], dtype=int), 2).shape == (0,)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((-1, 0, 1), r"n must be ≥ 0; got \(n=-1\)"),
        ((4, -2, 1), r"c must be ≥ 0; got \(c=-2\)"),
        ((4, 5, 1), r"c must be ≤ n .*got \(n=4, c=5\)"),
        (([4, 4], [1, 6], 1), r"got \(n=4, c=6\)"),
        ((4, 2, 0), r"k must be ≥ 1; got \(k=0\)"),
        ((4.5, 2, 1), r"n must hold whole numbers; got n=4.5"),
        ((4, 2, float("nan")), r"k must hold whole numbers"),
        ((4, "2", 1), r"c must be integers"),
        ((4, True, 1), r"c must be integers"),
        (([4, 4], [1, 1, 1], 1), r"do not broadcast"),
    ],
)
def test_invalid_input_names_the_offending_values(args: tuple, message: str) -> None:
    for estimator in (pass_at_k, pass_hat_k):
        with pytest.raises(ValueError, match=message):
            estimator(*args)


def test_relative_error_against_exact_fractions_is_below_1e_14() -> None:
    """The README quotes the measured relative error (below 3e-15); this asserts it stays below 1e-14."""
    worst = 0.0
    for n in (10, 1_000, 50_000):
        for c in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            for k in (1, 2, 5, 50, 200):
                if k > n:
                    continue
                hat = Fraction(math.comb(c, k), math.comb(n, k))
                at = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
                for got, exact in ((pass_hat_k(n, c, k), hat), (pass_at_k(n, c, k), at)):
                    if exact:
                        worst = max(worst, abs(got - float(exact)) / float(exact))
                    else:
                        assert got == 0.0
    assert worst < 1e-14
