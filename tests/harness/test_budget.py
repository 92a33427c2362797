"""run(budget_usd=, prices=): no trial starts that the budget cannot pay; a raised budget resumes."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import passk_nb
from passk_nb.data.prices import price_table, trial_cost
from passk_nb.harness.budget import BUDGET_FILE
from passk_nb.harness.providers.base import Reply
from passk_nb.harness.suites import get_suite
from tests.helpers.fake_servers import FakeServer, Fault

TASKS = ["refund-delivered", "cancel-pending-lookup"]  # three model turns each
PRICES = {"m": (1000.0, 1000.0)}  # USD per million tokens: 20 tokens a turn cost 0.02, a trial 0.06


def spend(df: pd.DataFrame, prices=PRICES) -> float:
    table = price_table(prices)
    return sum(trial_cost(r, table) for r in df.to_dict("records"))


def test_a_budget_stops_starting_trials_in_flight_ones_finish_and_a_raised_budget_resumes(tmp_path):
    with FakeServer("openai", rule=lambda body: Fault("usage", size=10), latency=0.2) as server:
        options = {"base_url": server.url, "tasks": TASKS, "trials": 4, "out": tmp_path, "progress": False}
        first = passk_nb.run("openai", "m", concurrency=4, budget_usd=0.2, prices=PRICES, **options)
        # the first trial alone (its cost unknown), then two at once: 0.06 + 2 × 0.06 ≤ 0.2; a fourth
        # would pass the budget, so it never started; the two in flight finished and were stored
        assert len(first) == 3 and spend(first) == pytest.approx(0.18)
        assert first.attrs["stopped"].startswith("budget_usd=0.2: spent")
        assert len(passk_nb.load(tmp_path)) == 3
        journal = [json.loads(line) for line in (tmp_path / first["run_id"].iloc[0] / BUDGET_FILE).open()]
        assert journal[-1]["not_started"] >= 1 and journal[-1]["spent_usd"] == pytest.approx(0.18)

        again = passk_nb.run("openai", "m", concurrency=4, budget_usd=1.0, prices=PRICES, **options)
        assert "stopped" not in again.attrs
        assert again["run_id"].nunique() == 1 and again["run_id"].iloc[0] == first["run_id"].iloc[0]
        assert len(again) == 8 and not again.duplicated(["task", "trial"]).any()
        assert len(server.chat_requests()) == 8 * 3  # nothing run twice: 3 turns for each of 8 trials
        assert spend(again) == pytest.approx(0.48)


def test_the_stored_spend_counts_so_the_same_budget_starts_nothing_more(tmp_path):
    with FakeServer("openai", rule=lambda body: Fault("usage", size=10)) as server:
        options = {"base_url": server.url, "tasks": TASKS, "trials": 4, "out": tmp_path, "progress": False}
        first = passk_nb.run("openai", "m", concurrency=1, budget_usd=0.13, prices=PRICES, **options)
        assert len(first) == 2  # 0.06 + 0.06 + 0.06 > 0.13
        requests = len(server.chat_requests())
        same = passk_nb.run("openai", "m", concurrency=1, budget_usd=0.13, prices=PRICES, **options)
        assert len(same) == 2 and len(server.chat_requests()) == requests
        assert "stopped" in same.attrs


ORDERS = get_suite("orders")


def priced_agent(messages):
    """The known-good scripts, each reply reporting 10 input and 10 output tokens."""
    task = next(t for t in ORDERS.tasks if t.prompt == messages[1]["content"])
    turn = sum(m["role"] == "assistant" for m in messages)
    return Reply(json.dumps(task.script[turn]), input_tokens=10, output_tokens=10)


def test_with_until_the_budget_is_one_more_stopping_rule(tmp_path):
    until = passk_nb.Until("precision=0.01")  # out of reach: only the budget can stop this run
    options = {
        "tasks": TASKS,
        "trials": 1,
        "out": tmp_path,
        "progress": False,
        "model": "agent",
        "version": "1",
    }
    prices = {"agent": (1000.0, 1000.0)}
    df = passk_nb.run(priced_agent, until=until, budget_usd=0.5, prices=prices, concurrency=2, **options)
    assert spend(df, prices) <= 0.5 and len(df) == 8  # 8 × 0.06 = 0.48; a ninth would pass 0.5
    assert df.attrs["stopped"].startswith("budget_usd=0.5")
    assert until.next_round(df) is not None  # the question was still open: the budget stopped it
    more = passk_nb.run(priced_agent, until=until, budget_usd=0.8, prices=prices, concurrency=2, **options)
    assert len(more) == 13 and not more.duplicated(["task", "trial"]).any()
    assert set(df["trial"]) <= set(more["trial"]) and more["round"].notna().all()


def test_a_budget_needs_a_price_for_the_model_and_prices_need_a_budget(tmp_path):
    with pytest.raises(ValueError, match=r"budget_usd=1 needs the price of model 'm'.*prices=\{'m': \("):
        passk_nb.run("openai", "m", base_url="http://127.0.0.1:9", budget_usd=1.0, out=tmp_path)
    with pytest.raises(ValueError, match=r"needs the price of model 'm' \(prices= names 'o'\)"):
        passk_nb.run(
            "openai",
            "m",
            base_url="http://127.0.0.1:9",
            budget_usd=1.0,
            prices={"o": (1, 1)},
            out=tmp_path,
        )
    with pytest.raises(ValueError, match="prices= prices a run's budget: give budget_usd= too"):
        passk_nb.run("scripted", prices={"m": (1, 1)}, out=tmp_path)
    with pytest.raises(ValueError, match="budget_usd must be a positive number of US dollars"):
        passk_nb.run("scripted", budget_usd=0, out=tmp_path)
    with pytest.raises(ValueError, match="finite number ≥ 0"):
        passk_nb.run("scripted", budget_usd=1, prices={"scripted": (-1, 1)}, out=tmp_path)


def test_a_trial_without_reported_usage_stops_a_budgeted_run(tmp_path):
    df = passk_nb.run(
        "scripted",
        tasks=TASKS,
        trials=3,
        budget_usd=1.0,
        prices={"known-good": (1, 1)},
        out=tmp_path,
        progress=False,
        concurrency=1,
    )
    assert len(df) == 1 and "no known cost" in df.attrs["stopped"]


def test_passk_run_keeps_to_budget_usd_at_the_prices_of_a_csv(tmp_path, capsys):
    from passk_nb.cli.main import main

    prices = tmp_path / "prices.csv"
    prices.write_text("model,price_in,price_out\nm,1000,1000\n")
    with FakeServer("openai", rule=lambda body: Fault("usage", size=10)) as server:
        flags = ["run", "--provider", "openai", "--model", "m", "--base-url", server.url, "--trials", "2"]
        flags += ["--tasks", ",".join(TASKS), "--k", "1", "--out", str(tmp_path / "runs"), "--no-progress"]
        assert main([*flags, "--budget-usd", "0.13", "--prices", str(prices), "--concurrency", "1"]) == 0
    out = capsys.readouterr().out
    assert "stopped: budget_usd=0.13" in out and "--budget-usd" in out
    assert len(passk_nb.load(tmp_path / "runs")) == 2
