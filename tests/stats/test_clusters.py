"""Task families (``cluster=``): coverage by simulation with clustered truths, and equality with
the unclustered statistics when every task is its own family.

The clustered truth: F = 10 families of 3 tasks, each task's logit 1 + u_f + e_t with a family
effect u_f ~ N(0, 1.5²) and a task effect e_t ~ N(0, 0.5²), 8 trials per task. The tasks of a
family are alike, so 30 tasks carry far less information about new tasks than 30 independent
ones: the interval for new tasks that treats them as independent under-covers, and the one that
resamples families must not.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from passk_nb.stats.counts import as_counts
from passk_nb.stats.design.planner import plan
from passk_nb.stats.gate import gate
from passk_nb.stats.intervals import design_effect
from passk_nb.stats.paired import compare
from passk_nb.stats.rank import rank
from passk_nb.stats.summary import curve, summarize

FAMILIES, SIZE, TRIALS, SD_FAMILY, SD_TASK, MU = 10, 3, 8, 1.5, 0.5, 1.0
SUITES = 600


def truth(k: int) -> tuple[float, float]:
    """Population pass@k and pass^k of the clustered truth (2·10⁶ draws: error ≈ 3·10⁻⁴)."""
    rng = np.random.default_rng(99)
    p = expit(MU + rng.normal(0, SD_FAMILY, 2_000_000) + rng.normal(0, SD_TASK, 2_000_000))
    return float(np.mean(1 - (1 - p) ** k)), float(np.mean(p**k))


def logits(suites: int, rng: np.random.Generator) -> np.ndarray:
    family = rng.normal(0, SD_FAMILY, (suites, FAMILIES, 1))
    return MU + family + rng.normal(0, SD_TASK, (suites, FAMILIES, SIZE))


def table(c: np.ndarray, **columns: object) -> pd.DataFrame:
    suites, tasks = c.shape
    return pd.DataFrame(
        {
            "sim": np.repeat(np.arange(suites), tasks),
            **columns,
            "task": np.tile(np.arange(tasks), suites),
            "fam": np.tile(np.arange(tasks) // SIZE, suites),
            "n": TRIALS,
            "c": c.ravel(),
        }
    )


def clustered_suites(suites: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    p = expit(logits(suites, rng)).reshape(suites, FAMILIES * SIZE)
    return table(rng.binomial(TRIALS, p))


def coverage(out: pd.DataFrame, target: tuple[float, float]) -> list[float]:
    return [
        float(np.mean((out[f"{m}_lo"] <= t) & (t <= out[f"{m}_hi"])))
        for m, t in zip(("pass@k", "pass^k"), target, strict=True)
    ]


@pytest.mark.parametrize("k", [1, 2])
def test_the_new_task_interval_covers_clustered_truths_only_with_cluster(k: int) -> None:
    tab, target = clustered_suites(SUITES, seed=k), truth(k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        naive = coverage(summarize(tab, k=k, by="sim"), target)
        clustered = coverage(summarize(tab, k=k, by="sim", cluster="fam"), target)
    # measured at 1,000 suites: 82-84 % without cluster=, 97-99 % with it
    assert max(naive) < 0.88, naive
    assert min(clustered) >= 0.93, clustered


def test_compare_keeps_its_false_positive_rate_on_clustered_arms_only_with_cluster() -> None:
    """Two arms with equal population pass^k whose difference is shared by a family: per family a
    fair coin gives arm a or arm b a lift of 1.5 on the logit scale (so the arms are exchangeable
    and their population values equal), and the three tasks of a family move together."""
    rng = np.random.default_rng(5)
    base = logits(SUITES, rng)
    lift = rng.choice([-0.75, 0.75], (SUITES, FAMILIES, 1))
    arms = [
        table(rng.binomial(TRIALS, expit(base + sign * lift).reshape(SUITES, -1)), arm=arm)
        for arm, sign in (("a", 1), ("b", -1))
    ]
    tab = pd.concat(arms, ignore_index=True)
    rates = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for cluster in (None, "fam"):
            out = compare(tab, on="arm", a="a", b="b", k=2, by="sim", cluster=cluster)
            rates[cluster] = float(np.mean((out["lo"] > 0) | (out["hi"] < 0)))
    # measured at 4,000 suites: 16-20 % without cluster=, 4.4-5.0 % with it (Korn–Graubard)
    assert rates[None] > 0.12, rates
    assert rates["fam"] <= 0.065, rates


def test_compare_holds_five_percent_false_positives_with_five_families() -> None:
    """Five families of three tasks, eight trials, the arms equal in population but each family's
    lift (1.5 on the logit scale) going to arm a or arm b by a coin: the family differences are
    nearly two-valued, so all five share a sign 2/32 of the time. The paired t over families
    flagged 5.7 % of such suites (at 40,000 suites); compare's Korn–Graubard interval 4.8 %."""
    suites, families, rng = 8000, 5, np.random.default_rng(11)
    family = rng.normal(0, SD_FAMILY, (suites, families, 1))
    base = MU + family + rng.normal(0, SD_TASK, (suites, families, SIZE))
    lift = rng.choice([-0.75, 0.75], (suites, families, 1))
    tasks = families * SIZE
    arms = [
        pd.DataFrame(
            {
                "sim": np.repeat(np.arange(suites), tasks),
                "arm": arm,
                "task": np.tile(np.arange(tasks), suites),
                "fam": np.tile(np.arange(tasks) // SIZE, suites),
                "n": TRIALS,
                "c": rng.binomial(TRIALS, expit(base + sign * lift).reshape(suites, -1)).ravel(),
            }
        )
        for arm, sign in (("a", 1), ("b", -1))
    ]
    out = compare(pd.concat(arms, ignore_index=True), on="arm", a="a", b="b", k=1, by="sim", cluster="fam")
    rate = float(np.mean((out["lo"] > 0) | (out["hi"] < 0)))
    assert rate <= 0.05, rate  # Monte-Carlo standard error 0.24 %; 4.8 % at 40,000 suites


def independent_suites(suites: int = 40, tasks: int = 12, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    c = rng.binomial(TRIALS, rng.beta(2, 1, (suites, tasks)))
    out = table(c)
    out["fam"] = out["task"]  # every task its own family
    return out


BOUNDS = ["pass@k_lo", "pass@k_hi", "pass^k_lo", "pass^k_hi", "pass^k_fixed_lo", "pass^k_fixed_hi"]


@pytest.mark.parametrize("method", ["korn-graubard", "t"])
def test_each_task_its_own_family_gives_the_unclustered_intervals(method: str) -> None:
    tab = independent_suites()
    plain = summarize(tab.drop(columns="fam"), k=2, by="sim", method=method)
    clustered = summarize(tab, k=2, by="sim", method=method, cluster="fam")
    np.testing.assert_allclose(clustered[BOUNDS], plain[BOUNDS], rtol=1e-12, atol=1e-14)
    assert (clustered["n_clusters"] == clustered["n_tasks"]).all()
    long = ["lo", "hi", "fixed_lo", "fixed_hi"]
    np.testing.assert_allclose(
        curve(tab, by="sim", method=method, cluster="fam")[long],
        curve(tab.drop(columns="fam"), by="sim", method=method)[long],
        rtol=1e-12,
        atol=1e-14,
    )


def test_each_task_its_own_family_bootstrap_within_monte_carlo_error() -> None:
    tab = independent_suites()
    plain = summarize(tab.drop(columns="fam"), k=2, by="sim", method="bootstrap", n_boot=2000)
    clustered = summarize(tab, k=2, by="sim", method="bootstrap", n_boot=2000, cluster="fam")
    # the draws differ (tasks in another order), the resampling scheme does not: bounds agree to a
    # few thousandths, far below the interval's width
    gap = (clustered[BOUNDS] - plain[BOUNDS]).abs().to_numpy()
    width = (plain["pass^k_hi"] - plain["pass^k_lo"]).mean()
    assert gap.mean() < 0.02 * width and gap.max() < 0.1 * width


def test_each_task_its_own_family_gives_the_unclustered_comparison_rank_gate_and_plan() -> None:
    tab = independent_suites(suites=1)
    two = pd.concat(
        [tab.assign(model="x"), tab.assign(model="y", c=np.roll(tab["c"].to_numpy(), 1))], ignore_index=True
    )
    for method in ("korn-graubard", "t", "bootstrap"):
        plain = compare(two.drop(columns="fam"), on="model", a="x", b="y", k=2, by=(), method=method)
        clustered = compare(two, on="model", a="x", b="y", k=2, by=(), method=method, cluster="fam")
        tol = 0.05 if method == "bootstrap" else 1e-12
        np.testing.assert_allclose(clustered[["lo", "hi"]], plain[["lo", "hi"]], atol=tol)
    ranked = rank(two, on="model", k=2, by=(), cluster="fam")
    np.testing.assert_allclose(
        ranked[["lo", "hi"]], rank(two.drop(columns="fam"), on="model", k=2, by=())[["lo", "hi"]], atol=1e-12
    )
    records = expand(tab)
    gated = gate(records, k=2, min=0.1, cluster="fam").bounds[["lo", "hi"]]
    np.testing.assert_allclose(gated, gate(records, k=2, min=0.1).bounds[["lo", "hi"]], atol=1e-12)
    options = {"k": 2, "tasks": [12], "trials": [8], "n_sim": 600, "power_suites": 60}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        planned = plan(records, cluster="fam", **options)
        columns = ["halfwidth_new", "halfwidth_these", "power_new"]
        pd.testing.assert_frame_equal(planned[columns], plan(records, **options)[columns])
    assert planned["design_effect"].iloc[0] == 1.0


def expand(tab: pd.DataFrame) -> pd.DataFrame:
    """Trial records of a one-suite counts table (c passes first, then failures)."""
    rows = [
        {"task": t, "fam": f, "trial": i, "passed": i < c, "outcome": "pass" if i < c else "wrong_state"}
        for t, f, n, c in tab[["task", "fam", "n", "c"]].itertuples(index=False)
        for i in range(n)
    ]
    return pd.DataFrame(rows)


def test_the_plan_counts_families_through_the_design_effect() -> None:
    """A clustered pilot: plan(cluster=) predicts the new-task half-width summarize(cluster=) gives
    on suites like it (the one without cluster= predicts the narrower, unclustered one)."""
    tab = clustered_suites(200, seed=11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shipped = summarize(tab, k=2, by="sim", cluster="fam")
        realised = float(((shipped["pass^k_hi"] - shipped["pass^k_lo"]) / 2).mean())
        pilot = expand(clustered_suites(1, seed=12))
        options = {"k": 2, "tasks": [30], "trials": [8], "n_sim": 3000, "power_suites": 60}
        naive = plan(pilot, **options)["halfwidth_new"].iloc[0]
        clustered = plan(pilot, cluster="fam", **options)
    assert clustered["design_effect"].iloc[0] > 1.5
    predicted = clustered["halfwidth_new"].iloc[0]
    assert naive < 0.8 * realised < predicted < 1.3 * realised, (naive, predicted, realised)


def test_design_effect_of_alike_families_is_their_size() -> None:
    values = np.repeat([1.0, 0.0, 1.0, 0.0, 1.0], 3)  # 5 families of 3 identical tasks
    assert design_effect(values, np.zeros(15), np.repeat(np.arange(5), 3)) == pytest.approx(3 * 14 / 12)
    assert design_effect(values, np.zeros(15), np.arange(15)) == 1.0


def test_a_task_in_two_families_is_refused() -> None:
    records = pd.DataFrame(
        {"task": ["a", "a"], "fam": ["x", "y"], "passed": [True, False], "outcome": ["pass", "wrong_state"]}
    )
    with pytest.raises(ValueError, match="task 'a' has more than one 'fam'"):
        as_counts(records, cluster="fam")


def test_cluster_cannot_be_a_grouping_column_or_the_task() -> None:
    tab = independent_suites(suites=2)
    with pytest.raises(ValueError, match="also a grouping column"):
        summarize(tab, k=2, by="sim", cluster="sim")
    with pytest.raises(ValueError, match="cannot name a task's family"):
        summarize(tab, k=2, by="sim", cluster="task")


def test_fewer_families_than_min_tasks_declines() -> None:
    tab = independent_suites(suites=1)
    tab["fam"] = tab["task"] // 4  # 12 tasks in 3 families
    with pytest.warns(UserWarning, match="no interval for new tasks"):
        out = summarize(tab, k=2, by=(), cluster="fam")
    assert out["ci_method"].iloc[0] == "declined: too few tasks" and np.isnan(out["pass^k_lo"].iloc[0])
    assert np.isfinite(out["pass^k_fixed_lo"].iloc[0])  # these tasks, re-rolled: unaffected
