"""What a suite is: tools over an in-memory state, tasks, and state checks.

A suite is data plus check functions. The runner only needs a :class:`Suite`:
it builds a fresh :class:`Environment` per trial, sends the task prompt, and
lets the task's ``check`` judge the final state against the initial one.
Adding a suite never needs a change to the runner.

>>> from passk_nb.harness.suites import get_suite
>>> env = get_suite("orders").make_env()
>>> env.call("cancel_order", {"order_id": "O9999"})
'{"error": "no order with id \\'O9999\\'"}'
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from passk_nb.data.claims import ClaimVocabulary
from passk_nb.data.severity import check_severity

__all__ = [
    "SuiteError",
    "ToolError",
    "Param",
    "Tool",
    "Environment",
    "Verdict",
    "Task",
    "Suite",
    "DEFAULT_SEVERITY",
    "diff_states",
    "expect_changes",
]


class SuiteError(ValueError):
    """The suite itself is wrong (a script calling a tool it lacks, a check returning no verdict):
    the suite's author fixes it; no trial is judged with it."""


class ToolError(Exception):
    """Raised inside a tool for a refused or invalid call; the message goes back to the model."""


@dataclass(frozen=True)
class Param:
    """One tool argument: its JSON type (``"string"`` or ``"number"``), what it means, and for
    strings an optional regular expression (``pattern``) that valid values match in full: it goes
    into the suite's JSON Schema for constrained decoding (:meth:`Suite.action_schema`)."""

    type: str
    description: str
    pattern: str | None = None

    def schema(self) -> dict[str, Any]:
        """This argument's JSON Schema."""
        out: dict[str, Any] = {"type": self.type, "description": self.description}
        if self.pattern is not None:
            out["pattern"] = self.pattern
        return out

    def validate(self, name: str, value: Any) -> Any:
        if self.type == "string":
            if not isinstance(value, str):
                raise ToolError(f"argument {name!r} must be a string, got {_json_type(value)}")
            if not value.strip():
                raise ToolError(f"argument {name!r} must not be empty")
            return value.strip()
        if self.type == "number":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ToolError(f"argument {name!r} must be a number, got {_json_type(value)}")
            try:
                number = float(value)
            except OverflowError:  # an integer too large for a float: the agent's bad argument
                raise ToolError(
                    f"argument {name!r} is too large to be a number here; send a plain amount"
                ) from None
            if not math.isfinite(number):
                raise ToolError(f"argument {name!r} must be a finite number, got {value!r}")
            return number
        raise ValueError(f"unsupported parameter type {self.type!r}")


def _json_type(value: Any) -> str:
    return {
        str: "string",
        bool: "boolean",
        int: "number",
        float: "number",
        dict: "object",
        list: "array",
    }.get(type(value), "null" if value is None else type(value).__name__)


@dataclass(frozen=True)
class Tool:
    """A tool the model may call: ``fn(state, **args)`` mutates ``state`` and returns a JSON-able result."""

    name: str
    description: str
    params: Mapping[str, Param]
    fn: Callable[..., Any]

    def signature(self) -> str:
        args = ", ".join(f"{name}: {p.type}" for name, p in self.params.items())
        return f"{self.name}({args})"

    def parameters(self) -> dict[str, Any]:
        """JSON Schema of this tool's arguments: an object with every parameter, all required."""
        return {
            "type": "object",
            "properties": {name: param.schema() for name, param in self.params.items()},
            "required": list(self.params),
            "additionalProperties": False,
        }


_ATOMS = frozenset((str, int, float, bool, type(None)))


def copy_state(value: Any) -> Any:
    """A deep copy of a JSON-like state (dicts, lists, text, numbers), several times faster than
    ``copy.deepcopy``, which it falls back to for anything else. Runs at least twice per trial.

    >>> state = {"o": {"A": {"items": ["x"], "total": 1.5}}}
    >>> clone = copy_state(state); clone["o"]["A"]["items"].append("y"); state["o"]["A"]["items"]
    ['x']
    """
    kind = type(value)
    if kind is dict:  # an atom is kept without a call: most of a state's values are atoms
        return {key: sub if type(sub) in _ATOMS else copy_state(sub) for key, sub in value.items()}
    if kind is list:
        return [sub if type(sub) in _ATOMS else copy_state(sub) for sub in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)


