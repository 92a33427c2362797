"""The episode as steps: the blocking and the asyncio driver give the same trial, field for field."""

import asyncio
import json

import pytest

import passk_nb
from passk_nb.harness.episode import ChatRequest, arun_episode, episode_steps, run_episode
from passk_nb.harness.providers.base import BaseProvider
from passk_nb.harness.providers.scripted import ScriptedProvider
from passk_nb.harness.suites import get_suite
from tests.harness.test_episode import CLASSIC_MISTAKES, BrokenBackend, tool

SUITE = get_suite("orders")
PROMPT = SUITE.prompts["default"]
TIMING = ("latency_s", "started_at")


class Awaiting:
    """An asyncio backend: ``achat``/``achat_native`` answer from a blocking provider after a real
    suspension, and count how often the loop asked."""

    def __init__(self, inner):
        self.inner, self.awaited = inner, 0

    async def achat(self, messages):
        self.awaited += 1
        await asyncio.sleep(0)
        return self.inner.chat(messages)

    async def achat_native(self, messages, tools):
        self.awaited += 1
        await asyncio.sleep(0)
        return self.inner.chat_native(messages, tools)


def comparable(record):
    """The record without wall-clock fields (also inside the transcript)."""
    out = {key: value for key, value in record.items() if key not in TIMING}
    entries = json.loads(out["transcript"])
    for entry in entries:
        entry.pop("latency_s", None)
    out["transcript"] = entries
    return out


def both(task_id, make_agent, **options):
    task = SUITE.task(task_id)
    blocking = run_episode(SUITE, task, make_agent(), system_prompt=PROMPT, **options)
    awaited = Awaiting(make_agent())
    via_loop = asyncio.run(arun_episode(SUITE, task, awaited, system_prompt=PROMPT, **options))
    in_thread = asyncio.run(arun_episode(SUITE, task, make_agent(), system_prompt=PROMPT, **options))
    return blocking, via_loop, in_thread, awaited


CASES = [
    *[
        (task_id, (lambda a=agent: passk_nb.harness.make_provider(a)), outcome)
        for task_id, agent, outcome in CLASSIC_MISTAKES
    ],
    *[(task.id, (lambda: ScriptedProvider(suite=SUITE)), "pass") for task in SUITE.tasks],
    ("refund-delivered", (lambda: BrokenBackend("m")), "infra_error"),
]


@pytest.mark.parametrize("task_id, make_agent, outcome", CASES)
def test_both_drivers_give_the_same_record(task_id, make_agent, outcome):
    blocking, via_loop, in_thread, awaited = both(task_id, make_agent)
    assert blocking["outcome"] == outcome
    assert comparable(via_loop) == comparable(blocking) == comparable(in_thread)
    assert awaited.awaited == max(blocking["n_turns"], 1)  # every turn was awaited, not blocked on


@pytest.mark.parametrize("task", SUITE.tasks, ids=lambda t: t.id)
def test_native_calls_are_awaited_and_give_the_same_record(task):
    blocking, via_loop, _, awaited = both(task.id, lambda: ScriptedProvider(suite=SUITE), protocol="native")
    assert blocking["outcome"] == "pass"
    assert comparable(via_loop) == comparable(blocking)
    assert awaited.awaited == blocking["n_turns"]


def test_an_agent_error_is_the_agents_under_both_drivers():
    def agent(messages):
        raise KeyError("tool_calls")

    blocking, via_loop, in_thread, _ = both("refund-delivered", lambda: passk_nb.harness.make_provider(agent))
    for record in (blocking, via_loop, in_thread):
        assert record["outcome"] == "agent_error"
        assert record["error"].startswith("the agent raised KeyError: 'tool_calls'")


def test_the_steps_yield_requests_and_take_replies_and_errors():
    steps = episode_steps(SUITE, SUITE.task("refund-delivered"), system_prompt=PROMPT)
    first = next(steps)
    assert isinstance(first, ChatRequest) and not first.native
    assert [m["role"] for m in first.messages] == ["system", "user"]
    second = steps.send(json.dumps(tool("get_order", order_id="O1001")))
    assert second.messages[-1]["content"].startswith("Tool result (get_order)")
    with pytest.raises(StopIteration) as stop:
        steps.throw(ConnectionError("gone"))
    record = stop.value.value
    assert record["outcome"] == "infra_error" and record["n_turns"] == 1
    assert record["error"] == "ConnectionError: gone"


def test_a_request_is_a_copy_the_backend_may_change():
    seen = []

    class Mutating(BaseProvider):
        name = "mutating"

        def chat(self, messages):
            seen.append(len(messages))
            messages.clear()  # a careless backend
            return (
                json.dumps({"answer": "done"})
                if len(seen) > 1
                else json.dumps(tool("get_order", order_id="O1001"))
            )

    record = run_episode(SUITE, SUITE.task("refund-delivered"), Mutating("m"), system_prompt=PROMPT)
    assert seen == [2, 4] and record["n_turns"] == 2


def test_keyboard_interrupt_from_a_backend_is_not_swallowed():
    class Interrupted(BaseProvider):
        name = "interrupted"

        def chat(self, messages):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_episode(SUITE, SUITE.task("refund-delivered"), Interrupted("m"), system_prompt=PROMPT)
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(
            arun_episode(SUITE, SUITE.task("refund-delivered"), Interrupted("m"), system_prompt=PROMPT)
        )
