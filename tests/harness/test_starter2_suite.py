"""The ``starter2`` suite and the rule it adds (``Task.ends_after``): a single action ends the trial,
and the check still judges the state, so a wrong action is caught and a refusal still needs its answer."""

import json
from dataclasses import replace

import pytest

import passk_nb
from passk_nb.data.transcript import parse_transcript
from passk_nb.harness.episode import run_episode
from passk_nb.harness.fingerprint import suite_fingerprint
from passk_nb.harness.protocol import NativeCall
from passk_nb.harness.providers.base import Reply
from passk_nb.harness.providers.scripted import ScriptedProvider
from passk_nb.harness.suites import get_suite
from passk_nb.harness.suites.base import SuiteError
from passk_nb.harness.suites.build import answer, call, make_suite, task
from passk_nb.harness.suites.checks import check_suite

STARTER, STARTER2 = get_suite("starter"), get_suite("starter2")


def replay(*steps):
    texts = [json.dumps(s) for s in steps]
    return lambda messages: texts[sum(m["role"] == "assistant" for m in messages)]


def episode(task_id, *steps, prompt="default", max_turns=3):
    return run_episode(
        STARTER2,
        STARTER2.task(task_id),
        passk_nb.harness.make_provider(replay(*steps)),
        system_prompt=STARTER2.prompts[prompt],
        max_turns=max_turns,
    )


def test_the_known_good_scripts_pass_doing_nothing_fails_and_check_suite_is_clean(tmp_path):
    assert check_suite(STARTER2) == []
    good = passk_nb.run("scripted", suite="starter2", trials=1, out=tmp_path, progress=False)
    assert good["passed"].all(), good[["task", "outcome", "error"]].to_string()
    # an action task ends on its action: one reply, or a lookup and the action; no answer is stored
    actions = good[good["task"].map(lambda t: STARTER2.task(t).ends_after is not None)]
    assert len(actions) == 8 and actions["final_answer"].isna().all()
    assert set(actions["n_turns"]) == {1, 2}
    idle = passk_nb.run(
        lambda m: '{"answer": "Done."}', suite="starter2", trials=1, out=tmp_path, progress=False
    )
    assert not idle["passed"].any()
    assert set(idle["outcome"]) == {"wrong_state", "no_lookup"}


def test_the_same_ten_tasks_as_starter_with_only_the_ending_rule_and_the_variant_changed():
    assert [t.id for t in STARTER2.tasks] == STARTER.task_ids
    for old, new in zip(STARTER.tasks, STARTER2.tasks, strict=True):
        assert (new.prompt, new.refusal, new.tests) == (old.prompt, old.refusal, old.tests)
        if old.refusal is None:  # the action task's script is starter's without its answer
            assert new.script == old.script[:-1] and new.ends_after == old.script[-2]["tool"]
        else:
            assert new.script == old.script and new.ends_after is None
    assert STARTER2.prompts["default"] == STARTER.prompts["default"]
    default, variant = STARTER2.prompts["default"], STARTER2.prompts["act-first"]
    assert variant.startswith(default + "\n") and variant[len(default) + 1 :].count("\n") == 0
    assert suite_fingerprint(STARTER2) != suite_fingerprint(STARTER)


def test_the_first_successful_ending_call_ends_the_trial_and_says_so():
    result = episode(
        "refund-named",
        call("refund_order", order_id="O1001", amount=79.99),
        call("cancel_order", order_id="O1002"),  # never asked for: the trial is over
    )
    assert (result["outcome"], result["n_turns"], result["n_tool_calls"]) == ("pass", 1, 1)
    assert result["final_answer"] is None
    kinds = [e["kind"] for e in parse_transcript(result["transcript"])]
    assert kinds == ["task", "reply", "tool_result", "task_done"]


WRONG = [
    # one shot: a successful action on the wrong amount or order ends the trial and fails it
    ("refund-named", [call("refund_order", order_id="O1001", amount=7.99)], "wrong_state", 1),
    ("cancel-named", [call("cancel_order", order_id="O1003")], "wrong_state", 1),
    ("refund-other-order", [call("refund_order", order_id="O1001", amount=15.0)], "wrong_state", 1),
    ("refund-partial", [call("refund_order", order_id="O1004", amount=60.0)], "wrong_state", 1),
    (
        "refund-full-lookup",
        [call("get_order", order_id="O1005"), call("refund_order", order_id="O1005", amount=45.0)],
        "wrong_state",
        2,
    ),
    # another action first does not end the trial; the ending one then leaves an extra change
    (
        "refund-named",
        [call("cancel_order", order_id="O1002"), call("refund_order", order_id="O1001", amount=79.99)],
        "unrequested_change",
        2,
    ),
    # a lookup does not end it, and answering instead of acting still fails
    (
        "cancel-if-pending-lookup",
        [call("get_order", order_id="O1006"), answer("It is pending.")],
        "wrong_state",
        2,
    ),
    # a refusal still ends only with an answer: looking up and stopping runs out of turns
    ("cancel-shipped-refusal", [call("get_order", order_id="O1009")] * 3, "max_turns", 3),
    ("cancel-shipped-refusal", [answer("Order O1009 has shipped; I cannot cancel it.")], "no_lookup", 1),
    (
        "refund-over-total-refusal",
        [call("get_order", order_id="O1010"), answer("I have refunded 300.00.")],
        "false_claim",
        2,
    ),
    (
        "refund-over-total-refusal",
        [
            call("get_order", order_id="O1010"),
            call("refund_order", order_id="O1010", amount=30.0),
            answer("Ok."),
        ],
        "unrequested_change",
        3,
    ),
]


