"""chat_transcript: the one converter τ-bench, τ²-bench and inspect_ai messages go through."""

from __future__ import annotations

import json

import pytest

from passk_nb.data.transcript import MAX_STORED_CHARS, parse_transcript
from passk_nb.importers.messages import calls_tools, chat_transcript, settings_label
from passk_nb.stats.divergence import action_sequence


def test_the_three_tool_call_shapes_give_the_same_action() -> None:
    shapes = [
        {"id": "c", "function": {"name": "cancel", "arguments": '{"id": 7}'}},  # OpenAI / τ-bench
        {"id": "c", "name": "cancel", "arguments": {"id": 7}},  # τ²-bench
        {"id": "c", "function": "cancel", "arguments": {"id": 7}, "parse_error": None},  # inspect_ai
    ]
    for call in shapes:
        out = chat_transcript([{"role": "assistant", "content": "", "tool_calls": [call]}])
        assert action_sequence(out["transcript"]) == ["cancel(id=7)"], call
        assert (out["n_tool_calls"], out["n_format_errors"]) == (1, 0)


def test_a_call_its_harness_could_not_parse_is_a_format_error() -> None:
    call = {"id": "c", "function": "cancel", "arguments": {}, "parse_error": "Expecting value"}
    out = chat_transcript([{"role": "assistant", "content": "", "tool_calls": [call]}])
    [entry] = parse_transcript(out["transcript"])
    assert "action" not in entry and "could not be parsed: Expecting value" in entry["format_error"]
    assert out["n_format_errors"] == 1 and action_sequence(out["transcript"]) == ["<format error>"]


def test_tool_results_name_their_tool_and_say_whether_it_failed() -> None:
    call = {"id": "c1", "function": "find", "arguments": {"key": "k"}}
    out = chat_transcript(
        [
            {"role": "assistant", "content": "", "tool_calls": [call, {**call, "id": "c2"}]},
            {"role": "tool", "tool_call_id": "c1", "function": "find", "content": "ok", "error": False},
            {"role": "tool", "tool_call_id": "c2", "content": "Error: boom"},  # named by its call
        ],
        tool_error_prefix="Error: ",
    )
    results = [e for e in parse_transcript(out["transcript"]) if e["kind"] == "tool_result"]
    assert [(e["tool"], e["error"]) for e in results] == [("find", False), ("find", True)]
    assert out["n_tool_errors"] == 1
    no_prefix = chat_transcript([{"role": "tool", "content": "Error: boom"}])  # without a prefix: a result
    assert no_prefix["n_tool_errors"] == 0


def test_only_a_last_message_without_tool_calls_is_the_answer() -> None:
    call = {"id": "c", "function": {"name": "submit", "arguments": '{"answer": "42"}'}}
    ends_on_a_call = chat_transcript(
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "Let me think."},
            {"role": "user", "content": "Please proceed."},
            {"role": "assistant", "content": "", "tool_calls": [call]},
        ]
    )
    kinds = [e["kind"] for e in parse_transcript(ends_on_a_call["transcript"])]
    assert kinds == ["task", "message", "task", "reply"]  # the remark is said, not an answer
    assert ends_on_a_call["final_answer"] is None
    assert action_sequence(ends_on_a_call["transcript"]) == ['submit(answer="42")']
    answered = chat_transcript(
        [
            {"role": "assistant", "content": "One moment."},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "assistant", "content": "It is 42."},
            {"role": "user", "content": "###STOP###"},  # the customer may have the last word
        ]
    )
    assert answered["final_answer"] == "It is 42." and answered["n_turns"] == 3
    assert action_sequence(answered["transcript"]) == ['submit(answer="42")', "answer"]


def test_a_long_answer_is_stored_cut_like_every_text() -> None:
    out = chat_transcript([{"role": "assistant", "content": "x" * (MAX_STORED_CHARS + 5)}])
    assert out["final_answer"].startswith("x" * MAX_STORED_CHARS)
    assert out["final_answer"].endswith(f"[truncated, {MAX_STORED_CHARS + 5} chars in all]")
    assert json.loads(out["transcript"])[0]["length"] == MAX_STORED_CHARS + 5


@pytest.mark.parametrize(
    ("temperature", "protocol", "config"),
    [
        (None, "native", "protocol=native"),
        (float("nan"), "text", "protocol=text"),
        (0.7, "json", "temperature=0.7"),
        (None, "json", "default"),
    ],
)
def test_settings_label_names_what_differs_from_a_default_run(
    temperature: float | None, protocol: str, config: str
) -> None:
    assert settings_label(temperature, protocol) == {"json_mode": "off", "config": config}


def test_calls_tools_looks_at_assistant_messages_only() -> None:
    assert not calls_tools([{"role": "user", "tool_calls": [{"name": "x"}]}])
    assert calls_tools([{"role": "assistant", "tool_calls": [{"name": "x"}]}])
