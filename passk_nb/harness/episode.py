"""One trial, end to end, as a pure function: no files, no threads.

system prompt + task prompt -> model reply -> parse -> tool -> result back as
a user message -> ... until an answer, the task's ending action (``Task.ends_after``),
``max_turns`` replies, too many format errors, or a provider failure. The task's
check then judges the final state.

>>> from passk_nb.harness.suites import get_suite
>>> from passk_nb.harness.providers.scripted import ScriptedProvider
>>> suite = get_suite("orders")
>>> result = run_episode(suite, suite.task("refund-delivered"), ScriptedProvider(suite=suite),
...                      system_prompt=suite.prompts["default"])
>>> result["outcome"], result["n_tool_calls"]
('pass', 2)
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import json
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from passk_nb.data.transcript import MAX_STORED_CHARS, cap_text, transcript_entry
from passk_nb.harness.faults import FaultInjector, FaultPlan
from passk_nb.harness.grading import Judgement, judge, tool_result_text, trial_severity
from passk_nb.harness.perturb import PerturbPlan
from passk_nb.harness.protocol import (
    NATIVE_EXAMPLE,
    PROTOCOL_EXAMPLE,
    PROTOCOLS,
    Answer,
    FormatError,
    NativeCall,
    ToolCall,
    parse_action,
    parse_native_call,
)
from passk_nb.harness.providers.base import (
    STOPS_RUN,
    AgentError,
    ChatProvider,
    Message,
    Reply,
    injected_delay,
    note_injected_delay,
)
from passk_nb.harness.suites.base import Environment, Suite, Task

__all__ = ["run_episode", "arun_episode", "episode_steps", "ChatRequest", "Delay"]


def _action_dict(action: ToolCall | Answer) -> dict[str, Any]:
    """The parsed action for the transcript, its text capped like everything stored."""
    if isinstance(action, Answer):
        stated = {} if action.confidence is None else {"confidence": action.confidence}
        return {"answer": cap_text(action.text), **stated}
    args_text = _json(action.args)
    args = action.args if len(args_text) <= MAX_STORED_CHARS else {"_truncated": cap_text(args_text)}
    return {"tool": cap_text(action.tool, 200), "args": args}


#: ``json.dumps(value, ensure_ascii=False, default=str, allow_nan=True)``, its encoder made once.
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str, allow_nan=True)


def _json(value: Any) -> str:
    return _ENCODER.encode(value)


def _native_entry_content(text: str, call: NativeCall) -> str:
    """What a native reply said, for the transcript: its text, then the call exactly as received."""
    raw = {"id": call.id, "name": call.name, "arguments": call.arguments}
    return (text + "\n" if text else "") + _json(raw)


@dataclass(frozen=True)
class ChatRequest:
    """One model turn an episode asks for: the conversation so far and, under native tool
    calling, the tool definitions (``chat_native``) — else the JSON protocol (``chat``)."""

    messages: list[Message]
    native: bool = False
    tools: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Delay:
    """A pause the episode asks its driver for (a ``latency`` fault): slept under :func:`run_episode`
    (:func:`~passk_nb.harness.providers.base.injected_delay`), ``asyncio.sleep`` under
    :func:`arun_episode`, each noted as the harness's own time; it is sent nothing back."""

    seconds: float


#: An episode as a generator: it yields each :class:`ChatRequest` (or a :class:`Delay`), is sent
#: the reply (or thrown the backend's exception), and returns the record fields. It does no I/O
#: itself, so the same episode runs under a blocking driver (:func:`run_episode`) and an asyncio
#: one (:func:`arun_episode`).
Episode = Generator["ChatRequest | Delay", "str | Reply | None", dict[str, Any]]


