"""Chat messages of another harness as this package's transcript entries: :func:`chat_transcript`.

τ-bench, τ²-bench and inspect_ai store a trial as a list of chat messages (``role``,
``content``, the assistant's ``tool_calls``, ``tool`` messages with the results). The
importers turn them into the entries our own native tool-calling runs write
(:mod:`passk_nb.data.transcript`), so :func:`passk_nb.divergence`, ``action_sequence`` and
the transcript browser read imported trials like our own. The importers also share the
``config`` label they write (:func:`settings_label`).

A message is a mapping. A tool call is one of the shapes these harnesses write:

- OpenAI's (τ-bench): ``{"id", "function": {"name", "arguments": "<JSON text>"}}``;
- τ²-bench's: ``{"id", "name", "arguments": {...}}``;
- inspect_ai's: ``{"id", "function": "<name>", "arguments": {...}, "parse_error"}``.

A tool message names its tool by ``name`` or ``function`` (else by the call it answers,
``tool_call_id``) and may say ``error`` (true: the tool failed).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from passk_nb.data.transcript import cap_text, transcript_entry

__all__ = ["calls_tools", "chat_transcript", "preview", "settings_label"]


def chat_transcript(messages: Sequence[Any], *, tool_error_prefix: str | None = None) -> dict[str, Any]:
    """Chat messages as transcript entries, with the record fields read from them.

    Returns ``transcript`` (JSON text), ``final_answer``, ``n_turns`` (assistant messages),
    ``n_tool_calls``, ``n_tool_errors`` and ``n_format_errors``.

    - The customer's (``user``) messages are ``task`` entries; a system prompt is a
      ``system`` entry.
    - Each tool call of an assistant message is one ``reply`` entry with its ``action``
      (``{"tool", "args"}``) and, as its content, the message's text and the call as
      received. A call whose arguments are not a JSON object (or that its harness could not
      parse: ``parse_error``) is a ``reply`` with a ``format_error``.
    - The last assistant message, when it makes no tool call, is the agent's answer: a
      ``reply`` with ``{"answer": text}``, and ``final_answer``. The agent's other text
      messages are ``message`` entries: said mid-conversation, not actions. A trial whose
      agent's last message is a tool call has no answer.
    - Tool results are ``tool_result`` entries; one fails when its message says ``error``
      or, without that key, when its text starts with ``tool_error_prefix``.

    >>> out = chat_transcript([
    ...     {"role": "user", "content": "Cancel order 7"},
    ...     {"role": "assistant", "content": None,
    ...      "tool_calls": [{"id": "c1", "function": {"name": "cancel", "arguments": '{"id": 7}'}}]},
    ...     {"role": "tool", "tool_call_id": "c1", "content": "cancelled"},
    ...     {"role": "assistant", "content": "Done."}])
    >>> for entry in json.loads(out["transcript"]):
    ...     print(entry["kind"], entry.get("action", ""))
    task
    reply {'tool': 'cancel', 'args': {'id': 7}}
    tool_result
    reply {'answer': 'Done.'}
    >>> out["final_answer"], out["n_turns"], out["n_tool_calls"]
    ('Done.', 2, 1)
    """
    messages = [m for m in messages if isinstance(m, Mapping)]
    agent = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    answer_at = agent[-1] if agent and not messages[agent[-1]].get("tool_calls") else None
    entries: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # call id -> tool name, for tool results that name only the call
    counts = {"n_turns": len(agent), "n_tool_calls": 0, "n_tool_errors": 0, "n_format_errors": 0}
    final_answer: str | None = None
    for i, message in enumerate(messages):
        role = str(message.get("role"))
        text = _text(message.get("content"))
        calls = [c for c in message.get("tool_calls") or [] if isinstance(c, Mapping)]
        if role == "assistant" and calls:
            for n, call in enumerate(calls):
                name, entry = _reply_entry(call, text if n == 0 else "", n if len(calls) > 1 else None)
                names[str(call.get("id"))] = name
                entries.append(entry)
                counts["n_format_errors"] += "format_error" in entry
            counts["n_tool_calls"] += len(calls)
        elif role == "assistant" and i == answer_at:
            final_answer = text
            entries.append(transcript_entry("reply", "assistant", text, action={"answer": text}))
        elif role == "assistant":
            entries.append(transcript_entry("message", "assistant", text))
        elif role == "tool":
            failed = _tool_failed(message, text, tool_error_prefix)
            counts["n_tool_errors"] += failed
            call_id = str(message.get("tool_call_id") or message.get("id"))
            name = str(message.get("name") or message.get("function") or names.get(call_id, ""))
            entries.append(transcript_entry("tool_result", "tool", text, tool=name[:80], error=failed))
        else:  # the customer (τ²'s user may call tools of its own) or the system prompt
            shown = [json.dumps({"name": _call(c)[0], "arguments": _call(c)[1]}, default=str) for c in calls]
            kind = "task" if role == "user" else role
            entries.append(transcript_entry(kind, role, "\n".join([text, *shown]).strip()))
    return {
        **counts,
        "final_answer": cap_text(final_answer),
        "transcript": json.dumps(entries, ensure_ascii=False, default=str),
    }


def calls_tools(messages: Sequence[Any]) -> bool:
    """Whether any assistant message carries tool calls (the run called tools natively).

    >>> calls_tools([{"role": "assistant", "content": "hi"}])
    False
    """
    return any(
        isinstance(m, Mapping) and m.get("role") == "assistant" and bool(m.get("tool_calls"))
        for m in messages
    )


def settings_label(temperature: float | None, protocol: str) -> dict[str, Any]:
    """``json_mode`` (the imported harnesses ask for no JSON mode) and the ``config`` label, which
    names the settings that differ from a default run of our own harness, as its labels do.

    >>> settings_label(0.0, "native")
    {'json_mode': 'off', 'config': 'temperature=0.0, protocol=native'}
    >>> settings_label(float("nan"), "json")["config"]
    'default'
    """
    known = temperature is not None and not math.isnan(temperature)
    parts = [f"temperature={temperature}"] if known else []
    parts += [f"protocol={protocol}"] if protocol != "json" else []
    return {"json_mode": "off", "config": ", ".join(parts) or "default"}


def preview(value: Any) -> str:
    """``value`` as JSON, cut to 80 characters (for error messages)."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _reply_entry(call: Mapping[str, Any], text: str, index: int | None) -> tuple[str, dict[str, Any]]:
    """(the tool's name, one tool call as a ``reply`` entry)."""
    name, raw, args = _call(call)
    received = json.dumps({"id": call.get("id"), "name": name, "arguments": raw}, default=str)
    content = (text + "\n" if text else "") + received
    where = {"tool_call_id": call.get("id"), **({"call_index": index} if index is not None else {})}
    parse_error = call.get("parse_error")
    if parse_error or args is None:
        problem = (
            f"the arguments of {name} could not be parsed: {parse_error}"
            if parse_error
            else f"the arguments of {name} are not a JSON object: {preview(raw)}"
        )
        return name, transcript_entry("reply", "assistant", content, format_error=problem, **where)
    action = {"tool": name, "args": args}
    return name, transcript_entry("reply", "assistant", content, action=action, **where)


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content, default=str) if content else ""


def _call(call: Mapping[str, Any]) -> tuple[str, Any, dict[str, Any] | None]:
    """(tool name, arguments as received, arguments as an object or None) of one tool call."""
    inner = call.get("function")
    fields: Mapping[str, Any] = inner if isinstance(inner, Mapping) else call
    name = inner if isinstance(inner, str) else str(fields.get("name"))
    raw = fields.get("arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) else {} if raw is None else raw
    except ValueError:
        args = None
    return name, raw, args if isinstance(args, dict) else None


def _tool_failed(message: Mapping[str, Any], text: str, prefix: str | None) -> bool:
    """The message's own ``error`` flag; without one, whether the text starts with ``prefix``."""
    if "error" in message:
        return message.get("error") is True
    return prefix is not None and text.startswith(prefix)
