"""safety() and worst_trials(): each severity's rate and harm-free pass^k, recovered with coverage."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from passk_nb.data.severity import SEVERITIES
from passk_nb.stats import safety, summarize, worst_trials
from passk_nb.stats.safety import recoded

SUITES, TASKS, N, K = 200, 20, 4, 2


def shape(name: str, rng: np.random.Generator) -> np.ndarray:
    """Per suite and task: the chance of each severity (harmful, misleading, benign, none)."""
    if name == "alike":  # every task the same: 15 % harmful, 10 % misleading, 20 % benign
        probs = np.broadcast_to([0.15, 0.10, 0.20, 0.55], (SUITES, TASKS, 4)).copy()
    else:  # most tasks safe, a few dangerous: harm 0 on 70 % of tasks, 0.5 on the rest
        harm = np.where(rng.random((SUITES, TASKS)) < 0.7, 0.0, 0.5)
        misleading = rng.beta(1, 9, size=(SUITES, TASKS))
        benign = 0.2 * (1 - harm - misleading)
        probs = np.stack([harm, misleading, benign, 1 - harm - misleading - benign], axis=-1)
    return probs


def truths(name: str) -> tuple[float, float]:
    """(population harm rate, population harm-free pass^K)."""
    if name == "alike":
        return 0.15, 0.85**K
    return 0.3 * 0.5, 0.7 + 0.3 * 0.5**K


def simulate(probs: np.ndarray, rng: np.random.Generator) -> pd.DataFrame:
    cumulative = probs.cumsum(axis=-1)
    u = rng.random((SUITES, TASKS, N))
    drawn = (u[..., None] > cumulative[:, :, None, :]).sum(axis=-1).clip(max=3)
    severity = np.array(SEVERITIES)[drawn].ravel()
    df = pd.DataFrame(
        {
            "model": np.repeat(np.arange(SUITES), TASKS * N),
            "task": np.tile(np.repeat(np.arange(TASKS), N), SUITES),
            "severity": severity,
        }
    )
    df["passed"] = df["severity"] == "none"
    df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
    return df


@pytest.mark.parametrize("name", ["alike", "few-dangerous"])
def test_known_harm_rates_and_harm_free_pass_k_are_recovered_with_coverage(name):
    rng = np.random.default_rng(len(name))
    probs = shape(name, rng)
    out = safety(simulate(probs, rng), k=K, by="model").sort_values("model")
    harm, harm_free = truths(name)
    fixed_harm = probs[..., 0].mean(axis=1)
    fixed_free = ((1 - probs[..., 0]) ** K).mean(axis=1)
    for column, population, fixed in (("harmful", harm, fixed_harm), ("harm_free^k", harm_free, fixed_free)):
        covered = (out[f"{column}_lo"] <= population) & (population <= out[f"{column}_hi"])
        assert covered.mean() >= 0.90, (column, "new tasks", covered.mean())
        lo, hi = out[f"{column}_fixed_lo"].to_numpy(), out[f"{column}_fixed_hi"].to_numpy()
        covered_fixed = (lo <= fixed) & (fixed <= hi)
        assert covered_fixed.mean() >= 0.90, (column, "these tasks", covered_fixed.mean())
        assert abs(out[column].mean() - population) < 0.02, (column, out[column].mean(), population)
    misleading = probs[..., 1].mean()
    assert abs(out["misleading"].mean() - misleading) < 0.01
    # every trial ends with exactly one severity: the failure rates and the pass rate add up to 1
    passes = summarize(simulate(probs, rng), k=1, by="model")["pass@k"].mean()
    assert abs(out[["harmful", "misleading", "benign"]].sum(axis=1).mean() + passes - 1) < 0.02


def test_harm_free_pass_k_is_pass_k_of_the_recoded_frame():
    rng = np.random.default_rng(7)
    df = simulate(shape("few-dangerous", rng), rng).query("model < 3")
    out = safety(df, k=3, by="model")
    plain = df.assign(passed=df["severity"] != "harmful")
    plain["outcome"] = np.where(plain["passed"], "pass", "wrong_state")
    expected = summarize(plain, k=3, by="model")
    for suffix in ("", "_lo", "_hi", "_fixed_lo", "_fixed_hi"):
        np.testing.assert_array_equal(out[f"harm_free^k{suffix}"], expected[f"pass^k{suffix}"])
    harmful = summarize(recoded(df, (df["severity"] == "harmful").to_numpy()), k=1, by="model")
    np.testing.assert_array_equal(out["harmful"], harmful["pass@k"])


def test_trials_not_graded_are_left_out_and_counted_and_none_graded_is_refused():
    rng = np.random.default_rng(3)
    df = simulate(shape("alike", rng), rng).query("model < 2").reset_index(drop=True)
    older = df.assign(severity=np.where(df.index % 5 == 0, "", df["severity"]))
    out = safety(older, k=2, by="model")
    assert out["n_not_graded"].tolist() == [int((older["model"] == m).sum() // 5) for m in (0, 1)]
    assert (out["trials"] + out["n_not_graded"]).tolist() == [TASKS * N] * 2
    with pytest.raises(ValueError, match="no trial of these records was graded for harm"):
        safety(df.assign(severity=""), k=2, by="model")


def test_infra_errors_are_left_out_by_default():
    df = pd.DataFrame(
        {
            "task": list("aabbccddee") * 2,
            "severity": ["harmful", "none"] * 10,
            "outcome": ["infra_error", "pass"] * 10,
        }
    )
    df["passed"] = df["outcome"] == "pass"
    assert safety(df, k=1, by=())["harmful"].iloc[0] == 0.0
    assert safety(df, k=1, by=(), infra="fail")["harmful"].iloc[0] == 0.5


def test_worst_trials_names_each_task_s_most_severe_trial():
    df = pd.DataFrame(
        {
            "run_id": ["r1"] * 4 + ["r2"] * 4,
            "model": ["m"] * 8,
            "config": ["c"] * 8,
            "task": ["a", "a", "b", "b"] * 2,
            "trial": [0, 1, 0, 1] * 2,
            "outcome": ["pass", "false_claim", "pass", "pass", "max_turns", "wrong_state", "pass", "pass"],
            "severity": ["none", "misleading", "none", "none", "benign", "harmful", "none", ""],
        }
    )
    out = worst_trials(df, by="model").set_index("task")
    assert out.loc["a", ["severity", "run_id", "trial", "outcome"]].tolist() == [
        "harmful",
        "r2",
        1,
        "wrong_state",
    ]
    assert out.loc["a", ["n_harmful", "n_misleading", "n_benign", "n_none"]].tolist() == [1, 1, 1, 1]
    assert out.loc["b", ["severity", "run_id", "trial", "n_none"]].tolist() == ["none", "r1", 0, 3]


def test_infra_errors_that_never_reached_the_judge_are_not_counted_as_ungraded():
    df = pd.DataFrame(
        {
            "task": list("aabbccddee"),
            "severity": ["", "none", "", "none", "harmful", "none", "none", "none", "", "none"],
            "outcome": ["infra_error", "pass", "wrong_state", "pass", "wrong_state"] + ["pass"] * 5,
        }
    )
    df["passed"] = df["outcome"] == "pass"
    df.loc[8, "outcome"] = "pass"  # an ungraded pass: counted
    df.loc[8, "passed"] = True
    out = safety(df, k=1, by=())
    assert out["n_not_graded"].iloc[0] == 2 and out["trials"].iloc[0] == 7
