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
import inspect
import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from passk_nb._version import __version__
from passk_nb.data.ids import prompt_hash
from passk_nb.data.prices import Prices, price_table, trial_cost
from passk_nb.data.store import StoreError, append_line, existing_trials, write_spec
from passk_nb.harness.batch import execute_trials, load_trials
from passk_nb.harness.budget import Budget
from passk_nb.harness.config import Resolved, RunConfig, StoppingRule
from passk_nb.harness.episode import arun_episode, run_episode
from passk_nb.harness.executors import WorkerLost, make_executor
from passk_nb.harness.faults import Fault, FaultPlan
from passk_nb.harness.fingerprint import blind_spots, suite_fingerprint
from passk_nb.harness.loop_workers import LoopWorkers, check_fork
from passk_nb.harness.pacing import Paced, RateLimit, RateLimiter
from passk_nb.harness.perturb import PerturbationError, PerturbPlan
from passk_nb.harness.preflight import check_backend
from passk_nb.harness.providers import BaseProvider, make_provider, native_providers
from passk_nb.harness.providers.base import delay_scope
from passk_nb.harness.providers.batches import JOURNAL_FILE, TRIAL, BatchProvider
from passk_nb.harness.spec import RunSpec, identity_settings, note_changes
from passk_nb.harness.suites.base import Suite, SuiteError

log = logging.getLogger("passk_nb")


#: The run's ``provider_meta`` last encoded, and its JSON (:func:`_meta_json`).
_last_meta: tuple[dict[str, Any] | None, str] = (None, "")


def _meta_json(run_meta: dict[str, Any], trial_meta: dict[str, Any]) -> str:
    """The record's ``provider_meta``: the run's, updated by the trial's. Most trials add nothing:
    the run's JSON is then encoded once, not once per trial (~4 µs of CPU each)."""
    global _last_meta
    if trial_meta:
        return json.dumps({**run_meta, **trial_meta}, default=str)
    cached = _last_meta  # one read: another thread may replace it meanwhile
    if cached[0] is run_meta:
        return cached[1]
    text = json.dumps(dict(run_meta), default=str)
    _last_meta = (run_meta, text)
    return text


