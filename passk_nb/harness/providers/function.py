"""The callable provider: any Python function ``messages -> str`` (or object with ``chat``) is an agent.

The agent is called once per turn with the conversation so far, OpenAI-style
``{"role": ..., "content": ...}`` dicts: the system prompt first (the suite's instructions,
tools and reply protocol), the task as the first ``user`` message, each of its replies as an
``assistant`` message, and what the harness answers as a **user** message: a tool's result
as ``Tool result (NAME): {"ok": ...}`` (or ``{"error": ...}``), a malformed reply as
``Format error: ...``. It returns its next reply as text: under the JSON protocol one JSON
object, ``{"tool": NAME, "args": {...}}`` or ``{"answer": TEXT}`` (docs/guide/running.md shows a turn).

The run identity of a Python agent includes a fingerprint of its code and the plain data
it reads (:mod:`passk_nb.harness.fingerprint`), so an edited agent is a new run; pass
``version=`` to pin the identity yourself. A function that takes a ``seed`` keyword gets
each trial's seed. An exception raised by the agent is the agent's failure
(``agent_error``), never an infrastructure error.

>>> p = CallableProvider(lambda messages: '{"answer": "ok"}', model="toy")
>>> p.chat([{"role": "user", "content": "hi"}])
'{"answer": "ok"}'
>>> sorted(p.meta())
['fingerprint']
"""

from __future__ import annotations

import inspect
import json
import traceback
from collections.abc import Callable
from typing import Any

from passk_nb.harness.fingerprint import fingerprint
from passk_nb.harness.providers.base import AgentError, BaseProvider, Message, Reply

#: Frames of a traceback kept in an agent_error's message (the innermost ones).
TRACEBACK_FRAMES = 3


def _accepts_seed(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "seed" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


class CallableProvider(BaseProvider):
    """Wrap ``fn(messages) -> str | Reply``; the model name defaults to the function's name.

    ``identity`` is what the fingerprint is taken of (the function, or the object whose
    ``chat`` method ``fn`` is); ``version`` pins the identity instead.
    """

    name = "callable"
    user_code = True

    def __init__(
        self,
        fn: Callable[..., str | Reply],
        model: str | None = None,
        *,
        version: str | None = None,
        identity: Any = None,
        **options: Any,
    ):
        if not callable(fn):
            raise TypeError(f"CallableProvider needs a function of the messages, got {type(fn).__name__}")
        if version is not None and (not isinstance(version, str) or not version.strip()):
            raise ValueError(
                f"version must be a non-empty string that names this agent's version, got {version!r}"
            )
        super().__init__(model or getattr(fn, "__name__", type(fn).__name__), **options)
        self.fn = fn
        self.version = version
        self.fingerprint = fingerprint(fn if identity is None else identity)
        self.takes_seed = _accepts_seed(fn)

    def chat(self, messages: list[Message]) -> str | Reply:
        try:
            reply = self.fn(messages, seed=self.seed) if self.takes_seed else self.fn(messages)
        except (Exception, SystemExit, KeyboardInterrupt) as exc:  # sys.exit() in agent code too
            frames = traceback.format_exception(exc, limit=-TRACEBACK_FRAMES)
            raise AgentError(
                f"the agent raised {type(exc).__name__}: {exc}",
                "".join(frames),
                stops_run=isinstance(exc, KeyboardInterrupt),
            ) from exc
        if isinstance(reply, Reply):
            _check_reply(reply)
        return reply

    def meta(self) -> dict[str, Any]:
        return {"fingerprint": self.fingerprint, **({"version": self.version} if self.version else {})}


def _check_reply(reply: Reply) -> None:
    """Refuse, as the agent's failure, a :class:`Reply` the record could not hold."""
    for name in ("input_tokens", "output_tokens"):
        value = getattr(reply, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise AgentError(
                f"the agent's Reply.{name} must be an int or None, got {type(value).__name__} {value!r:.40}"
            )
    if not isinstance(reply.meta, dict):
        raise AgentError(f"the agent's Reply.meta must be a dict, got {type(reply.meta).__name__}")
    try:
        json.dumps(reply.meta, default=str)
    except (TypeError, ValueError, RecursionError) as exc:
        raise AgentError(
            f"the agent's Reply.meta cannot be stored as JSON ({exc}): use str keys and no cycles"
        ) from None
