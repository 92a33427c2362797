"""plan: variance components, predicted half-widths of the shipped intervals and power against
simulation, rho from a two-arm pilot, budgets, costs."""

from __future__ import annotations

import warnings
from contextlib import nullcontext

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from passk_nb.stats import summary
from passk_nb.stats.design import (
    Population,
    components,
    detectable,
    fixed_look,
    gate_halfwidth,
    paired_power,
    pilot_population,
    plan,
    plan_trials,
    two_arms,
)
from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.forecast import Mixture
from passk_nb.stats.paired import compare
from passk_nb.stats.summary import summarize

TRUTH = Mixture(0.3, 0.1, 2.0, 1.0)


def pilot_frame(p: np.ndarray, n: int, rng: np.random.Generator) -> pd.DataFrame:
    passed = rng.random((p.size, n)) < p[:, None]
    return pd.DataFrame(
        {
            "task": np.repeat([f"t{t:03d}" for t in range(p.size)], n),
            "passed": passed.ravel(),
            "outcome": np.where(passed.ravel(), "pass", "wrong_state"),
            "input_tokens": 1000,
            "output_tokens": 200,
            "latency_s": 3.0,
        }
    )


def test_components_match_a_direct_computation() -> None:
    pop = Population(atoms=np.array([0.2, 0.7, 0.95]))
    mean, between, within = components(pop, 2, 5)
    values = pop.atoms**2
    x = np.asarray(pass_hat_k(5, np.arange(6), 2))
    var_x = [np.sum(sps.binom.pmf(np.arange(6), 5, p) * x**2) - p**4 for p in pop.atoms]
    assert mean == pytest.approx(values.mean())
    assert between == pytest.approx(values.var())
    assert within == pytest.approx(np.mean(var_x))


def test_mixture_and_atom_populations_agree_on_point_masses() -> None:
    mix = Population(mixture=Mixture(0.5, 0.5, 1.0, 1.0))
    atoms = Population(atoms=np.array([0.0, 1.0]))
    assert components(mix, 3, 6) == pytest.approx(components(atoms, 3, 6))


def suites_table(p: np.ndarray, n: int, rng: np.random.Generator, **columns: object) -> pd.DataFrame:
    """A counts table of suites: p (suites, tasks); suite s is group sim = s."""
    suites, tasks = p.shape
    return pd.DataFrame(
        {"sim": np.repeat(np.arange(suites), tasks), "task": np.tile(np.arange(tasks), suites), "n": n}
        | {"c": rng.binomial(n, p).ravel()}
        | columns
    )


@pytest.mark.parametrize("k", [1, 4])
def test_predicted_halfwidths_are_those_summarize_ships_within_15_percent(k: int) -> None:
    """The truth's suites run through summarize: the half-widths users get (the old prediction, a
    t interval and the true re-roll spread, missed the shipped fixed-task interval by 30 %)."""
    rng = np.random.default_rng(20 + k)
    pilot = pilot_frame(TRUTH.sample((100,), rng), 8, rng)
    grid = [(10, 4), (20, 8), (40, 16), (40, 4)]
    predicted = plan(pilot, k=k, tasks=[10, 20, 40], trials=[4, 8, 16]).set_index(
        ["tasks", "trials_per_task"]
    )
    for tasks, n in grid:
        out = summarize(suites_table(TRUTH.sample((1000, tasks), rng), n, rng), k=k, by="sim")
        row = predicted.loc[(tasks, n)]
        measured_new = float((out["pass^k_hi"] - out["pass^k_lo"]).mean()) / 2
        measured_these = float((out["pass^k_fixed_hi"] - out["pass^k_fixed_lo"]).mean()) / 2
        assert row["halfwidth_new"] == pytest.approx(measured_new, rel=0.15), (tasks, n)
        assert row["halfwidth_these"] == pytest.approx(measured_these, rel=0.15), (tasks, n)


