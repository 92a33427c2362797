"""Many trials: concurrency, resume, progress, and records on disk.

:func:`run` composes the pure episode with the store. It uses threads (no
asyncio), so it works the same in a terminal and inside a running Jupyter
kernel.

>>> import tempfile
>>> df = run("scripted", trials=2, out=tempfile.mkdtemp(), progress=False)
>>> len(df), bool(df["passed"].all())
(10, True)
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from passk_nb._version import __version__
from passk_nb.data.ids import prompt_hash
from passk_nb.data.store import existing_trials, write_spec
from passk_nb.harness.arguments import (
    check_bool,
    check_positive,
    check_seconds,
    check_seed,
    check_text,
    check_trials,
    check_unique,
)
from passk_nb.harness.batch import execute_trials, load_trials
from passk_nb.harness.episode import arun_episode, run_episode
from passk_nb.harness.faults import Fault, FaultPlan, parse_faults
from passk_nb.harness.fingerprint import blind_spots, suite_fingerprint
from passk_nb.harness.pacing import Paced, RateLimit, RateLimiter
from passk_nb.harness.perturb import PerturbPlan, parse_perturb
from passk_nb.harness.preflight import check_backend
from passk_nb.harness.providers import NATIVE_PROVIDERS, BaseProvider, make_provider
from passk_nb.harness.shards import parse_shard, select_shard
from passk_nb.harness.spec import (
    RunSpec,
    identity_settings,
    normalize_json_mode,
    normalize_protocol,
    normalize_temperature,
    note_changes,
    resolve_prompt,
)
from passk_nb.harness.suites import get_suite
from passk_nb.harness.suites.base import Suite, SuiteError
from passk_nb.harness.suites.build import native_prompt

log = logging.getLogger("passk_nb")


def _record(base: dict[str, Any], task_id: str, trial: int, seed: int | None, fields: dict[str, Any]):
    meta = {**base["provider_meta"], **fields.pop("provider_meta", {})}
    trial_seed = None if seed is None else seed + trial
    return {
        **base,
        **fields,
        "task": task_id,
        "trial": trial,
        "seed": trial_seed,
        "provider_meta": json.dumps(meta, default=str),
    }


def _infra(started: dt.datetime, error: str, latency_s: float = float("nan")) -> dict[str, Any]:
    return {
        "outcome": "infra_error",
        "passed": False,
        "started_at": started,
        "latency_s": latency_s,
        "error": error,
    }


def _trial_record(
    suite: Suite,
    provider: BaseProvider,
    base: dict[str, Any],
    task_id: str,
    trial: int,
    seed: int | None,
    episode_options: dict[str, Any],
    limiter: RateLimiter | None = None,
) -> dict[str, Any]:
    bound = _bound(provider, trial, seed, limiter)
    started = dt.datetime.now(dt.UTC)
    try:
        return _record(
            base, task_id, trial, seed, run_episode(suite, suite.task(task_id), bound, **episode_options)
        )
    except SuiteError:  # the suite's own check is wrong: no trial can be judged; stop the run
        raise
    except Exception as exc:  # a harness bug must not stop the run; it is kept, visibly, as infra
        return _harness_error(base, task_id, trial, seed, started, exc)


async def _atrial_record(
    suite: Suite,
    provider: BaseProvider,
    base: dict[str, Any],
    task_id: str,
    trial: int,
    seed: int | None,
    episode_options: dict[str, Any],
    limiter: RateLimiter | None = None,
) -> dict[str, Any]:
    """:func:`_trial_record` as a task on the transport loop (a backend that speaks asyncio)."""
    bound = _bound(provider, trial, seed, limiter)
    started = dt.datetime.now(dt.UTC)
    try:
        fields = await arun_episode(suite, suite.task(task_id), bound, **episode_options)
        return _record(base, task_id, trial, seed, fields)
    except SuiteError:
        raise
    except Exception as exc:
        return _harness_error(base, task_id, trial, seed, started, exc)


def _bound(provider: BaseProvider, trial: int, seed: int | None, limiter: RateLimiter | None) -> Any:
    """The provider of one trial: its own seed, paced when the run has a rate limit."""
    bound: Any = provider.with_seed(None if seed is None else seed + trial)
    return bound if limiter is None else Paced(bound, limiter)


def _harness_error(
    base: dict[str, Any], task_id: str, trial: int, seed: int | None, started: dt.datetime, exc: Exception
) -> dict[str, Any]:
    log.exception("harness error in task %s trial %d", task_id, trial)
    error = f"harness error: {type(exc).__name__}: {exc}"
    return _record(base, task_id, trial, seed, _infra(started, error))


def run(
    provider: Any = "scripted",
    model: str | None = None,
    *,
    suite: str | Suite = "orders",
    tasks: Sequence[str] | None = None,
    trials: int = 3,
    prompt: str = "default",
    prompt_name: str | None = None,
    temperature: float | None = None,
    backend_seed: int | None = 0,
    version: str | None = None,
    concurrency: int = 4,
    adaptive: bool = False,
    out: str | os.PathLike[str] = "runs",
    max_turns: int = 10,
    max_format_errors: int = 2,
    json_mode: bool | str = "off",
    protocol: str = "json",
    progress: bool = True,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    trial_timeout: float | None = None,
    rate_limit: str | RateLimit | None = None,
    shard: tuple[int, int] | str | None = None,
    until: Any = None,
    max_trials: int | None = None,
    faults: str | Fault | Sequence[Fault] | FaultPlan | None = None,
    perturb: str | dict[str, Any] | PerturbPlan | None = None,
    **provider_options: Any,
) -> pd.DataFrame:
    """Run every task ``trials`` times against ``provider`` and return the trial records.

    ``provider`` is a registered name (``"scripted"``, ``"ollama"``, ...), an
    object with ``chat(messages)``, or a function of the messages. Backend
    options such as ``base_url=`` pass through to the backend. ``prompt`` is a
    prompt name of the suite (``"default"``, ``"strict"``) or the full system
    prompt text. ``json_mode``: ``"off"``, ``"json"`` (or True) or ``"schema"``
    (replies constrained to the action protocol's JSON Schema).

    ``protocol``: ``"json"`` (the JSON action protocol: tools listed in the system
    prompt, every reply one JSON object) or ``"native"``: the backend's own tool
    calling (``openai``, ``anthropic``, ``ollama``; ``scripted`` replays its scripts
    that way). The suite's tools then go to the API as tool definitions, and the
    prompt's JSON-protocol section is replaced by
    :data:`~passk_nb.harness.suites.build.NATIVE_PROTOCOL_TEXT` (a prompt of your own
    is sent as given). Checks, outcomes and records are the same; the protocol is
    part of the run id and a record column, so the two protocols can be compared on
    one model and the same tasks.

    Records go to ``out/<run_id>/`` as parquet. The run id is a hash of everything
    that decides what is measured (see :class:`~passk_nb.harness.spec.RunSpec`):
    the suite (a fingerprint of its tasks, checks, scripts, tools, initial state,
    prompts and claim vocabulary: an edited suite is a new run), backend, model,
    host, prompt hash, temperature, backend seed, JSON mode, limits, backend settings
    and, for a Python agent, a fingerprint of its code (or ``version`` when given: it
    pins the identity; an agent reading objects that the fingerprint sees by type only
    resumes only with a ``version``). Re-running the same spec into
    the same folder runs only the trials that are missing (and those that ended in
    an infrastructure error), so a killed run resumes where it stopped and a larger
    ``trials`` extends an earlier run. Trial ``i`` sends seed ``backend_seed + i``
    to the backend; a function agent that takes a ``seed`` keyword receives it.

    ``trial_timeout`` (seconds) bounds one trial: a trial still running then is
    recorded (``infra_error`` for a backend, ``agent_error`` for a Python agent)
    and the run goes on. ``on_record`` is called with each new record as it
    completes. A provider that ``run`` created is closed when it returns.

    ``concurrency`` trials run at once, on threads; a network backend's one shared
    connection pool is sized to it. ``adaptive=True`` makes ``concurrency`` a ceiling: a network
    backend's requests in flight start lower, grow while replies are clean and halve on a 429,
    503 or 529 (AIMD, :mod:`~passk_nb.harness.providers.adaptive`), so a run finds what the
    server admits instead of retrying what it refuses; the progress bar shows the requests in
    flight and the current limit. ``rate_limit`` paces the model requests of all
    of them: ``"600rpm"`` (requests per minute), ``"90000tpm"`` (tokens per minute)
    or both (``"600rpm,90000tpm"``); see :mod:`passk_nb.harness.pacing`. ``shard``
    ``(i, N)`` (or ``"i/N"``, 1 ≤ i ≤ N) runs only shard ``i`` of ``N`` of the tasks,
    chosen by a stable hash of the task id, so that N machines split a run (see
    :mod:`passk_nb.harness.shards`). Neither is part of the run's identity: the
    shards of a run, paced or not, are records of one run.

    ``until`` runs in rounds until a question is answered: ``trials`` of every task first (round
    0), then after each completed round ``until.next_round(records)`` (the run's records so far)
    names the tasks and trials of the next round (a frame with ``task``, ``trials`` and
    ``reason``; :class:`passk_nb.Until` builds them, anytime-valid, from a question such as
    ``"gate=0.8"``), and the run stops when it returns None or ``max_trials`` trials of the run are
    spent (the last round is cut to fit). Each record says its ``round`` and ``allocation`` (why it
    was run), so a stopped run resumes, extends or is audited: re-running continues with the next
    round. The harness only calls ``next_round``: any object with it works.

    ``faults`` injects tool faults (a spec such as ``"timeout:get_order,noop:refund_order:p=0.5"``,
    a :class:`~passk_nb.harness.faults.Fault` or a list of them; see :mod:`passk_nb.harness.faults`):
    timeouts, service errors, partial or stale results, silent no-ops, renamed fields, latency, on
    the n-th call of a tool or with a probability, drawn from the task and trial alone. The plan
    is part of the run's identity (the ``faults`` column), and each record lists what was injected
    (``faults_injected``), so a faulted run never resumes or pools with a clean one and pairs
    with it by task (:func:`passk_nb.robustness`).

    ``perturb`` rewords each trial's task prompt, keeping its meaning (see
    :mod:`passk_nb.harness.perturb`): a rule (``"typo"``, ``"synonyms"``, ``"reorder"``,
    ``"formal"``, ``"informal"``, ``"distractor"``), several (comma-separated: each trial draws one)
    or ``"all"``; a dict of your own rules (name -> ``function(text, rng)``) or of variant lists
    (task id -> prompt texts, one drawn per trial). Run one rule per call to get each as its own
    configuration. Recorded like faults: the ``perturbation`` column (part of the run id) and
    each trial's ``perturbation_applied``.

    Returns every record of this spec for the chosen tasks and trials, the
    ones from earlier runs included, sorted by task and trial (with ``until``, every trial of the
    chosen tasks).
    """
    if "seed" in provider_options:
        raise TypeError(
            "run() takes backend_seed= for the seed sent to the backend (trial i sends backend_seed + i); "
            "seed= names the bootstrap seed of the analysis functions"
        )
    # Every argument is checked here, before the first trial: a bad one costs no agent call.
    the_suite = get_suite(suite)
    trials = check_trials(trials)
    concurrency = check_positive("concurrency", concurrency)
    max_turns = check_positive("max_turns", max_turns)
    max_format_errors = check_positive("max_format_errors", max_format_errors)
    check_seconds("trial_timeout", trial_timeout)
    backend_seed = check_seed(backend_seed, trials)
    check_text("model", model)
    check_text("prompt_name", prompt_name, allow_empty=False)
    check_bool("progress", progress)
    check_bool("adaptive", adaptive)
    if until is not None and not callable(getattr(until, "next_round", None)):
        raise TypeError(
            f"until must have a next_round(records) method (e.g. passk_nb.Until('gate=0.8')); got {until!r}"
        )
    if max_trials is not None:
        if until is None:
            raise ValueError(
                "max_trials caps a run that stops when its question is answered: give until= too"
            )
        max_trials = check_positive("max_trials", max_trials)
    if on_record is not None and not callable(on_record):
        raise TypeError(f"on_record must be a function of one record, got {type(on_record).__name__}")
    if not isinstance(out, str | os.PathLike):
        raise TypeError(f"out must be a folder path, got {type(out).__name__} {out!r}")
    task_ids = list(the_suite.task_ids if tasks is None else tasks)
    if isinstance(tasks, str) or not task_ids:
        raise ValueError(f"tasks must be a non-empty list of task ids from {the_suite.task_ids}")
    for task_id in task_ids:
        if not isinstance(task_id, str):
            raise TypeError(f"task ids must be strings from {the_suite.task_ids}, got {task_id!r}")
        the_suite.task(task_id)
    check_unique("tasks", task_ids)
    limiter = None if rate_limit is None else RateLimiter(rate_limit)
    plan = parse_faults(faults)
    plan.check_tools(the_suite)
    rewording = parse_perturb(perturb)
    rewording.check(the_suite.tasks)
    if shard is not None:
        task_ids = select_shard(task_ids, shard)
        if not task_ids:
            i, n = parse_shard(shard)
            log.warning("shard %d/%d holds none of the %d tasks: nothing to run", i, n, len(the_suite.tasks))
    name, text = resolve_prompt(the_suite, prompt, prompt_name)
    check_text("prompt", text)
    temperature = normalize_temperature(temperature)
    mode = normalize_json_mode(json_mode)
    protocol = normalize_protocol(protocol)
    if protocol == "native":
        if mode != "off":
            raise ValueError(
                f"json_mode={json_mode!r} constrains the JSON protocol's replies; with protocol='native' "
                "the API's tool calling structures the calls: leave json_mode off"
            )
        text = native_prompt(the_suite.tools.values(), text)

    created = not isinstance(provider, BaseProvider)
    if isinstance(provider, str):
        provider_options.update(temperature=temperature, json_mode=mode != "off")
        if mode == "schema":  # the suite's own actions: tool names, argument types and id patterns
            provider_options.setdefault("json_schema", the_suite.action_schema())
        if provider == "scripted":
            provider_options.setdefault("suite", the_suite)
    elif mode != "off":
        raise ValueError(
            f"json_mode={json_mode!r} asks a model backend for constrained output; a Python agent "
            "produces its own text: leave json_mode off"
        )
    if version is not None:
        provider_options["version"] = version
    backend = make_provider(provider, model, **provider_options)
    # what a Python agent reads that its fingerprint sees by type only: such a run resumes only
    # under a version= the user pins
    pinned = version is not None or not backend.user_code or backend is provider
    unseen = [] if pinned else blind_spots(provider)
    if protocol == "native" and not backend.native_tools:
        if created:
            backend.close()
        raise ValueError(
            f"protocol='native' needs a backend with native tool calling ({', '.join(NATIVE_PROVIDERS)}); "
            f"the {backend.name} provider has none: use protocol='json'"
        )
    try:
        backend.check_prompt(text)
        backend.size_pool(concurrency)
        steered = backend.adapt_concurrency(concurrency) if adaptive else None
        return _run_trials(
            the_suite,
            backend,
            task_ids,
            trials,
            prompt_name=name,
            prompt_text=text,
            temperature=temperature,
            backend_seed=backend_seed,
            concurrency=concurrency,
            out=Path(out),
            max_turns=max_turns,
            max_format_errors=max_format_errors,
            protocol=protocol,
            progress=progress,
            on_record=on_record,
            trial_timeout=trial_timeout,
            limiter=limiter,
            unseen=unseen,
            status=None if steered is None else steered.status,
            until=until,
            max_trials=max_trials,
            plan=plan,
            rewording=rewording,
        )
    finally:
        if created:
            backend.close()


def _run_trials(
    the_suite: Suite,
    backend: BaseProvider,
    task_ids: list[str],
    trials: int,
    *,
    prompt_name: str,
    prompt_text: str,
    temperature: float | None,
    backend_seed: int | None,
    concurrency: int,
    out: Path,
    max_turns: int,
    max_format_errors: int,
    protocol: str,
    progress: bool,
    on_record: Callable[[dict[str, Any]], None] | None,
    trial_timeout: float | None,
    limiter: RateLimiter | None = None,
    unseen: Sequence[str] = (),
    status: Callable[[], str] | None = None,
    until: Any = None,
    max_trials: int | None = None,
    plan: FaultPlan | None = None,
    rewording: PerturbPlan | None = None,
) -> pd.DataFrame:
    plan = plan or FaultPlan()
    rewording = rewording or PerturbPlan()
    described = backend.describe()
    spec = RunSpec(
        suite=the_suite.name,
        provider=described["provider"],
        model=described["model"],
        base_url_host=described["base_url_host"],
        prompt_hash=prompt_hash(prompt_text),
        temperature=temperature,
        seed=backend_seed,
        json_mode=described["json_mode"],
        max_turns=max_turns,
        max_format_errors=max_format_errors,
        settings=identity_settings(described["provider_meta"]),
        protocol=protocol,
        suite_fingerprint=suite_fingerprint(the_suite),
        faults=plan.label,
        perturbation=rewording.label,
    )
    run_id = spec.run_id
    base = {
        **described,
        "run_id": run_id,
        "suite": the_suite.name,
        "prompt_hash": spec.prompt_hash,
        "prompt_name": prompt_name,
        "system_prompt": prompt_text,
        "temperature": temperature,
        "protocol": protocol,
        "faults": plan.label,
        "perturbation": rewording.label,
        "config": spec.config,
        "harness_version": __version__,
    }
    out_dir = out
    note_changes(out_dir, spec)
    done = existing_trials(out_dir, run_id)
    if done and unseen:
        raise ValueError(
            f"{out_dir} holds {len(done)} trials of this agent's run {run_id}, but its fingerprint sees "
            f"{', '.join(unseen)} by type only (an edit there would not show): pass version='...' "
            "(a name you change whenever the agent changes) to resume a run, or write to a new out= folder"
        )
    todo = [(t, i) for t in task_ids for i in range(trials) if (t, i) not in done]
    if until is not None and max_trials is not None:
        todo = todo[: max(0, max_trials - len(done))]
    if done:
        log.info("run %s: %d trials already in %s, %d to run", run_id, len(done), out_dir, len(todo))
    if todo:
        check_backend(backend)  # a dead server fails here, once, not in every trial's retries
        write_spec(out_dir, run_id, spec.identity())
    episode_options = {
        "system_prompt": prompt_text,
        "max_turns": max_turns,
        "max_format_errors": max_format_errors,
        "protocol": protocol,
        "faults": plan if plan.faults else None,
        "perturb": rewording or None,
    }
    seed = backend_seed
    # with until=: why each trial runs (its round and allocation), by (task, trial)
    why: dict[tuple[str, int], dict[str, Any]] = {}
    if until is not None:
        why.update({job: {"round": 0, "allocation": "first round"} for job in todo})

    def fields_of(task_id: str, trial: int) -> dict[str, Any]:
        """The run's fields of every record, with the trial's round and allocation under until=."""
        return {**base, **why.get((task_id, trial), {})}

    def options_of(task_id: str, trial: int) -> dict[str, Any]:
        """The episode's options; fault and perturbation draws seeded by the task and trial alone."""
        return {**episode_options, "trial_key": f"{task_id}:{trial}"}

    def one_trial(task_id: str, trial: int) -> dict[str, Any]:
        fields, options = fields_of(task_id, trial), options_of(task_id, trial)
        return _trial_record(the_suite, backend, fields, task_id, trial, seed, options, limiter)

    async def one_async_trial(task_id: str, trial: int) -> dict[str, Any]:
        fields, options = fields_of(task_id, trial), options_of(task_id, trial)
        return await _atrial_record(the_suite, backend, fields, task_id, trial, seed, options, limiter)

    def timed_out(task_id: str, trial: int, elapsed: float) -> dict[str, Any]:
        started = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=elapsed)
        error = f"trial timed out after {elapsed:.1f} s (trial_timeout={trial_timeout}): no answer in time"
        fields = _infra(started, error, elapsed)
        if backend.user_code:  # a Python agent that hangs is the agent's failure
            fields["outcome"] = "agent_error"
        return _record(fields_of(task_id, trial), task_id, trial, seed, fields)

    def execute(jobs: list[tuple[str, int]]) -> None:
        execute_trials(
            one_async_trial if backend.speaks_asyncio else one_trial,
            jobs,
            concurrency=concurrency,
            out=out_dir,
            run_id=run_id,
            desc=f"{spec.provider}/{spec.model}",
            progress=progress,
            on_record=on_record,
            timeout=trial_timeout,
            on_timeout=timed_out,
            keep_records=False,  # read back from disk below: memory stays bounded however long the run
            status=status,
        )

    execute(todo)
    if until is None:
        return load_trials(out_dir, run_id, task_ids, trials)
    checked = bool(todo)
    while jobs := _next_round(until, load_trials(out_dir, run_id, task_ids, _ALL), max_trials, why):
        if not checked:  # a resumed run: the backend is checked once, before its first new trial
            check_backend(backend)
            write_spec(out_dir, run_id, spec.identity())
            checked = True
        execute(jobs)
    return load_trials(out_dir, run_id, task_ids, _ALL)