def run_episode(
    suite: Suite,
    task: Task,
    provider: ChatProvider,
    *,
    system_prompt: str,
    max_turns: int = 10,
    max_format_errors: int = 2,
    protocol: str = "json",
    faults: FaultPlan | None = None,
    perturb: PerturbPlan | None = None,
    trial_key: str = "",
) -> dict[str, Any]:
    """Run one trial of ``task`` with ``provider`` and return its record fields.

    The steps are :func:`episode_steps`'; each request goes to ``provider.chat`` (or
    ``chat_native``) and blocks until it answers.
    """
    steps = episode_steps(
        suite,
        task,
        system_prompt=system_prompt,
        max_turns=max_turns,
        max_format_errors=max_format_errors,
        protocol=protocol,
        faults=faults,
        perturb=perturb,
        trial_key=trial_key,
    )
    request, result = _resume(steps)
    while request is not None:
        if isinstance(request, Delay):
            injected_delay(request.seconds)
            request, result = _resume(steps)
            continue
        try:
            reply, error = send(provider, request), None
        except Exception as exc:  # the episode decides what it means (agent or backend failure)
            reply, error = None, exc
        request, result = _resume(steps, reply, error)
    assert result is not None
    return result


async def arun_episode(suite: Suite, task: Task, provider: Any, **options: Any) -> dict[str, Any]:
    """:func:`run_episode` on an asyncio loop (the same ``options``, steps and record), each request
    awaited from ``provider.achat`` (or ``achat_native``); a provider without them runs in a
    worker thread.

    >>> import asyncio
    >>> from passk_nb.harness.suites import get_suite
    >>> from passk_nb.harness.providers.scripted import ScriptedProvider
    >>> suite = get_suite("orders")
    >>> task, agent = suite.task("refund-delivered"), ScriptedProvider(suite=suite)
    >>> result = asyncio.run(arun_episode(suite, task, agent, system_prompt=suite.prompts["default"]))
    >>> result["outcome"], result["n_tool_calls"]
    ('pass', 2)
    """
    steps = episode_steps(suite, task, **options)
    request, result = _resume(steps)
    while request is not None:
        if isinstance(request, Delay):
            note_injected_delay(True)
            await asyncio.sleep(request.seconds)  # a timeout cancels it here: its end stays unnoted
            note_injected_delay(False)
            request, result = _resume(steps)
            continue
        try:
            reply, error = await asend(provider, request), None
        except Exception as exc:
            reply, error = None, exc
        request, result = _resume(steps, reply, error)
    assert result is not None
    return result


def send(provider: ChatProvider, request: ChatRequest) -> str | Reply:
    """Ask ``provider`` for one turn, blocking."""
    if request.native:
        return provider.chat_native(request.messages, request.tools)  # type: ignore[attr-defined]
    return provider.chat(request.messages)


async def asend(provider: Any, request: ChatRequest) -> str | Reply:
    """Ask ``provider`` for one turn on the running loop (in a worker thread if it only blocks)."""
    name = "achat_native" if request.native else "achat"
    method = getattr(provider, name, None)
    if method is None:
        return await asyncio.to_thread(send, provider, request)
    if request.native:
        return await method(request.messages, request.tools)
    return await method(request.messages)


def _resume(
    steps: Episode, reply: str | Reply | None = None, error: Exception | None = None
) -> tuple[ChatRequest | Delay | None, dict[str, Any] | None]:
    """Start or resume an episode: its next request, or (None, its record fields) once it ends."""
    try:
        if error is not None:
            return steps.throw(error), None
        return (next(steps) if reply is None else steps.send(reply)), None
    except StopIteration as stop:
        return None, stop.value