def test_predicted_halfwidths_follow_the_interval_summarize_ships(monkeypatch: pytest.MonkeyPatch) -> None:
    """plan calls the shipped intervals: were the fixed-task interval twice as wide, so is the plan."""
    rng = np.random.default_rng(24)
    pilot = pilot_frame(TRUTH.sample((40,), rng), 8, rng)
    before = plan(pilot, k=2, tasks=[40], trials=[8])["halfwidth_these"].iloc[0]
    shipped = summary.fixed_interval

    def twice(value: np.ndarray, se: np.ndarray, ci: float) -> tuple[np.ndarray, np.ndarray]:
        return shipped(value, 2 * se, ci)

    monkeypatch.setattr(summary, "fixed_interval", twice)
    after = plan(pilot, k=2, tasks=[40], trials=[8])["halfwidth_these"].iloc[0]
    assert after == pytest.approx(2 * before, rel=0.05)


def test_a_two_arm_pilot_gives_its_own_rho_and_the_power_compare_has() -> None:
    """Arm b fails a third less often on every task. The default rho = 0.5 predicts less power
    than compare has; the pilot's own rho predicts what compare detects."""
    rng = np.random.default_rng(25)
    k, n, tasks = 2, 8, 40

    def arms(p_a: np.ndarray) -> np.ndarray:
        return 1 - (1 - p_a) * 2 / 3

    p_a = TRUTH.sample((tasks,), rng)
    pilot = pd.concat(
        [pilot_frame(p_a, n, rng).assign(prompt="a"), pilot_frame(arms(p_a), n, rng).assign(prompt="b")]
    )
    big = TRUTH.sample((400_000,), rng)
    diff = float(np.mean(arms(big) ** k - big**k))
    out = plan(pilot, on="prompt", a="a", b="b", k=k, tasks=[tasks], trials=[n], diff=diff).iloc[0]
    true_rho = np.corrcoef(big**k, arms(big) ** k)[0, 1]
    assert out["rho_source"] == "pilot" and out["rho"] == pytest.approx(true_rho, abs=0.15)
    one_arm = plan(pilot[pilot["prompt"] == "a"], k=k, tasks=[tasks], trials=[n], diff=diff).iloc[0]
    assert one_arm["rho_source"].startswith("default") and one_arm["rho"] == 0.5

    p = TRUTH.sample((1000, tasks), rng)
    suites = pd.concat(
        [suites_table(p, n, rng, prompt="a"), suites_table(arms(p), n, rng, prompt="b")], ignore_index=True
    )
    hat = compare(suites, on="prompt", a="a", b="b", k=k, by="sim").query("metric == 'pass^k'")
    simulated = float(((hat["lo"] > 0) | (hat["hi"] < 0)).mean())
    assert abs(out["power_new"] - simulated) < 0.10, (out["power_new"], simulated)
    assert one_arm["power_new"] < simulated - 0.1  # what the default would have promised


@pytest.mark.parametrize("p", [1.0, 0.0])
def test_no_prediction_is_zero_wide_on_all_pass_or_all_fail_pilots(p: float) -> None:
    pilot = pilot_frame(np.full(8, p), 4, np.random.default_rng(0))
    with pytest.warns(UserWarning, match="mdd_new is NaN for 8×4") if p == 1 else nullcontext():
        out = plan(pilot, k=2, tasks=[8, 16, 64], trials=[4, 8])
    for column in ("halfwidth_new", "halfwidth_these", "mdd_these"):
        assert (out[column] > 0).all(), column
    # a pilot at its ceiling leaves an arm b little to gain: declined where no difference it can
    # have is detected with power 0.8 (8 tasks), never 0
    assert (out["mdd_new"].isna() | (out["mdd_new"] > 0)).all()
    assert (out.loc[out["tasks"] == 64, "mdd_new"] > 0).all()


def test_below_five_tasks_the_new_task_predictions_are_declined_like_the_intervals() -> None:
    rng = np.random.default_rng(3)
    pilot = pilot_frame(TRUTH.sample((20,), rng), 4, rng)
    with pytest.warns(UserWarning, match=r"mdd_new is NaN for 5×4 \(tasks×trials\): no arm b") as seen:
        out = plan(pilot, k=1, tasks=[4, 5], trials=[4]).set_index("tasks")
    assert out.loc[4, ["halfwidth_new", "mdd_new", "power_new"]].isna().all()
    assert out.loc[5, ["halfwidth_new", "power_new"]].notna().all()
    # at 5 tasks × 4 trials compare reaches 0.8 for no difference this arm b can have: said, not
    # the 4-task decline (which is silent, as summarize's)
    assert not any("4×4" in str(w.message) for w in seen)
    assert (out[["halfwidth_these", "mdd_these", "power_these"]] > 0).all().all()


