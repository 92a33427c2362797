"""The callable provider: any Python function ``messages -> str`` is an agent.

>>> p = CallableProvider(lambda messages: '{"answer": "ok"}', model="toy")
>>> p.chat([{"role": "user", "content": "hi"}])
'{"answer": "ok"}'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from passk_nb.harness.providers.base import BaseProvider, Message, Reply


class CallableProvider(BaseProvider):
    """Wrap ``fn(messages) -> str | Reply``; the model name defaults to the function's name."""

    name = "callable"

    def __init__(self, fn: Callable[[list[Message]], str | Reply], model: str | None = None, **options: Any):
        if not callable(fn):
            raise TypeError(f"CallableProvider needs a function of the messages, got {type(fn).__name__}")
        super().__init__(model or getattr(fn, "__name__", type(fn).__name__), **options)
        self.fn = fn

    def chat(self, messages: list[Message]) -> str | Reply:
        return self.fn(messages)
