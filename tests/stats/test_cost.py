"""with_cost (a price per trial, never invented) and cost_summary (the cost of one reliable success)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from passk_nb.stats.cost import cost_summary, with_cost
from passk_nb.stats.summary import summarize


def tokens(models: list[str], tokens_in: list[float | None], tokens_out: list[float | None]) -> pd.DataFrame:
    return pd.DataFrame({"model": models, "input_tokens": tokens_in, "output_tokens": tokens_out})


def test_prices_per_model_from_a_table_price_each_trial_by_its_model() -> None:
    df = tokens(["a", "b", "a", "c"], [1_000_000, 2_000_000, 500_000, 1000], [100_000, 0, 200_000, 10])
    table = pd.DataFrame({"model": ["a", "b"], "price_in": [3.0, 0.5], "price_out": [15.0, 2.0]})
    cost = with_cost(df, prices=table)["cost_usd"].tolist()
    # a: 1 M in at $3 + 0.1 M out at $15; b: 2 M in at $0.5; a: 0.5 M at $3 + 0.2 M at $15
    assert cost[:3] == pytest.approx([3.0 + 1.5, 1.0, 1.5 + 3.0])
    assert math.isnan(cost[3])  # model c has no price: unknown, not free
    as_dict = with_cost(df, prices={"a": (3.0, 15.0), "b": (0.5, 2.0)})["cost_usd"]
    pd.testing.assert_series_equal(as_dict, with_cost(df, prices=table)["cost_usd"])


def test_unknown_tokens_cost_nan_not_zero_and_are_not_counted_as_measured() -> None:
    df = tokens(["a"] * 4, [1000, None, 1000, 1000], [100, 100, None, 100])
    cost = with_cost(df, price_in=3, price_out=15)["cost_usd"]
    assert cost.isna().tolist() == [False, True, True, False]
    assert cost.iloc[0] == pytest.approx(0.0045)
    records = df.assign(task=["t1", "t1", "t2", "t2"], passed=True, outcome="pass", cost_usd=cost.to_numpy())
    row = cost_summary(records, k=1, by="model", n_boot=0).iloc[0]
    assert (row["trials"], row["n_measured"]) == (4, 2)
    assert row["per_trial"] == pytest.approx(0.0045)  # the mean of the two known costs, not of four
    assert row["total"] == pytest.approx(0.009)


def test_price_arguments_that_contradict_or_are_incomplete_are_refused() -> None:
    df = tokens(["a"], [1000], [100])
    with pytest.raises(ValueError, match="not both"):
        with_cost(df, price_in=1, price_out=1, prices={"a": (1, 1)})
    with pytest.raises(ValueError, match="give both price_in and price_out"):
        with_cost(df, price_in=1)
    with pytest.raises(ValueError, match="price_out must be ≥ 0"):
        with_cost(df, price_in=1, price_out=-1)
    twice = pd.DataFrame({"model": ["a", "a"], "price_in": [1, 2], "price_out": [1, 2]})
    with pytest.raises(ValueError, match="lists a model twice"):
        with_cost(df, prices=twice)


def test_without_a_price_the_cost_the_backend_reported_is_used() -> None:
    meta = ['{"cost_usd": 0.25}', '{"cost_usd": true}', "not json", None, '{"cost_usd": 2}']
    cost = with_cost(pd.DataFrame({"provider_meta": meta}))["cost_usd"].tolist()
    assert cost[0] == 0.25 and cost[4] == 2.0
    assert all(math.isnan(c) for c in cost[1:4])  # a flag, broken JSON, nothing: unknown


def test_cost_per_reliable_success_is_k_times_the_trial_cost_over_pass_hat_k() -> None:
    rng = np.random.default_rng(3)
    passed = rng.random(48) < 0.7
    df = pd.DataFrame(
        {
            "model": np.repeat(["m1", "m2"], 24),
            "task": np.tile(np.repeat(list("abcdef"), 4), 2),
            "passed": passed,
            "outcome": np.where(passed, "pass", "wrong_state"),
            "input_tokens": 2000,
            "output_tokens": 400,
        }
    )
    priced = with_cost(df, prices={"m1": (1.0, 4.0), "m2": (3.0, 15.0)})
    out = cost_summary(priced, k=2, by="model").set_index("model")
    plain = summarize(df, k=2, by="model").set_index("model")
    for model, (p_in, p_out) in {"m1": (1.0, 4.0), "m2": (3.0, 15.0)}.items():
        per_trial = (2000 * p_in + 400 * p_out) / 1e6
        row = out.loc[model]
        assert row["per_trial"] == pytest.approx(per_trial)
        assert (
            row[["pass^k", "pass^k_lo", "pass^k_hi"]].tolist()
            == plain.loc[model, ["pass^k", "pass^k_lo", "pass^k_hi"]].tolist()
        )
        assert 0 < row["pass^k_lo"] < row["pass^k_hi"]
        assert row["per_reliable_success"] == pytest.approx(2 * per_trial / row["pass^k"])
        # the interval comes from pass^k's: the dearest end from its lowest bound
        assert row["per_reliable_success_hi"] == pytest.approx(2 * per_trial / row["pass^k_lo"])
        assert row["per_reliable_success_lo"] == pytest.approx(2 * per_trial / row["pass^k_hi"])
    never = priced.assign(passed=False, outcome="wrong_state")
    assert np.isinf(cost_summary(never, k=2, by="model", n_boot=0)["per_reliable_success"]).all()


def test_cost_summary_needs_the_measure_column() -> None:
    df = pd.DataFrame({"model": ["m"], "task": ["a"], "passed": [True], "outcome": ["pass"]})
    with pytest.raises(ValueError, match="cost_usd"):
        cost_summary(df, k=1, n_boot=0)