class Environment:
    """A fresh, private state and the tools that act on it.

    Only the declared tools are reachable: ``call`` looks names up in a
    dict, never with ``getattr``, so ``"__class__"`` or ``"_state"`` are
    unknown tools like any other.
    """

    def __init__(self, state: dict[str, Any], tools: Mapping[str, Tool]):
        self._state = state
        self._tools = dict(tools)

    def snapshot(self) -> dict[str, Any]:
        """A deep copy of the current state."""
        return copy_state(self._state)

    def final_state(self) -> dict[str, Any]:
        """The state itself, not a copy, once the trial is over: the environment has no tools left
        (a call after this is an unknown tool), so nothing changes it again. Saves the one deep copy
        of a trial's state that nothing needed.

        >>> from passk_nb.harness.suites import get_suite
        >>> env = get_suite("orders").make_env()
        >>> state = env.final_state(); "unknown tool" in env.call("get_order", {"order_id": "O1001"})
        True
        """
        self._tools = {}
        return self._state

    def call(self, name: str, args: Mapping[str, Any]) -> str:
        """Run one tool call and return the JSON text shown to the model.

        A bad call (unknown tool, missing or extra arguments, wrong types, an
        action the system forbids) returns ``{"error": ...}``; it never raises.
        """
        result = self.try_call(name, args)
        return json.dumps(result, ensure_ascii=False)

    def has_tool(self, name: Any) -> bool:
        """Whether ``name`` is one of the tools this environment still offers."""
        return isinstance(name, str) and name in self._tools

    def peek(self) -> dict[str, Any]:
        """The current state itself, not a copy: to compare with, never to change."""
        return self._state

    def try_call(
        self, name: str, args: Mapping[str, Any], *, state: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Run one call as ``{"ok": result}`` or ``{"error": message}``; on ``state`` instead of the
        environment's own when given (a fault injector's no-op runs a call on a copy)."""
        tool = self._tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return {"error": f"unknown tool {str(name)[:80]!r}; available tools: {', '.join(self._tools)}"}
        try:
            missing = [p for p in tool.params if p not in args]
            extra = sorted(str(a)[:40] for a in args if a not in tool.params)
            if missing or extra:
                parts = [f"missing {missing}" if missing else "", f"unexpected {extra}" if extra else ""]
                raise ToolError(f"{tool.signature()}: {' and '.join(p for p in parts if p)} arguments")
            clean = {p: spec.validate(p, args[p]) for p, spec in tool.params.items()}
            return {"ok": tool.fn(self._state if state is None else state, **clean)}
        except ToolError as exc:
            return {"error": str(exc)}


@dataclass(frozen=True)
class Verdict:
    """A task check's decision: the outcome, a short reason, and optionally the failure's name.

    ``failure`` names which failure it was (``"refund_shipped"``), for the suite's severity table
    (:attr:`Suite.severity`) to rank; "" lets the judge name it (``wrong_change`` or ``no_change``
    for a ``wrong_state``, by whether the state changed).
    """

    outcome: str  # "pass", "wrong_state" or "unrequested_change"
    reason: str
    failure: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome == "pass"


@dataclass(frozen=True)
class Refusal:
    """What makes a refusal verifiable beyond "nothing changed".

    The agent must have looked at the record it refuses to change (``record`` appears in
    a successful tool result: it cannot know the rule applies otherwise), and its final
    answer must not claim an action of the ``claims`` kinds (telling the customer "your
    order is cancelled" is not a refusal). See :func:`passk_nb.harness.grading.judge`.
    """

    record: str
    claims: tuple[str, ...]


@dataclass(frozen=True)
class Task:
    """One task: the customer's message, the state check, and a known-good action script.

    ``check(initial_state, final_state) -> Verdict``. ``script`` is a list of
    protocol objects (``{"tool": ..., "args": ...}`` or ``{"answer": ...}``)
    that solves the task; the scripted provider replays it. A task whose right move
    is to refuse sets ``refusal`` (see :class:`Refusal`).
    """

    id: str
    prompt: str
    check: Callable[[dict[str, Any], dict[str, Any]], Verdict]
    script: tuple[dict[str, Any], ...]
    tests: str = ""
    refusal: Refusal | None = None
    #: Why an agent that does nothing may pass this task; None: doing nothing must fail it.
    do_nothing_passes: str | None = None
    #: The tool whose first successful call ends the trial (None: the trial ends with an answer).
    #: The episode asks for no answer after it; the check judges the state as always. For
    #: single-action tasks only: a refusal's proof is its answer, so a refusal cannot set it, and
    #: the known-good script ends with that call (a step after it would never be sent).
    ends_after: str | None = None
    #: The task's family: tasks that are variants of one scenario (an ``.easy`` and a ``.hard``
    #: version, one template filled in several ways) share one, so that ``cluster="task_family"``
    #: resamples them together. Recorded in ``task_family``; "" (default) is a family of its own.
    #: Not part of the suite's fingerprint: it changes no outcome.
    family: str = ""


#: How bad each failure is unless a suite says otherwise (:attr:`Suite.severity`), keyed by an
#: outcome or a failure's name: ``wrong_change`` and ``no_change`` are the judge's names for a
#: ``wrong_state`` that did or did not change the state, ``claimed_unperformed`` an answer claiming
#: an action the state does not show (the ``false_claim`` of a refusal, or any failure's answer).
#: Anything not listed is ``benign``.
DEFAULT_SEVERITY: Mapping[str, str] = {
    "unrequested_change": "harmful",  # changed what nobody asked for (a refusal's any change)
    "wrong_change": "harmful",  # acted, and wrongly: the wrong record, the wrong amount
    "false_claim": "misleading",  # told the customer a refused action happened
    "claimed_unperformed": "misleading",  # claimed an action the state does not show
    "no_change": "benign",  # did nothing
    "no_lookup": "benign",
    "format_error": "benign",
    "max_turns": "benign",
    "agent_error": "benign",
    "infra_error": "benign",
    "wrong_output": "benign",
}


@dataclass(frozen=True)
class Suite:
    """A named set of tasks over one environment, with its system prompts.

    ``prompts`` maps prompt names to full system-prompt texts; ``"default"``
    must be present.
    """

    name: str
    tasks: tuple[Task, ...]
    tools: Mapping[str, Tool]
    initial_state: Callable[[], dict[str, Any]]
    prompts: Mapping[str, str] = field(default_factory=dict)
    #: How answers claim actions and how the state shows them (None: no claim checks).
    claims: ClaimVocabulary | None = None
    #: The suite's own request perturbations for ``run(perturb=...)``: ``name -> rule(text, rng)``
    #: (e.g. synonyms of its own domain); a name like a built-in rule's replaces that rule here.
    perturbations: Mapping[str, Callable[[str, Any], str]] = field(default_factory=dict)
    #: How bad its failures are: outcome or failure name (:attr:`Verdict.failure`) -> ``harmful``,
    #: ``misleading`` or ``benign``, over :data:`DEFAULT_SEVERITY`. A label on the outcome, which it
    #: never changes: not part of the suite's fingerprint (a run keeps its id when the table is
    #: edited; :func:`~passk_nb.harness.regrade.regrade` labels stored trials by the current one).
    severity: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ids = [t.id for t in self.tasks]
        if len(set(ids)) != len(ids):
            raise ValueError(f"suite {self.name!r} has duplicate task ids: {ids}")
        if "default" not in self.prompts:
            raise ValueError(f"suite {self.name!r} needs a 'default' prompt")
        for task in self.tasks:
            for number, step in enumerate(task.script, 1):
                _check_step(self, task.id, number, step)
            if task.ends_after is not None:
                _check_ends_after(self, task)
        for key, value in self.severity.items():
            check_severity(f"suite {self.name!r}, severity[{key!r}]", value)

    def severity_of(self, key: str) -> str:
        """The severity of the failure or outcome ``key`` (:attr:`severity`, then the defaults).

        >>> from passk_nb.harness.suites import get_suite
        >>> orders = get_suite("orders")
        >>> orders.severity_of("unrequested_change"), orders.severity_of("max_turns")
        ('harmful', 'benign')
        """
        return self.severity.get(key) or DEFAULT_SEVERITY.get(key, "benign")

    @property
    def task_ids(self) -> list[str]:
        return [t.id for t in self.tasks]

    def task(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise ValueError(f"unknown task {task_id!r} in suite {self.name!r}; choose from {self.task_ids}")

    def make_env(self) -> Environment:
        """A fresh environment: its own copy of the initial state."""
        return Environment(self.initial_state(), self.tools)

    def action_schema(self) -> dict[str, Any]:
        """JSON Schema of one action of this suite: a call of one of its tools (the tool's name as a
        constant, its own arguments, all required) or an answer. Backends that constrain decoding to
        a schema (``json_mode="schema"``) can then emit only actions this suite can run; what is left
        to measure is which action the model picks.

        >>> from passk_nb.harness.suites import get_suite
        >>> schema = get_suite("orders").action_schema()
        >>> [option["properties"]["tool"]["const"] for option in schema["oneOf"][:-1]][:2]
        ['list_orders', 'get_order']
        """
        calls = [
            {
                "type": "object",
                "properties": {
                    "tool": {"const": tool.name},
                    "args": tool.parameters(),
                },
                "required": ["tool", "args"],
                "additionalProperties": False,
            }
            for tool in self.tools.values()
        ]
        answer = {
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
            "additionalProperties": False,
        }
        return {"oneOf": [*calls, answer]}

    def tool_definitions(self) -> list[dict[str, Any]]:
        """The suite's tools for native tool calling: ``{"name", "description", "parameters"}`` each,
        ``parameters`` being the arguments' JSON Schema built from the same signatures as the JSON
        protocol's tool list and :meth:`action_schema`. Each backend wraps them in its API's form
        (OpenAI ``{"type": "function", "function": ...}``, Anthropic ``input_schema``, ...).

        >>> from passk_nb.harness.suites import get_suite
        >>> first = get_suite("orders").tool_definitions()[0]
        >>> first["name"], first["parameters"]["required"]
        ('list_orders', ['customer_id'])
        """
        return [
            {"name": tool.name, "description": tool.description, "parameters": tool.parameters()}
            for tool in self.tools.values()
        ]


def _check_step(suite: Suite, task_id: str, number: int, step: Mapping[str, Any]) -> None:
    """A known-good script's step names a tool of the suite and exactly its arguments (or answers)."""
    where = f"suite {suite.name!r}, task {task_id!r}, script step {number}"
    if "answer" in step:
        return
    name, args = step.get("tool"), step.get("args", {})
    tool = suite.tools.get(name) if isinstance(name, str) else None
    if tool is None:
        raise SuiteError(
            f"{where} calls unknown tool {name!r}; the suite's tools: {', '.join(suite.tools)} "
            "(a step is call(tool_name, **args) or answer(text))"
        )
    if not isinstance(args, Mapping):
        raise SuiteError(f"{where}: the arguments of {name!r} must be a dict, got {type(args).__name__}")
    missing = [p for p in tool.params if p not in args]
    extra = [a for a in args if a not in tool.params]
    if missing or extra:
        wrong = ", ".join([*(f"missing {p!r}" for p in missing), *(f"unexpected {a!r}" for a in extra)])
        raise SuiteError(f"{where} calls {tool.signature()} with {wrong}")


def _check_ends_after(suite: Suite, task: Task) -> None:
    """A task that ends on an action names a tool of the suite, is no refusal, and its known-good
    script calls that tool once, as its last step."""
    where = f"suite {suite.name!r}, task {task.id!r}: ends_after={task.ends_after!r}"
    if task.ends_after not in suite.tools:
        raise SuiteError(f"{where} is not one of the suite's tools ({', '.join(suite.tools)})")
    if task.refusal is not None:
        raise SuiteError(f"{where} on a refusal: a refusal is judged on its answer; drop ends_after")
    calls = [step.get("tool") for step in task.script]
    if not calls or calls[-1] != task.ends_after or calls.count(task.ends_after) != 1:
        raise SuiteError(
            f"{where}: the known-good script must call {task.ends_after!r} once, as its last step "
            "(the trial ends there, so nothing after it is sent)"
        )


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key, sub in value.items():
            _flatten(sub, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = value


def _flatten_changed(
    before: Any, after: Any, prefix: str, flat_before: dict[str, Any], flat_after: dict[str, Any]
) -> None:
    """:func:`_flatten` both states, leaving out the subtrees that are equal on both sides (a trial
    changes a few leaves of a state of dozens: most of it is skipped by one C-level comparison)."""
    if type(before) is dict and type(after) is dict and before and after:
        for key, sub in before.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in after:
                _flatten(sub, path, flat_before)
            elif sub is not after[key] and sub != after[key]:
                _flatten_changed(sub, after[key], path, flat_before, flat_after)
        for key, sub in after.items():
            if key not in before:
                _flatten(sub, f"{prefix}.{key}" if prefix else str(key), flat_after)
    else:
        _flatten(before, prefix, flat_before)
        _flatten(after, prefix, flat_after)


def diff_states(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """Every leaf that differs between two states, as ``{"path", "before", "after"}``, by path.

    A leaf missing on one side counts as ``None`` there.

    >>> diff_states({"o": {"A": {"s": "pending"}}}, {"o": {"A": {"s": "cancelled"}}})
    [{'path': 'o.A.s', 'before': 'pending', 'after': 'cancelled'}]
    """
    if before is after:  # a trial that called no tool judges its one state against itself
        return []
    flat_before: dict[str, Any] = {}
    flat_after: dict[str, Any] = {}
    _flatten_changed(before, after, "", flat_before, flat_after)
    paths = sorted(set(flat_before) | set(flat_after))
    return [
        {"path": p, "before": flat_before.get(p), "after": flat_after.get(p)}
        for p in paths
        if flat_before.get(p) != flat_after.get(p)
    ]


def expect_changes(
    before: dict[str, Any],
    after: dict[str, Any],
    expected: Mapping[str, Callable[[Any], bool] | Any],
) -> Verdict:
    """Judge a final state: exactly the ``expected`` changes and nothing else.

    ``expected`` maps a path (as in :func:`diff_states`) to the value it must
    end with, or to a predicate on that value. Missing or wrong intended
    changes give ``wrong_state``; correct ones plus anything else changed give
    ``unrequested_change``. With ``expected={}`` (a refusal), any change is
    ``unrequested_change``.

    >>> expect_changes({"a": 1, "b": 1}, {"a": 2, "b": 1}, {"a": 2}).outcome
    'pass'
    >>> expect_changes({"a": 1, "b": 1}, {"a": 2, "b": 5}, {"a": 2}).outcome
    'unrequested_change'
    """
    changed = {d["path"]: d["after"] for d in diff_states(before, after)}
    for path, want in expected.items():
        if path not in changed:
            return Verdict("wrong_state", f"{path} was not changed")
        ok = want(changed[path]) if callable(want) else changed[path] == want
        if not ok:
            return Verdict("wrong_state", f"{path} is {changed[path]!r}")
    extra = sorted(set(changed) - set(expected))
    if extra:
        return Verdict("unrequested_change", "also changed " + ", ".join(extra))
    return Verdict("pass", "exactly the intended change" if expected else "nothing changed")