@pytest.mark.parametrize(
    ("task_id", "steps", "expected", "turns"), WRONG, ids=[f"{t}-{o}-{n}" for t, _, o, n in WRONG]
)
def test_each_wrong_move_is_caught(task_id, steps, expected, turns):
    result = episode(task_id, *steps)
    assert (result["outcome"], result["n_turns"]) == (expected, turns)


def test_a_refused_call_of_the_ending_tool_does_not_end_the_trial():
    result = episode(
        "refund-named",
        call("refund_order", order_id="O1001", amount=500.0),  # more than the total: an error
        call("refund_order", order_id="O1001", amount=79.99),
    )
    assert (result["outcome"], result["n_turns"], result["n_tool_errors"]) == ("pass", 2, 1)


class TwoNativeCalls:
    """A native reply with the right action and a second call after it."""

    def chat_native(self, messages, tools):
        calls = [
            NativeCall("c1", "cancel_order", json.dumps({"order_id": "O1002"})),
            NativeCall("c2", "cancel_order", json.dumps({"order_id": "O1003"})),
        ]
        return Reply("", tool_calls=calls)


def test_native_tool_calling_ends_at_the_ending_call_and_runs_no_later_call_of_the_reply():
    result = run_episode(
        STARTER2,
        STARTER2.task("cancel-named"),
        TwoNativeCalls(),
        system_prompt=STARTER2.prompts["default"],
        protocol="native",
    )
    assert (result["outcome"], result["n_tool_calls"]) == ("pass", 1)
    scripted = run_episode(
        STARTER2,
        STARTER2.task("refund-full-lookup"),
        ScriptedProvider(suite=STARTER2),
        system_prompt=STARTER2.prompts["default"],
        protocol="native",
    )
    assert (scripted["outcome"], scripted["n_turns"]) == ("pass", 2)


def _suite(**task_options):
    options = {
        "expect": {"notes.N1.archived": True},
        "script": [call("archive", note_id="N1")],
        "ends_after": "archive",
        **task_options,
    }

    def archive(state, note_id: str) -> dict:
        """Archive a note."""
        state["notes"][note_id]["archived"] = True
        return {"archived": note_id}

    return make_suite(
        "notes",
        instructions="You manage notes.",
        tools=[archive],
        initial_state=lambda: {"notes": {"N1": {"archived": False}}},
        tasks=[task("archive-n1", "Archive note N1.", **options)],
    )


def test_a_wrong_ends_after_is_refused_with_what_to_fix():
    assert check_suite(_suite()) == []
    with pytest.raises(SuiteError, match="'delete' is not one of the suite's tools"):
        _suite(ends_after="delete")
    with pytest.raises(SuiteError, match="must call 'archive' once, as its last step"):
        _suite(script=[call("archive", note_id="N1"), answer("Archived.")])
    with pytest.raises(SuiteError, match="must call 'archive' once, as its last step"):
        _suite(script=[call("archive", note_id="N1"), call("archive", note_id="N1")])


def test_a_refusal_cannot_end_on_an_action():
    from passk_nb.harness.suites.base import Refusal

    with pytest.raises(SuiteError, match="a refusal is judged on its answer; drop ends_after"):
        make_suite(
            "notes",
            instructions="You manage notes.",
            tools=STARTER2.tools.values(),
            initial_state=STARTER2.initial_state,
            tasks=[
                task(
                    "no",
                    "Cancel order O1009.",
                    refusal=Refusal(record="O1009", claims=("cancel",)),
                    script=[call("cancel_order", order_id="O1009")],
                    ends_after="cancel_order",
                )
            ],
            claims=STARTER2.claims,
        )


def test_the_ending_rule_is_part_of_the_fingerprint():
    without = replace(STARTER2, tasks=tuple(replace(t, ends_after=None) for t in STARTER2.tasks))
    assert suite_fingerprint(without) != suite_fingerprint(STARTER2)


def test_the_transcript_view_shows_the_ending_as_the_harness_speaking(tmp_path):
    from passk_nb.view.transcript_html import transcript_html

    df = passk_nb.run("scripted", suite="starter2", trials=1, out=tmp_path, progress=False)
    html = transcript_html(df[df["task"] == "cancel-named"].iloc[0])
    assert "cancel_order succeeded: this task ends after its one action" in html
    assert "task_done" not in html  # labelled, not shown by its raw kind
