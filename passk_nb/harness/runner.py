"""Many trials: concurrency, resume, progress, and records on disk.

:func:`run` composes the pure episode with the store. Network backends' trials run as
asyncio tasks on one transport loop in a background thread, Python agents and the CLI backends
in a bounded thread pool (or processes, or Ray tasks: ``executor=``), so it works the same in a
terminal and inside a running Jupyter kernel, whose own loop it never touches.

>>> import tempfile
>>> df = run("scripted", trials=2, out=tempfile.mkdtemp(), progress=False)
>>> len(df), bool(df["passed"].all())
(10, True)
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from passk_nb._version import __version__
from passk_nb.data.ids import prompt_hash
from passk_nb.data.store import StoreError, existing_trials, write_spec
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
from passk_nb.harness.executors import EXECUTORS, WorkerLost, make_executor
from passk_nb.harness.faults import Fault, FaultPlan, parse_faults
from passk_nb.harness.fingerprint import blind_spots, suite_fingerprint
from passk_nb.harness.pacing import Paced, RateLimit, RateLimiter
from passk_nb.harness.perturb import PerturbationError, PerturbPlan, parse_perturb
from passk_nb.harness.preflight import check_backend
from passk_nb.harness.providers import BaseProvider, make_provider, native_providers
from passk_nb.harness.providers.base import delay_scope
from passk_nb.harness.providers.batches import JOURNAL_FILE, TRIAL, BatchProvider
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
    except PerturbationError as exc:  # a rule of your own, named: no harness error, no traceback
        return _rule_error(base, task_id, trial, seed, started, exc)
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
    TRIAL.set((task_id, trial))  # this task's own context: a batch request is named by its trial
    try:
        fields = await arun_episode(suite, suite.task(task_id), bound, **episode_options)
        return _record(base, task_id, trial, seed, fields)
    except SuiteError:
        raise
    except PerturbationError as exc:
        return _rule_error(base, task_id, trial, seed, started, exc)
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


def _rule_error(
    base: dict[str, Any], task_id: str, trial: int, seed: int | None, started: dt.datetime, exc: Exception
) -> dict[str, Any]:
    """A perturbation rule failed in this trial though its draw passed the dry run: ``infra_error``
    (the trial never ran as specified; a resume tries it again), named by the rule."""
    log.warning("task %s trial %d: %s", task_id, trial, exc)
    return _record(base, task_id, trial, seed, _infra(started, str(exc)))


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
    concurrency: int | None = None,
    adaptive: bool = False,
    batch: bool = False,
    batch_poll: float = 30.0,
    workers: int | None = None,
    executor: str = "threads",
    ray_address: str | None = None,
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
    object with ``chat(messages)``, or a function of the messages (what it receives and
    returns: :mod:`passk_nb.harness.providers.function`). Backend
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
    recorded (``infra_error`` for a backend, ``agent_error`` for a Python agent; ``infra_error``
    for both when its time ran out inside an injected ``latency`` fault, the harness's own time)
    and the run goes on. ``on_record`` is called with each new record as it
    completes. A provider that ``run`` created is closed when it returns.

    ``batch=True`` (``anthropic``, ``openai``) sends the model turns through the provider's batch
    API at its batch price: the turns of every trial in flight go out as one batch, polled every
    ``batch_poll`` seconds, and a trial of T turns waits for T batches; a killed run resumes from the
    batches already submitted, never paying for one twice (:mod:`~passk_nb.harness.providers.batches`).
    Its trials all run at once unless ``concurrency`` says otherwise; the run id is that of the same
    run sent request by request.

    ``workers=N`` runs a Python agent's trials in N worker processes (past the GIL, for agents that
    compute), ``executor="ray"`` as Ray tasks on the cluster at ``ray_address`` (default
    ``$RAY_ADDRESS``, else a local one); this process stays the only writer of the run folder, and a
    trial whose worker died is run again (:mod:`~passk_nb.harness.executors`). Neither changes the
    run id.

    ``concurrency`` (default 4; ``workers`` with ``workers=``) trials run at once; a network
    backend's one shared connection pool is sized to it. ``adaptive=True`` makes ``concurrency`` a
    ceiling: a network backend's requests in flight start lower, grow while replies are clean and
    halve on a 429, 503 or 529 (AIMD, :mod:`~passk_nb.harness.providers.adaptive`), so a run finds what the
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
    was run), so a stopped run resumes, extends or is audited: re-running first finishes the
    trials its last round planned (each round's plan is kept beside the records, in
    ``_rounds.jsonl``), then continues with the next round, so that no look reads a round cut
    short by a kill. The harness only calls ``next_round``: any object with it works.

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
    check_bool("batch", batch)
    check_seconds("batch_poll", batch_poll, allow_none=False)
    if batch and (adaptive or rate_limit is not None):
        raise ValueError(
            "batch=True sends each round as one batch, which the API queues itself: adaptive= and "
            "rate_limit= steer requests sent one by one; drop them for a batch run"
        )
    if concurrency is not None:
        concurrency = check_positive("concurrency", concurrency)
    if workers is not None:
        workers = check_positive("workers", workers)
        executor = "processes" if executor == "threads" else executor
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {list(EXECUTORS)}, got {executor!r}")
    if ray_address is not None and executor != "ray":
        raise ValueError("ray_address= names the Ray cluster of executor='ray': pass executor='ray' too")
    if executor != "threads" and (batch or rate_limit is not None):
        raise ValueError(
            f"executor={executor!r} runs Python agents in other processes; batch= and rate_limit= steer "
            "a network backend's requests, which threads already wait on: drop one or the other"
        )
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
    if until is not None and callable(getattr(until, "check", None)):
        until.check(trials)  # a first round the question cannot use (past its final=N)
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
    rewording = parse_perturb(perturb, the_suite.perturbations)
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
    plan.check_reachable(max_turns, protocol)
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
    backend: Any = make_provider(provider, model, **provider_options)
    if batch:
        try:
            backend = BatchProvider(backend, poll=batch_poll)
        except ValueError:
            if created:
                backend.close()
            raise
    if executor != "threads" and not (backend.user_code or backend.name == "scripted"):
        if created:
            backend.close()
        raise ValueError(
            f"executor={executor!r} (workers=) runs a Python agent's own computation in other processes; "
            f"the {backend.name} backend waits on its model instead: raise concurrency= for it"
        )
    if concurrency is None:  # a batch run: every trial's turn in each batch
        concurrency = min(len(task_ids) * trials, MAX_BATCH_CONCURRENCY) if batch else workers or 4
    # what a Python agent reads that its fingerprint sees by type only: such a run resumes only
    # under a version= the user pins
    pinned = version is not None or not backend.user_code or backend is provider
    unseen = [] if pinned else blind_spots(provider)
    if protocol == "native" and not backend.native_tools:
        if created:
            backend.close()
        raise ValueError(
            f"protocol='native' needs a backend with native tool calling ({', '.join(native_providers())}); "
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
            executor=(executor, workers, ray_address),
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
    executor: tuple[str, int | None, str | None] = ("threads", None, None),
    plan: FaultPlan | None = None,
    rewording: PerturbPlan | None = None,
) -> pd.DataFrame:
    plan = plan or FaultPlan()
    rewording = rewording or PerturbPlan()
    described = backend.describe()
    unwrapped = backend.base if isinstance(backend, BatchProvider) else backend
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
        "suite_hash": spec.suite_fingerprint,
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
    note_changes(out_dir, spec, prompt_name)
    done = existing_trials(out_dir, run_id)
    if done and unseen:
        raise ValueError(
            f"{out_dir} holds {len(done)} trials of this agent's run {run_id}, but its fingerprint sees "
            f"{', '.join(unseen)} by type only (an edit there would not show): pass version='...' "
            "(a name you change whenever the agent changes) to resume a run, or write to a new out= folder"
        )
    todo = [(t, i) for t in task_ids for i in range(trials) if (t, i) not in done]
    # with until=: why each trial runs (its round and allocation), by (task, trial)
    why: dict[tuple[str, int], dict[str, Any]] = {}
    rounds_file = out_dir / run_id / ROUNDS_FILE
    if until is not None:
        why.update({job: {"round": 0, "allocation": "first round"} for job in todo})
        # a resumed run first finishes the rounds it planned: the next look reads them whole
        planned = {
            job: reason
            for job, reason in planned_rounds(rounds_file).items()
            if job[0] in task_ids and job not in done and job not in why
        }
        why.update(planned)
        todo += list(planned)
        if max_trials is not None:
            todo = todo[: max(0, max_trials - len(done))]
    if done:
        log.info("run %s: %d trials already in %s, %d to run", run_id, len(done), out_dir, len(todo))
    if todo:
        check_backend(unwrapped)  # a dead server fails here, once, not in every trial's retries
        write_spec(out_dir, run_id, spec.identity())
    if isinstance(backend, BatchProvider):  # batches already submitted answer a resumed run
        backend.attach_journal(out_dir / run_id / JOURNAL_FILE)
    episode_options = {
        "system_prompt": prompt_text,
        "max_turns": max_turns,
        "max_format_errors": max_format_errors,
        "protocol": protocol,
        "faults": plan if plan.faults else None,
        "perturb": rewording or None,
    }
    seed = backend_seed

    def fields_of(task_id: str, trial: int) -> dict[str, Any]:
        """The run's fields of every record, with the trial's round and allocation under until=."""
        return {**base, **why.get((task_id, trial), {})}

    def options_of(task_id: str, trial: int) -> dict[str, Any]:
        """The episode's options; fault and perturbation draws seeded by the task and trial alone."""
        return {**episode_options, "trial_key": f"{task_id}:{trial}"}

    delaying: set[tuple[str, int]] = set()  # trials inside the harness's own injected delay

    def note_delay(task_id: str, trial: int, active: bool) -> None:
        (delaying.add if active else delaying.discard)((task_id, trial))

    def one_trial(task_id: str, trial: int) -> dict[str, Any]:
        fields, options = fields_of(task_id, trial), options_of(task_id, trial)
        with delay_scope(functools.partial(note_delay, task_id, trial)):
            if elsewhere is None:
                return _trial_record(the_suite, backend, fields, task_id, trial, seed, options, limiter)
            started = dt.datetime.now(dt.UTC)
            try:
                return elsewhere.call(_trial_in_worker, task_id, trial, fields)
            except WorkerLost as exc:  # the agent's own process died each time it ran this trial
                lost = {**_infra(started, str(exc)), "outcome": "agent_error"}
                return _record(fields, task_id, trial, seed, lost)

    async def one_async_trial(task_id: str, trial: int) -> dict[str, Any]:
        fields, options = fields_of(task_id, trial), options_of(task_id, trial)
        with delay_scope(functools.partial(note_delay, task_id, trial)):
            return await _atrial_record(the_suite, backend, fields, task_id, trial, seed, options, limiter)

    def timed_out(task_id: str, trial: int, elapsed: float) -> dict[str, Any]:
        started = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=elapsed)
        error = f"trial timed out after {elapsed:.1f} s (trial_timeout={trial_timeout}): no answer in time"
        fields = _infra(started, error, elapsed)
        if (task_id, trial) in delaying:  # the harness's own time, whatever the backend
            delaying.discard((task_id, trial))
            fields["error"] = (
                f"trial timed out after {elapsed:.1f} s (trial_timeout={trial_timeout}) inside the "
                f"harness's injected latency (faults={plan.label!r}): infrastructure, not the agent"
            )
        elif backend.user_code:  # a Python agent that hangs is the agent's failure
            fields["outcome"] = "agent_error"
        return _record(fields_of(task_id, trial), task_id, trial, seed, fields)

    standing = [""]  # under until=: where the question stands after the last round, beside the bar

    def bar_status() -> str:
        return "; ".join(part for part in (standing[0], status() if status else "") if part)

    merged: dict[str, Any] = {}  # the part the last merge left and what it holds: not read back
    prompts = {task.id: task.prompt for task in the_suite.tasks}

    def execute(jobs: list[tuple[str, int]]) -> None:
        rewording.check_draws(prompts, jobs)  # a rule failing on a draw is refused before the trials
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
            keep_records=False,  # memory stays bounded however long the run (the frame comes from the merge)
            status=bar_status if status is not None or until is not None else None,
            on_merge=lambda part: merged.update(last=part),
            redact=backend.redact,
        )

    name, workers, address = executor
    state = {"suite": the_suite, "backend": backend, "seed": seed, "options": episode_options}
    elsewhere = (
        None if name == "threads" else make_executor(name, workers=workers, state=state, address=address)
    )
    try:
        execute(todo)
        if until is None:
            return load_trials(out_dir, run_id, task_ids, trials, merged.pop("last", None))
        checked = bool(todo)
        while jobs := _next_round(
            until,
            load_trials(out_dir, run_id, task_ids, _ALL, merged.pop("last", None)),
            max_trials,
            why,
            standing,
            rounds_file,
        ):
            if not checked:  # a resumed run: the backend is checked once, before its first new trial
                check_backend(unwrapped)
                write_spec(out_dir, run_id, spec.identity())
                checked = True
            execute(jobs)
        return load_trials(out_dir, run_id, task_ids, _ALL, merged.pop("last", None))
    finally:
        if elsewhere is not None:
            elsewhere.close()


