"""A run's configuration: every argument of :func:`~passk_nb.harness.runner.run`, checked once, here.

:class:`RunConfig` holds what a run is asked to do, grouped by concern (backend, suite, trials and
identity, concurrency and pacing, faults and perturbations, stopping, reporting). Building one
checks every field against :data:`CONSTRAINTS` (one declared check per field, on the shared checks
of :mod:`passk_nb.harness.arguments`) and then the rules that tie fields together (:data:`RULES`),
so a bad argument fails before the first trial, with the same message from ``run(...)``,
``run(config=RunConfig(...))`` and ``passk run`` (which says its ``--flags`` instead). What needs
the suite loaded (its task ids, prompts, tools) is checked by :meth:`RunConfig.resolve`.

>>> config = RunConfig(trials=2, json_mode=True, rate_limit="600rpm")
>>> config.json_mode, str(config.rate_limit), config.executor
('json', '600rpm', 'threads')
>>> RunConfig(max_trials=10)
Traceback (most recent call last):
...
ValueError: max_trials caps a run that stops when its question is answered: give until= too
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from passk_nb.harness.arguments import (
    check_bool,
    check_positive,
    check_seconds,
    check_seed,
    check_text,
    check_trials,
    check_unique,
)
from passk_nb.harness.executors import EXECUTORS
from passk_nb.harness.faults import Fault, FaultPlan, parse_faults
from passk_nb.harness.pacing import RateLimit, RateLimiter
from passk_nb.harness.perturb import PerturbPlan, parse_perturb
from passk_nb.harness.shards import parse_shard, select_shard
from passk_nb.harness.spec import (
    normalize_json_mode,
    normalize_protocol,
    normalize_temperature,
    resolve_prompt,
)
from passk_nb.harness.suites import get_suite
from passk_nb.harness.suites.base import Suite
from passk_nb.harness.suites.build import CONFIDENCE_SUFFIX, native_prompt

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("passk_nb")


@runtime_checkable
class StoppingRule(Protocol):
    """What ``run(until=)`` asks between rounds (:class:`passk_nb.Until` is one, structurally).

    :meth:`next_round` gets the run's records after each completed round and names the next
    round's trials (a frame with ``task``, ``trials`` and ``reason``), or None to stop. A class of
    your own may subclass this one to inherit :meth:`check` and :meth:`progress`.
    """

    def next_round(self, records: pd.DataFrame) -> pd.DataFrame | None:
        """The next round's tasks, trials and reasons, or None: the question is answered."""
        ...

    def check(self, trials: int) -> None:
        """Refuse, before any trial, a first round of ``trials`` per task the rule cannot use."""
        return None

    def progress(self, records: pd.DataFrame) -> str:
        """One line for the progress bar: where the question stands after ``records``."""
        return f"{len(records)} trials so far"


#: One field's check: (field name, value) -> the value to keep (normalized), or raise naming it.
Check = Callable[[str, Any], Any]


def _optional(check: Check) -> Check:
    """``check`` for a field that may also be None."""
    return lambda name, value: None if value is None else check(name, value)


def _unnamed(check: Callable[[Any], Any]) -> Check:
    """A check that names its argument itself (``check_trials``, ``normalize_protocol``)."""
    return lambda _name, value: check(value)


def _one_of(choices: Sequence[str]) -> Check:
    def check(name: str, value: Any) -> Any:
        if value not in choices:
            raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
        return value

    return check


def _stopping_rule(name: str, value: Any) -> StoppingRule:
    if not isinstance(value, StoppingRule):
        raise TypeError(
            f"{name} must have a next_round(records) method, with check(trials) and progress(records) "
            f"(e.g. passk_nb.Until('gate=0.8'); a class of your own may subclass "
            f"passk_nb.harness.StoppingRule); got {value!r}"
        )
    return value


