"""Vectorised exact tests against scipy, table by table."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from passk_nb.stats.exact import boschloo_exact_2x2, fisher_exact_2x2
from passk_nb.stats.paired import flips


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


def full_support_fisher(tables: np.ndarray) -> np.ndarray:
    """The algorithm fisher_exact_2x2 ran before its bisection: the probability of every x of each
    table's support, then the tails counted (one probability per x: quadratic in the trials)."""
    c_a, n_a, c_b, n_b = tables.T
    total, successes = n_a + n_b, c_a + c_b
    p = np.ones(len(tables))
    varies = (n_a > 0) & (n_b > 0) & (successes > 0) & (successes < total)
    c_a, n_a, total, successes = c_a[varies], n_a[varies], total[varies], successes[varies]
    dist = sps.hypergeom(total, n_a, successes)
    low, high = np.maximum(0, successes - n_b[varies]), np.minimum(successes, n_a)
    mode = (successes + 1) * (n_a + 1) // (total + 2)
    p_exact, p_mode = dist.pmf(c_a), dist.pmf(mode)
    threshold = p_exact * (1 + 1e-14)
    x = low[:, None] + np.arange(int((high - low).max()) + 1)
    in_support = x <= high[:, None]
    pmf = np.where(in_support, dist.pmf(np.minimum(x, high[:, None]).T).T, 0.0)
    last_high = mode + (in_support & (x >= mode[:, None]) & (pmf >= threshold[:, None])).sum(axis=1) - 1
    last_low = low + (in_support & (x <= mode[:, None]) & (pmf <= threshold[:, None])).sum(axis=1) - 1
    below = c_a < mode
    tails = np.where(below, dist.cdf(c_a) + dist.sf(last_high), dist.sf(c_a - 1) + dist.cdf(last_low))
    ties = np.abs(p_exact - p_mode) / np.maximum(p_exact, p_mode) <= 1e-14
    p[varies] = np.where(ties, 1.0, np.minimum(tails, 1.0))
    return p


@pytest.mark.parametrize("seed", range(3))
def test_bisection_gives_the_full_support_p_values_bit_for_bit(seed: int) -> None:
    """Speed (#47 §3): each tail's end found by bisection, a few probabilities per table instead of
    one per x of the support, and the p-values unchanged, bit for bit."""
    rng = np.random.default_rng(seed)
    n_a, n_b = rng.integers(1, 300, size=(2, 400))
    c_a = rng.binomial(n_a, rng.random(400))
    c_b = rng.binomial(n_b, np.where(np.arange(400) % 2, c_a / n_a, rng.random(400)))
    tables = np.vstack([every_table(7), np.column_stack([c_a, n_a, c_b, n_b])])
    np.testing.assert_array_equal(fisher_exact_2x2(*tables.T), full_support_fisher(tables))


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


TESTS = {"fisher": fisher_exact_2x2, "boschloo": boschloo_exact_2x2}


@functools.cache
def all_p_values(name: str, n_a: int, n_b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x, y = (g.ravel() for g in np.meshgrid(np.arange(n_a + 1), np.arange(n_b + 1), indexing="ij"))
    return x, y, TESTS[name](x, n_a, y, n_b)


def worst_size(name: str, n_a: int, n_b: int, alpha: float, grid: np.ndarray) -> float:
    """The largest chance, over the common success rate on ``grid``, that test ``name`` rejects at
    alpha two arms of n_a and n_b trials sharing that rate (the rejected tables' null probability)."""
    x, y, p = all_p_values(name, n_a, n_b)
    rejected = p <= alpha
    chance = sps.binom.pmf(x[rejected, None], n_a, grid) * sps.binom.pmf(y[rejected, None], n_b, grid)
    return float(chance.sum(axis=0).max(initial=0.0))


@pytest.mark.parametrize("name", TESTS)
@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.1])
def test_exact_tests_hold_their_size_up_to_twelve_trials_per_arm(name: str, alpha: float) -> None:
    """Exact size: for every n_a, n_b ≤ 12, the null probability of the rejected tables at the
    worst common success rate (a grid of 4001 rates) never exceeds alpha."""
    grid = np.linspace(0, 1, 4001)
    sizes = {
        (n_a, n_b): worst_size(name, n_a, n_b, alpha, grid)
        for n_a, n_b in itertools.product(range(1, 13), repeat=2)
    }
    worst = max(sizes, key=sizes.__getitem__)
    assert sizes[worst] <= alpha, f"{name} at n_a, n_b = {worst} rejects {sizes[worst]:.4f} > {alpha}"
    assert max(sizes.values()) > alpha / 2  # the tests are not trivially conservative


