"""forecast: the mixture fit, its closed forms, its declines, and its coverage by simulation."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.forecast import (
    GRID_A,
    GRID_B,
    Mixture,
    ReplicateCells,
    _em,
    _faces,
    _mid_term,
    _terms,
    beta_moment,
    data_bounds,
    fit_grid,
    fit_mixture,
    forecast,
    mixture_loglik,
    point_horizon,
    task_pass_hat,
)


def frame(c: np.ndarray, n: int, model: str = "m") -> pd.DataFrame:
    """Trial rows for tasks with c successes of n each."""
    passed = np.arange(n)[None, :] < np.asarray(c)[:, None]
    return pd.DataFrame(
        {
            "model": model,
            "task": np.repeat([f"t{t:03d}" for t in range(len(c))], n),
            "passed": passed.ravel(),
            "outcome": np.where(passed.ravel(), "pass", "wrong_state"),
        }
    )


@pytest.mark.parametrize(
    ("alpha", "beta", "k"), [(2.0, 1.0, 1), (0.5, 0.7, 16), (3.0, 9.0, 64), (1.0, 1.0, 128)]
)
def test_beta_moment_is_the_product_formula(alpha: float, beta: float, k: int) -> None:
    product = math.prod((alpha + i) / (alpha + beta + i) for i in range(k))
    assert beta_moment(alpha, beta, k) == pytest.approx(product, rel=1e-10)


def test_a_pure_beta_population_reproduces_the_product_formula() -> None:
    rng = np.random.default_rng(3)
    n = np.full(4000, 8)
    c = rng.binomial(n, rng.beta(2.0, 1.0, n.size))
    fit = fit_mixture(n, c)
    assert fit.share_always < 0.03 and fit.share_never < 0.03
    for k in (1, 4, 16, 64):
        expected = math.prod((2.0 + i) / (3.0 + i) for i in range(k))
        assert fit.pass_hat(k) == pytest.approx(expected, abs=0.02)


def test_a_known_mixture_is_recovered() -> None:
    rng = np.random.default_rng(4)
    truth = Mixture(0.3, 0.1, 2.0, 3.0)
    n = np.full(5000, 8)
    fit = fit_mixture(n, rng.binomial(n, truth.sample((n.size,), rng)))
    assert fit.share_always == pytest.approx(0.3, abs=0.03)
    assert fit.share_never == pytest.approx(0.1, abs=0.03)
    assert fit.pass_hat(64) == pytest.approx(truth.pass_hat(64), abs=0.03)


def test_all_pass_data_gives_share_always_one_and_declines_the_forecast() -> None:
    with pytest.warns(UserWarning, match="flaky part cannot be estimated"):
        out = forecast(frame(np.full(20, 4), 4), ks=(1, 4, 64), by=(), n_boot=50)
    assert (out["share_always"] == 1.0).all() and (out["share_never"] == 0.0).all()
    assert out["pass^k"].isna().all() and out["lo"].isna().all() and not out["given"].any()
    assert out["observed"].tolist()[:2] == [1.0, 1.0] and math.isnan(out["observed"].iloc[2])
    assert "run more trials" in out["note"].iloc[0]
    # Without the model the data still bound pass^k: high at k = n, unbounded below far beyond it.
    assert out["bound_hi"].tolist() == pytest.approx([1.0, 1.0, 1.0])
    assert out["bound_lo"].iloc[1] > 0.7 and out["bound_lo"].iloc[2] < 0.05


def test_too_few_tasks_declines_with_the_reason() -> None:
    with pytest.warns(UserWarning, match="only 6 tasks"):
        out = forecast(frame(np.array([4, 3, 2, 1, 0, 4]), 4), ks=(2, 16), by=(), n_boot=10)
    assert out["pass^k"].isna().all()
    assert out["observed"].iloc[0] == pytest.approx(np.mean(pass_hat_k(4, [4, 3, 2, 1, 0, 4], 2)))


def test_the_closed_form_equals_em_when_every_task_has_the_same_n() -> None:
    rng = np.random.default_rng(5)
    n = np.full(20, 4)
    cells = ReplicateCells.of(n, rng.binomial(4, rng.random((20, 20))))
    a, b = rng.uniform(0.1, 20, 30), rng.uniform(0.1, 20, 30)
    f_all, f_none, log_f = _terms(cells, a, b)
    mid = _mid_term(cells, log_f)
    closed = _faces(cells.all_pass, cells.all_fail, cells.flaky[:, None], mid, f_all.T, f_none.T)
    start = tuple(np.full(mid.shape, 1 / 3) for _ in range(3))
    reps = (20, *f_all.shape)
    em = _em(cells, np.broadcast_to(f_all, reps), np.broadcast_to(f_none, reps), mid, start, 3000, tol=0.0)
    assert np.all(closed[0] >= em[0] - 1e-6)  # the closed form is the maximum
    assert np.allclose(closed[0], em[0], atol=1e-3)


def brute_force_grid(n: np.ndarray, c: np.ndarray) -> tuple[int, float]:
    """The grid fit as it was first written: EM over the shares on every (n, c) pattern, at every
    grid point, from 1/3 each, for many iterations. Returns the best grid point and its loglik."""
    pairs = np.array([(m, k) for m in np.unique(n) for k in range(m + 1)])
    counts = np.array([np.sum((n == m) & (c == k)) for m, k in pairs], float)
    from scipy import stats as sps

    f = sps.betabinom.pmf(pairs[None, :, 1], pairs[None, :, 0], GRID_A[:, None], GRID_B[:, None])
    is_all, is_none = (pairs[:, 1] == pairs[:, 0]).astype(float), (pairs[:, 1] == 0).astype(float)
    w = np.full((3, GRID_A.size, 1), 1 / 3)
    for _ in range(2000):
        dens = w[0] * is_all + w[1] * is_none + w[2] * f
        ratio = counts / dens
        w = (
            w
            * np.stack([(ratio * is_all).sum(-1), (ratio * is_none).sum(-1), (ratio * f).sum(-1)])[..., None]
            / counts.sum()
        )
    dens = w[0] * is_all + w[1] * is_none + w[2] * f
    ll = (counts * np.log(np.where(counts > 0, dens, 1.0))).sum(-1)
    return int(np.argmax(ll)), float(ll.max())


def test_the_mixed_n_grid_fit_finds_the_grid_maximum_of_the_full_likelihood() -> None:
    """The cells (all-pass and all-fail per n, flaky tasks summed) and the bound-then-EM search
    give the grid point and likelihood of EM on every (n, c) at every grid point."""
    rng = np.random.default_rng(11)
    for ns in ([4, 6, 8], [8, 12, 20, 33]):
        n = rng.choice(ns, 40)
        c = rng.binomial(n, Mixture(0.3, 0.1, 2.0, 1.0).sample((2, 40), rng))
        fits = fit_grid(ReplicateCells.of(n, c))
        for r in range(2):
            g, ll = brute_force_grid(n, c[r])
            fit = Mixture(*fits[r])
            assert (fit.alpha, fit.beta) == (GRID_A[g], GRID_B[g])
            # The bootstrap's EM stops at 100 iterations (within 2e-3 of the maximum) ...
            assert mixture_loglik(n, c[r], fit) == pytest.approx(ll, abs=2e-3)
            # ... the point fit converges, and refines off the grid.
            assert mixture_loglik(n, c[r], fit_mixture(n, c[r])) >= ll - 1e-6


def test_mixed_n_is_fitted_with_every_task_s_own_n() -> None:
    rng = np.random.default_rng(6)
    truth = Mixture(0.4, 0.1, 2.0, 3.0)
    n = rng.choice([4, 6, 8], size=600)
    fit = fit_mixture(n, rng.binomial(n, truth.sample((n.size,), rng)))
    assert fit.share_always == pytest.approx(0.4, abs=0.06)
    assert fit.pass_hat(32) == pytest.approx(truth.pass_hat(32), abs=0.06)


def test_forecast_frame_columns_observed_and_groups() -> None:
    rng = np.random.default_rng(7)
    truth = Mixture(0.3, 0.1, 2.0, 1.0)
    df = pd.concat(
        [frame(rng.binomial(4, truth.sample((30,), rng)), 4, model) for model in ("a", "b")],
        ignore_index=True,
    )
    out = forecast(df, ks=(1, 4, 16), n_boot=100)
    assert out["model"].tolist() == ["a"] * 3 + ["b"] * 3
    assert out["extrapolated"].tolist() == [False, False, True] * 2
    shown = out[~out["extrapolated"]]
    assert (shown["lo"] <= shown["pass^k"]).all() and (shown["pass^k"] <= shown["hi"]).all()
    assert out.loc[out["extrapolated"], "pass^k"].isna().all()  # past n: the interval only
    assert out["hi"].is_monotonic_decreasing or (out.groupby("model")["hi"].diff().dropna() <= 1e-12).all()
    counts = df[df["model"] == "a"].groupby("task")["passed"].sum().to_numpy()
    assert out["observed"].iloc[1] == pytest.approx(np.mean(pass_hat_k(4, counts, 4)))
    assert out["share_always_lo"].iloc[0] <= out["share_always"].iloc[0] <= out["share_always_hi"].iloc[0]
    same = forecast(df, ks=(1, 4, 16), n_boot=100)
    pd.testing.assert_frame_equal(out, same)  # the same seed gives the same intervals


def test_per_task_posterior_predictive_by_hand() -> None:
    fit = Mixture(0.2, 0.1, 2.0, 2.0)
    n, c = np.array([4, 4, 4]), np.array([4, 2, 0])
    got = task_pass_hat(fit, n, c, np.array([3]))[:, 0]
    from scipy import stats as sps

    f = sps.betabinom.pmf(c, n, 2.0, 2.0)
    flaky = 0.7 * f
    post = [math.prod((2 + cc + i) / (4 + 4 + i) for i in range(3)) for cc in c]
    expected = [
        (0.2 + flaky[0] * post[0]) / (0.2 + flaky[0]),
        post[1],
        flaky[2] * post[2] / (0.1 + flaky[2]),
    ]
    assert got == pytest.approx(expected, rel=1e-9)


def test_per_task_frame() -> None:
    rng = np.random.default_rng(8)
    df = frame(rng.binomial(4, Mixture(0.3, 0.1, 2.0, 1.0).sample((25,), rng)), 4)
    out = forecast(df, ks=(2, 64), by=(), per_task=True)
    assert len(out) == 50 and {"task", "n", "c", "k", "pass^k", "observed"} <= set(out.columns)
    assert out.loc[out["k"] == 64, ["observed", "pass^k"]].isna().all().all()  # past n: no point
    within = out.loc[out["k"] == 2, "pass^k"]
    assert ((within >= 0) & (within <= 1)).all()


def test_bad_ks_are_refused() -> None:
    with pytest.raises(ValueError, match="k must be a whole number"):
        forecast(frame(np.full(20, 2), 4), ks=(0, 4), by=())


@pytest.mark.parametrize("passed", [True, False], ids=["all pass", "all fail"])
def test_never_zero_wide_on_all_pass_and_all_fail_suites(passed: bool) -> None:
    """Declined (no flaky task), so the bounds are what a user reads: never zero wide."""
    with pytest.warns(UserWarning, match="declined"):
        out = forecast(frame(np.full(30, 8 if passed else 0), 8), ks=(1, 8, 16, 64), by=(), n_boot=20)
    assert not out["given"].any()
    assert (out["bound_hi"] - out["bound_lo"] > 0.01).all(), out[["k", "bound_lo", "bound_hi"]]


def test_both_readings_are_fitted_and_the_interval_spans_them() -> None:
    rng = np.random.default_rng(9)
    df = frame(rng.binomial(8, np.where(rng.random(40) < 0.5, 0.97, 0.5)), 8)
    out = forecast(df, ks=(4, 64), by=(), n_boot=100)
    assert out["given"].all() and out["note"].iloc[0] == ""
    weight = out["weight_with_always"].iloc[0]
    assert 0 < weight < 1
    mixed = weight * out["pass^k_with_always"] + (1 - weight) * out["pass^k_without_always"]
    assert out["pass^k"].iloc[0] == pytest.approx(mixed.iloc[0])  # K = 64 > n: no point, the readings stay
    for column in ("pass^k_with_always", "pass^k_without_always"):
        assert ((out["lo"] <= out[column]) & (out[column] <= out["hi"])).all()
    assert out["share_always_lo"].iloc[0] == 0.0  # the without-always reading has none


def test_the_without_always_fit_holds_share_always_at_zero_with_mixed_n() -> None:
    rng = np.random.default_rng(10)
    n = rng.choice([4, 8], size=200)
    c = rng.binomial(n, Mixture(0.3, 0.1, 2.0, 1.0).sample((n.size,), rng))
    without = fit_mixture(n, c, always=False)
    assert without.share_always == 0.0
    assert mixture_loglik(n, c, without) <= mixture_loglik(n, c, fit_mixture(n, c)) + 1e-6


def counts_table(c: np.ndarray, trials: int) -> pd.DataFrame:
    suites, tasks = c.shape
    return pd.DataFrame(
        {"sim": np.repeat(np.arange(suites), tasks), "task": np.tile(np.arange(tasks), suites), "n": trials}
    ).assign(c=c.ravel())


def read_coverage(p: np.ndarray, truth: np.ndarray, trials: int, seed: int) -> np.ndarray:
    """Coverage of the interval a user reads (lo/hi when given, else the bounds) over suites p."""
    rng = np.random.default_rng(seed)
    c = rng.binomial(trials, p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = forecast(counts_table(c, trials), ks=(16, 64), by="sim", n_boot=100, seed=seed)
    lo = np.where(out["given"], out["lo"], out["bound_lo"]).reshape(-1, 2)
    hi = np.where(out["given"], out["hi"], out["bound_hi"]).reshape(-1, 2)
    return np.mean((lo <= truth) & (truth <= hi), axis=0)


@pytest.mark.slow
def test_coverage_on_shapes_the_mixture_does_not_describe() -> None:
    """A small benchmarks/forecast_validation.py: 50 suites of 40 tasks per truth. The target is
    95 % (≥ 90 % promised); 50 suites put the binomial SD of a 95 % coverage near 3 points, so the
    bound 86 % is three SDs below it, and far above the one-model interval's 52–57 % here."""
    rng = np.random.default_rng(14)
    ks = np.array([16, 64])
    three_point = rng.choice([0.0, 0.6, 0.95], p=[0.15, 0.5, 0.35], size=(50, 40))
    truth = 0.5 * 0.6**ks + 0.35 * 0.95**ks
    assert (read_coverage(three_point, truth, 8, seed=15) >= 0.86).all()
    two_point = np.where(rng.random((50, 40)) < 0.5, 0.97, 0.5)
    truth = 0.5 * 0.5**ks + 0.5 * 0.97**ks
    assert (read_coverage(two_point, truth, 4, seed=16) >= 0.86).all()


