"""The action protocol: every model turn is exactly one JSON object.

Either a tool call ``{"tool": NAME, "args": {...}}`` or a final answer
``{"answer": TEXT}``, optionally with the agent's stated chance that it is right,
``{"answer": TEXT, "confidence": 0.8}`` (a number in [0, 1]; a ``+confidence`` prompt asks for
it; one that is not such a number is kept as not stated, with a note, and never costs the
trial). The object may stand alone or inside one code fence
(```` ```json ... ``` ````); surrounding whitespace is fine. Anything else is a
format error, and the error says exactly what was wrong so the model (and the
person reading the transcript) can see it.

:func:`parse_action` never raises, whatever string a model produces.

>>> parse_action('{"tool": "get_order", "args": {"order_id": "O1001"}}')
ToolCall(tool='get_order', args={'order_id': 'O1001'})
>>> parse_action('```json\\n{"answer": "Done."}\\n```')
Answer(text='Done.')
>>> parse_action("Sure! I refunded it.").message
'not JSON: the reply must be one JSON object, got text starting with "Sure! I refunded it."'
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from passk_nb.data.confidence import stated_confidence

__all__ = [
    "ToolCall",
    "Answer",
    "FormatError",
    "Action",
    "parse_action",
    "PROTOCOL_EXAMPLE",
    "ACTION_SCHEMA",
    "PROTOCOLS",
    "NativeCall",
    "parse_native_call",
    "NATIVE_EXAMPLE",
]

#: How the agent calls tools: ``json``, the JSON action protocol of this module (any backend), or
#: ``native``, the API's own tool calling (OpenAI ``tool_calls``, Anthropic ``tool_use``, Ollama
#: ``tools``): the suite's tools go out as tool definitions and calls come back as structured data.
PROTOCOLS: tuple[str, ...] = ("json", "native")

PROTOCOL_EXAMPLE = '{"tool": "get_order", "args": {"order_id": "O1001"}} or {"answer": "..."}'

#: JSON Schema of one action, for backends that can constrain their output to a
#: schema (``json_schema=True`` on the ``ollama`` and ``openai`` providers). It
#: removes format errors from what is measured: use it knowingly.
ACTION_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {
            "type": "object",
            "properties": {"tool": {"type": "string"}, "args": {"type": "object"}},
            "required": ["tool", "args"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
            "additionalProperties": False,
        },
    ]
}

_FENCE = re.compile(r"\A```[ \t]*([A-Za-z0-9_-]*)[ \t]*\r?\n(.*?)\r?\n?[ \t]*```\Z", re.DOTALL)
_PREVIEW = 40


@dataclass(frozen=True)
class ToolCall:
    """The model asked to run ``tool`` with keyword arguments ``args``."""

    tool: str
    args: dict[str, Any]


@dataclass(frozen=True, repr=False)
class Answer:
    """The model ended the episode with a final answer to the customer; ``confidence`` its stated
    chance of being right (None: not stated), ``confidence_note`` why a stated one was not kept.

    >>> parse_action('{"answer": "Refunded.", "confidence": 0.9}')
    Answer(text='Refunded.', confidence=0.9)
    >>> parse_action('{"answer": "Refunded.", "confidence": "very"}').confidence_note
    "confidence='very' is not a number in [0, 1], stored as not stated"
    """

    text: str
    confidence: float | None = None
    confidence_note: str | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        stated = (("confidence", self.confidence), ("confidence_note", self.confidence_note))
        return f"Answer(text={self.text!r}{''.join(f', {k}={v!r}' for k, v in stated if v is not None)})"


@dataclass(frozen=True)
class FormatError:
    """The reply broke the protocol; ``message`` says how."""

    message: str


Action = ToolCall | Answer | FormatError


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PREVIEW else flat[:_PREVIEW] + "..."


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _unfence(text: str) -> str | FormatError:
    """Strip one surrounding code fence, or explain why the fencing is wrong."""
    if text.startswith("```"):
        match = _FENCE.match(text)
        if match is None:
            if text.count("```") < 2:
                return FormatError("unclosed code fence: close the ``` block, or send the JSON object alone")
            return FormatError("text outside the code fence: send one fenced JSON object and nothing else")
        language, body = match.group(1).lower(), match.group(2)
        if language not in ("", "json"):
            return FormatError(f"code fence labelled {language!r}: use ```json or no fence")
        if "```" in body:
            return FormatError("more than one code fence: send exactly one JSON object")
        return body.strip()
    if "```" in text and not _is_json(text):  # backticks inside a JSON string are content, not a fence
        return FormatError("text outside the code fence: send one fenced JSON object and nothing else")
    return text


def _is_json(text: str) -> bool:
    try:
        _DECODER.decode(text)
    except ValueError:
        return False
    return True


def _check_object(obj: Any) -> Action:
    if not isinstance(obj, dict):
        kind = "null" if obj is None else type(obj).__name__
        return FormatError(f"expected a JSON object, got {kind}")
    keys = set(obj)
    if "tool" in keys and "answer" in keys:
        return FormatError('an action has either "tool" or "answer", not both')
    if "answer" in keys:
        extra = sorted(keys - {"answer", "confidence"})
        if extra:
            return FormatError(f'unknown keys {extra} beside "answer": send {{"answer": TEXT}} only')
        if not isinstance(obj["answer"], str):
            return FormatError(f'"answer" must be a string, got {type(obj["answer"]).__name__}')
        return Answer(obj["answer"], *stated_confidence(obj.get("confidence")))
    if "tool" in keys:
        extra = sorted(keys - {"tool", "args"})
        if extra:
            return FormatError(f'unknown keys {extra}: a tool call has only "tool" and "args"')
        tool = obj["tool"]
        if not isinstance(tool, str) or not tool.strip():
            return FormatError('"tool" must be a non-empty string naming a tool')
        if "args" not in keys:
            return FormatError('missing "args": send {"tool": NAME, "args": {...}} (use {} for no arguments)')
        if not isinstance(obj["args"], dict):
            kind = "null" if obj["args"] is None else type(obj["args"]).__name__
            return FormatError(f'"args" must be a JSON object, got {kind}')
        return ToolCall(tool, obj["args"])
    return FormatError(f'unknown keys {sorted(keys)}: expected "tool" and "args", or "answer"')


def _parse(text: Any) -> Action:
    if not isinstance(text, str):
        return FormatError(f"reply is not text (got {type(text).__name__})")
    stripped = text.strip()
    if not stripped:
        return FormatError("empty reply: send one JSON object, e.g. " + PROTOCOL_EXAMPLE)
    body = _unfence(stripped)
    if isinstance(body, FormatError):
        return body
    try:
        obj, end = _DECODER.raw_decode(body)
    except ValueError as exc:
        if body.startswith("{"):
            return FormatError(f"invalid JSON: {exc}")
        return FormatError(
            f'not JSON: the reply must be one JSON object, got text starting with "{_preview(body)}"'
        )
    rest = body[end:].strip()
    if rest:
        if rest.startswith("{"):
            return FormatError("two JSON objects in one reply: send exactly one action per turn")
        return FormatError(f'text after the JSON object ("{_preview(rest)}"): send the object alone')
    return _check_object(obj)


def parse_action(text: str) -> Action:
    """Parse one model reply into a :class:`ToolCall`, an :class:`Answer` or a :class:`FormatError`.

    Never raises: any failure, including pathological input (deep nesting,
    huge strings, non-standard constants such as ``NaN``), is a
    :class:`FormatError` that names the problem.

    >>> parse_action('{"tool": "refund_order", "args": {"order_id": "O1001", "amount": 79.99}}').args
    {'order_id': 'O1001', 'amount': 79.99}
    >>> parse_action('{"answer": "a"} {"answer": "b"}').message
    'two JSON objects in one reply: send exactly one action per turn'
    """
    try:
        return _parse(text)
    except RecursionError:
        return FormatError("invalid JSON: nested too deeply")
    except Exception as exc:  # the contract is "never raises"
        return FormatError(f"unparseable reply: {type(exc).__name__}: {exc}")


NATIVE_EXAMPLE = "call one of the tools with a JSON object of arguments, or reply in plain text to answer"


@dataclass(frozen=True)
class NativeCall:
    """One tool call as a backend's native tool calling returned it.

    ``id`` is the API's call id (made up as ``call_<n>`` where the API gives none, as Ollama's
    does not); ``arguments`` is kept exactly as received: a JSON string (OpenAI) or an object
    (Anthropic, Ollama), so that the conversation sent back echoes it unchanged.
    """

    id: str
    name: str
    arguments: Any


def parse_native_call(call: NativeCall) -> ToolCall | FormatError:
    """A native tool call as a :class:`ToolCall`, or the :class:`FormatError` the JSON protocol
    gives for the same mistake (arguments that are not JSON, or not an object; no tool name).

    An unknown tool or arguments of the wrong type are not format errors here either: the tool
    rejects them (a tool error), as it does for the JSON protocol. Never raises.

    >>> parse_native_call(NativeCall("call_1", "get_order", '{"order_id": "O1001"}'))
    ToolCall(tool='get_order', args={'order_id': 'O1001'})
    >>> parse_native_call(NativeCall("call_2", "get_order", '{"order_id": ')).message
    'invalid JSON in the arguments of get_order: Expecting value: line 1 column 13 (char 12)'
    >>> parse_native_call(NativeCall("toolu_1", "get_order", ["O1001"])).message
    'the arguments of get_order must be a JSON object, got list'
    """
    name = call.name
    if not isinstance(name, str) or not name.strip():
        return FormatError("a tool call without a tool name: name one of the tools")
    shown = name[:80]
    args = call.arguments
    if args is None or (isinstance(args, str) and not args.strip()):
        args = {}  # a call of a tool without arguments may carry none
    if isinstance(args, str):
        try:
            args = _DECODER.decode(args.strip())
        except RecursionError:
            return FormatError(f"invalid JSON in the arguments of {shown}: nested too deeply")
        except ValueError as exc:
            return FormatError(f"invalid JSON in the arguments of {shown}: {exc}")
    if not isinstance(args, dict):
        kind = "null" if args is None else type(args).__name__
        return FormatError(f"the arguments of {shown} must be a JSON object, got {kind}")
    return ToolCall(name, args)
