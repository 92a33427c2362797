"""One trial: each classic agent mistake ends with the right outcome, judged on the final state."""

import json

import pytest

import passk_nb
from passk_nb.data.transcript import MAX_STORED_CHARS
from passk_nb.harness.episode import run_episode
from passk_nb.harness.providers import Reply
from passk_nb.harness.providers.base import BaseProvider
from passk_nb.harness.suites import get_suite

SUITE = get_suite("orders")
PROMPT = SUITE.prompts["default"]


def replay(*steps):
    """A stateless agent: reply i is steps[i] (dicts are sent as JSON, strings verbatim)."""

    def agent(messages):
        i = sum(m["role"] == "assistant" for m in messages)
        step = steps[min(i, len(steps) - 1)]
        return step if isinstance(step, str) else json.dumps(step)

    return agent


def tool(name, **args):
    return {"tool": name, "args": args}


def answer(text):
    return {"answer": text}


def episode(task_id, agent, **options):
    return run_episode(
        SUITE, SUITE.task(task_id), passk_nb.harness.make_provider(agent), system_prompt=PROMPT, **options
    )


CLASSIC_MISTAKES = [
    # the trap: refunding instead of refusing the cancellation of a shipped order
    (
        "cancel-shipped-refusal",
        replay(
            tool("get_order", order_id="O1007"),
            tool("refund_order", order_id="O1007", amount=310.0),
            answer("I refunded you instead."),
        ),
        "unrequested_change",
    ),
    # action hallucination: looks everything up, never cancels, says "cancelled"
    (
        "cancel-pending-lookup",
        replay(tool("list_orders", customer_id="C002"), answer("Your order O1003 has been cancelled.")),
        "wrong_state",
    ),
    # acts on the wrong record
    (
        "cancel-pending-lookup",
        replay(
            tool("list_orders", customer_id="C002"), tool("cancel_order", order_id="O1002"), answer("Done.")
        ),
        "wrong_state",
    ),
    # partial refund where the policy says full
    (
        "refund-damaged-shipped",
        replay(tool("refund_order", order_id="O1005", amount=27.25), answer("Refunded half.")),
        "wrong_state",
    ),
    (
        "refund-delivered",
        replay(tool("refund_order", order_id="O1001", amount=79.0), answer("Refunded.")),
        "wrong_state",
    ),
    # right change plus an extra one
    (
        "address-change-pending",
        replay(
            tool("change_address", order_id="O1006", address="230 Lake Ave, Austin, TX 78703"),
            tool("cancel_order", order_id="O1002"),
            answer("Done."),
        ),
        "unrequested_change",
    ),
    # prose instead of JSON, twice
    ("refund-delivered", replay("Sure, I'll refund that for you!", "Done, refunded!"), "format_error"),
    # loops on lookups forever
    ("address-change-pending", replay(tool("get_order", order_id="O1006")), "max_turns"),
]


@pytest.mark.parametrize("task_id, agent, outcome", CLASSIC_MISTAKES)
def test_classic_mistakes_get_the_right_outcome(task_id, agent, outcome):
    result = episode(task_id, agent)
    assert result["outcome"] == outcome
    assert result["passed"] is False
    assert result["error"]


class BrokenBackend(BaseProvider):
    name = "broken-backend"

    def chat(self, messages):
        raise ConnectionError("backend went away")


def test_raising_backend_is_an_infra_error_not_a_crash():
    result = episode("refund-delivered", BrokenBackend("m"))
    assert result["outcome"] == "infra_error"
    assert result["error"] == "ConnectionError: backend went away"
    assert result["n_turns"] == 0


def test_a_raising_python_agent_is_the_agents_failure_with_its_traceback():
    def agent(messages):
        return helper(messages)

    def helper(messages):
        raise KeyError("tool_calls")

    result = episode("refund-delivered", agent)
    assert result["outcome"] == "agent_error" and result["passed"] is False
    assert result["error"].startswith("the agent raised KeyError: 'tool_calls'")
    assert "in helper" in result["error"]  # the innermost frames of the traceback are kept


def test_infra_error_mid_trial_keeps_the_transcript_so_far():
    class Flaky(BaseProvider):
        calls = 0

        def chat(self, messages):
            type(self).calls += 1
            if self.calls == 2:
                raise TimeoutError("read timed out")
            return json.dumps(tool("get_order", order_id="O1001"))

    result = episode("refund-delivered", Flaky("m"))
    assert result["outcome"] == "infra_error"
    kinds = [e["kind"] for e in json.loads(result["transcript"])]
    assert kinds == ["task", "reply", "tool_result", "infra_error"]


