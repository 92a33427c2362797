"""rank: tiers, rank intervals, multiple-comparison corrections."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from passk_nb.stats.rank import _adjust, _pairs, rank


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


def test_holm_and_bh_by_hand() -> None:
    p = np.array([0.01, 0.04, 0.03])
    assert _adjust(p, "holm").tolist() == pytest.approx([0.03, 0.06, 0.06])
    assert _adjust(p, "bh").tolist() == pytest.approx([0.03, 0.04, 0.04])


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
    assert (out["p_adjusted"] >= out["p"]).all()
    assert out["significant"].tolist()[:2] == [True, True]


@pytest.mark.parametrize("correction", ["holm", "bh"])
def test_family_wise_error_under_the_null(correction: str) -> None:
    """Five equal arms (same tasks, independent trials): how often does any pair differ?"""
    rng = np.random.default_rng(62)
    any_significant = []
    for _ in range(400):
        base = rng.beta(2, 1, 20)
        x = rng.binomial(4, np.broadcast_to(base, (5, 20))) / 4  # pass^1 per task, five arms
        any_significant.append(_pairs(x, list("abcde"), 0.05, correction)["significant"].any())
    assert np.mean(any_significant) <= 0.07


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
