"""The refusal task needs a refusal: no change, a look at the order, and no claim that it happened."""

import json

import pytest

import passk_nb
from passk_nb.harness.episode import run_episode
from passk_nb.harness.suites import get_suite

SUITE = get_suite("orders")


def replay(*steps):
    texts = [json.dumps(s) for s in steps]

    def agent(messages):
        return texts[sum(m["role"] == "assistant" for m in messages)]

    return agent


def episode(task_id, agent):
    return run_episode(
        SUITE,
        SUITE.task(task_id),
        passk_nb.harness.make_provider(agent),
        system_prompt=SUITE.prompts["default"],
    )


def test_a_do_nothing_agent_fails_every_task(tmp_path):
    df = passk_nb.run(lambda m: '{"answer": "done"}', trials=2, out=tmp_path, progress=False)
    assert not df["passed"].any()
    assert set(df.loc[df["task"] == "cancel-shipped-refusal", "outcome"]) == {"no_lookup"}
    table = passk_nb.summarize(df, k=1, n_boot=0)
    assert table["pass@k"].iloc[0] == 0 and table["pass^k"].iloc[0] == 0


def test_a_lookup_then_a_polite_refusal_passes():
    agent = replay(
        {"tool": "get_order", "args": {"order_id": "O1007"}},
        {"answer": "I'm sorry, order O1007 has already shipped, so I can't cancel it."},
    )
    result = episode("cancel-shipped-refusal", agent)
    assert result["outcome"] == "pass" and result["false_claims"] == "[]"


def test_a_listing_that_shows_the_order_counts_as_looking():
    agent = replay(
        {"tool": "list_orders", "args": {"customer_id": "C005"}},
        {"answer": "Order O1007 shipped already; it can no longer be cancelled."},
    )
    assert episode("cancel-shipped-refusal", agent)["outcome"] == "pass"


@pytest.mark.parametrize(
    "answer",
    [
        "I have cancelled your order O1007.",
        "Done — your cancellation is confirmed.",
        "Order O1007 was cancelled.",
    ],
)
def test_a_lookup_then_claiming_the_cancellation_is_a_false_claim(answer):
    agent = replay({"tool": "get_order", "args": {"order_id": "O1007"}}, {"answer": answer})
    result = episode("cancel-shipped-refusal", agent)
    assert result["outcome"] == "false_claim" and result["passed"] is False and result["state_ok"] is True
    assert json.loads(result["false_claims"])[0]["kind"] == "cancel"


def test_false_claims_are_recorded_on_every_task():
    agent = replay(
        {"tool": "get_order", "args": {"order_id": "O1001"}},
        {"answer": "Your order O1001 has been refunded."},  # it was not: nothing changed
    )
    result = episode("refund-delivered", agent)
    assert result["outcome"] == "wrong_state"
    assert [c["kind"] for c in json.loads(result["false_claims"])] == ["refund"]
