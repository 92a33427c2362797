"""Tool-fault injection: a fault plan applied to a trial's tool calls, reproducible from its seed.

A plan is a list of :class:`Fault` objects, each a kind (``timeout``, ``error``, ``partial``,
``stale``, ``noop``, ``drift``, ``latency``: explicit/implicit × transient/permanent, plus schema
drift and latency) on one tool or ``"*"``, on the n-th call or with a probability per call,
written ``kind[:tool][:key=value...]``, comma-separated. The state check stays the judge. The
plan's label is part of the run's identity (the ``faults`` column) and draws come from the plan,
task and trial alone, so a run is reproducible at any concurrency. Each kind, in full:
``docs/guide/faults.md``.

>>> plan = parse_faults("timeout:get_order, noop:refund_order:p=0.5")
>>> plan.label
'timeout:get_order,noop:refund_order:p=0.5'
>>> [fault.fault_class for fault in plan.faults]
['explicit transient', 'implicit permanent']
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from passk_nb.data.faults import FAULT_CLASSES, NO_FAULTS, fault_classes
from passk_nb.harness.suites.base import Environment, Suite, copy_state

__all__ = ["Fault", "FaultPlan", "FAULT_KINDS", "NO_FAULTS", "parse_faults", "FaultInjector", "fault_classes"]

#: Each kind's class and its default timing (``"first"``: the tool's first call; ``"every"``).
FAULT_KINDS: dict[str, tuple[str, str]] = {
    kind: (FAULT_CLASSES[kind], "first" if kind in ("timeout", "partial") else "every")
    for kind in FAULT_CLASSES
}
#: Latency when ``s=`` is not given.
DEFAULT_LATENCY_S = 0.5
_OPTIONS = {"n", "p", "s", "field", "to"}
#: The largest ``n=``: a trial's calls of one tool never reach it (a run also refuses an ``n=``
#: beyond its ``max_turns`` under the JSON protocol, one call per turn: :meth:`FaultPlan.check_reachable`).
MAX_NTH_CALL = 100_000
_ALL = "*"


@dataclass(frozen=True)
class Fault:
    """One fault: its ``kind`` (:data:`FAULT_KINDS`) on ``tool`` (``"*"``: every tool), on the
    ``n``-th call of that tool (from 1) or with probability ``p`` per call (neither: the kind's
    default timing). ``s``: latency seconds; ``field``/``to``: the field drift renames.

    >>> Fault("timeout", "get_order").label, Fault("noop", p=0.25).label
    ('timeout:get_order', 'noop:*:p=0.25')
    """

    kind: str
    tool: str = _ALL
    n: int | None = None
    p: float | None = None
    s: float | None = None
    field: str | None = None
    to: str | None = None

    def __post_init__(self) -> None:
        where = f"fault {self.kind!r}"
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; choose from {', '.join(FAULT_KINDS)}")
        if not isinstance(self.tool, str) or not self.tool.strip():
            raise ValueError(f"{where}: tool must be a tool name or '*' (every tool), got {self.tool!r}")
        if self.n is not None and self.p is not None:
            raise ValueError(f"{where}: give n= (the n-th call) or p= (a probability per call), not both")
        if self.n is not None and (isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1):
            raise ValueError(f"{where}: n= is the n-th call of the tool, an integer ≥ 1; got {self.n!r}")
        if self.n is not None and self.n > MAX_NTH_CALL:
            raise ValueError(
                f"{where}: n={self.n} can never fire: no trial calls a tool more than {MAX_NTH_CALL:,} times"
            )
        if self.p is not None and not (
            isinstance(self.p, int | float) and not isinstance(self.p, bool) and 0 < self.p <= 1
        ):
            raise ValueError(f"{where}: p= is a probability per call, 0 < p ≤ 1; got {self.p!r}")
        if self.s is not None and (
            self.kind != "latency"
            or not isinstance(self.s, int | float)
            or not math.isfinite(self.s)
            or not 0 <= self.s <= 600
        ):
            raise ValueError(f"{where}: s= is the latency fault's seconds, 0 ≤ s ≤ 600; got {self.s!r}")
        if (self.field is not None or self.to is not None) and self.kind != "drift":
            raise ValueError(f"{where}: field= and to= belong to the drift fault")
        if self.to is not None and self.field is None:
            raise ValueError(f"{where}: to= renames field=; give the field too")

    @property
    def fault_class(self) -> str:
        """The class of the kind: ``explicit transient``, ..., ``schema drift``, ``latency``."""
        return FAULT_KINDS[self.kind][0]

    @property
    def label(self) -> str:
        parts = [self.kind, self.tool]
        parts += [
            f"{key}={_number(value)}" for key in ("n", "p", "s") if (value := getattr(self, key)) is not None
        ]
        parts += [f"{key}={value}" for key in ("field", "to") if (value := getattr(self, key)) is not None]
        return ":".join(parts)

    def hits(self, tool: str, nth: int, rng: random.Random) -> bool:
        """Does this fault strike the ``nth`` call (from 1) of ``tool``? Draws from ``rng`` only when
        it has a probability and names this tool, so the draws depend on the calls alone."""
        if self.tool not in (_ALL, tool):
            return False
        if self.p is not None:
            return rng.random() < self.p
        if self.n is not None:
            return nth == self.n
        return nth == 1 if FAULT_KINDS[self.kind][1] == "first" else True


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


@dataclass(frozen=True)
class FaultPlan:
    """The faults of a run, in order: for one call the first matching fault that replaces or alters
    the result applies (``timeout``, ``error``, ``noop``, ``stale``, ``partial``), then every matching
    ``drift``, and the ``latency`` of every matching latency fault adds up."""

    faults: tuple[Fault, ...] = ()

    @property
    def label(self) -> str:
        """The plan as its canonical spec; :data:`NO_FAULTS` for none (the run identity's field)."""
        return ",".join(f.label for f in self.faults) or NO_FAULTS

    def check_tools(self, suite: Suite) -> None:
        """Every named tool is one of ``suite``'s; else a ValueError listing them."""
        for fault in self.faults:
            if fault.tool != _ALL and fault.tool not in suite.tools:
                raise ValueError(
                    f"fault {fault.label!r} names tool {fault.tool!r}, which suite {suite.name!r} lacks; "
                    f"its tools: {', '.join(suite.tools)} (or '*' for every tool)"
                )

    def check_reachable(self, max_turns: int, protocol: str) -> None:
        """Every ``n=`` can fire: under the JSON protocol a trial calls at most ``max_turns`` tools
        (one per reply); else a ValueError."""
        for fault in self.faults:
            if protocol == "json" and fault.n is not None and fault.n > max_turns:
                raise ValueError(
                    f"fault {fault.label!r} can never fire: under the JSON protocol a trial makes at most "
                    f"max_turns={max_turns} tool calls; lower n= or raise max_turns"
                )

    def injector(self, key: str) -> FaultInjector | None:
        """A fresh injector for one trial (``key``: the task and trial, seeding its draws); None
        without faults."""
        return FaultInjector(self, key) if self.faults else None


def parse_faults(spec: str | Fault | Sequence[Fault] | FaultPlan | None) -> FaultPlan:
    """A :class:`FaultPlan` from a spec (see the module), a fault, a list of them or a plan.

    >>> parse_faults("latency:*:s=0.1").faults[0].s
    0.1
    >>> parse_faults(None).label, parse_faults("none").label
    ('none', 'none')
    >>> parse_faults("crash:get_order")
    Traceback (most recent call last):
    ...
    ValueError: unknown fault kind 'crash'; choose from timeout, error, partial, stale, noop, drift, latency
    """
    if spec is None or isinstance(spec, FaultPlan):
        return spec or FaultPlan()
    if isinstance(spec, Fault):
        return FaultPlan((spec,))
    if isinstance(spec, str):
        text = spec.strip()
        if not text:
            raise ValueError(
                f"faults={spec!r} names no fault: leave faults out (or pass 'none') for a run without "
                "faults, or write a spec such as 'timeout:get_order'"
            )
        if text == NO_FAULTS:
            return FaultPlan()
        return FaultPlan(tuple(_parse_one(item.strip()) for item in text.split(",")))
    if isinstance(spec, list | tuple) and all(isinstance(f, Fault) for f in spec):
        return FaultPlan(tuple(spec))
    raise TypeError(
        f"faults must be a spec such as 'timeout:get_order,noop:refund_order:p=0.5', a Fault or a list "
        f"of Faults; got {type(spec).__name__} {spec!r:.80}"
    )


def _parse_one(item: str) -> Fault:
    if not item:
        raise ValueError("empty fault in the spec (two commas in a row?); write kind[:tool][:key=value]")
    kind, *rest = [part.strip() for part in item.split(":")]
    options: dict[str, Any] = {}
    tool = _ALL
    for i, part in enumerate(rest):
        if "=" not in part:
            if i:
                raise ValueError(
                    f"fault {item!r}: the tool comes right after the kind; then key=value options"
                )
            tool = part
            continue
        key, value = (s.strip() for s in part.split("=", 1))
        if key not in _OPTIONS:
            raise ValueError(
                f"fault {item!r}: unknown option {key!r}; options are {', '.join(sorted(_OPTIONS))}"
            )
        if key in options:
            raise ValueError(f"fault {item!r} gives {key}= twice")
        options[key] = _option(item, key, value)
    return Fault(kind, tool, **options)


def _option(item: str, key: str, value: str) -> Any:
    if key in ("field", "to"):
        if not value:
            raise ValueError(f"fault {item!r}: {key}= needs a field name")
        return value
    try:
        return int(value) if key == "n" else float(value)
    except ValueError:
        kind = "an integer" if key == "n" else "a number"
        raise ValueError(f"fault {item!r}: {key}= must be {kind}, got {value!r}") from None


_REPLACING = ("timeout", "error", "noop", "stale", "partial")


def _camel(name: str) -> str:
    head, *tail = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in tail)


