"""Whatever a Python agent returns or raises is that trial's agent_error; the run goes on (issue 29 #9)."""

from __future__ import annotations

import sys

import pytest

import passk_nb
from passk_nb.harness import Reply

TRIALS = 10  # 5 tasks x 10 = 50 trials


def run(agent, tmp_path, **options):
    return passk_nb.run(agent, trials=TRIALS, out=tmp_path, progress=False, **options)


def circular() -> dict:
    d: dict = {}
    d["self"] = d
    return d


@pytest.mark.parametrize(
    "reply, says",
    [
        (lambda: Reply('{"answer": "done"}', meta={(1, 2): "tuple key"}), "meta"),
        (lambda: Reply('{"answer": "done"}', meta=circular()), "meta"),
        (lambda: Reply('{"answer": "done"}', meta=["not", "a", "dict"]), "meta"),  # type: ignore[arg-type]
        (lambda: Reply('{"answer": "done"}', input_tokens="12"), "input_tokens"),  # type: ignore[arg-type]
        (lambda: Reply('{"answer": "done"}', output_tokens=object()), "output_tokens"),  # type: ignore[arg-type]
        (lambda: Reply('{"answer": "done"}', input_tokens=True), "input_tokens"),
    ],
)
def test_a_reply_the_harness_cannot_store_is_the_agents_failure(tmp_path, reply, says):
    def agent(messages):
        return reply()

    df = run(agent, tmp_path)
    assert len(df) == 5 * TRIALS  # the run went on
    assert set(df["outcome"]) == {"agent_error"}
    assert df["error"].str.contains(says).all(), df["error"].iloc[0]
    assert df["error"].str.contains("Reply").all()


def test_sys_exit_in_agent_code_is_an_agent_error_and_every_trial_is_stored(tmp_path):
    calls = []

    def agent(messages):
        calls.append(1)
        if len(calls) % 3 == 0:
            sys.exit(3)
        return '{"answer": "done"}'

    df = run(agent, tmp_path, concurrency=2)
    assert len(df) == 5 * TRIALS
    exits = df[df["outcome"] == "agent_error"]
    assert len(exits) >= 10 and exits["error"].str.contains("SystemExit").all()
    assert set(df["outcome"]) <= {"agent_error", "wrong_state", "no_lookup"}


def test_keyboard_interrupt_from_agent_code_stops_the_run_cleanly_with_that_trial_stored(tmp_path):
    calls = []

    def agent(messages):
        calls.append(1)
        if len(calls) == 7:
            raise KeyboardInterrupt
        return '{"answer": "done"}'

    with pytest.raises(KeyboardInterrupt):
        run(agent, tmp_path, concurrency=1)
    stored = passk_nb.load(tmp_path)
    assert len(stored) == 7  # the six finished trials and the interrupted one
    interrupted = stored[stored["outcome"] == "agent_error"]
    assert len(interrupted) == 1 and "KeyboardInterrupt" in interrupted["error"].iloc[0]
    # the same command resumes the rest
    df = run(lambda messages: '{"answer": "done"}', tmp_path, concurrency=1)
    assert len(df) == 5 * TRIALS