def _usd(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
        raise ValueError(f"{name} must be a positive number of US dollars, e.g. 5.0; got {value!r}")
    return float(value)


def _prices(name: str, value: Any) -> dict[str, tuple[float, float]]:
    """``{model: (price_in, price_out)}`` or a frame of them, as a checked dict (USD per million)."""
    from passk_nb.data.prices import price_table  # pandas, only for a run with prices

    table = price_table(value)
    return {str(model): (float(row.price_in), float(row.price_out)) for model, row in table.iterrows()}


def _function(name: str, value: Any) -> Any:
    if not callable(value):
        raise TypeError(f"{name} must be a function of one record, got {type(value).__name__}")
    return value


def _folder(name: str, value: Any) -> Any:
    if not isinstance(value, str | os.PathLike):
        raise TypeError(f"{name} must be a folder path, got {type(value).__name__} {value!r}")
    return value


def _options(name: str, value: Any) -> dict[str, Any]:
    if "seed" in value:
        raise TypeError(
            "run() takes backend_seed= for the seed sent to the backend (trial i sends backend_seed + i); "
            "seed= names the bootstrap seed of the analysis functions"
        )
    return dict(value)


#: Each field's declared check, in the order they run (scikit-learn's constraints as data, on the
#: shared checks of :mod:`~passk_nb.harness.arguments`). Fields tied to others are in :data:`RULES`.
CONSTRAINTS: dict[str, Check] = {
    "provider_options": _options,
    "trials": _unnamed(check_trials),
    "batch": check_bool,
    "batch_poll": functools.partial(check_seconds, allow_none=False),
    "concurrency": _optional(check_positive),
    "workers": _optional(check_positive),
    "executor": _one_of(tuple(EXECUTORS)),
    "max_turns": check_positive,
    "max_format_errors": check_positive,
    "trial_timeout": check_seconds,
    "model": check_text,
    "prompt_name": functools.partial(check_text, allow_empty=False),
    "progress": check_bool,
    "adaptive": check_bool,
    "until": _optional(_stopping_rule),
    "max_trials": _optional(check_positive),
    "budget_usd": _optional(_usd),
    "prices": _optional(_prices),
    "on_record": _optional(_function),
    "out": _folder,
    "temperature": _unnamed(normalize_temperature),
    "json_mode": _unnamed(normalize_json_mode),
    "protocol": _unnamed(normalize_protocol),
    "rate_limit": _optional(_unnamed(RateLimit.parse)),
    "shard": _optional(_unnamed(parse_shard)),
    "faults": _unnamed(parse_faults),
}


@dataclass(frozen=True)
class RunConfig:
    """Everything :func:`~passk_nb.harness.runner.run` is asked to do; its keywords build one, and
    ``run(config=RunConfig(...))`` takes one whole. Each field is the ``run()`` keyword of its name
    (documented there); building a config checks them all (:data:`CONSTRAINTS`, :data:`RULES`)
    and keeps them normalized (``json_mode`` one of ``"off"``, ``"json"``, ``"schema"``; ``faults``
    a :class:`~passk_nb.harness.faults.FaultPlan`; ``rate_limit`` a
    :class:`~passk_nb.harness.pacing.RateLimit`; ``shard`` a pair; with ``workers=``, ``executor``
    ``"processes"`` unless another was named).
    """

    # -- backend: who answers and how it is asked
    provider: Any = "scripted"
    model: str | None = None
    provider_options: Mapping[str, Any] = field(default_factory=dict)
    version: str | None = None
    temperature: float | None = None
    json_mode: bool | str = "off"
    protocol: str = "json"
    batch: bool = False
    batch_poll: float = 30.0
    # -- suite: what is asked
    suite: str | Suite = "orders"
    tasks: Sequence[str] | None = None
    prompt: str = "default"
    prompt_name: str | None = None
    max_turns: int = 10
    max_format_errors: int = 2
    # -- trials and identity: how often, with which seeds, stored where
    trials: int = 3
    backend_seed: int | None = 0
    out: str | os.PathLike[str] = "runs"
    # -- concurrency and pacing: none of these changes the run id
    concurrency: int | None = None
    adaptive: bool = False
    workers: int | None = None
    executor: str = "threads"
    ray_address: str | None = None
    rate_limit: str | RateLimit | None = None
    shard: tuple[int, int] | str | None = None
    trial_timeout: float | None = None
    # -- faults and perturbations: part of the run id
    faults: str | Fault | Sequence[Fault] | FaultPlan | None = None
    perturb: str | dict[str, Any] | PerturbPlan | None = None
    # -- stopping: rounds until a question is answered, within a budget
    until: StoppingRule | None = None
    max_trials: int | None = None
    budget_usd: float | None = None
    prices: Mapping[str, tuple[float, float]] | pd.DataFrame | None = None
    # -- reporting
    progress: bool = True
    on_record: Callable[[dict[str, Any]], None] | None = None

    def __post_init__(self) -> None:
        for name, check in CONSTRAINTS.items():
            object.__setattr__(self, name, check(name, getattr(self, name)))
        for rule in RULES:
            rule(self)

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with ``changes``, checked again."""
        return dataclasses.replace(self, **changes)

    def resolve(self) -> Resolved:
        """What the suite decides: its tasks (checked, this shard's), the prompt's name and text
        (in native form under ``protocol="native"``), the fault and perturbation plans checked
        against its tools and tasks, and the rate limiter."""
        suite = get_suite(self.suite)
        task_ids = _task_ids(suite, self.tasks)
        plan = parse_faults(self.faults)  # a FaultPlan already: kept as it is
        plan.check_tools(suite)
        rewording = parse_perturb(self.perturb, suite.perturbations)
        rewording.check(suite.tasks)
        if self.shard is not None:
            task_ids = select_shard(task_ids, self.shard)
            if not task_ids:
                i, n = parse_shard(self.shard)
                log.warning("shard %d/%d holds none of the %d tasks: nothing to run", i, n, len(suite.tasks))
        name, text = resolve_prompt(suite, self.prompt, self.prompt_name)
        check_text("prompt", text)
        plan.check_reachable(self.max_turns, str(self.protocol))
        if self.protocol == "native":
            text = native_prompt(suite.tools.values(), text)
        limiter = None if self.rate_limit is None else RateLimiter(self.rate_limit)
        return Resolved(suite, task_ids, name, text, plan, rewording, limiter)


@dataclass(frozen=True)
class Resolved:
    """A config's suite-dependent parts, checked (:meth:`RunConfig.resolve`)."""

    suite: Suite
    task_ids: list[str]
    prompt_name: str
    prompt_text: str
    faults: FaultPlan
    rewording: PerturbPlan
    limiter: RateLimiter | None


def _task_ids(suite: Suite, tasks: Sequence[str] | None) -> list[str]:
    task_ids = list(suite.task_ids if tasks is None else tasks)
    if isinstance(tasks, str) or not task_ids:
        raise ValueError(f"tasks must be a non-empty list of task ids from {suite.task_ids}")
    for task_id in task_ids:
        if not isinstance(task_id, str):
            raise TypeError(f"task ids must be strings from {suite.task_ids}, got {task_id!r}")
        suite.task(task_id)
    check_unique("tasks", task_ids)
    return task_ids


def _workers_run_in_processes(c: RunConfig) -> None:
    if c.workers is not None and c.executor == "threads":
        object.__setattr__(c, "executor", "processes")


def _batch_alone(c: RunConfig) -> None:
    if c.batch and (c.adaptive or c.rate_limit is not None):
        raise ValueError(
            "batch=True sends each round as one batch, which the API queues itself: adaptive= and "
            "rate_limit= steer requests sent one by one; drop them for a batch run"
        )


def _ray_address_needs_ray(c: RunConfig) -> None:
    if c.ray_address is not None and c.executor != "ray":
        raise ValueError("ray_address= names the Ray cluster of executor='ray': pass executor='ray' too")


def _executor_alone(c: RunConfig) -> None:
    if c.executor != "threads" and (c.batch or c.rate_limit is not None):
        raise ValueError(
            f"executor={c.executor!r} runs Python agents in other processes; batch= and rate_limit= steer "
            "a network backend's requests, which threads already wait on: drop one or the other"
        )


def _seed_fits(c: RunConfig) -> None:
    object.__setattr__(c, "backend_seed", check_seed(c.backend_seed, c.trials))


def _stopping(c: RunConfig) -> None:
    if c.prices is not None and c.budget_usd is None:
        raise ValueError(
            "prices= prices a run's budget: give budget_usd= too (the analysis prices trials with "
            "passk_nb.stats.with_cost(df, prices=...))"
        )
    if c.until is not None:
        c.until.check(c.trials)  # a first round the question cannot use (past its final=N)
    elif c.max_trials is not None:
        raise ValueError("max_trials caps a run that stops when its question is answered: give until= too")


def _json_mode_fits(c: RunConfig) -> None:
    if c.json_mode == "off":
        return
    if c.protocol == "native":
        raise ValueError(
            f"json_mode={c.json_mode!r} constrains the JSON protocol's replies; with protocol='native' "
            "the API's tool calling structures the calls: leave json_mode off"
        )
    if not isinstance(c.provider, str):
        raise ValueError(
            f"json_mode={c.json_mode!r} asks a model backend for constrained output; a Python agent "
            "produces its own text: leave json_mode off"
        )


def _confidence_fits(c: RunConfig) -> None:
    """A ``+confidence`` prompt asks for ``"confidence"`` in the JSON protocol's answer object: under
    native tool calling the answer is plain text, and a schema leaves no room for the field."""
    if not (isinstance(c.prompt, str) and c.prompt.endswith(CONFIDENCE_SUFFIX)):
        return
    if c.protocol == "native":
        raise ValueError(
            f"prompt={c.prompt!r} asks for a confidence beside the JSON protocol's answer; under "
            "protocol='native' the final answer is plain text and states none: use protocol='json'"
        )
    if c.json_mode == "schema":
        raise ValueError(
            f"prompt={c.prompt!r} asks for a confidence, which the suite's action schema has no field "
            "for: use json_mode='json' or 'off'"
        )


#: The checks that tie fields together, in order, after :data:`CONSTRAINTS`.
RULES: tuple[Callable[[RunConfig], None], ...] = (
    _workers_run_in_processes,
    _batch_alone,
    _ray_address_needs_ray,
    _executor_alone,
    _seed_fits,
    _stopping,
    _json_mode_fits,
    _confidence_fits,
)