def test_scipy_default_boschloo_search_overshoots_where_ours_does_not() -> None:
    """3/4 vs 0/4: scipy's coarse nuisance search gives 0.047; the chance at π = ½ of a table at
    least as extreme is 18/256 = 0.0703, which the p-value must not undercut."""
    assert sps.boschloo_exact([[3, 1], [0, 4]]).pvalue < 0.05  # the flaw this module fixes
    p = boschloo_exact_2x2([3, 4], 4, [0, 1], 4)
    assert p == pytest.approx([18 / 256, 18 / 256], abs=1e-6) and (p >= 18 / 256).all()


def test_boschloo_is_never_above_fisher_and_gains_at_small_n() -> None:
    tables = every_table(8)
    fisher, boschloo = fisher_exact_2x2(*tables.T), boschloo_exact_2x2(*tables.T)
    assert (boschloo <= fisher + 1e-15).all()
    assert boschloo_exact_2x2(4, 4, 0, 4) == pytest.approx(2 / 256, abs=1e-6)  # 2·½⁴·½⁴ at π = ½
    assert ((boschloo < 0.05) & (fisher >= 0.05)).any()


def test_boschloo_equals_a_brute_force_supremum() -> None:
    """Unequal arms (5 vs 7 trials): the p-value is the maximum over π of the region's chance."""
    grid = np.linspace(0, 1, 20001)
    for c_a, c_b in [(5, 1), (4, 0), (0, 5), (3, 6)]:
        x, y = (g.ravel() for g in np.meshgrid(np.arange(6), np.arange(8), indexing="ij"))
        region = fisher_exact_2x2(x, 5, y, 7) <= fisher_exact_2x2(c_a, 5, c_b, 7) * (1 + 1e-9)
        chance = sps.binom.pmf(x[region, None], 5, grid) * sps.binom.pmf(y[region, None], 7, grid)
        brute = chance.sum(axis=0).max()
        assert float(boschloo_exact_2x2(c_a, 5, c_b, 7)) == pytest.approx(brute, abs=2e-6)
        assert float(boschloo_exact_2x2(c_a, 5, c_b, 7)) >= brute - 1e-12


def test_boschloo_refuses_impossible_tables_and_keeps_shapes() -> None:
    with pytest.raises(ValueError, match="between 0 and the trials"):
        boschloo_exact_2x2(5, 4, 0, 4)
    assert boschloo_exact_2x2(np.array([[4, 0], [2, 1]]), 4, 0, 4).shape == (2, 2)
    assert boschloo_exact_2x2([], [], [], []).shape == (0,)
    assert boschloo_exact_2x2([0, 3], [0, 3], [0, 3], [4, 3]).tolist() == [1.0, 1.0]  # no trials; all pass


def marks_frame(marks: dict[tuple[str, str], str]) -> pd.DataFrame:
    df = pd.DataFrame(
        [
            {"task": t, "model": "m", "prompt_hash": p, "passed": m == "1"}
            for (p, t), ms in marks.items()
            for m in ms
        ]
    )
    return df.assign(outcome=np.where(df["passed"], "pass", "wrong_state"))


def test_flips_boschloo_no_longer_flags_three_of_four_against_none() -> None:
    """scipy's default search gave p = 0.047 for 3/4 → 0/4; under a common rate ½ the tables at
    least as extreme have chance 0.0703, so a size-holding test must not call it a flip."""
    df = marks_frame({("p1", "t1"): "1110", ("p2", "t1"): "0000", ("p1", "t2"): "1111", ("p2", "t2"): "1000"})
    out = flips(df, a="p1", b="p2", test="boschloo", family="all")
    assert (out["p_value"] > 0.05).all() and not out["flip"].any()
    assert out["p_value"].tolist() == pytest.approx([18 / 256] * 2, abs=1e-6)


@pytest.mark.parametrize("test", ["fisher", "boschloo"])
@pytest.mark.parametrize("mark", ["1111", "0000"])
def test_flips_on_all_pass_and_all_fail_suites_find_nothing(test: str, mark: str) -> None:
    df = marks_frame({(p, t): mark for p in ("p1", "p2") for t in ("t1", "t2", "t3")})
    out = flips(df, a="p1", b="p2", test=test)
    assert (out["p_value"] == 1.0).all() and not out["tested"].any() and not out["flip"].any()
