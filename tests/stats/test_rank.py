"""rank: tiers, rank intervals, multiple-comparison corrections."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, special

from passk_nb.stats.paired import compare
from passk_nb.stats.rank import rank
from passk_nb.stats.summary import summarize


def suite(p: dict[str, np.ndarray], n: int, rng: np.random.Generator) -> pd.DataFrame:
    frames = []
    for arm, probs in p.items():
        passed = rng.random((probs.size, n)) < probs[:, None]
        frames.append(
            pd.DataFrame(
                {
                    "model": arm,
                    "task": np.repeat([f"t{t:02d}" for t in range(probs.size)], n),
                    "passed": passed.ravel(),
                }
            )
        )
    df = pd.concat(frames, ignore_index=True)
    df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
    return df


def table(c: dict[str, list[int]], n: int) -> pd.DataFrame:
    """A counts table: arm → successes per task, n trials each."""
    return pd.DataFrame(
        [
            {"model": arm, "task": f"t{t:02d}", "n": n, "c": x}
            for arm, cs in c.items()
            for t, x in enumerate(cs)
        ]
    )


def test_rank_agrees_with_compare_and_summarize_on_four_of_four_against_three() -> None:
    """The issue's case: 6 tasks at 4/4 against 6 at 3/4 (k = 1). compare's interval is about
    [−0.54, 0.04], so the arms are one tier, and each arm's interval is summarize's, never 0 wide."""
    data = table({"a": [4] * 6, "b": [3] * 6}, 4)
    out = rank(data, k=1).set_index("arm")
    assert (out["tier"] == 1).all()
    assert out.loc["a", "rank_lo"] == 1 and out.loc["a", "rank_hi"] == 2 and out.loc["b", "rank_lo"] == 1
    shipped = summarize(data, k=1, by="model").set_index("model")
    np.testing.assert_allclose(
        out[["lo", "hi"]].to_numpy(), shipped.loc[out.index, ["pass^k_lo", "pass^k_hi"]]
    )
    assert (out["hi"] - out["lo"] > 0.3).all()
    pair = rank(data, k=1, pairs=True).iloc[0]
    shipped_pair = compare(data, on="model", a="a", b="b", k=1, by=()).set_index("metric").loc["pass^k"]
    assert (pair["lo"], pair["hi"]) == pytest.approx((shipped_pair["lo"], shipped_pair["hi"]))
    assert pair["lo"] < 0 < pair["hi"] and not pair["significant"]


@pytest.mark.parametrize("c", [0, 4])
def test_all_pass_and_all_fail_suites_are_never_zero_wide(c: int) -> None:
    out = rank(table({"a": [c] * 8, "b": [c] * 8}, 4), k=2)
    assert (out["hi"] - out["lo"] > 0).all() and (out["tier"] == 1).all()
    assert (out["rank_lo"] == 1).all() and (out["rank_hi"] == 2).all()


def test_function_agents_with_their_own_fingerprints_are_ranked_together() -> None:
    """Each Python function agent has its own config (its fingerprint): group as compare does."""
    rng = np.random.default_rng(65)
    df = suite({"careful": np.full(8, 0.9), "hasty": np.full(8, 0.4)}, 4, rng)
    df["config"] = np.where(df["model"] == "careful", "fp-careful", "fp-hasty")
    df["suite"] = "demo"
    out = rank(df, on="model", k=1)
    assert sorted(out["arm"]) == ["careful", "hasty"] and (out["suite"] == "demo").all()
    assert "config" not in out.columns


def ladder(n_arms: int, n_tasks: int, n: int, rng: np.random.Generator, spread: float = 1.5) -> pd.DataFrame:
    """A counts table of arms whose pass^1 is spread evenly from 0.59 to 0.13 (the issue's
    leaderboard): task i has difficulty d_i ~ N(0, spread) shared by all arms, arm a succeeds with
    probability expit(θ_a − d_i), θ_a set so that its mean over the tasks is its pass^1."""
    d = rng.normal(0, spread, n_tasks)
    frames = []
    for a, target in enumerate(np.linspace(0.59, 0.13, n_arms)):
        theta = optimize.brentq(lambda th, target=target: special.expit(th - d).mean() - target, -30, 30)
        c = rng.binomial(n, special.expit(theta - d))
        frames.append(
            pd.DataFrame(
                {"model": f"m{a:02d}", "task": [f"t{t:03d}" for t in range(n_tasks)], "n": n, "c": c}
            )
        )
    return pd.concat(frames, ignore_index=True)


def compare_row(df: pd.DataFrame, a: str, b: str, k: int, ci: float = 0.95) -> pd.Series:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = compare(df, on="model", a=a, b=b, k=k, by=(), ci=ci)
    return out.set_index("metric").loc["pass^k"]


def test_thirteen_evenly_spaced_arms_make_several_tiers_and_the_ends_never_share_one() -> None:
    """The issue's leaderboard: 13 arms from pass^1 0.59 to 0.13, 80 tasks, 5 trials. The old rule
    (a tier ends only where every arm above differs from every arm below) chained them all into
    tier 1 at k = 1 and k = 5."""
    df = ladder(13, 80, 5, np.random.default_rng(0))
    at1 = rank(df, k=1)
    assert at1["tier"].max() >= 3
    assert at1["tier"].iloc[0] == 1 and at1["tier"].iloc[-1] >= 3
    assert at1["rank_hi"].iloc[0] < at1["rank_lo"].iloc[-1]
    at5 = rank(df, k=5)
    ends = rank(df, k=5, pairs=True).set_index(["a", "b"]).loc[(at5["arm"].iloc[0], at5["arm"].iloc[-1])]
    assert ends["significant"] and at5["tier"].iloc[0] != at5["tier"].iloc[-1]


@pytest.mark.parametrize("seed", [0, 66])
def test_a_tier_claims_only_differences_compare_shows(seed: int) -> None:
    """What a tier says: every arm is shown worse than the top arm of each tier above its own, by
    compare's interval at the corrected level (and so at 95 %). So two arms whose compare interval
    contains 0 are never presented as different: neither is the top of a tier above the other's."""
    df = ladder(8, 40, 5, np.random.default_rng(seed), spread=2.0)
    out = rank(df, k=1)
    pairs = rank(df, k=1, pairs=True).set_index(["a", "b"])
    tops = out.groupby("tier")["arm"].first()
    claims = 0
    for row in out.itertuples():
        for tier in range(1, row.tier):
            top = tops[tier]
            pair = pairs.loc[(top, row.arm)] if (top, row.arm) in pairs.index else pairs.loc[(row.arm, top)]
            level = float(pair["ci_adjusted"])
            for ci in (level, 0.95):
                shown = compare_row(df, top, row.arm, k=1, ci=ci)
                assert shown["hi"] < 0, (top, row.arm, ci)  # row.arm − top: shown worse
            claims += 1
    assert claims >= 3 and out["tier"].max() >= 2