def _halve(value: Any) -> Any:
    """``value`` with every list cut to its first half (rounded down)."""
    if isinstance(value, list):
        return [_halve(item) for item in value[: len(value) // 2]]
    if isinstance(value, dict):
        return {key: _halve(sub) for key, sub in value.items()}
    return value


def _rename(value: Any, fault: Fault) -> Any:
    if isinstance(value, list):
        return [_rename(item, fault) for item in value]
    if isinstance(value, dict):
        out = {}
        for key, sub in value.items():
            new = _renamed(key, fault) if isinstance(key, str) else key
            out[new] = _rename(sub, fault)
        return out
    return value


def _renamed(key: str, fault: Fault) -> str:
    """The name drift gives ``key``: every key in camelCase, or only ``field`` renamed (to ``to``;
    default its camelCase, or ``<field>V2`` for a one-word field)."""
    if fault.field is None:
        return _camel(key)
    if key != fault.field:
        return key
    return fault.to or (_camel(key) if "_" in key else f"{key}V2")


@dataclass
class FaultInjector:
    """A plan applied to one trial's calls: the calls of each tool counted, the draws seeded by
    ``key``, what was injected kept in ``injected``."""

    plan: FaultPlan
    key: str
    injected: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(f"{self.plan.label}|{self.key}")
        self._calls: dict[str, int] = {}
        self._n = 0

    def call(
        self, env: Environment, tool: str, args: Mapping[str, Any], initial: Mapping[str, Any]
    ) -> tuple[dict[str, Any], float, list[str]]:
        """Run one call through the plan: ``(result, latency seconds, kinds injected)``. ``initial``
        is the trial's initial state (what ``stale`` reads)."""
        self._n += 1
        if not env.has_tool(tool):
            return env.try_call(tool, args), 0.0, []
        nth = self._calls[tool] = self._calls.get(tool, 0) + 1
        hits = [fault for fault in self.plan.faults if fault.hits(tool, nth, self._rng)]
        kinds: list[str] = []
        replacing = next((f for f in hits if f.kind in _REPLACING), None)
        result: dict[str, Any]
        if replacing is None:
            result = env.try_call(tool, args)
        elif replacing.kind == "timeout":
            result = {
                "error": f"timeout: {tool} did not answer in time; the call was not carried out. Try again."
            }
            kinds.append("timeout")
        elif replacing.kind == "error":
            result = {
                "error": f"{tool} failed: the service is unavailable (503); the call was not carried out"
            }
            kinds.append("error")
        elif replacing.kind == "noop":
            scratch = env.snapshot()
            result = env.try_call(tool, args, state=scratch)
            if scratch != env.peek():
                kinds.append("noop")
        elif replacing.kind == "stale":
            real = env.try_call(tool, args)
            result = env.try_call(tool, args, state=copy_state(dict(initial)))
            if result != real:
                kinds.append("stale")
        else:  # partial
            result = env.try_call(tool, args)
            if "ok" in result:
                cut = {"ok": _halve(result["ok"])}
                if cut != result:
                    result = cut
                    kinds.append("partial")
        for fault in hits:
            if fault.kind == "drift" and "ok" in result:
                renamed = {"ok": _rename(result["ok"], fault)}
                if renamed != result:
                    result = renamed
                    kinds.append("drift")
        delay = sum(
            DEFAULT_LATENCY_S if fault.s is None else float(fault.s)
            for fault in hits
            if fault.kind == "latency"
        )
        if delay > 0:
            kinds.append("latency")
        self.injected.extend({"call": self._n, "tool": tool, "fault": kind} for kind in kinds)
        return result, delay, kinds

    def record(self) -> str:
        """What was injected in the trial, as the ``faults_injected`` column's JSON."""
        return json.dumps(self.injected)