def episode_steps(
    suite: Suite,
    task: Task,
    *,
    system_prompt: str,
    max_turns: int = 10,
    max_format_errors: int = 2,
    protocol: str = "json",
    faults: FaultPlan | None = None,
    perturb: PerturbPlan | None = None,
    trial_key: str = "",
) -> Episode:
    """One trial of ``task`` as an :data:`Episode`: yields each model turn, returns its record fields.

    The returned dict holds the episode's part of a trial record (outcome,
    counts, tokens, timing, transcript and state diff as JSON); the runner
    adds the run's identity (run id, model, trial, seed, ...).

    ``max_format_errors``: the trial ends as ``format_error`` when this many
    replies broke the protocol; before that, each bad reply is answered with a
    message saying what was wrong.

    ``protocol="native"``: the provider's native tool calling (``chat_native``)
    instead of the JSON action protocol. Each tool call of a reply runs in order
    and its result goes back as the API's tool result; a reply without tool
    calls answers with its text. A call whose arguments are not a JSON object is
    a format error (answered as that call's result), an unknown tool or a bad
    argument a tool error: the same outcomes as under the JSON protocol. Each
    call is its own ``reply`` entry in the transcript (with ``tool_call_id``).

    ``faults``: a :class:`~passk_nb.harness.faults.FaultPlan` applied to the tool calls (under
    either protocol), its draws seeded by ``trial_key`` (the runner gives the task and trial);
    each faulted result's transcript entry names its ``faults``, and the record's
    ``faults_injected`` lists them. A latency fault is a :class:`Delay` the driver sleeps.
    ``perturb``: a :class:`~passk_nb.harness.perturb.PerturbPlan` rewording the task prompt (drawn
    by ``trial_key`` too); the transcript holds the text sent, ``perturbation_applied`` the rule.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {list(PROTOCOLS)}, got {protocol!r}")
    native = protocol == "native"
    tools = suite.tool_definitions() if native else []
    env = suite.make_env()
    initial = _InitialState(env)
    injector = None if faults is None else faults.injector(trial_key)
    prompt, applied = (task.prompt, None) if not perturb else perturb.apply(task.id, task.prompt, trial_key)
    messages: list[Message] = [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": prompt},
    ]
    transcript: list[dict[str, Any]] = [transcript_entry("task", "user", prompt)]
    counts = {"n_turns": 0, "n_tool_calls": 0, "n_tool_errors": 0, "n_format_errors": 0, "attempts": 0}
    tokens: dict[str, int | None] = {"input_tokens": None, "output_tokens": None}
    meta: dict[str, Any] = {}
    seen: list[str] = []  # successful tool results, for the refusal check
    outcome: str | None = None
    stops_run = False  # the agent raised KeyboardInterrupt: the run stops after this trial
    final_answer: str | None = None
    stated: Answer | None = None  # the answer, with its stated confidence (the JSON protocol's)
    error: str | None = None
    started_at = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    example = NATIVE_EXAMPLE if native else f"reply with exactly one JSON object: {PROTOCOL_EXAMPLE}"

    def format_error(message: str) -> bool:
        """Count one format error; True when it ends the trial."""
        nonlocal outcome, error
        counts["n_format_errors"] += 1
        if counts["n_format_errors"] >= max_format_errors:
            outcome, error = "format_error", message
            return True
        return False

    run_tool = functools.partial(_run_tool, env, injector, initial, counts, seen)

    def ends_trial(tool: str, is_error: bool) -> bool:
        """True when this call is the task's ending action (``task.ends_after``) and it succeeded:
        the trial ends without an answer, noted in the transcript, and the check judges the state."""
        if is_error or task.ends_after is None or tool != task.ends_after:
            return False
        note = f"{tool} succeeded: this task ends after its one action (ends_after); no answer is asked for"
        transcript.append(transcript_entry("task_done", "system", note))
        return True

    done = False  # the task's ending action succeeded
    while outcome is None and not done:
        if counts["n_turns"] >= max_turns:
            outcome, error = "max_turns", f"no answer after {max_turns} turns"
            break
        t_call = time.perf_counter()
        try:
            raw = yield ChatRequest(list(messages), native, tools)
        except AgentError as exc:  # the user's own agent code raised: the agent's failure
            counts["attempts"] += 1
            stops_run = exc.stops_run
            outcome, error = "agent_error", f"{exc}\n{exc.details}".strip()
            transcript.append(transcript_entry("agent_error", "system", error))
            break
        except Exception as exc:  # a backend failure is infrastructure, not the agent
            counts["attempts"] += int(getattr(exc, "attempts", 1))
            outcome, error = "infra_error", f"{type(exc).__name__}: {exc}"
            transcript.append(transcript_entry("infra_error", "system", error))
            break
        reply = raw if isinstance(raw, Reply) else Reply(raw)  # type: ignore[arg-type]
        counts["n_turns"] += 1
        counts["attempts"] += reply.attempts
        _add_usage(reply, tokens, meta)
        text = reply.text if isinstance(reply.text, str) else repr(reply.text)
        latency = round(time.perf_counter() - t_call, 6)

        if native and reply.tool_calls:
            done = yield from _native_calls(
                reply, text, latency, messages, transcript, format_error, run_tool, ends_trial
            )
            continue

        if native:
            action: ToolCall | Answer | FormatError = (
                Answer(text) if text.strip() else FormatError("empty reply: no tool call and no text")
            )
        else:
            action = parse_action(reply.text)
        messages.append({"role": "assistant", "content": text})

        if isinstance(action, FormatError):
            transcript.append(
                transcript_entry("reply", "assistant", text, format_error=action.message, latency_s=latency)
            )
            if format_error(action.message):
                break
            feedback = f"Format error: {action.message}. {example[0].upper()}{example[1:]}"
            messages.append({"role": "user", "content": feedback})
            transcript.append(transcript_entry("format_feedback", "user", feedback))
            continue

        unkept = action.confidence_note if isinstance(action, Answer) else None
        note = {"confidence_note": unkept} if unkept else {}
        entry = transcript_entry("reply", "assistant", text, action=_action_dict(action), latency_s=latency)
        transcript.append({**entry, **note})
        if isinstance(action, Answer):
            final_answer, stated = action.text, action
            break
        result_text, is_error, noted, delay = run_tool(action)
        if delay:
            yield Delay(delay)
        tool_message = f"Tool result ({action.tool[:80]}): {result_text}"
        messages.append({"role": "user", "content": tool_message})
        transcript.append(
            transcript_entry(
                "tool_result", "user", tool_message, tool=action.tool[:80], error=is_error, **noted
            )
        )
        done = ends_trial(action.tool, is_error)

    after = env.final_state()
    verdict = judge(suite, task, initial.judged(after), after, final_answer=final_answer, seen=seen)
    return _record(
        verdict,
        suite=suite,
        outcome=outcome,
        error=error,
        final_answer=final_answer,
        fields={
            **counts,
            **tokens,
            "latency_s": time.perf_counter() - t0,
            "started_at": started_at,
            **_confidence_fields(stated),
        },
        transcript=transcript,
        meta=meta,
        injector=injector,
        applied=applied,
        stops_run=stops_run,
    )


def _confidence_fields(answer: Answer | None) -> dict[str, Any]:
    """The record's ``confidence`` (None: not stated) and, when a stated one was not a number in
    [0, 1], the ``record_notes`` saying so: the trial and its answer stand either way."""
    if answer is None:
        return {"confidence": None}
    note = {"record_notes": answer.confidence_note} if answer.confidence_note else {}
    return {"confidence": answer.confidence, **note}


class _InitialState:
    """A trial's initial state, copied as its first tool call starts (nothing but a tool changes the
    state): a trial that calls none judges its one state against itself and copies nothing."""

    def __init__(self, env: Environment):
        self.env = env
        self.copy: dict[str, Any] | None = None

    def __call__(self) -> dict[str, Any]:
        if self.copy is None:
            self.copy = self.env.snapshot()
        return self.copy

    def judged(self, after: dict[str, Any]) -> dict[str, Any]:
        """The state to judge ``after`` against: the copy, or ``after`` itself when no tool ran."""
        return after if self.copy is None else self.copy


def _run_tool(
    env: Environment,
    injector: FaultInjector | None,
    initial: Callable[[], dict[str, Any]],
    counts: dict[str, int],
    seen: list[str],
    action: ToolCall,
) -> tuple[str, bool, dict[str, Any], float]:
    """Run one call, through the fault plan if there is one: ``(result as JSON, whether it is
    an error, the transcript's note of the faults injected, the latency to wait)``; counts it in
    ``counts`` and keeps the result's text in ``seen`` (for the refusal check). ``initial()``: the
    trial's initial state, copied before the first call changes it."""
    counts["n_tool_calls"] += 1
    before = initial()
    if injector is None:
        result, delay, kinds = env.try_call(action.tool, action.args), 0.0, list[str]()
    else:
        result, delay, kinds = injector.call(env, action.tool, action.args, before)
    seen.append(tool_result_text(result))
    is_error = "error" in result
    counts["n_tool_errors"] += is_error
    return _json(result), is_error, ({"faults": kinds} if kinds else {}), delay


def _add_usage(reply: Reply, tokens: dict[str, int | None], meta: dict[str, Any]) -> None:
    """Add one reply's token counts to ``tokens`` and its provider notes to ``meta``."""
    for key in tokens:
        value = getattr(reply, key)
        if value is not None:
            tokens[key] = (tokens[key] or 0) + int(value)
    for key, value in reply.meta.items():  # a list (the batches that answered) grows turn by turn
        listed = isinstance(value, list) and isinstance(meta.get(key), list)
        meta[key] = [*meta[key], *value] if listed else value


def _native_calls(
    reply: Reply,
    text: str,
    latency: float,
    messages: list[Message],
    transcript: list[dict[str, Any]],
    format_error: Callable[[str], bool],
    run_tool: Callable[[ToolCall], tuple[str, bool, dict[str, Any], float]],
    ends_trial: Callable[[str, bool], bool],
) -> Generator[Delay, Any, bool]:
    """The tool calls of one native reply, run in order (:func:`episode_steps`): each call's
    entries in ``transcript`` and result in ``messages``; yields a fault's :class:`Delay`. True
    when a call ended the trial (``ends_after``); a format error that ends it returns False."""
    messages.append({"role": "assistant", "content": text, "tool_calls": list(reply.tool_calls)})
    for i, call in enumerate(reply.tool_calls):
        content = _native_entry_content(text if i == 0 else "", call)
        where = {"tool_call_id": call.id, **({"call_index": i} if len(reply.tool_calls) > 1 else {})}
        step = {"latency_s": latency} if i == 0 else {}
        parsed = parse_native_call(call)
        if isinstance(parsed, FormatError):
            transcript.append(
                transcript_entry("reply", "assistant", content, format_error=parsed.message, **where, **step)
            )
            if format_error(parsed.message):
                return False
            result_text, is_error = _json({"error": f"Format error: {parsed.message}"}), True
            noted, delay = dict[str, Any](), 0.0
        else:
            transcript.append(
                transcript_entry("reply", "assistant", content, action=_action_dict(parsed), **where, **step)
            )
            result_text, is_error, noted, delay = run_tool(parsed)
            if delay:
                yield Delay(delay)
        name = call.name[:80] if isinstance(call.name, str) else ""
        messages.append(
            {
                "role": "tool",
                "tool_call_id": call.id,
                "name": name,
                "content": result_text,
                "is_error": is_error,
            }
        )
        transcript.append(
            transcript_entry(
                "tool_result",
                "tool",
                result_text,
                tool=name,
                error=is_error,
                tool_call_id=call.id,
                **noted,
            )
        )
        if not isinstance(parsed, FormatError) and ends_trial(parsed.tool, is_error):
            return True  # the reply's later calls, if any, are not run
    return False


def _record(
    verdict: Judgement,
    *,
    suite: Suite,
    outcome: str | None,
    error: str | None,
    final_answer: str | None,
    fields: dict[str, Any],
    transcript: list[dict[str, Any]],
    meta: dict[str, Any],
    injector: FaultInjector | None,
    applied: str | None,
    stops_run: bool,
) -> dict[str, Any]:
    """The record fields :func:`episode_steps` returns: ``outcome`` (None: the check's), the
    check's ``verdict``, ``fields`` (counts, tokens, timing) and the trial's JSON columns."""
    if outcome is None:
        outcome = verdict.outcome
        if outcome != "pass":
            error = verdict.reason
    return {
        "outcome": outcome,
        "passed": outcome == "pass",
        "state_ok": verdict.state_ok,
        "false_claims": verdict.false_claims_json,
        "severity": trial_severity(suite, verdict, outcome),
        **fields,
        "final_answer": cap_text(final_answer),
        "state_diff": _json(list(verdict.diff)) if verdict.diff else "[]",
        "transcript": _json(transcript),
        "error": cap_text(error),
        "provider_meta": meta,
        **({"faults_injected": injector.record()} if injector is not None else {}),
        **({"perturbation_applied": applied} if applied is not None else {}),
        **({STOPS_RUN: True} if stops_run else {}),
    }
