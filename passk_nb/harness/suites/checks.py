"""``check_suite``: the first thing a suite author runs.

- every known-good script passes its task;
- an agent that does nothing fails every task (unless the task says why it may pass);
- checks are deterministic: the same script twice gives the same outcome and final state;
- tools reject bad arguments (missing, extra, wrong types, absurd numbers) with a tool
  error the model sees, never an exception;
- refusal tasks have a claim vocabulary to catch a claimed refusal.

>>> from passk_nb.harness.suites import get_suite
>>> check_suite(get_suite("orders"))
[]
"""

from __future__ import annotations

import json
from typing import Any

from passk_nb.data.transcript import parse_transcript
from passk_nb.harness.episode import run_episode
from passk_nb.harness.providers.base import BaseProvider, Message
from passk_nb.harness.providers.scripted import ScriptedProvider
from passk_nb.harness.suites.base import Suite, SuiteError, Tool

#: Bad values tried for each argument type: none may make a tool raise.
_BAD_VALUES: dict[str, tuple[Any, ...]] = {
    "string": (None, 7, "", "   ", "\x00", "x" * 10_000, ["list"], {"a": 1}),
    "number": (None, "12", True, float("nan"), float("inf"), -1e308, 10**400, [1]),
}


def check_suite(suite: Suite) -> list[str]:
    """Problems found in ``suite``, one sentence each; an empty list means it passed."""
    problems: list[str] = []
    prompt = suite.prompts["default"]
    for task in suite.tasks:
        outcomes = []
        try:
            for _ in range(2):
                result = run_episode(suite, task, ScriptedProvider(suite=suite), system_prompt=prompt)
                outcomes.append((result["outcome"], result["state_diff"]))
        except SuiteError as exc:
            problems.append(str(exc))
            continue
        if outcomes[0][0] != "pass":
            problems.append(
                f"task {task.id!r}: its known-good script ends as {outcomes[0][0]!r}, not 'pass': "
                f"{_why(result)}"
            )
        if outcomes[0] != outcomes[1]:
            problems.append(f"task {task.id!r}: the same script twice gave different outcomes or states")
        try:
            idle = run_episode(suite, task, _DoNothing("do-nothing"), system_prompt=prompt)
        except SuiteError as exc:
            problems.append(str(exc))
            continue
        if idle["outcome"] == "pass" and task.do_nothing_passes is None:
            problems.append(
                f"task {task.id!r}: an agent that does nothing passes it; make the check require the action "
                "(or a refusal=), or set do_nothing_passes='why'"
            )
        if task.refusal is not None and suite.claims is None:
            problems.append(f"task {task.id!r} is a refusal but the suite has no claims vocabulary")
    for tool in suite.tools.values():
        problems += _tool_problems(suite, tool)
    return problems


def _why(result: dict[str, Any]) -> str:
    """The reason a trial failed: the check's (or the episode's) reason, and the first tool error."""
    reasons = [str(result.get("error") or "no reason given")]
    for entry in parse_transcript(result.get("transcript")):
        if entry.get("kind") == "tool_result" and entry.get("error"):
            reasons.append(f"a step failed: {entry.get('content')}")
            break
    return "; ".join(reasons)


class _DoNothing(BaseProvider):
    name = "do-nothing"

    def chat(self, messages: list[Message]) -> str:
        return json.dumps({"answer": "Done."})


def _tool_problems(suite: Suite, tool: Tool) -> list[str]:
    problems = []
    good = {name: ("A" if p.type == "string" else 1.0) for name, p in tool.params.items()}
    trials: list[dict[str, Any]] = [{}, {**good, "unexpected_argument": 1}]
    for name, param in tool.params.items():
        trials += [{**good, name: bad} for bad in _BAD_VALUES.get(param.type, ())]
    for args in trials:
        env = suite.make_env()
        try:
            result = env.try_call(tool.name, args)
        except Exception as exc:  # the point of the check: report, never crash
            problems.append(
                f"tool {tool.name!r} raised {type(exc).__name__} for arguments {_short(args)}; "
                "raise ToolError (or KeyError/ValueError in a build.tool function) so the model sees an error"
            )
            continue
        if not isinstance(result, dict) or not ({"ok", "error"} & set(result)):
            problems.append(f"tool {tool.name!r} returned {_short(result)} for {_short(args)}")
    return problems


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"