def test_pairwise_decisions_equal_compare_at_the_corrected_level_on_uneven_coverage() -> None:
    """rank's pairs are compare's: each pair on the tasks both ran (n_tasks), the same diff and 95 %
    interval, and ``significant`` exactly when compare's interval at ``ci_adjusted`` excludes 0,
    with Holm's or Benjamini–Hochberg's levels from the p-values computed once."""
    rng = np.random.default_rng(7)
    df = ladder(6, 30, 6, rng, spread=2.0)
    df = df[~((df["model"] == "m02") & (df["task"] >= "t012"))]  # m02 ran 12 of the 30 tasks
    df.loc[(df["model"] == "m04") & (df["task"] < "t005"), "n"] = 3  # too few trials at k = 4
    for k, correction in ((1, "holm"), (4, "bh")):
        with pytest.warns(UserWarning, match="each pair is compared on the tasks both ran"):
            pairs = rank(df, k=k, pairs=True, correction=correction)
        assert pairs["n_tasks"].nunique() > 1
        for row in pairs.itertuples():
            shipped = compare_row(df, row.a, row.b, k=k)
            assert row.n_tasks == shipped["n_tasks"]
            assert (row.diff, row.lo, row.hi) == pytest.approx(
                (shipped["diff"], shipped["lo"], shipped["hi"])
            )
            at_level = compare_row(df, row.a, row.b, k=k, ci=row.ci_adjusted)
            assert row.significant == bool(at_level["lo"] > 0 or at_level["hi"] < 0), row
        assert pairs["significant"].any() and not pairs["significant"].all()