@pytest.mark.slow
def test_the_model_free_bounds_cover_a_population_the_model_does_not_describe() -> None:
    """Two clusters of p (0.5 and 0.97): the mixture's interval covers pass^64 only about half the
    time (benchmarks/forecast_validation.py), the model-free bounds every time here."""
    rng = np.random.default_rng(13)
    ks = np.array([4, 16, 64])
    truth = 0.5 * 0.5**ks + 0.5 * 0.97**ks
    n = np.full(40, 4)
    hits = []
    for _ in range(60):
        c = rng.binomial(n, np.where(rng.random(40) < 0.5, 0.97, 0.5))
        bounds = data_bounds(n, c, ks, 0.95)
        hits.append((bounds[:, 0] <= truth) & (truth <= bounds[:, 1]))
    assert (np.mean(hits, axis=0) >= 0.95).all()


def test_counts_the_mixture_does_not_describe_decline_the_forecast_beyond_n() -> None:
    """Tasks nearly but not quite certain (60 % at p = 0.98, 40 % at 0.02): the fit check flags
    the counts, so pass^k beyond n is NaN, not given, with a warning; the bounds stay."""
    c = np.r_[np.full(21, 8), np.full(5, 7), np.full(12, 0), np.full(2, 1)]
    with pytest.warns(UserWarning, match="shape the mixture does not describe"):
        out = forecast(frame(c, 8), ks=(4, 8, 64), by=(), n_boot=200)
    assert out["given"].tolist() == [True, True, False]
    assert out["pass^k"].iloc[:2].notna().all() and np.isnan(out["pass^k"].iloc[2])
    assert np.isnan(out["lo"].iloc[2]) and out["bound_lo"].iloc[2] <= 0.165 <= out["bound_hi"].iloc[2]
    assert "fit check" in out["note"].iloc[2]


