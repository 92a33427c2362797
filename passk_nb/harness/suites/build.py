"""Write a suite in minutes: tools are plain typed functions, tasks say what must change.

:func:`tool` turns ``fn(state, arg: str, amount: float) -> result`` into a tool (JSON types from the
signature, descriptions from the docstring; a ``KeyError`` or ``ValueError`` is a tool error);
:func:`task` is one task (the message, an ``expect`` of changes, a ``check`` or a ``refusal``,
and a known-good ``script``); :func:`make_suite` assembles them with the system prompt. More:
``docs/guide/suites.md``.

>>> def get_note(state, note_id: str) -> dict:
...     '''One note by id.'''
...     return state["notes"][note_id]
>>> def archive(state, note_id: str) -> dict:
...     '''Archive a note.'''
...     state["notes"][note_id]["archived"] = True
...     return {"archived": note_id}
>>> suite = make_suite(
...     "notes",
...     instructions="You manage a user's notes.",
...     tools=[get_note, archive],
...     initial_state=lambda: {"notes": {"N1": {"text": "milk", "archived": False}}},
...     tasks=[task("archive-n1", "Please archive note N1.", expect={"notes.N1.archived": True},
...                 script=[call("archive", note_id="N1"), answer("Archived N1.")])],
... )
>>> import passk_nb, tempfile
>>> df = passk_nb.run("scripted", suite=suite, trials=1, out=tempfile.mkdtemp(), progress=False)
>>> df["outcome"].tolist()
['pass']
"""

from __future__ import annotations

import functools
import inspect
import re
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from passk_nb.data.claims import ClaimVocabulary
from passk_nb.harness.suites.base import Param, Refusal, Suite, Task, Tool, ToolError, Verdict, expect_changes

__all__ = [
    "tool",
    "task",
    "call",
    "answer",
    "make_suite",
    "protocol_text",
    "native_prompt",
    "NATIVE_PROTOCOL_TEXT",
    "CONFIDENCE_TEXT",
    "CONFIDENCE_SUFFIX",
]

_JSON_TYPES = {str: "string", float: "number", int: "number"}
_ARG_LINE = re.compile(r"^\s*(\w+)\s*:\s*(.+?)\s*$")


def tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    params: Mapping[str, Param] | None = None,
) -> Tool:
    """A :class:`~passk_nb.harness.suites.base.Tool` from a typed function ``fn(state, ...)``.

    ``params`` overrides the derived description (or adds a ``pattern``) of some arguments.
    """
    signature = inspect.signature(fn)
    arguments = list(signature.parameters.values())
    if not arguments:
        raise TypeError(
            f"tool {fn.__name__}: the first parameter must be the state, e.g. def {fn.__name__}(state, ...)"
        )
    hints = typing.get_type_hints(fn)
    doc = inspect.getdoc(fn) or ""
    described = {m.group(1): m.group(2) for m in map(_ARG_LINE.match, doc.splitlines()[1:]) if m}
    derived: dict[str, Param] = {}
    for parameter in arguments[1:]:
        if parameter.kind not in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
            raise TypeError(f"tool {fn.__name__}: argument {parameter.name!r} must be a plain named argument")
        kind = _JSON_TYPES.get(hints.get(parameter.name, object))
        if kind is None:
            raise TypeError(
                f"tool {fn.__name__}: annotate argument {parameter.name!r} as str, float or int "
                f"(got {hints.get(parameter.name, 'no annotation')})"
            )
        derived[parameter.name] = Param(kind, described.get(parameter.name, parameter.name))
    unknown = sorted(set(params or {}) - set(derived))
    if unknown:
        raise TypeError(f"tool {fn.__name__}: params= names arguments it does not have: {unknown}")
    derived.update(params or {})
    first_line = doc.splitlines()[0].rstrip(".") if doc else fn.__name__
    return Tool(name or fn.__name__, description or first_line, derived, _tool_errors(fn))