def test_two_arm_and_rho_validation() -> None:
    pilot = pilot_frame(TRUTH.sample((12,), np.random.default_rng(1)), 4, np.random.default_rng(2))
    with pytest.raises(ValueError, match="needs both arms named"):
        plan(pilot.assign(prompt="a"), on="prompt", k=1)
    with pytest.raises(ValueError, match="not in the frame"):
        plan(pilot.assign(prompt="a"), on="prompt", a="a", b="z", k=1)
    with pytest.raises(ValueError, match="rho is a correlation"):
        plan(pilot, k=1, rho=1.5)
    given = plan(pilot, k=1, tasks=[12], trials=[4], rho=0.9)
    assert given["rho_source"].iloc[0] == "given" and given["rho"].iloc[0] == 0.9


@pytest.mark.parametrize(("k", "n", "tasks", "improved"), [(1, 4, 30, 0.3), (2, 4, 20, 0.4), (4, 8, 40, 0.2)])
def test_predicted_power_matches_simulated_power_within_10_points(
    k: int, n: int, tasks: int, improved: float
) -> None:
    """Arm B fixes a random share of arm A's tasks (p becomes 1); the paired t-test over tasks."""
    rng = np.random.default_rng(30 + k)
    arm_b = Mixture(
        improved + (1 - improved) * TRUTH.share_always, (1 - improved) * TRUTH.share_never, 2.0, 1.0
    )
    gap = 1 - Population(mixture=TRUTH).moment(k)  # E[1 - p^k]
    gap2 = 1 - 2 * Population(mixture=TRUTH).moment(k) + Population(mixture=TRUTH).moment(2 * k)
    diff = improved * gap
    between = improved * gap2 - diff**2
    within = components(Population(mixture=TRUTH), k, n)[2] + components(Population(mixture=arm_b), k, n)[2]
    predicted = paired_power(diff, between + within, tasks)

    p_a = TRUTH.sample((4000, tasks), rng)
    p_b = np.where(rng.random(p_a.shape) < improved, 1.0, p_a)
    d = np.asarray(pass_hat_k(n, rng.binomial(n, p_b), k)) - np.asarray(
        pass_hat_k(n, rng.binomial(n, p_a), k)
    )
    t = d.mean(1) / (d.std(1, ddof=1) / np.sqrt(tasks))
    simulated = np.mean(np.abs(t) > sps.t.ppf(0.975, tasks - 1))
    assert abs(predicted - simulated) < 0.10, (predicted, simulated)


@pytest.mark.parametrize("floor", [0.0, 0.01, 0.2])
@pytest.mark.parametrize("new_tasks", [True, False])
def test_the_detectable_difference_has_the_asked_power(floor: float, new_tasks: bool) -> None:
    """With and without the shipped test's variance floor binding (var_diff = 0.05)."""
    mdd = detectable(0.05, 40, new_tasks=new_tasks, floor=floor)
    assert paired_power(mdd, 0.05, 40, new_tasks=new_tasks, floor=floor) == pytest.approx(0.8, abs=0.01)
    rng = np.random.default_rng(40)
    row = plan(pilot_frame(TRUTH.sample((40,), rng), 8, rng), k=2, tasks=[40], trials=[8], rho=0.5).iloc[0]
    assert 0 < row["mdd_these"] < row["mdd_new"]


def test_trials_needed_reach_the_power_with_these_tasks() -> None:
    rng = np.random.default_rng(41)
    out = plan(pilot_frame(TRUTH.sample((40,), rng), 8, rng), k=2, tasks=[40], trials=[8], diff=0.1)
    needed = int(out["trials_needed_these"].iloc[0])
    again = plan(pilot_frame(TRUTH.sample((40,), rng), 8, rng), k=2, tasks=[40], trials=[needed], diff=0.1)
    assert again["power_these"].iloc[0] >= 0.75


