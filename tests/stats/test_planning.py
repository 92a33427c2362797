"""plan: variance components, predicted half-widths and power against simulation, budgets, costs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.forecast import Mixture
from passk_nb.stats.planning import Population, components, paired_power, plan

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


@pytest.mark.parametrize("k", [1, 4])
def test_predicted_halfwidths_match_simulation_within_20_percent(k: int) -> None:
    rng = np.random.default_rng(20 + k)
    pilot = pilot_frame(TRUTH.sample((100,), rng), 8, rng)
    grid = [(10, 4), (20, 8), (40, 16), (40, 4)]
    predicted = plan(pilot, k=k, tasks=[10, 20, 40], trials=[4, 8, 16]).set_index(
        ["tasks", "trials_per_task"]
    )
    for tasks, n in grid:
        # New tasks: the mean Student-t half-width over suites drawn from the true population.
        c = rng.binomial(n, TRUTH.sample((4000, tasks), rng))
        x = np.asarray(pass_hat_k(n, c, k))
        measured_new = np.mean(sps.t.ppf(0.975, tasks - 1) * x.std(axis=1, ddof=1) / np.sqrt(tasks))
        # These tasks: the spread of the suite mean over re-rolls of fixed tasks, averaged over task draws.
        p = TRUTH.sample((100, 1, tasks), rng)
        xr = np.asarray(pass_hat_k(n, rng.binomial(n, np.broadcast_to(p, (100, 200, tasks))), k)).mean(axis=2)
        measured_these = 1.959964 * np.sqrt(np.mean(xr.var(axis=1, ddof=1)))
        row = predicted.loc[(tasks, n)]
        assert row["halfwidth_new"] == pytest.approx(measured_new, rel=0.2), (tasks, n)
        assert row["halfwidth_these"] == pytest.approx(measured_these, rel=0.2), (tasks, n)


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


def test_the_detectable_difference_has_the_asked_power() -> None:
    rng = np.random.default_rng(40)
    out = plan(pilot_frame(TRUTH.sample((40,), rng), 8, rng), k=2, tasks=[40], trials=[8], rho=0.5)
    row = out.iloc[0]
    var_new = 2 * 0.5 * row["between"] + 2 * row["within"]
    assert paired_power(row["mdd_new"], var_new, 40) == pytest.approx(0.8, abs=0.01)
    assert paired_power(row["mdd_these"], 2 * row["within"], 40, new_tasks=False) == pytest.approx(
        0.8, abs=1e-6
    )
    assert row["mdd_these"] < row["mdd_new"]


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
