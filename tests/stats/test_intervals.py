"""The intervals summarize gives: Clopper-Pearson per task, the fixed-task interval, the bootstrap
and Korn-Graubard population intervals, never zero wide."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from passk_nb.stats.paired import compare
from passk_nb.stats.summary import summarize
from tests.helpers.records import records_from_marks as trials
from tests.stats.cases import TWO_TASKS, exact_var


def test_per_task_rows_get_clopper_pearson_intervals() -> None:
    out = summarize(trials({("m", "p", "t"): "1100"}), k=2, by="task")
    row = out.iloc[0]
    lo, hi = sps.binomtest(2, 4).proportion_ci(0.95, method="exact")
    assert row["ci_method"] == "clopper-pearson"
    assert row["pass^k_lo"] == pytest.approx(lo**2, rel=1e-9)
    assert row["pass^k_hi"] == pytest.approx(hi**2, rel=1e-9)
    assert row["pass@k_lo"] == pytest.approx(1 - (1 - lo) ** 2, rel=1e-9)
    assert row["pass@k_hi"] == pytest.approx(1 - (1 - hi) ** 2, rel=1e-9)
    assert row["pass^k_se_fixed"] == pytest.approx(math.sqrt(exact_var(4, 2, 2)), rel=1e-4)
    edge = summarize(trials({("m", "p", "t"): "1111"}), k=2, by="task").iloc[0]
    assert (edge["pass^k_hi"], edge["pass^k_lo"]) == (1.0, pytest.approx(0.025 ** (2 / 4), rel=1e-9))


def test_fixed_task_interval_is_never_zero_width_and_needs_only_n_at_least_k() -> None:
    # the acceptance case: tasks 1111, 1000, 0000 at k = 2 (the old unbiased estimate was exactly 0)
    df = trials({("m", "p", "a"): "1111", ("m", "p", "b"): "1000", ("m", "p", "c"): "0000"})
    row = summarize(df, k=2, by="model", n_boot=0).iloc[0]
    assert row["pass^k_se_fixed"] > 0.05 and row["pass@k_se_fixed"] > 0.05
    # every (n, c, k) with n >= k: positive; n = k is enough (the old one needed n >= 2k)
    for n in range(1, 9):
        cells = trials({("m", "p", f"c{c}"): "1" * c + "0" * (n - c) for c in range(n + 1)})
        for k in range(1, n + 1):
            per_task = summarize(cells, k=k, by="task", n_boot=0)
            assert (per_task[["pass^k_se_fixed", "pass@k_se_fixed"]] > 0).all(axis=None), (n, k)
            exact = [math.sqrt(exact_var(n, c, k)) for c in range(n + 1)]
            np.testing.assert_allclose(per_task["pass^k_se_fixed"], exact, rtol=1e-4)


def test_bootstrap_interval_is_the_percentile_interval_of_task_resamples() -> None:
    # Two tasks (pass^2 = 1 and 1/6): resampled means are 1/6, 7/12, 1 with probability 1/4, 1/2, 1/4.
    boot = {"by": "model", "method": "bootstrap", "min_tasks": 2}
    narrow = summarize(TWO_TASKS, k=2, ci=0.4, **boot).iloc[0]  # 30% and 70% quantiles
    assert (narrow["pass^k_lo"], narrow["pass^k_hi"]) == (pytest.approx(7 / 12), pytest.approx(7 / 12))
    wide = summarize(TWO_TASKS, k=2, ci=0.6, **boot).iloc[0]  # 20% and 80% quantiles
    assert (wide["pass^k_lo"], wide["pass^k_hi"]) == (pytest.approx(1 / 6), pytest.approx(1.0))


def test_population_interval_is_declined_below_min_tasks_with_a_warning() -> None:
    four = trials({("m", "p", t): "1100" for t in "abcd"})
    with pytest.warns(
        UserWarning, match=r"no interval for new tasks: fewer than min_tasks=5 tasks.*fixed-task"
    ):
        row = summarize(four, k=2, by="model").iloc[0]
    assert math.isnan(row["pass^k_lo"]) and row["ci_method"] == "declined: too few tasks"
    assert row["pass^k_se_fixed"] > 0  # the fixed-task interval is always given
    five = trials(
        {
            ("m", "p", t): marks
            for t, marks in zip("abcde", ["1111", "1100", "1100", "1000", "0000"], strict=True)
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        given = summarize(five, k=2, by="model").iloc[0]
    assert given["ci_method"] == "korn-graubard"
    assert 0 <= given["pass^k_lo"] < given["pass^k"] < given["pass^k_hi"] <= 1
    assert summarize(four, k=2, by="model", min_tasks=4)["ci_method"].iloc[0] == "korn-graubard"
    with pytest.raises(ValueError, match="method must be one of"):
        summarize(five, k=2, method="percentile")


def test_no_interval_is_zero_width_when_every_task_has_n_at_least_k() -> None:
    # identical tasks, all-pass and all-fail suites: the old bootstrap and se_fixed were points here
    for marks in ("1111", "0000", "1100"):
        same = trials({("m", "p", t): marks for t in "abcdef"})
        for k in (1, 2, 4):
            row = summarize(same, k=k, by="model").iloc[0]
            for metric in ("pass@k", "pass^k"):
                assert row[f"{metric}_hi"] - row[f"{metric}_lo"] > 0.01, (marks, k, metric)
                assert row[f"{metric}_se_fixed"] > 0, (marks, k, metric)
            per_task = summarize(same, k=k, by="task")
            assert (per_task["pass^k_hi"] > per_task["pass^k_lo"]).all()
        arms = pd.concat([same, same.assign(prompt_hash="q")])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            diff = compare(arms, a="p", b="q", k=2, by="model")
        assert ((diff["hi"] - diff["lo"]) > 0.01).all() and (diff["se_fixed"] > 0).all()


def _jeffreys(n: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from passk_nb.stats.intervals import FIXED_LEVEL, betaincinv

    cn, cc = n.astype(float), c.astype(float)
    with np.errstate(invalid="ignore"):
        lo = np.where(cc <= 0, 0.0, betaincinv(cc + 0.5, cn - cc + 0.5, (1 - FIXED_LEVEL) / 2))
        hi = np.where(cc >= cn, 1.0, betaincinv(cc + 0.5, cn - cc + 0.5, (1 + FIXED_LEVEL) / 2))
    return lo, hi


@pytest.mark.parametrize("k", [1, 2, 5, 10])
def test_fixed_task_variance_is_the_largest_variance_over_the_jeffreys_interval(k: int) -> None:
    """Speed (#47): the variance is the estimator's at its peak in p clipped to the task's interval,
    not the best of a grid search: at least the largest over 4,001 points of the interval (to float
    rounding), and the variance at a p inside it."""
    from passk_nb.stats.intervals import estimator_variance, fixed_task_variance

    rng = np.random.default_rng(k)
    n = rng.integers(k, 300, 300)
    c = rng.binomial(n, rng.random(300))
    lo, hi = _jeffreys(n, c)
    grid = lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, 4001)
    dense = estimator_variance(n[:, None], np.zeros(grid.shape), k, grid).max(axis=1)
    got = fixed_task_variance(n, c, k)
    assert (got >= dense * (1 - 1e-13)).all()
    assert (got <= dense * (1 + 1e-6)).all()  # the grid's points lie within 1/4,000 of the peak


def test_the_estimators_variance_has_one_peak_in_p() -> None:
    """What fixed_task_variance's maximiser relies on: for n ≤ 400 and k ≤ 20 the variance rises
    from 0 at p = 0 to one peak and falls to 0 at p = 1 (no second local maximum), so its largest
    value over an interval is at the peak clipped to the interval."""
    from passk_nb.stats.intervals import estimator_variance

    p = np.linspace(0.0, 1.0, 1001)
    for k in range(1, 21):
        n = np.arange(k, 401)[:, None]
        steps = np.diff(estimator_variance(n, np.zeros((n.size, 1)), k, p[None, :]), axis=1)
        steps[np.abs(steps) <= 1e-15 * np.abs(steps).max(axis=1, keepdims=True)] = 0.0
        for row in np.sign(steps):
            moves = row[row != 0]
            assert moves[0] > 0 and np.count_nonzero(np.diff(moves)) == 1, k


def test_fixed_task_variances_at_many_k_are_each_ks_own() -> None:
    """curve's one call for every k gives each k the variances of its own call, bit for bit, and
    a re-run of other trials (``trials=``) the same."""
    from passk_nb.stats.intervals import fixed_task_variance, fixed_task_variances

    rng = np.random.default_rng(3)
    n = rng.integers(1, 60, 500)
    c = rng.binomial(n, rng.random(500))
    ks = [1, 2, 3, 5, 8, 13]
    every = fixed_task_variances(n, c, ks)
    for j, k in enumerate(ks):
        np.testing.assert_array_equal(every[j], fixed_task_variance(n, c, k))
        np.testing.assert_array_equal(fixed_task_variance(n[:7], c[:7], k), every[j, :7])
    np.testing.assert_array_equal(
        fixed_task_variances(n, c, ks, trials=20)[2], fixed_task_variance(n, c, 3, trials=20)
    )


def test_korn_graubard_never_counts_fewer_effective_tasks_than_tasks() -> None:
    """Five tasks that each pass all or nothing are five Bernoulli draws: the interval is the exact
    one for 3 of 5, where the t correction used to take T_eff to 2.5 (issue 49)."""
    from passk_nb.stats.intervals import korn_graubard

    values = np.array([[1.0], [1.0], [1.0], [0.0], [0.0]])
    lo, hi = korn_graubard(np.zeros(5, dtype=int), values, np.zeros((5, 1)), 1, ci=0.95)
    exact = sps.binomtest(3, 5).proportion_ci(0.95, method="exact")
    assert (lo[0, 0], hi[0, 0]) == (pytest.approx(exact.low), pytest.approx(exact.high))


@pytest.mark.parametrize(
    ("truth", "tasks", "n", "k"),
    [
        ("U-shaped Beta(0.3, 0.3)", 5, 8, 2),  # where T_eff = T now binds
        ("hard Beta(0.5, 2)", 5, 4, 4),  # the largest narrowing (0.70 of the old width)
        ("mixture", 10, 8, 2),  # the cell that stops a narrower interval at ten tasks
    ],
)
def test_new_task_interval_keeps_93_percent_on_the_hard_shapes(
    truth: str, tasks: int, n: int, k: int
) -> None:
    suites = 1500
    rng = np.random.default_rng([tasks, n, k, len(truth)])
    if truth.startswith("U-shaped"):
        p, b = rng.beta(0.3, 0.3, (suites, tasks)), sps.beta(0.3, 0.3)
        population = (1 - b.expect(lambda x: (1 - x) ** k), b.expect(lambda x: x**k))
    elif truth.startswith("hard"):
        p, b = rng.beta(0.5, 2, (suites, tasks)), sps.beta(0.5, 2)
        population = (1 - b.expect(lambda x: (1 - x) ** k), b.expect(lambda x: x**k))
    else:  # 30 % always pass, 20 % never, 50 % Beta(4, 2)
        u = rng.random((suites, tasks))
        p = np.where(u < 0.3, 1.0, np.where(u < 0.5, 0.0, rng.beta(4, 2, (suites, tasks))))
        b = sps.beta(4, 2)
        population = (
            0.3 + 0.5 * (1 - b.expect(lambda x: (1 - x) ** k)),
            0.3 + 0.5 * b.expect(lambda x: x**k),
        )
    c = rng.binomial(n, p)
    sim, task = np.repeat(np.arange(suites), tasks), np.tile(np.arange(tasks), suites)
    out = summarize(pd.DataFrame({"sim": sim, "task": task, "n": n, "c": c.ravel()}), k=k, by="sim")
    tolerance = 2 * np.sqrt(0.93 * 0.07 / suites)  # two Monte-Carlo standard errors
    for metric, truth_value in zip(("pass@k", "pass^k"), population, strict=True):
        lo, hi = out[f"{metric}_lo"].to_numpy(), out[f"{metric}_hi"].to_numpy()
        assert (hi > lo).all(), "an interval for new tasks is zero wide"
        covered = float(np.mean((lo <= truth_value + 1e-12) & (truth_value - 1e-12 <= hi)))
        assert covered >= 0.93 - tolerance, (metric, covered)