@pytest.mark.parametrize(
    ("shares", "values", "tasks", "trials", "seed"),
    [
        ([0.4, 0.6], [0.02, 0.98], 40, 8, 21),  # nearly certain tasks: the model alone covered ~1/3
        ([0.4, 0.6], [0.02, 0.98], 40, 4, 23),
        ([0.4, 0.6], [0.02, 0.98], 20, 8, 24),
        ([0.25, 0.1, 0.65], [1.0, 0.0, -1.0], 40, 4, 22),  # -1: Uniform(0.5, 0.95)
    ],
    ids=["near-certain T40 n8", "near-certain T40 n4", "near-certain T20 n8", "uniform rest"],
)
def test_coverage_on_near_certain_and_uniform_truths(
    shares: list[float], values: list[float], tasks: int, trials: int, seed: int
) -> None:
    """A small benchmarks/forecast_validation.py on its near-certain truths (40 suites): what a user
    reads covers pass^16 and pass^64 like the promise. Before the all-pass floor
    (:func:`all_pass_floor`) the suites the fit check let through put the all-pass tasks at p = 1
    and missed pass^64 (0.165) in 10–20 % of suites."""
    rng = np.random.default_rng(seed)
    p = rng.choice(values, p=shares, size=(40, tasks))
    p = np.where(p < 0, rng.uniform(0.5, 0.95, p.shape), p)
    ks = np.array([16, 64])
    if values[0] == 0.02:
        truth = 0.4 * 0.02**ks + 0.6 * 0.98**ks
    else:
        truth = 0.25 + 0.65 * (0.95 ** (ks + 1) - 0.5 ** (ks + 1)) / ((ks + 1) * 0.45)
    assert (read_coverage(p, truth, trials, seed=seed + 100) >= 0.9).all()