def test_budget_splits_and_costs() -> None:
    rng = np.random.default_rng(42)
    pilot = pilot_frame(TRUTH.sample((30,), rng), 8, rng)
    out = plan(pilot, k=4, budget=960, price_in=3.0, price_out=15.0, concurrency=4)
    assert (out["trials"] <= 960).all() and (out["trials_per_task"] >= 4).all()
    assert out["best"].sum() >= 1
    best = out[out["best"]].iloc[0]
    assert best["halfwidth_new"] == out["halfwidth_new"].min()
    row = out.iloc[0]
    assert row["cost_usd"] == pytest.approx(row["trials"] * (1000 * 3.0 + 200 * 15.0) / 1e6)
    assert row["wall_s"] == pytest.approx(row["trials"] * 3.0 / 4)


def test_without_prices_the_cost_is_unknown_and_several_configurations_are_refused() -> None:
    rng = np.random.default_rng(43)
    pilot = pilot_frame(TRUTH.sample((12,), rng), 4, rng)
    assert plan(pilot, k=1, tasks=[12], trials=[4])["cost_usd"].isna().all()
    two = pd.concat([pilot.assign(model="a"), pilot.assign(model="b")])
    with pytest.raises(ValueError, match="plan one at a time"):
        plan(two, k=1)


def test_an_all_pass_pilot_still_has_within_task_noise() -> None:
    pilot = pilot_frame(np.ones(5), 4, np.random.default_rng(0))
    out = plan(pilot, k=1, tasks=[5], trials=[4])
    assert out["population"].iloc[0] == "pilot tasks (shrunk)"
    assert out["halfwidth_these"].iloc[0] > 0


