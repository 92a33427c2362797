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
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from passk_nb.harness.providers.base import BaseProvider, Message, ProviderError
from passk_nb.harness.suites import get_suite
from passk_nb.harness.suites.base import Suite

Step = Mapping[str, Any] | str


class ScriptedProvider(BaseProvider):
    """Replay scripts: each task's own known-good script, or custom ones.

    ``scripts`` maps task ids to a list of steps; a step is a protocol object
    (sent as JSON) or a raw string (sent verbatim, e.g. to test format errors).
    Tasks without a custom script use their known-good one.
    """

    name = "scripted"

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

    def chat(self, messages: list[Message]) -> str:
        first_user = next((m["content"] for m in messages if m["role"] == "user"), None)
        if first_user not in self._by_prompt:
            raise ProviderError(
                f"scripted provider: no script for this conversation (suite {self.suite.name!r})"
            )
        task_id, steps = self._by_prompt[first_user]
        step = sum(1 for m in messages if m["role"] == "assistant")
        if step >= len(steps):
            raise ProviderError(f"scripted provider: the script for {task_id!r} has only {len(steps)} steps")
        item = steps[step]
        return item if isinstance(item, str) else json.dumps(item)