def _trial_in_worker(
    state: dict[str, Any], task_id: str, trial: int, fields: dict[str, Any]
) -> dict[str, Any]:
    """One trial in a worker process or Ray task, from what the run gave the worker once (the agent,
    suite and episode options, a perturbation rule of your own among them: never pickled per trial)."""
    options = {**state["options"], "trial_key": f"{task_id}:{trial}"}
    return _trial_record(state["suite"], state["backend"], fields, task_id, trial, state["seed"], options)


#: Every trial index (load_trials keeps trials below it).
_ALL = 2**62

#: The most trials a batch run keeps in flight (each round's batch) unless concurrency= says.
MAX_BATCH_CONCURRENCY = 10_000


def _next_round(
    until: Any,
    records: pd.DataFrame,
    max_trials: int | None,
    why: dict[tuple[str, int], dict[str, Any]],
    standing: list[str] | None = None,
    journal: Path | None = None,
) -> list[tuple[str, int]]:
    """The (task, trial) jobs of the next round ``until`` asks for, each noted in ``why`` with its
    round and allocation; empty when it asks for none or ``max_trials`` are spent. ``standing[0]``
    becomes the progress line shown beside the bar (the round, the interval, the trials spent).
    The round's plan goes to ``journal`` before any of its trials runs (:func:`plan_round`)."""
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
    progress = _progress(until, records)
    log.info("round %d: %d trials (%s)", this_round, len(jobs), progress)
    if standing is not None:
        standing[0] = f"round {this_round}: {progress}"
    jobs = jobs if left is None else jobs[:left]
    if journal is not None:
        plan_round(journal, this_round, [(*job, why[job]["allocation"]) for job in jobs])
    return jobs