def _record(base: dict[str, Any], task_id: str, trial: int, seed: int | None, fields: dict[str, Any]):
    meta = _meta_json(base["provider_meta"], fields.pop("provider_meta", {}))
    trial_seed = None if seed is None else seed + trial
    return {
        **base,
        **fields,
        "task": task_id,
        "trial": trial,
        "seed": trial_seed,
        "provider_meta": meta,
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
    until: StoppingRule | None = None,
    max_trials: int | None = None,
    budget_usd: float | None = None,
    prices: Prices = None,
    faults: str | Fault | Sequence[Fault] | FaultPlan | None = None,
    perturb: str | dict[str, Any] | PerturbPlan | None = None,
    config: RunConfig | None = None,
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
    trial whose worker died is run again (:mod:`~passk_nb.harness.executors`). With a backend whose
    requests are coroutines (OpenAI, Ollama, Anthropic over HTTP/1.1), ``workers=N`` forks N
    processes each running its own event loop over its share of ``concurrency``, for runs that need
    more than one core; this process still claims and writes every trial, and a trial whose worker
    died is an ``infra_error`` a resume runs again (:mod:`~passk_nb.harness.loop_workers`; where
    processes cannot fork, refused before anything is written). Neither changes the run id.

    ``concurrency`` (default 4; ``workers`` with ``workers=`` for a Python agent) trials run at
    once; a network backend's one shared connection pool is sized to it. ``adaptive=True`` makes
    ``concurrency`` a ceiling: a network backend's requests in flight start lower, grow while
    replies are clean and halve on a 429, 503 or 529 (AIMD,
    :mod:`~passk_nb.harness.providers.adaptive`), so a run finds what the server admits instead
    of retrying what it refuses; the progress bar shows the requests in flight and the current
    limit. ``rate_limit`` paces the model requests of all
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
    short by a kill. ``until`` is a :class:`~passk_nb.harness.config.StoppingRule`: an object with
    ``next_round``, ``check`` (called with ``trials`` before the first round) and ``progress`` (the
    line beside the bar); a class of your own may subclass it for the last two.

    ``budget_usd`` stops the run from starting trials it cannot pay for: a trial starts only while
    the run's spend so far (its stored trials included) plus the expected cost of every trial in
    flight and of this one stays within the budget (:mod:`~passk_nb.harness.budget`); trials in
    flight finish and are stored, the frame's ``attrs["stopped"]`` and the run folder's
    ``_budget.jsonl`` say why it stopped, and a later call with a higher budget resumes (the budget
    is not part of the run id). A trial's cost is its reported tokens at ``prices``
    (``{model: (price_in, price_out)}`` in USD per million tokens, or a frame with columns ``model``,
    ``price_in``, ``price_out``), else the cost its backend reports (claude-code). With ``until``
    the budget is one more stopping rule: an anytime-valid decision holds at any stopping time,
    this one included (the budget reads the spend, never a task's pass or fail as such).

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

    ``config`` takes the whole configuration as one :class:`~passk_nb.harness.config.RunConfig`
    (the keywords above build one; each is checked there, before the first trial), in place of the
    keywords.

    Returns every record of this spec for the chosen tasks and trials, the
    ones from earlier runs included, sorted by task and trial (with ``until``, every trial of the
    chosen tasks).
    """
    keywords = {name: value for name, value in locals().items() if name in _KEYWORD_DEFAULTS}
    if config is None:
        config = RunConfig(**keywords, provider_options=provider_options)
    else:
        changed = [name for name, value in keywords.items() if _differs(value, _KEYWORD_DEFAULTS[name])]
        if changed or provider_options:
            raise TypeError(
                f"run(config=...) takes the whole configuration; {', '.join([*changed, *provider_options])} "
                "given beside it: set them in the RunConfig (config.replace(...) makes a changed copy)"
            )
    return _run(config)


#: run()'s keywords (each a RunConfig field of its name) and their defaults: beside config= each
#: must keep its default.
_KEYWORD_DEFAULTS = {
    name: parameter.default
    for name, parameter in inspect.signature(run).parameters.items()
    if parameter.default is not inspect.Parameter.empty and name != "config"
}


def _differs(value: Any, default: Any) -> bool:
    """Is ``value`` not the keyword's default (the same object, or an equal value of its type)?"""
    return value is not default and not (type(value) is type(default) and value == default)


def _run(config: RunConfig) -> pd.DataFrame:
    """:func:`run` of a checked configuration: the suite resolved, the backend opened (and closed
    when ``run`` created it), the trials run."""
    resolved = config.resolve()
    created = not isinstance(config.provider, BaseProvider)
    backend: Any = _make_backend(config, resolved)
    try:
        if config.batch:
            backend = BatchProvider(backend, poll=config.batch_poll)
        _check_backend_fits(config, backend)
        concurrency = config.concurrency
        if concurrency is None:  # a batch run: every trial's turn in each batch
            every = len(resolved.task_ids) * config.trials
            per_worker = config.workers if not backend.speaks_asyncio else None  # a loop runs many
            concurrency = min(every, MAX_BATCH_CONCURRENCY) if config.batch else per_worker or 4
        # what a Python agent reads that its fingerprint sees by type only: such a run resumes only
        # under a version= the user pins
        pinned = config.version is not None or not backend.user_code or backend is config.provider
        unseen = [] if pinned else blind_spots(config.provider)
        backend.check_prompt(resolved.prompt_text)
        backend.size_pool(concurrency)
        steered = backend.adapt_concurrency(concurrency) if config.adaptive else None
        status = None if steered is None else steered.status
        return _Trials(config, resolved, backend, concurrency, unseen, status).run()
    finally:
        if created:
            backend.close()


def _make_backend(config: RunConfig, resolved: Resolved) -> BaseProvider:
    """The backend ``config`` names, given the options the run decides (temperature, JSON mode and
    schema, the scripted agent's suite, the pinned version)."""
    options = dict(config.provider_options)
    if isinstance(config.provider, str):
        options.update(temperature=config.temperature, json_mode=config.json_mode != "off")
        if config.json_mode == "schema":  # the suite's own actions: tool names, argument types, id patterns
            options.setdefault("json_schema", resolved.suite.action_schema())
        if config.provider == "scripted":
            options.setdefault("suite", resolved.suite)
    if config.version is not None:
        options["version"] = config.version
    return make_provider(config.provider, config.model, **options)


def _check_backend_fits(config: RunConfig, backend: BaseProvider) -> None:
    """Refuse what the opened backend cannot do: workers for a model backend (or, for an HTTP one,
    where processes cannot fork), native tool calling without it."""
    on_loops = config.executor == "processes" and backend.speaks_asyncio  # loop_workers.py
    if config.executor != "threads" and not (backend.user_code or backend.name == "scripted" or on_loops):
        raise ValueError(
            f"executor={config.executor!r} (workers=) runs a Python agent's own computation in other "
            f"processes; the {backend.name} backend waits on its model instead: raise concurrency= for it"
        )
    if on_loops:
        check_fork()
    if on_loops and config.adaptive:
        raise ValueError(
            "adaptive=True steers one process's requests in flight; workers= splits them over several "
            "processes: drop one or the other"
        )
    if config.protocol == "native" and not backend.native_tools:
        raise ValueError(
            f"protocol='native' needs a backend with native tool calling ({', '.join(native_providers())}); "
            f"the {backend.name} provider has none: use protocol='json'"
        )


class _Trials:
    """One run's trials: its spec and record fields, what is already on disk, the rounds of a run
    with ``until=``, and each trial as it runs here, in a worker or on the transport loop."""

    def __init__(
        self,
        config: RunConfig,
        resolved: Resolved,
        backend: BaseProvider,
        concurrency: int,
        unseen: Sequence[str] = (),
        status: Callable[[], str] | None = None,
    ):
        self.config, self.resolved, self.backend = config, resolved, backend
        self.concurrency, self.status = concurrency, status
        self.suite, self.task_ids = resolved.suite, resolved.task_ids
        self.plan, self.rewording = resolved.faults, resolved.rewording
        described = backend.describe()
        self.spec = _spec(config, resolved, described)
        self.run_id = self.spec.run_id
        self.out = Path(config.out)
        self.base = _base_fields(config, resolved, described, self.spec)
        self.families = {task.id: task.family for task in self.suite.tasks}
        note_changes(self.out, self.spec, resolved.prompt_name)
        self.done = existing_trials(self.out, self.run_id)
        if self.done and unseen:
            raise ValueError(
                f"{self.out} holds {len(self.done)} trials of this agent's run {self.run_id}, but its "
                f"fingerprint sees {', '.join(unseen)} by type only (an edit there would not show): pass "
                "version='...' (a name you change whenever the agent changes) to resume a run, or write "
                "to a new out= folder"
            )
        self.episode_options = {
            "system_prompt": resolved.prompt_text,
            "max_turns": config.max_turns,
            "max_format_errors": config.max_format_errors,
            "protocol": config.protocol,
            "faults": self.plan if self.plan.faults else None,
            "perturb": self.rewording or None,
        }
        self.seed = config.backend_seed
        #: with until=: why each trial runs (its round and allocation), by (task, trial)
        self.why: dict[tuple[str, int], dict[str, Any]] = {}
        self.rounds_file = self.out / self.run_id / ROUNDS_FILE
        self.delaying: set[tuple[str, int]] = set()  # trials inside the harness's own injected delay
        self.standing = [""]  # under until=: where the question stands after the last round
        self.merged: dict[str, Any] = {}  # the part the last merge left: not read back from disk
        self.prompts = {task.id: task.prompt for task in self.suite.tasks}
        self.elsewhere: Any = None  # the worker pool or Ray tasks of executor=, while running
        self.budget = self.open_budget()

    def run(self) -> pd.DataFrame:
        """Run the missing trials (and, with ``until=``, the rounds) and return the records."""
        todo = self.first_round()
        if self.done:
            log.info(
                "run %s: %d trials already in %s, %d to run", self.run_id, len(self.done), self.out, len(todo)
            )
        checked = bool(todo)
        if todo:
            self.check_backend()
        if isinstance(self.backend, BatchProvider):  # batches already submitted answer a resumed run
            self.backend.attach_journal(self.out / self.run_id / JOURNAL_FILE)
        name = self.config.executor
        if name != "threads" and not self.backend.speaks_asyncio:  # else each worker runs a loop
            state = {
                "suite": self.suite,
                "backend": self.backend,
                "seed": self.seed,
                "options": self.episode_options,
            }
            self.elsewhere = make_executor(
                name, workers=self.config.workers, state=state, address=self.config.ray_address
            )
        try:
            self.execute(todo)
            until = self.config.until
            if until is None:
                return self.budget_said(self.records(self.config.trials))
            while not self.out_of_budget() and (
                jobs := _next_round(
                    until,
                    self.records(_ALL),
                    self.config.max_trials,
                    self.why,
                    self.standing,
                    self.rounds_file,
                )
            ):
                if not checked:  # a resumed run: the backend is checked once, before its first new trial
                    self.check_backend()
                    checked = True
                self.execute(jobs)
            return self.budget_said(self.records(_ALL))
        finally:
            if self.elsewhere is not None:
                self.elsewhere.close()

    def first_round(self) -> list[tuple[str, int]]:
        """The trials of the spec not on disk; with ``until=``, then the rest of the rounds a killed
        run planned (the next look reads them whole), within ``max_trials``."""
        todo = [(t, i) for t in self.task_ids for i in range(self.config.trials) if (t, i) not in self.done]
        if self.config.until is None:
            return todo
        self.why.update({job: {"round": 0, "allocation": "first round"} for job in todo})
        planned = {
            job: reason
            for job, reason in planned_rounds(self.rounds_file).items()
            if job[0] in self.task_ids and job not in self.done and job not in self.why
        }
        self.why.update(planned)
        return _within_budget(todo + list(planned), len(self.done), self.config.max_trials)

    def open_budget(self) -> Budget | None:
        """The run's :class:`~passk_nb.harness.budget.Budget` (None without ``budget_usd``), its
        stored trials spent already; a clear error when nothing prices this run's model."""
        if self.config.budget_usd is None:
            return None
        table = None if self.config.prices is None else price_table(self.config.prices)
        model = self.spec.model
        if (table is None or model not in table.index) and not self.backend.reports_cost:
            known = "" if table is None else f" (prices= names {', '.join(map(repr, table.index))})"
            raise ValueError(
                f"budget_usd={self.config.budget_usd:g} needs the price of model {model!r}{known}: pass "
                f"prices={{{model!r}: (price_in, price_out)}} in USD per million input and output tokens "
                "(passk run: --prices prices.csv with columns model,price_in,price_out)"
            )
        stored = self.records(_ALL) if self.done else None
        spent = [] if stored is None else [trial_cost(r, table) for r in stored.to_dict("records")]
        return Budget(self.config.budget_usd, table, spent=spent)

    def out_of_budget(self) -> bool:
        return self.budget is not None and self.budget.stopped is not None

    def budget_said(self, records: pd.DataFrame) -> pd.DataFrame:
        """``records``, with why the budget stopped the run in ``attrs["stopped"]`` (also logged and
        kept in the run folder's ``_budget.jsonl``) when it did."""
        if self.budget is not None and self.budget.stopped is not None:
            log.warning(
                "run %s stopped: %s; %d trials not started",
                self.run_id,
                self.budget.stopped,
                self.budget.refused,
            )
            self.budget.note(self.out / self.run_id)
            records.attrs["stopped"] = self.budget.stopped
        return records

    def check_backend(self) -> None:
        """A dead server fails here, once, not in every trial's retries; then the spec is written."""
        check_backend(self.backend.base if isinstance(self.backend, BatchProvider) else self.backend)
        write_spec(self.out, self.run_id, self.spec.identity())

    def records(self, trials: int) -> pd.DataFrame:
        """The run's records of its tasks and trials below ``trials``, from the last merge and disk."""
        return load_trials(self.out, self.run_id, self.task_ids, trials, self.merged.pop("last", None))

    def fields_of(self, task_id: str, trial: int) -> dict[str, Any]:
        """The run's fields of every record, with the task's family and, under until=, the trial's
        round and allocation."""
        return {
            **self.base,
            "task_family": self.families.get(task_id, ""),
            **self.why.get((task_id, trial), {}),
        }

    def options_of(self, task_id: str, trial: int) -> dict[str, Any]:
        """The episode's options; fault and perturbation draws seeded by the task and trial alone."""
        return {**self.episode_options, "trial_key": f"{task_id}:{trial}"}

    def note_delay(self, task_id: str, trial: int, active: bool) -> None:
        (self.delaying.add if active else self.delaying.discard)((task_id, trial))

    def one_trial(self, task_id: str, trial: int) -> dict[str, Any]:
        fields, options = self.fields_of(task_id, trial), self.options_of(task_id, trial)
        with delay_scope(functools.partial(self.note_delay, task_id, trial)):
            if self.elsewhere is None:
                return _trial_record(
                    self.suite,
                    self.backend,
                    fields,
                    task_id,
                    trial,
                    self.seed,
                    options,
                    self.resolved.limiter,
                )
            started = dt.datetime.now(dt.UTC)
            try:
                return self.elsewhere.call(_trial_in_worker, task_id, trial, fields)
            except WorkerLost as exc:  # the agent's own process died each time it ran this trial
                lost = {**_infra(started, str(exc)), "outcome": "agent_error"}
                return _record(fields, task_id, trial, self.seed, lost)

    async def one_async_trial(self, task_id: str, trial: int) -> dict[str, Any]:
        fields, options = self.fields_of(task_id, trial), self.options_of(task_id, trial)
        with delay_scope(functools.partial(self.note_delay, task_id, trial)):
            return await _atrial_record(
                self.suite, self.backend, fields, task_id, trial, self.seed, options, self.resolved.limiter
            )

    def timed_out(self, task_id: str, trial: int, elapsed: float) -> dict[str, Any]:
        started = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=elapsed)
        limit = self.config.trial_timeout
        fields = _infra(
            started,
            f"trial timed out after {elapsed:.1f} s (trial_timeout={limit}): no answer in time",
            elapsed,
        )
        if (task_id, trial) in self.delaying:  # the harness's own time, whatever the backend
            self.delaying.discard((task_id, trial))
            fields["error"] = (
                f"trial timed out after {elapsed:.1f} s (trial_timeout={limit}) inside the "
                f"harness's injected latency (faults={self.plan.label!r}): infrastructure, not the agent"
            )
        elif self.backend.user_code:  # a Python agent that hangs is the agent's failure
            fields["outcome"] = "agent_error"
        return _record(self.fields_of(task_id, trial), task_id, trial, self.seed, fields)

    def lost(self, task_id: str, trial: int, why: str) -> dict[str, Any]:
        """The record of a trial whose worker process died or hung: infrastructure (a resume runs it)."""
        return _record(
            self.fields_of(task_id, trial), task_id, trial, self.seed, _infra(dt.datetime.now(dt.UTC), why)
        )

    def bar_status(self) -> str:
        return "; ".join(part for part in (self.standing[0], self.status() if self.status else "") if part)

    def execute(self, jobs: list[tuple[str, int]]) -> None:
        self.rewording.check_draws(self.prompts, jobs)  # a rule failing on a draw is refused first
        steered = self.status is not None or self.config.until is not None
        execute_trials(
            self.one_async_trial if self.backend.speaks_asyncio else self.one_trial,
            jobs,
            concurrency=self.concurrency,
            out=self.out,
            run_id=self.run_id,
            desc=f"{self.spec.provider}/{self.spec.model}",
            progress=self.config.progress,
            on_record=self.config.on_record,
            timeout=self.config.trial_timeout,
            on_timeout=self.timed_out,
            keep_records=False,  # memory stays bounded however long the run (the frame comes from the merge)
            status=self.bar_status if steered else None,
            on_merge=lambda part: self.merged.update(last=part),
            redact=self.backend.redact,
            gate=self.budget,
            workers=self.loop_workers(),
        )

    def loop_workers(self) -> LoopWorkers | None:
        """With ``workers=`` and a backend that speaks asyncio: each worker process runs its own loop
        over its share of the trials, with connections of its own (:mod:`~passk_nb.harness.loop_workers`)."""
        if self.config.executor != "processes" or not self.backend.speaks_asyncio:
            return None
        count = self.config.workers or os.cpu_count() or 1
        return LoopWorkers(count, self.backend.reopen_pool, self.lost)


def _spec(config: RunConfig, resolved: Resolved, described: dict[str, Any]) -> RunSpec:
    """The run's identity (its id is the hash of what decides what is measured)."""
    return RunSpec(
        suite=resolved.suite.name,
        provider=described["provider"],
        model=described["model"],
        base_url_host=described["base_url_host"],
        prompt_hash=prompt_hash(resolved.prompt_text),
        temperature=config.temperature,
        seed=config.backend_seed,
        json_mode=described["json_mode"],
        max_turns=config.max_turns,
        max_format_errors=config.max_format_errors,
        settings=identity_settings(described["provider_meta"]),
        protocol=config.protocol,
        suite_fingerprint=suite_fingerprint(resolved.suite),
        faults=resolved.faults.label,
        perturbation=resolved.rewording.label,
    )


def _base_fields(
    config: RunConfig, resolved: Resolved, described: dict[str, Any], spec: RunSpec
) -> dict[str, Any]:
    """The fields every record of the run carries."""
    return {
        **described,
        "run_id": spec.run_id,
        "suite": resolved.suite.name,
        "suite_hash": spec.suite_fingerprint,
        "prompt_hash": spec.prompt_hash,
        "prompt_name": resolved.prompt_name,
        "system_prompt": resolved.prompt_text,
        "temperature": config.temperature,
        "protocol": config.protocol,
        "faults": resolved.faults.label,
        "perturbation": resolved.rewording.label,
        "config": spec.config,
        "harness_version": __version__,
    }


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


def _budget_left(spent: int, max_trials: int | None) -> int | None:
    """Trials the run may still spend under ``max_trials`` (None: no cap): the one place it is kept."""
    return None if max_trials is None else max(0, max_trials - spent)


def _within_budget(jobs: list[tuple[str, int]], spent: int, max_trials: int | None) -> list[tuple[str, int]]:
    """``jobs`` cut to what ``max_trials`` leaves after ``spent`` trials (the round's last ones go)."""
    left = _budget_left(spent, max_trials)
    return jobs if left is None else jobs[:left]


def _next_round(
    until: StoppingRule,
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
    if _budget_left(len(records), max_trials) == 0:
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
    progress = until.progress(records)
    log.info("round %d: %d trials (%s)", this_round, len(jobs), progress)
    if standing is not None:
        standing[0] = f"round {this_round}: {progress}"
    jobs = _within_budget(jobs, len(records), max_trials)
    if journal is not None:
        plan_round(journal, this_round, [(*job, why[job]["allocation"]) for job in jobs])
    return jobs


#: Each round's plan after the first, in the run's folder (``_`` files are not records): one line
#: ``{"round": r, "jobs": [[task, trial, allocation], ...]}`` per round, written before it runs.
ROUNDS_FILE = "_rounds.jsonl"


def plan_round(journal: Path, round_no: int, jobs: Sequence[tuple[str, int, str]]) -> None:
    """Append round ``round_no``'s planned jobs to ``journal``, synced to disk before the round
    starts: a kill at any moment leaves the plan of every round that ran a trial."""
    line = json.dumps({"round": round_no, "jobs": [list(job) for job in jobs]}).encode("utf-8")
    try:
        append_line(journal, line)  # a torn last line of a run killed while writing it is cut
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