def test_beyond_the_point_horizon_only_the_interval_is_given_and_it_covers() -> None:
    """Nearly certain tasks (40 % at p = 0.02, 60 % at 0.98; T = 40, n = 8): the point forecast of
    pass^64 (truth 0.165) was 0.15–0.3 high in the suites the fit check lets through
    (benchmarks/forecast_validation.py --bias), so past :func:`point_horizon` it is NaN with a
    note, while the interval a user reads still covers; up to the horizon the point is shown."""
    rng = np.random.default_rng(40)
    c = rng.binomial(8, rng.choice([0.02, 0.98], p=[0.4, 0.6], size=(12, 40)))
    horizon = point_horizon(8)
    ks = np.array(sorted({1, 8, horizon, horizon + 1, 64}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = forecast(counts_table(c, 8), ks=tuple(ks), by="sim", n_boot=100, seed=41)
    given = out["given"]
    beyond = out["k"] > horizon
    assert given[beyond].any()  # the fit check lets some suites through past n
    assert out.loc[beyond, "pass^k"].isna().all()
    assert out.loc[beyond & given, "note"].str.startswith(f"point not shown beyond K = {horizon} ").all()
    assert (out.loc[beyond & given, "lo"] < out.loc[beyond & given, "hi"]).all()
    assert out.loc[~beyond & given, "pass^k"].notna().all()
    assert not out.loc[~beyond & given, "note"].str.startswith("point not shown").any()
    at64 = out[out["k"] == 64]
    truth = 0.4 * 0.02**64 + 0.6 * 0.98**64
    lo = np.where(at64["given"], at64["lo"], at64["bound_lo"])
    hi = np.where(at64["given"], at64["hi"], at64["bound_hi"])
    assert np.mean((lo <= truth) & (truth <= hi)) >= 0.9


def test_per_task_points_stop_at_each_task_s_horizon() -> None:
    rng = np.random.default_rng(42)
    n = np.repeat([4, 8], 15)
    c = rng.binomial(n, Mixture(0.3, 0.1, 2.0, 1.0).sample((n.size,), rng))
    table = pd.DataFrame({"task": np.arange(n.size), "n": n, "c": c})
    ks = np.array(sorted({2, point_horizon(4), point_horizon(4) + 1, point_horizon(8), 64}))
    out = forecast(table, ks=tuple(ks), by=(), per_task=True)
    shown = out["pass^k"].notna()
    assert (shown == (out["k"] <= out["n"])).all()
    assert out.loc[~shown, "note"].str.startswith("point not shown").all()


def test_bootstrap_cells_are_the_counts_of_suites_drawn_task_by_task() -> None:
    """Cells drawn per n as one multinomial have the same expected counts as suites drawn task
    by task (p from the mixture, then c), for each kind of cell."""
    fit, n = Mixture(0.3, 0.1, 2.0, 1.0), np.repeat([4, 9], [30, 20])
    drawn = ReplicateCells.draw(fit, n, 4000, np.random.default_rng(30))
    rng = np.random.default_rng(31)
    by_task = ReplicateCells.of(n, rng.binomial(n, fit.sample((4000, n.size), rng)))
    for got, want in ((drawn.all_pass, by_task.all_pass), (drawn.all_fail, by_task.all_fail)):
        assert got.mean(0) == pytest.approx(want.mean(0), abs=0.15)
    assert drawn.flaky.mean() == pytest.approx(by_task.flaky.mean(), abs=0.2)


def test_cells_of_tasks_with_very_many_trials_stay_small() -> None:
    """Pattern keys are (distinct n, c), so one task with 200,000 trials costs no 200,000² table."""
    n = np.array([3, 3, 200_000])
    cells = ReplicateCells.of(n, np.array([[1, 2, 150_000]]))
    assert cells.pattern_n.tolist() == [3, 3, 200_000] and cells.pattern_c.tolist() == [1, 2, 150_000]
    assert cells.flaky.tolist() == [3.0]