def draw_arms(
    mix: Mixture, r: float, shift: float, size: tuple[int, int], rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Two arms' p from the joint population, written out independently of stats/design/: latent
    normals with correlation r, the mixture's inverse CDF by scipy, arm b's log-odds + shift."""
    z_a = rng.standard_normal(size)
    z_b = r * z_a + np.sqrt(1 - r**2) * rng.standard_normal(size)

    def inverse(u: np.ndarray) -> np.ndarray:
        beta = sps.beta.ppf(np.clip((u - mix.share_never) / mix.share_flaky, 0, 1), mix.alpha, mix.beta)
        return np.where(u < mix.share_never, 0.0, np.where(u >= 1 - mix.share_always, 1.0, beta))

    p_a, p_b = inverse(sps.norm.cdf(z_a)), inverse(sps.norm.cdf(z_b))
    with np.errstate(divide="ignore"):
        p_b = 1 / (1 + (1 - p_b) / p_b * np.exp(-shift)) if shift else p_b
    return p_a, np.nan_to_num(p_b, nan=0.0)


@pytest.mark.parametrize(
    ("k", "tasks", "trials", "diff", "rho"), [(1, 30, 8, 0.1, 0.8), (2, 40, 8, 0.1, 0.5)]
)
def test_plan_power_is_the_rejection_rate_of_compare_on_its_population(
    k: int, tasks: int, trials: int, diff: float, rho: float
) -> None:
    """plan's power_new is the share of suites in which compare() rejects, on suites drawn (here, by
    code of the test's own) from the population plan simulates: the pilot's fitted mixture for both
    arms, b shifted to differ by diff, their p^k correlated by rho. Monte-Carlo tolerance 0.06:
    plan's 2,000 suites and the test's 2,000 give a standard error of the gap of at most
    √(2 · 0.25 / 2000) = 0.016, so 0.06 is 3.8 standard errors. power_these (a formula) is held
    to the same tolerance against compare's fixed-task test on task sets that differ by diff."""
    rng = np.random.default_rng(50 + k)
    pilot = pilot_frame(TRUTH.sample((60,), rng), 8, rng)
    table = pilot.groupby("task")["passed"].agg(["size", "sum"])
    pop = pilot_population(table["size"].to_numpy(), table["sum"].to_numpy())
    assert pop.mixture is not None
    row = plan(
        pilot, k=k, tasks=[tasks], trials=[trials], diff=diff, rho=rho, power_suites=2000, seed=7
    ).iloc[0]
    joint = two_arms(pop, pop, k, diff, rho)
    assert joint is not None

    big_a, big_b = draw_arms(pop.mixture, joint.r, joint.shift, (400_000, 1), rng)
    assert np.mean(big_b**k - big_a**k) == pytest.approx(diff, abs=0.004)  # the population asked for
    assert np.corrcoef(big_a.ravel() ** k, big_b.ravel() ** k)[0, 1] == pytest.approx(rho, abs=0.03)

    def rejections(p_a: np.ndarray, p_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        two = pd.concat(
            [suites_table(p_a, trials, rng, prompt="a"), suites_table(p_b, trials, rng, prompt="b")],
            ignore_index=True,
        )
        out = compare(two, on="prompt", a="a", b="b", k=k, by="sim").query("metric == 'pass^k'")
        return ((out["lo"] > 0) | (out["hi"] < 0)).to_numpy(), (
            out["fixed_lo"] * out["fixed_hi"] > 0
        ).to_numpy()

    new, _ = rejections(*draw_arms(pop.mixture, joint.r, joint.shift, (2000, tasks), rng))
    assert row["power_new"] == pytest.approx(new.mean(), abs=0.06), (row["power_new"], new.mean())
    # these tasks: task sets whose own difference is diff (drawn many, the near ones kept)
    p_a, p_b = draw_arms(pop.mixture, joint.r, joint.shift, (40_000, tasks), rng)
    near = np.abs(np.mean(p_b**k - p_a**k, axis=1) - diff) <= 0.003
    _, these = rejections(p_a[near][:2000], p_b[near][:2000])
    assert near.sum() >= 1000
    assert row["power_these"] == pytest.approx(these.mean(), abs=0.06), (row["power_these"], these.mean())
    assert 0.1 < new.mean() < 0.9 and 0.1 < these.mean() < 0.99  # a design where power can be wrong


def test_a_difference_the_pilot_cannot_reach_has_no_power_and_says_so() -> None:
    """Suite pass@1 near 0.7: no arm b like the pilot's gains 0.9 on it (a log-odds shift moves no
    task past p = 1), so the simulated power_new is NaN with a warning naming the reachable range."""
    rng = np.random.default_rng(60)
    pilot = pilot_frame(TRUTH.sample((40,), rng), 8, rng)
    with pytest.warns(UserWarning, match=r"differs from arm a by diff=0\.9"):
        out = plan(pilot, k=1, tasks=[40], trials=[8], diff=0.9)
    assert out["power_new"].isna().all()
    assert (out["power_these"] > 0).all()  # the formula answers for these tasks, as before
    with pytest.raises(ValueError, match="power_suites must be"):
        plan(pilot, k=1, power_suites=10)


def test_a_batch_plan_waits_one_batch_per_turn_of_the_longest_trial():
    rng = np.random.default_rng(3)
    pilot = pd.DataFrame({"task": np.repeat(np.arange(12), 4), "passed": rng.random(48) < 0.7})
    pilot["outcome"] = np.where(pilot["passed"], "pass", "wrong_state")
    pilot["n_turns"] = rng.integers(1, 6, 48)
    pilot["latency_s"] = 2.0
    out = plan(pilot, k=1, batch_latency_s=900.0, concurrency=8)
    rounds = int(pilot["n_turns"].max())
    assert (out["wall_s"] == rounds * 900.0).all()  # however many trials: they share each batch
    plain = plan(pilot, k=1, concurrency=8)
    assert (plain["wall_s"] == plain["trials"] * 2.0 / 8).all()
    assert np.isnan(plan(pilot.drop(columns="n_turns"), k=1, batch_latency_s=900.0)["wall_s"]).all()
    with pytest.raises(ValueError, match="batch_latency_s is the seconds one batch takes"):
        plan(pilot, k=1, batch_latency_s=0)


def test_the_new_task_mdd_fed_back_as_diff_has_the_asked_power() -> None:
    """mdd_new and power_new answer one question: plan's power at diff = its own mdd_new, from an
    independent simulation (seed 7, 1,600 suites at T = 40), is 0.80. Monte-Carlo tolerance 0.06:
    the mdd's own 800 suites move the power it lands on by ≤ 0.015 (sd) and the check's by 0.010."""
    rng = np.random.default_rng(60)
    pilot = pilot_frame(TRUTH.sample((60,), rng), 8, rng)
    for k, trials in ((1, 4), (2, 8)):
        out = plan(pilot, k=k, tasks=[40], trials=[trials], rho=0.6)
        mdd = float(out["mdd_new"].iloc[0])
        again = plan(pilot, k=k, tasks=[40], trials=[trials], rho=0.6, diff=mdd, seed=7, power_suites=2000)
        power = again["power_new"].iloc[0]
        assert power == pytest.approx(0.8, abs=0.06), (k, mdd, power)
        assert plan(pilot, k=k, tasks=[40], trials=[trials], rho=0.6, power=0.5)["mdd_new"].iloc[0] < mdd


def test_the_new_task_mdd_is_declined_where_no_arm_b_reaches_the_power() -> None:
    """Nine tasks in ten always pass: no arm b like this one gains more than the flaky tenth, which
    five tasks cannot detect with power 0.8; the formula would have printed a difference anyway."""
    p = np.r_[np.ones(45), np.full(5, 0.5)]
    pilot = pilot_frame(p, 8, np.random.default_rng(61))
    out = plan(pilot, k=1, tasks=[5, 400], trials=[8]).set_index("tasks")
    assert np.isnan(out.loc[5, "mdd_new"])
    assert 0 < out.loc[400, "mdd_new"] < 0.1


def _first_row(pilot: pd.DataFrame, k: int, target: float, **kwargs: object) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # plan's power columns on a one-arm pilot: not asked here
        rows = plan(pilot, k=k, trials=[k * m for m in range(1, 65)], **kwargs)  # type: ignore[arg-type]
    return int(rows[rows["halfwidth_these"] <= target]["trials_per_task"].iloc[0])


def test_plan_trials_is_the_plan_row_that_answers_the_question() -> None:
    """The fixed design's n for a question is plan()'s own first row that reaches it: the
    precision, gate_halfwidth of the pilot's distance to a gate, h/√2 per arm of a comparison."""
    rng = np.random.default_rng(3)
    pilot = pilot_frame(rng.beta(2, 1, 12), 8, rng)
    assert plan_trials(pilot, "precision=0.08 k=2") == _first_row(pilot, 2, 0.08, tasks=[12])
    c = pilot.groupby("task")["passed"].sum().to_numpy()
    room = gate_halfwidth(float(np.mean(pass_hat_k(np.full(12, 8), c, 2))) - 0.3)
    assert plan_trials(pilot, "gate=0.3 k=2") == _first_row(pilot, 2, room, tasks=[12])
    two = pd.concat([pilot.assign(arm="a"), pilot_frame(rng.beta(2, 1, 12), 8, rng).assign(arm="b")])
    n_b = plan_trials(two, "compare=arm:a,b precision=0.1 k=1")
    assert n_b >= plan_trials(pilot, "precision=0.1 k=1") and n_b >= 1


def test_a_gate_design_from_plan_trials_clears_the_gate_with_about_its_power() -> None:
    """Sized by plan_trials, a fixed run of N trials per task clears a gate 0.05 below pass^k in
    about 80 % of re-runs (the fixed-n interval summarize reports, re-run from the pilot's own
    rates, so that its estimate is the truth); sized for a half-width equal to the gap it clears
    it only about half the time."""
    rng = np.random.default_rng(8)
    pilot = pilot_frame(rng.beta(4, 1, 20), 64, rng)
    p = pilot.groupby("task")["passed"].mean().to_numpy()  # the pilot's rates, taken as the truth
    gate = round(float(np.mean(p)) - 0.05, 4)
    w = np.full(p.size, 1 / p.size)

    def cleared(n: int) -> float:
        draws = (fixed_look(np.full(p.size, n), rng.binomial(n, p), w, 1, 0.95)[1] for _ in range(400))
        return float(np.mean([lo >= gate for lo in draws]))

    powered, half = plan_trials(pilot, f"gate={gate}"), plan_trials(pilot, "precision=0.05")
    assert powered > half
    assert 0.72 <= cleared(powered) <= 0.95 and cleared(half) <= 0.62, (powered, half)


def test_plan_trials_says_what_is_reachable_when_it_refuses() -> None:
    """Issue 49: a gate 0.05 away on Uniform(0.7, 1), T = 10, k = 2 was refused with no more; the
    refusal now names the gap the largest design resolves, and a gate that far away is answered."""
    import re

    rng = np.random.default_rng(3)
    pilot = pilot_frame(rng.uniform(0.7, 1.0, 10), 8, rng)
    n, c = pilot.groupby("task")["passed"].agg(["size", "sum"]).to_numpy().T
    estimate = float(np.mean(pass_hat_k(n, c, 2)))
    with pytest.raises(ValueError, match="resolves a gate at least") as caught:
        plan_trials(pilot, f"gate={estimate - 0.01:.4f} k=2", most=8, n_sim=2000)
    gap = float(re.search(r"resolves a gate at least ([0-9.]+)", str(caught.value)).group(1))
    assert gap > 0.01
    assert plan_trials(pilot, f"gate={estimate - 1.05 * gap:.4f} k=2", most=8, n_sim=2000) <= 16
    with pytest.raises(ValueError, match=r"the narrowest, \d+ trials per task, gives ± 0\.\d+"):
        plan_trials(pilot, "precision=0.001 k=2", most=8, n_sim=2000)


@pytest.mark.parametrize(
    ("question", "message"),
    [
        ("compare=arm:a,b", "a fixed design for a comparison is sized for a precision"),
        ("precision=0.001", "no fixed design of up to 64 trials per task reaches"),
    ],
)
def test_plan_trials_refuses_what_no_fixed_design_answers(question: str, message: str) -> None:
    rng = np.random.default_rng(1)
    pilot = pilot_frame(np.full(6, 0.5), 4, rng)
    two = pd.concat([pilot.assign(arm="a"), pilot.assign(arm="b")])
    with pytest.raises(ValueError, match=message):
        plan_trials(two if question.startswith("compare") else pilot, question)


def _power_through_compare(joints, k, designs, alpha=0.05, suites=800, seed=0):  # type: ignore[no-untyped-def]
    """simulated_power as it was: every suite through compare's whole frame (PairedTasks.from_counts,
    paired_frame, differs), every design's p drawn afresh."""
    from passk_nb.stats.design.population import shifted
    from passk_nb.stats.paired import PairedTasks, differs, paired_frame
    from passk_nb.stats.params import MIN_TASKS, N_BOOT, PAIRED_METHOD

    normals, parts, sizes = {}, [], []
    for (tasks, trials), arms in zip(designs, joints, strict=True):
        if tasks not in normals:
            rng = np.random.default_rng([seed, 2, tasks])
            size = (min(suites, max(200, 64_000 // tasks)), tasks)
            normals[tasks] = (rng.standard_normal(size), rng.standard_normal(size))
        p_a, p_b = arms.sample(*normals[tasks])
        rng = np.random.default_rng([seed, 2, tasks, trials])
        c_a, c_b = rng.binomial(trials, p_a), rng.binomial(trials, shifted(p_b, arms.shift))
        parts.append((np.full(c_a.size, trials), c_a.ravel(), c_b.ravel()))
        sizes.append(len(p_a))
    n, c_a, c_b = (np.concatenate(column) for column in zip(*parts, strict=True))
    gid = np.repeat(np.arange(sum(sizes)), np.repeat([tasks for tasks, _ in designs], sizes))
    paired = PairedTasks.from_counts(
        ("group",), k, gid, pd.DataFrame({"group": np.arange(sum(sizes))}), n, c_a, n, c_b
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        frame = paired_frame(
            paired, ci=1 - alpha, n_boot=N_BOOT, seed=seed, method=PAIRED_METHOD, min_tasks=MIN_TASKS
        )
    new, _ = differs(frame[frame["metric"] == "pass^k"].sort_values("group"))
    power = np.bincount(np.repeat(np.arange(len(designs)), sizes), new, len(designs)) / np.asarray(sizes)
    return np.where([tasks < MIN_TASKS for tasks, _ in designs], np.nan, power)


@pytest.mark.parametrize("seed", range(3))
def test_simulated_power_equals_compares_whole_frame(seed: int) -> None:
    """Speed (#47 §2): simulated_power reads compare's pass^k interval without building compare's
    frame, and the designs of one T share their arms' draws; the powers are the same, bit for bit."""
    from passk_nb.stats.design import simulated_power, two_arms

    rng = np.random.default_rng(seed)
    pop = Population(mixture=Mixture(rng.uniform(0, 0.3), rng.uniform(0, 0.2), 2.0, 1.0))
    other = Population(atoms=rng.beta(2, 1, 30))
    designs = [(40, 2), (40, 5), (120, 3), (3, 4), (120, 8)]
    joint = two_arms(pop, other, 2, 0.05, 0.6)
    joints = [two_arms(pop, other, 2, d, 0.6) for d in (0.02, 0.05, 0.08, 0.05, 0.1)]
    for given in (joint, joints):
        expected = _power_through_compare([given] * 5 if given is joint else given, 2, designs, seed=seed)
        np.testing.assert_array_equal(simulated_power(given, 2, designs, seed=seed), expected)


class _CountingRng:
    """A numpy Generator that adds the size of every binomial draw to ``drawn``."""

    def __init__(self, rng: np.random.Generator, drawn: list[int]) -> None:
        self._rng, self._drawn = rng, drawn

    def binomial(self, n, p, size=None):  # type: ignore[no-untyped-def]
        out = self._rng.binomial(n, p, size)
        self._drawn.append(int(np.size(out)))
        return out

    def __getattr__(self, name: str) -> object:
        return getattr(self._rng, name)


def _count_binomials(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    drawn: list[int] = []
    make = np.random.default_rng
    monkeypatch.setattr(np.random, "default_rng", lambda *a, **kw: _CountingRng(make(*a, **kw), drawn))
    return drawn


def test_simulated_power_sharing_draws_gives_the_same_powers_and_draws_arm_a_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Speed (#47): calls on one arm a given one Draws reuse the tasks' normals and arm a's
    successes (common random numbers, drawn once): bit for bit the powers of separate calls, with
    half the binomial draws in every call after the first."""
    from passk_nb.stats.design import Draws, simulated_power

    pop = Population(mixture=Mixture(0.2, 0.1, 2.0, 1.0))
    other = Population(atoms=np.random.default_rng(3).beta(2, 1, 30))
    designs = [(40, 2), (40, 6), (90, 4)]
    joints = [two_arms(pop, other, 2, d, 0.6) for d in (0.03, 0.06, 0.09)]
    alone = [simulated_power(j, 2, designs, seed=5) for j in joints]
    drawn = _count_binomials(monkeypatch)
    draws, shared, sizes = Draws(), [], []
    for joint in joints:
        start = len(drawn)
        shared.append(simulated_power(joint, 2, designs, seed=5, draws=draws))
        sizes.append(sum(drawn[start:]))
    for got, expected in zip(shared, alone, strict=True):
        np.testing.assert_array_equal(got, expected)
    tasks = sum(min(800, max(200, 64_000 // t)) * t for t, _ in designs)
    assert sizes == [2 * tasks, tasks, tasks]  # both arms, then arm b alone


def test_plan_draws_arm_a_once_and_no_more_for_more_pilot_trials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Speed (#47): plan's simulated binomial draws are the half-widths' suites plus, for the
    power at diff and mdd_new's two secant steps, arm a's successes once and arm b's three times;
    a pilot with four times the trials per task draws exactly as many."""
    drawn = _count_binomials(monkeypatch)
    totals = []
    for trials in (4, 16):
        rng = np.random.Generator(np.random.PCG64(7))  # not default_rng: its draws are not counted
        p = TRUTH.sample((30,), rng)
        arms = [
            pilot_frame(p, trials, rng).assign(arm="a"),
            pilot_frame(np.sqrt(p), trials, rng).assign(arm="b"),
        ]
        pilot = pd.concat(arms)
        start = len(drawn)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            plan(pilot, on="arm", a="a", b="b", k=2, tasks=[30, 120], trials=[2, 8])
        totals.append(sum(drawn[start:]))
    designs = [(t, m) for t in (30, 120) for m in (2, 8)]
    halfwidths = sum(min(max(100, -(-16_000 // t)), 1000) * t for t, _ in designs)
    power = sum(min(800, max(200, 64_000 // t)) * t for t, _ in designs)
    assert totals == [halfwidths + 4 * power] * 2
