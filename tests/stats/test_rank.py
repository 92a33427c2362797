"""rank: tiers, rank intervals, multiple-comparison corrections."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

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


def test_tiers_never_split_a_pair_whose_compare_interval_contains_zero() -> None:
    """Random suites (3–4 arms, 5–12 tasks, 2–6 trials): whenever compare's interval of two arms
    contains 0, rank puts them in one tier."""
    rng = np.random.default_rng(66)
    checked = split = 0
    for _ in range(12):
        arms, tasks, n = int(rng.integers(3, 5)), int(rng.integers(5, 13)), int(rng.integers(2, 7))
        base = rng.beta(1, 1, tasks)
        p = {
            f"m{a}": np.clip(base + rng.normal(0, 0.3) + rng.normal(0, 0.1, tasks), 0, 1) for a in range(arms)
        }
        df = suite(p, n, rng)
        out = rank(df, k=1).set_index("arm")
        split += out["tier"].nunique() > 1
        for a, b in itertools.combinations(p, 2):
            row = compare(df, on="model", a=a, b=b, k=1, by=()).set_index("metric").loc["pass^k"]
            if not (row["lo"] > 0 or row["hi"] < 0):
                checked += 1
                assert out.loc[a, "tier"] == out.loc[b, "tier"], (a, b, out)
    assert checked >= 5 and split >= 2  # both kinds of suites were drawn


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


@pytest.mark.parametrize("correction", ["holm", "bh"])
def test_family_wise_error_under_the_null(correction: str) -> None:
    """Three equal arms (same tasks, independent trials): how often does any pair differ?
    (40 suites: Monte-Carlo tolerance ~3.5 points around the nominal 5 %.)"""
    rng = np.random.default_rng(62)
    any_significant = []
    for _ in range(40):
        base = rng.beta(2, 1, 12)
        out = rank(suite({"a": base, "b": base, "c": base}, 4, rng), k=1, pairs=True, correction=correction)
        any_significant.append(out["significant"].any())
    assert np.mean(any_significant) <= 0.05 + 0.07


def test_tasks_missing_under_one_arm_are_left_out_with_a_warning() -> None:
    rng = np.random.default_rng(63)
    df = suite({"a": np.full(6, 0.5), "b": np.full(6, 0.5)}, 4, rng)
    df = df[~((df["model"] == "b") & (df["task"] == "t00"))]
    with pytest.warns(UserWarning, match="1 of 6 tasks"):
        out = rank(df, k=1, n_boot=50)
    assert (out["n_tasks"] == 5).all()


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