def test_one_format_error_is_fed_back_and_the_agent_can_recover():
    agent = replay("Let me check.", tool("refund_order", order_id="O1001", amount=79.99), answer("Refunded."))
    result = episode("refund-delivered", agent)
    assert result["outcome"] == "pass"
    assert result["n_format_errors"] == 1
    transcript = json.loads(result["transcript"])
    feedback = [e for e in transcript if e["kind"] == "format_feedback"]
    assert len(feedback) == 1 and "not JSON" in feedback[0]["content"]


def test_format_error_budget_is_configurable():
    agent = replay("prose", tool("refund_order", order_id="O1001", amount=79.99), answer("ok"))
    assert episode("refund-delivered", agent, max_format_errors=1)["outcome"] == "format_error"


def test_format_error_after_the_right_action_still_fails_but_state_ok_says_so():
    agent = replay(tool("refund_order", order_id="O1001", amount=79.99), "Refunded!", "Really refunded!")
    result = episode("refund-delivered", agent)
    assert result["outcome"] == "format_error"
    assert result["state_ok"] is True


def test_tool_errors_go_back_to_the_model_and_are_counted():
    agent = replay(
        tool("cancel_order", order_id="O1007"),
        tool("nope"),
        tool("get_order", order_id="O1007"),
        answer("It shipped, sorry."),
    )
    result = episode("cancel-shipped-refusal", agent)
    assert result["outcome"] == "pass"
    assert result["n_tool_calls"] == 3 and result["n_tool_errors"] == 2
    contents = [e["content"] for e in json.loads(result["transcript"]) if e["kind"] == "tool_result"]
    assert "only pending orders can be cancelled" in contents[0]
    assert "unknown tool 'nope'" in contents[1]


def test_messages_sent_to_the_model_follow_the_protocol():
    seen = []

    def agent(messages):
        seen.append([dict(m) for m in messages])
        return replay(tool("get_order", order_id="O1007"), answer("Shipped already."))(messages)

    episode("cancel-shipped-refusal", agent)
    assert [m["role"] for m in seen[1]] == ["system", "user", "assistant", "user"]
    assert seen[1][0]["content"] == PROMPT
    assert seen[1][3]["content"].startswith("Tool result (get_order): ")


def test_tokens_and_attempts_are_summed_from_replies():
    def agent(messages):
        text = replay(tool("get_order", order_id="O1007"), answer("No."))(messages)
        return Reply(text, input_tokens=100, output_tokens=10, attempts=2, meta={"cost_usd": 0.01})

    result = episode("cancel-shipped-refusal", agent)
    assert (result["input_tokens"], result["output_tokens"], result["attempts"]) == (200, 20, 4)
    assert result["provider_meta"] == {"cost_usd": 0.01}


def test_stored_text_is_capped_with_its_original_length():
    big = "x" * (MAX_STORED_CHARS + 5000)
    result = episode("refund-delivered", replay(big))
    entry = json.loads(result["transcript"])[1]
    assert entry["length"] == len(big)
    assert len(entry["content"]) < MAX_STORED_CHARS + 100
    assert len(result["error"]) < MAX_STORED_CHARS + 100


def test_state_diff_records_the_change():
    result = episode(
        "address-change-pending",
        replay(tool("change_address", order_id="O1006", address="1 New Rd"), answer("ok")),
    )
    assert json.loads(result["state_diff"]) == [
        {
            "path": "orders.O1006.shipping_address",
            "before": "8 Mill St, Austin, TX 78701",
            "after": "1 New Rd",
        }
    ]
    assert result["outcome"] == "wrong_state"


def test_the_initial_state_is_copied_once_at_the_first_tool_call_and_never_without_one(monkeypatch):
    """Issue 50: a trial that calls no tool copies no state (its one state is judged against itself,
    as nothing but a tool changes it); one that calls tools copies it once, before the first."""
    from passk_nb.harness.suites.base import Environment

    copies = []
    snapshot = Environment.snapshot

    def counted(env):
        copies.append(json.dumps(env.peek(), sort_keys=True))
        return snapshot(env)

    monkeypatch.setattr(Environment, "snapshot", counted)
    initial = json.dumps(SUITE.initial_state(), sort_keys=True)
    blind = episode("refund-delivered", replay(answer("Done, refunded.")))
    assert copies == [] and (blind["outcome"], blind["state_diff"]) == ("wrong_state", "[]")
    task = SUITE.task("refund-delivered")
    done = episode(task.id, replay(*task.script))
    assert copies == [initial] and done["outcome"] == "pass"  # copied before the refund changed it
    assert json.loads(done["state_diff"])
