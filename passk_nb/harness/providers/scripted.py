"""The scripted provider: replays each task's known-good action script.

It proves the whole pipeline (protocol, tools, checks, records) without a
model. It is stateless: the task is recognised from the first user message and
the step from the number of assistant turns so far, so one instance serves any
number of concurrent trials.

>>> from passk_nb.harness.suites import get_suite
>>> suite = get_suite("orders")
>>> p = ScriptedProvider(suite=suite)
>>> p.chat([{"role": "system", "content": "..."}, {"role": "user", "content": suite.tasks[0].prompt}])
'{"tool": "get_order", "args": {"order_id": "O1001"}}'

A task prompt reworded by ``run(perturb=)`` is recognised as the task it is most like.

It speaks native tool calling too (``run("scripted", protocol="native")``): a
tool-call step becomes one call (arguments as JSON text, id ``call_<step>``), an
answer step a reply in plain text, a raw string step is sent as text.

>>> p.chat_native([{"role": "user", "content": suite.tasks[0].prompt}], suite.tool_definitions()).tool_calls
[NativeCall(id='call_0', name='get_order', arguments='{"order_id": "O1001"}')]
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from passk_nb.harness.protocol import NativeCall
from passk_nb.harness.providers.base import BaseProvider, Message, ProviderError, Reply
from passk_nb.harness.suites.base import Suite
from passk_nb.harness.suites.registry import get_suite

Step = Mapping[str, Any] | str


class ScriptedProvider(BaseProvider):
    """Replay scripts: each task's own known-good script, or custom ones.

    ``scripts`` maps task ids to a list of steps; a step is a protocol object
    (sent as JSON) or a raw string (sent verbatim, e.g. to test format errors).
    Tasks without a custom script use their known-good one.
    """

    name = "scripted"
    native_tools = True

    def __init__(
        self,
        model: str | None = None,
        *,
        suite: str | Suite = "orders",
        scripts: Mapping[str, Sequence[Step]] | None = None,
        **options: Any,
    ):
        super().__init__(model or "known-good", **options)
        self.suite = get_suite(suite)
        custom = dict(scripts or {})
        unknown = sorted(set(custom) - set(self.suite.task_ids))
        if unknown:
            raise ValueError(f"scripts for unknown tasks {unknown}; tasks are {self.suite.task_ids}")
        self._by_prompt = {t.prompt: (t.id, list(custom.get(t.id, t.script))) for t in self.suite.tasks}

    def step(self, messages: list[Message]) -> Step:
        """The script's step for this conversation: the task from the first user message, the
        step from the number of assistant turns so far."""
        first_user = next((m["content"] for m in messages if m["role"] == "user"), None)
        if first_user not in self._by_prompt and isinstance(first_user, str):
            first_user = self._reworded(first_user)
        if first_user not in self._by_prompt:
            raise ProviderError(
                f"scripted provider: no script for this conversation (suite {self.suite.name!r})"
            )
        task_id, steps = self._by_prompt[first_user]
        step = sum(1 for m in messages if m["role"] == "assistant")
        if step >= len(steps):
            raise ProviderError(f"scripted provider: the script for {task_id!r} has only {len(steps)} steps")
        return steps[step]

    def _reworded(self, text: str) -> str | None:
        """The task prompt ``text`` rewords (``run(perturb=)``): the one most like it, if clearly so."""
        close = difflib.get_close_matches(text, list(self._by_prompt), n=2, cutoff=0.5)
        return close[0] if close else None

    def chat(self, messages: list[Message]) -> str:
        item = self.step(messages)
        return item if isinstance(item, str) else json.dumps(item)

    def chat_native(self, messages: list[Message], tools: list[dict[str, Any]]) -> Reply:
        """The step as a native reply; a custom step ``{"tool_calls": [{"name", "arguments"}, ...],
        "text": ...}`` gives those calls as they are (several calls, malformed arguments)."""
        item = self.step(messages)
        step = sum(1 for m in messages if m["role"] == "assistant")
        if isinstance(item, str):
            return Reply(item)
        if "tool_calls" in item:
            calls = [
                NativeCall(str(c.get("id", f"call_{step}_{i}")), c.get("name", ""), c.get("arguments"))
                for i, c in enumerate(item["tool_calls"])
            ]
            return Reply(str(item.get("text", "")), tool_calls=calls)
        if "tool" in item:
            arguments = json.dumps(item.get("args", {}))
            return Reply("", tool_calls=[NativeCall(f"call_{step}", item["tool"], arguments)])
        return Reply(str(item.get("answer", "")))