#: Each round's plan after the first, in the run's folder (``_`` files are not records): one line
#: ``{"round": r, "jobs": [[task, trial, allocation], ...]}`` per round, written before it runs.
ROUNDS_FILE = "_rounds.jsonl"


def plan_round(journal: Path, round_no: int, jobs: Sequence[tuple[str, int, str]]) -> None:
    """Append round ``round_no``'s planned jobs to ``journal``, synced to disk before the round
    starts: a kill at any moment leaves the plan of every round that ran a trial."""
    line = json.dumps({"round": round_no, "jobs": [list(job) for job in jobs]}).encode("utf-8") + b"\n"
    try:
        journal.parent.mkdir(parents=True, exist_ok=True)
        with journal.open("a+b") as f:
            if f.tell():
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    line = b"\n" + line  # after the torn last line of a run killed while writing it
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise StoreError(
            f"could not write round {round_no}'s plan to {journal}: {exc.strerror or exc}. "
            "Check free space and write permission; records written before are intact"
        ) from exc


def planned_rounds(journal: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """Every job the rounds in ``journal`` planned, with its round and allocation (empty without a
    journal). A line that is not JSON was torn by a kill while written: its round never started."""
    if not journal.exists():
        return {}
    planned: dict[tuple[str, int], dict[str, Any]] = {}
    for number, line in enumerate(journal.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        try:
            round_no = int(entry["round"])
            jobs = [(str(task), int(trial), str(reason)) for task, trial, reason in entry["jobs"]]
        except (ValueError, KeyError, TypeError):
            raise ValueError(
                f"{journal}, line {number}, is not a round's plan (round, jobs): {line[:120]!r}; the file "
                "is written by run(until=): restore it, or delete it to plan the next round from the "
                "records alone"
            ) from None
        for task, trial, reason in jobs:
            planned[(task, trial)] = {"round": round_no, "allocation": reason}
    return planned


def _progress(until: Any, records: pd.DataFrame) -> str:
    progress = getattr(until, "progress", None)
    return str(progress(records)) if callable(progress) else f"{len(records)} trials so far"