def test_a_model_that_ran_few_tasks_does_not_shrink_every_comparison() -> None:
    """The issue's leaderboard: 10 models, one ran 16 of 83 tasks, trials per task 6 to 10. Keeping
    only the tasks every model ran left 15 and every rank interval [1, 10]; at k = 8 none was left
    ("found 0"). Each pair now uses the tasks both ran."""
    rng = np.random.default_rng(3)
    frames = []
    for a, p in enumerate(np.linspace(0.9, 0.25, 10)):
        tasks = 16 if a == 5 else 83
        n = rng.integers(6, 11, tasks)
        frames.append(
            pd.DataFrame(
                {
                    "model": f"m{a}",
                    "task": [f"t{t:02d}" for t in range(tasks)],
                    "n": n,
                    "c": rng.binomial(n, p),
                }
            )
        )
    df = pd.concat(frames, ignore_index=True)
    with pytest.warns(UserWarning, match="16 to 83 of 83"):
        out = rank(df, k=1).set_index("arm")
    assert out.loc["m0", "rank_hi"] < 10 and out.loc["m9", "rank_lo"] > 1 and out.loc["m5", "n_tasks"] == 16
    assert (out.drop("m5")["n_tasks"] == 83).all()
    with pytest.warns(UserWarning):
        pairs = rank(df, k=8, pairs=True)
        at8 = rank(df, k=8)
    sparse = (pairs["a"] == "m5") | (pairs["b"] == "m5")
    assert pairs.loc[~sparse, "n_tasks"].min() > 15 and pairs["significant"].any()
    assert at8["tier"].max() >= 2 and len(at8) == 10


SHAPES = {
    "u-shaped": lambda rng, t: rng.beta(0.3, 0.3, t),
    "mostly easy": lambda rng, t: rng.beta(5, 1, t),
    "one flaky among certain": lambda rng, t: np.r_[np.ones(t - 1), 0.5],
    "point masses": lambda rng, t: rng.choice([0.0, 0.5, 1.0], t),
}


@pytest.mark.parametrize("correction", ["holm", "bh"])
def test_family_wise_error_under_null_shapes(correction: str) -> None:
    """Four equal arms (the same per-task success, independent trials) on four shapes of per-task
    success: how often does rank present any two as different? 40 suites a shape; the pooled rate
    must stay within Monte-Carlo error (~1.7 points) of the nominal 5 %, and no shape far above it."""
    rng = np.random.default_rng(62)
    rates = {}
    for name, shape in SHAPES.items():
        hits = 0
        for _ in range(40):
            base = shape(rng, int(rng.integers(8, 25)))
            df = suite({a: base for a in "abcd"}, int(rng.integers(3, 7)), rng)
            hits += rank(df, k=1, pairs=True, correction=correction)["significant"].any()
        rates[name] = hits / 40
    assert np.mean(list(rates.values())) <= 0.05 + 0.035, rates
    assert max(rates.values()) <= 0.15, rates


def test_a_tie_at_the_top_is_one_tier_with_overlapping_ranks() -> None:
    rng = np.random.default_rng(60)
    base = rng.beta(2, 1, 30)
    df = suite({"a": base, "b": base, "c": base * 0.3}, 4, rng)
    out = rank(df, k=1, n_boot=500)
    top = out[out["arm"].isin(["a", "b"])]
    assert (top["tier"] == 1).all()
    assert (top["rank_lo"] == 1).all() and (top["rank_hi"] >= 2).all()
    assert out.loc[out["arm"] == "c", "tier"].iloc[0] == 2
    assert out.loc[out["arm"] == "c", "rank_lo"].iloc[0] == 3


def test_pairs_frame() -> None:
    rng = np.random.default_rng(61)
    base = rng.beta(2, 1, 25)
    out = rank(suite({"a": base, "b": base * 0.5, "c": base * 0.5}, 4, rng), k=2, pairs=True)
    assert out[["a", "b"]].values.tolist() == [["a", "b"], ["a", "c"], ["b", "c"]]
    assert (out["ci_adjusted"] >= 0.95).all() and (out["lo"] <= out["diff"]).all()
    assert out["significant"].tolist()[:2] == [True, True]


def test_tasks_missing_under_one_arm_are_left_out_with_a_warning() -> None:
    rng = np.random.default_rng(63)
    df = suite({"a": np.full(6, 0.5), "b": np.full(6, 0.5)}, 4, rng)
    df = df[~((df["model"] == "b") & (df["task"] == "t00"))]
    with pytest.warns(UserWarning, match="each pair is compared on the tasks both ran, 5 to 5 of 6"):
        out = rank(df, k=1, n_boot=50).set_index("arm")
    assert out.loc["a", "n_tasks"] == 6 and out.loc["b", "n_tasks"] == 5


def test_rank_needs_two_arms() -> None:
    rng = np.random.default_rng(64)
    with pytest.raises(ValueError, match="at least two arms"):
        rank(suite({"a": np.full(5, 0.5)}, 2, rng), k=1)


def test_rank_without_intervals_is_refused_rather_than_calling_everything_tied() -> None:
    # 10/10 against 0/10 on ten tasks differs at any level; n_boot=0 would have read it as a tie
    data = table({"a": [10] * 10, "b": [0] * 10}, 10)
    assert rank(data, k=1)["tier"].tolist() == [1, 2]
    with pytest.raises(ValueError, match="n_boot=0 asks for none"):
        rank(data, k=1, n_boot=0)
