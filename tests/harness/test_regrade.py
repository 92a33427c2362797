"""regrade(): stored trials judged again by today's checks, without any model call."""

import dataclasses
import json

import pytest

import passk_nb
from passk_nb.harness.regrade import RegradeError, regrade
from passk_nb.harness.suites import get_suite
from passk_nb.harness.suites.base import expect_changes

ORDERS = get_suite("orders")


def flawed_agent(messages):
    """Refunds O1001 by 50.00 on odd trials (seed), the full 79.99 on even ones; fine elsewhere."""
    task = next(t for t in ORDERS.tasks if t.prompt == messages[1]["content"])
    script = [dict(step) for step in task.script]
    if task.id == "refund-delivered" and flawed_agent.calls % 2:
        script[1] = {"tool": "refund_order", "args": {"order_id": "O1001", "amount": 50.00}}
    turn = sum(m["role"] == "assistant" for m in messages)
    if turn == len(script) - 1:
        flawed_agent.calls += task.id == "refund-delivered"
    return json.dumps(script[turn])


def test_regrading_unchanged_checks_changes_nothing(tmp_path):
    flawed_agent.calls = 0
    df = passk_nb.run(flawed_agent, trials=4, out=tmp_path, progress=False, concurrency=1)
    again = regrade(df, suite=ORDERS)
    assert not again["regrade_changed"].any()
    assert again["outcome"].tolist() == df["outcome"].tolist()
    assert again["false_claims"].tolist() == df["false_claims"].tolist()


def test_a_changed_check_flips_exactly_the_trials_it_should_with_no_provider_call(tmp_path, monkeypatch):
    flawed_agent.calls = 0
    df = passk_nb.run(flawed_agent, trials=4, out=tmp_path, progress=False, concurrency=1)
    refund = df[df["task"] == "refund-delivered"].set_index("trial")
    assert refund["outcome"].tolist() == ["pass", "wrong_state", "pass", "wrong_state"]

    # a more lenient grader: any refund of O1001 counts, partial ones (status unchanged) included
    def any_refund(before, after):
        expected = {"orders.O1001.refunded_amount": lambda amount: amount > 0}
        if after["orders"]["O1001"]["status"] == "refunded":
            expected["orders.O1001.status"] = "refunded"
        return expect_changes(before, after, expected)

    lenient = dataclasses.replace(ORDERS.task("refund-delivered"), check=any_refund)
    suite = dataclasses.replace(
        ORDERS, name="orders-lenient", tasks=tuple(lenient if t.id == lenient.id else t for t in ORDERS.tasks)
    )

    def no_provider(*args, **kwargs):
        raise AssertionError("regrade must not build or call a provider")

    monkeypatch.setattr("passk_nb.harness.providers.make_provider", no_provider)
    again = regrade(df, suite=suite)
    changed = again[again["regrade_changed"]]
    assert sorted(zip(changed["task"], changed["trial"], strict=True)) == [
        ("refund-delivered", 1),
        ("refund-delivered", 3),
    ]
    assert set(changed["outcome_before"]) == {"wrong_state"} and set(changed["outcome"]) == {"pass"}
    assert again["passed"].sum() == df["passed"].sum() + 2


def test_a_tampered_record_cannot_be_regraded_silently(tmp_path):
    df = passk_nb.run("scripted", tasks=["refund-delivered"], trials=1, out=tmp_path, progress=False)
    tampered = df.copy()
    tampered.loc[0, "state_diff"] = "[]"
    with pytest.raises(RegradeError, match="does not rebuild the stored final state"):
        regrade(tampered)


def test_regraded_records_are_a_new_run_naming_the_checks_they_were_graded_with(tmp_path):
    from passk_nb.harness.regrade import provider_meta, regraded_records

    df = passk_nb.run("scripted", trials=1, out=tmp_path, progress=False)
    grader = {"suite": "orders", "checks": "abc123", "passk_nb": "x"}
    out = regraded_records(df, regrade(df), grader)
    assert out["run_id"].nunique() == 1 and set(out["run_id"]).isdisjoint(df["run_id"])
    assert (out["suite_hash"] == "abc123").all() and out["config"].str.endswith("checks=abc123").all()
    assert provider_meta(out["provider_meta"].iloc[0])["grader"]["regraded_from"] == df["run_id"].iloc[0]
    assert regraded_records(df, regrade(df), grader)["run_id"].equals(out["run_id"])  # same checks, same id