#: Every trial index (load_trials keeps trials below it).
_ALL = 2**62


def _next_round(
    until: Any, records: pd.DataFrame, max_trials: int | None, why: dict[tuple[str, int], dict[str, Any]]
) -> list[tuple[str, int]]:
    """The (task, trial) jobs of the next round ``until`` asks for, each noted in ``why`` with its
    round and allocation; empty when it asks for none or ``max_trials`` are spent."""
    left = None if max_trials is None else max_trials - len(records)
    if left is not None and left <= 0:
        return []
    allocation = until.next_round(records)
    if allocation is None or len(allocation) == 0:
        return []
    rounds = (
        pd.to_numeric(records["round"], errors="coerce") if "round" in records else pd.Series(dtype=float)
    )
    this_round = int(rounds.max()) + 1 if rounds.notna().any() else 1
    following = records.groupby("task")["trial"].max().add(1).to_dict() if len(records) else {}
    jobs = []
    for task, count, reason in zip(
        allocation["task"], allocation["trials"], allocation["reason"], strict=True
    ):
        first = int(following.get(task, 0))
        for trial in range(first, first + int(count)):
            jobs.append((str(task), trial))
            why[(str(task), trial)] = {"round": this_round, "allocation": str(reason)}
    log.info("round %d: %d trials (%s)", this_round, len(jobs), _progress(until, records))
    return jobs if left is None else jobs[:left]


def _progress(until: Any, records: pd.DataFrame) -> str:
    progress = getattr(until, "progress", None)
    return str(progress(records)) if callable(progress) else f"{len(records)} trials so far"