def _tool_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with KeyError / ValueError turned into a ToolError the model sees."""

    @functools.wraps(fn)  # __wrapped__: the suite's fingerprint hashes fn itself
    def wrapped(state: dict[str, Any], **args: Any) -> Any:
        try:
            return fn(state, **args)
        except KeyError as exc:
            raise ToolError(f"not found: {exc}") from None
        except ValueError as exc:
            raise ToolError(str(exc)) from None

    return wrapped


def call(tool_name: str, **args: Any) -> dict[str, Any]:
    """One tool call of a known-good script: ``call("get_order", order_id="O1")``."""
    return {"tool": tool_name, "args": args}


def answer(text: str) -> dict[str, Any]:
    """The final answer of a known-good script."""
    return {"answer": text}


def task(
    id: str,
    prompt: str,
    *,
    script: Sequence[Mapping[str, Any]],
    expect: Mapping[str, Any] | None = None,
    check: Callable[[dict[str, Any], dict[str, Any]], Verdict] | None = None,
    refusal: Refusal | None = None,
    tests: str = "",
    do_nothing_passes: str | None = None,
    ends_after: str | None = None,
    family: str = "",
) -> Task:
    """One task. Exactly one of ``expect`` (the fields that must change, and their final values
    or predicates; nothing else may change), ``check`` (your own judge of the two states) or
    ``refusal`` (nothing may change, the agent must look at ``refusal.record``, and must not claim
    the refused action). ``do_nothing_passes``: why an agent that does nothing may pass this task
    (checked by ``passk check-suite``; leave it None for every task where doing nothing must fail).
    ``ends_after``: a tool whose first successful call ends the trial, no answer asked for (a
    single-action task; the script then ends with that call; see
    :attr:`~passk_nb.harness.suites.base.Task.ends_after`). ``family``: the scenario this task is
    a variant of (tasks sharing one are resampled together by ``cluster="task_family"``; default
    "": a family of its own).
    """
    given = [name for name, value in (("expect", expect), ("check", check), ("refusal", refusal)) if value]
    if len(given) != 1:
        raise ValueError(
            f"task {id!r}: give exactly one of expect=, check= or refusal= (got {given or 'none'})"
        )
    if check is None:
        expected = dict(expect or {})

        def check(before: dict[str, Any], after: dict[str, Any]) -> Verdict:
            return expect_changes(before, after, expected)

    return Task(
        id=id,
        prompt=prompt,
        check=check,
        script=tuple(dict(step) for step in script),
        tests=tests,
        refusal=refusal,
        do_nothing_passes=do_nothing_passes,
        ends_after=ends_after,
        family=family,
    )


def protocol_text(tools: Iterable[Tool]) -> str:
    """The reply protocol and the tool list every suite's system prompt carries."""
    lines = "\n".join(f"- {t.signature()}: {t.description}." for t in tools)
    return (
        "Reply protocol: every reply is exactly one JSON object and nothing else "
        "(no prose, no second object).\n"
        '- To call a tool: {"tool": "<tool name>", "args": {<arguments>}}\n'
        '- To finish and answer the customer: {"answer": "<your message to the customer>"}\n'
        "Call one tool per reply. The tool's result comes back in the next message.\n\n"
        f"Tools:\n{lines}"
    )


#: A prompt name ending in this (``"default+confidence"``, ``"strict+confidence"``) is that prompt
#: with :data:`CONFIDENCE_TEXT` appended: the agent states its confidence beside its answer. Made
#: from the name rather than stored in ``suite.prompts``, so a suite's fingerprint and every
#: existing prompt's hash stay what their records hold.
CONFIDENCE_SUFFIX = "+confidence"
#: The line a ``+confidence`` prompt adds: how to state the chance that the answer is right.
CONFIDENCE_TEXT = (
    "With your final answer, state how likely it is that you did what the customer needed, correctly: "
    'add "confidence", a number from 0 (surely wrong) to 1 (surely right), beside "answer": '
    '{"answer": "<your message to the customer>", "confidence": <number from 0 to 1>}.'
)

#: What replaces :func:`protocol_text` in a system prompt under native tool calling.
NATIVE_PROTOCOL_TEXT = (
    "Act through the tools you are given, by calling them (several calls in one reply run in "
    "order); each result comes back to you. To finish, reply to the customer in plain text "
    "without a tool call: that reply is your final answer."
)


def native_prompt(tools: Iterable[Tool], text: str) -> str:
    """``text`` for native tool calling: the JSON protocol's section (:func:`protocol_text`, which every
    built prompt carries) replaced by :data:`NATIVE_PROTOCOL_TEXT`, since the tools then go to the API
    as tool definitions. A prompt without that section (your own text) is returned unchanged.

    >>> from passk_nb.harness.suites import get_suite
    >>> suite = get_suite("orders")
    >>> native = native_prompt(suite.tools.values(), suite.prompts["default"])
    >>> "Reply protocol" in native, NATIVE_PROTOCOL_TEXT in native
    (False, True)
    """
    section = protocol_text(tools)
    return text.replace(section, NATIVE_PROTOCOL_TEXT) if section in text else text


def make_suite(
    name: str,
    *,
    instructions: str,
    tools: Sequence[Callable[..., Any] | Tool],
    initial_state: Callable[[], dict[str, Any]],
    tasks: Sequence[Task],
    policy: str = "",
    variants: Mapping[str, str] | None = None,
    claims: ClaimVocabulary | None = None,
    severity: Mapping[str, str] | None = None,
) -> Suite:
    """A suite from typed tool functions (or :func:`tool` results) and :func:`task` s.

    The ``default`` system prompt is ``instructions``, the protocol and tool list, then
    ``policy``; ``variants`` maps more prompt names to text appended to the default after a
    line break (more policy lines, or a blank line and a worked example). ``claims`` lets the
    harness find answers that claim actions the state does not show (required for refusal
    tasks' claim check). ``severity`` says how bad each failure is (outcome or failure name ->
    ``harmful``, ``misleading``, ``benign``; see :attr:`Suite.severity`): it labels outcomes and
    never changes them, so it is not part of the suite's fingerprint.
    """
    built = [t if isinstance(t, Tool) else tool(t) for t in tools]
    names = [t.name for t in built]
    if len(set(names)) != len(names):
        raise ValueError(f"suite {name!r}: duplicate tool names {names}")
    default = "\n\n".join(
        part for part in (instructions.strip(), protocol_text(built), policy.strip()) if part
    )
    prompts = {"default": default, **{k: default + "\n" + v for k, v in (variants or {}).items()}}
    if any(t.refusal is not None for t in tasks) and claims is None:
        raise ValueError(f"suite {name!r} has refusal tasks: give claims= so a claimed refusal can be caught")
    return Suite(
        name=name,
        tasks=tuple(tasks),
        tools={t.name: t for t in built},
        initial_state=initial_state,
        prompts=prompts,
        claims=claims,
        severity=dict(severity or {}),
    )
