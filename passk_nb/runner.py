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
import hashlib
import json
import logging
import math
import os
import queue
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from passk_nb._version import __version__
from passk_nb.episode import run_episode
from passk_nb.providers import BaseProvider, make_provider
from passk_nb.records import frame_from_records
from passk_nb.store import compact, existing_trials, load, read_specs, write_part, write_spec
from passk_nb.suites import get_suite
from passk_nb.suites.base import Suite

__all__ = [
    "run",
    "RunSpec",
    "prompt_hash",
    "resolve_prompt",
    "execute_trials",
    "check_positive",
    "spec_hash",
    "load_trials",
]

log = logging.getLogger("passk_nb")


def prompt_hash(text: str) -> str:
    """First 12 hex characters of the sha256 of the exact prompt text.

    >>> prompt_hash("You are a helpful agent.")
    'fb825410b084'
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def resolve_prompt(suite: Suite, prompt: str, prompt_name: str | None = None) -> tuple[str, str]:
    """``(name, text)`` for a prompt given by name (see ``suite.prompts``) or as full text.

    >>> from passk_nb.suites import get_suite
    >>> resolve_prompt(get_suite("orders"), "strict")[0]
    'strict'
    """
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"prompt must be a prompt name {sorted(suite.prompts)} or the full prompt text")
    if prompt in suite.prompts:
        return prompt_name or prompt, suite.prompts[prompt]
    if prompt_name is None and len(prompt.split()) < 3:
        raise ValueError(
            f"unknown prompt name {prompt!r}; choose from {sorted(suite.prompts)}, "
            "or pass the full system prompt text (with prompt_name= to label it)"
        )
    return prompt_name or "custom", prompt


#: provider_meta keys that say how hard the backend was tried, not what was measured:
#: changing them resumes the same run.
_NOT_IDENTITY = frozenset({"timeout_s", "max_attempts"})


@dataclass(frozen=True)
class RunSpec:
    """Everything that identifies a run: trials of the same spec resume into each other.

    ``settings`` holds the backend's settings that change what is measured
    (``max_tokens``, ``json_schema``, a CLI version, ...): the provider's
    ``provider_meta`` without retry and timeout settings.
    """

    suite: str
    provider: str
    model: str
    base_url_host: str | None
    prompt_hash: str
    temperature: float | None
    seed: int | None
    json_mode: bool
    max_turns: int
    max_format_errors: int
    settings: dict[str, Any]

    @property
    def run_id(self) -> str:
        return spec_hash(asdict(self))


def spec_hash(spec: dict[str, Any]) -> str:
    """The run id of a spec: first 12 hex chars of the sha256 of its sorted JSON."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]


def load_trials(out: Path, run_id: str, tasks: Sequence[str], trials: int) -> pd.DataFrame:
    """The stored records of ``run_id`` for ``tasks`` and trials ``0..trials-1``."""
    frame = load(out / run_id) if (out / run_id).is_dir() else frame_from_records([])
    return frame[frame["task"].isin(list(tasks)) & (frame["trial"] < trials)].reset_index(drop=True)


def check_positive(name: str, value: Any) -> int:
    """``value`` if it is a whole number ≥ 1, else a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number ≥ 1, got {value!r}")
    return value


class _Writer:
    """Buffers records and writes a part file every ``every_s`` seconds or ``every_n`` records."""

    def __init__(self, out: Path, run_id: str, every_s: float = 1.0, every_n: int = 200):
        self.out, self.run_id, self.every_s, self.every_n = out, run_id, every_s, every_n
        self.pending: list[dict[str, Any]] = []
        self.parts: list[Path] = []
        self.last = time.monotonic()

    def add(self, record: dict[str, Any]) -> None:
        self.pending.append(record)
        if len(self.pending) >= self.every_n:
            self.flush()
        else:
            self.flush_if_due()

    def flush_if_due(self) -> None:
        if time.monotonic() - self.last >= self.every_s:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            records, self.pending = self.pending, []
            self.parts.append(write_part(records, self.out, self.run_id))
        self.last = time.monotonic()


def _run_concurrently(
    fn: Callable[[Any, int], dict[str, Any]],
    jobs: list[tuple[Any, int]],
    concurrency: int,
    timeout: float | None = None,
    on_timeout: Callable[[Any, int, float], dict[str, Any]] | None = None,
    tick: float | None = None,
) -> Iterator[dict[str, Any] | None]:
    """Yield ``fn(*job)`` for every job as it completes, at most ``concurrency`` at a time.

    With ``tick``, None is yielded whenever ``tick`` seconds pass with no job
    finishing, so the caller can do periodic work (flush records to disk).

    Jobs run on daemon threads, so a backend that never answers cannot keep
    the process alive. A job still running after ``timeout`` seconds is
    abandoned: ``on_timeout(*job, elapsed)`` is yielded in its place, a new
    worker takes over, and the late result is dropped. On an early exit (an
    exception, Ctrl-C, the generator closed) no new job starts.
    """
    todo: queue.SimpleQueue[tuple[Any, int]] = queue.SimpleQueue()
    for job in jobs:
        todo.put(job)
    results: queue.SimpleQueue[tuple[tuple[Any, int], dict[str, Any] | None, BaseException | None]]
    results = queue.SimpleQueue()
    started: dict[tuple[Any, int], float] = {}
    abandoned: set[tuple[Any, int]] = set()
    lock = threading.Lock()
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            try:
                job = todo.get_nowait()
            except queue.Empty:
                return
            with lock:
                started[job] = time.monotonic()
            try:
                outcome: tuple[Any, Any, Any] = (job, fn(*job), None)
            except BaseException as exc:  # re-raised in the caller's thread
                outcome = (job, None, exc)
            results.put(outcome)
            with lock:
                if job in abandoned:
                    return  # a replacement worker took this one's place

    def spawn() -> None:
        threading.Thread(target=worker, daemon=True, name="passk-trial").start()

    def pop_expired() -> tuple[tuple[Any, int], float] | None:
        """The longest-running job if it is over ``timeout``, given up on; else None."""
        if timeout is None:
            return None
        with lock:
            if not started:
                return None
            job = min(started, key=started.__getitem__)
            elapsed = time.monotonic() - started[job]
            if elapsed < timeout:
                return None
            del started[job]
            abandoned.add(job)
        return job, elapsed

    def wait_time() -> float | None:
        waits = [] if tick is None else [tick]
        if timeout is not None:
            with lock:
                oldest = min(started.values(), default=time.monotonic())
            waits.append(max(0.0, oldest + timeout - time.monotonic()))
        return min(waits, default=None)

    for _ in range(min(concurrency, len(jobs))):
        spawn()
    delivered = 0
    try:
        while delivered < len(jobs):
            try:
                job, record, error = results.get(timeout=wait_time())
            except queue.Empty:
                expired = pop_expired()
                if expired is None:
                    yield None  # a tick: nothing finished yet
                    continue
                spawn()  # the stuck worker's replacement
                delivered += 1
                (task_id, trial), elapsed = expired
                assert on_timeout is not None
                yield on_timeout(task_id, trial, elapsed)
                continue
            with lock:
                if job in abandoned:
                    continue  # finished after it was given up on: already recorded
                del started[job]
            if error is not None:
                raise error
            delivered += 1
            yield record
    finally:
        stop.set()


def execute_trials(
    one_trial: Callable[[Any, int], dict[str, Any]],
    jobs: list[tuple[Any, int]],
    *,
    concurrency: int,
    out: Path | None,
    run_id: str,
    desc: str = "",
    progress: bool = True,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    timeout: float | None = None,
    on_timeout: Callable[[Any, int, float], dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The batch layer: run ``one_trial(*job)`` for every job and keep the records.

    Runs at most ``concurrency`` jobs at once with a progress bar, streams the
    records to ``out/<run_id>/`` as crash-safe parts (nothing is written when
    ``out`` is None), merges this call's parts at the end, and returns the new
    records in completion order. Shared by :func:`run` and
    :func:`passk_nb.cases.run_cases`.
    """
    writer = None if out is None else _Writer(out, run_id)
    records: list[dict[str, Any]] = []
    bar = tqdm(total=len(jobs), desc=desc, unit="trial", disable=not progress)
    try:
        ticks = None if writer is None else writer.every_s
        for record in _run_concurrently(one_trial, jobs, concurrency, timeout, on_timeout, tick=ticks):
            if record is None:
                writer.flush_if_due()
                continue
            records.append(record)
            if writer is not None:
                writer.add(record)
            if on_record is not None:
                on_record(record)
            bar.update(1)
    finally:
        bar.close()
        if writer is not None:
            writer.flush()
    if writer is not None:
        compact(writer.parts, writer.out, run_id)
    return records


def _note_prompt_changes(out: Path, spec: RunSpec) -> None:
    """Say so when the folder holds runs of the same spec under another prompt text."""
    mine = asdict(spec)
    others = sorted(
        other["prompt_hash"]
        for other in read_specs(out).values()
        if other.get("prompt_hash") != spec.prompt_hash
        and all(other.get(k) == v for k, v in mine.items() if k != "prompt_hash")
    )
    if others:
        warnings.warn(
            f"{out} holds runs of this provider/model/settings under other prompt texts "
            f"(prompt hashes {', '.join(others)}); the prompt changed (now {spec.prompt_hash}), so this is "
            "a new run and does not resume them",
            UserWarning,
            stacklevel=3,
        )


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
) -> dict[str, Any]:
    bound = provider.with_seed(None if seed is None else seed + trial)
    started = dt.datetime.now(dt.UTC)
    try:
        fields = run_episode(suite, suite.task(task_id), bound, **episode_options)
    except Exception as exc:  # a harness bug must not stop the run; it is kept, visibly, as infra
        log.exception("harness error in task %s trial %d", task_id, trial)
        fields = _infra(started, f"harness error: {type(exc).__name__}: {exc}")
    return _record(base, task_id, trial, seed, fields)


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
    seed: int | None = 0,
    concurrency: int = 4,
    out: str | os.PathLike[str] = "runs",
    max_turns: int = 10,
    max_format_errors: int = 2,
    json_mode: bool = False,
    progress: bool = True,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    trial_timeout: float | None = None,
    **provider_options: Any,
) -> pd.DataFrame:
    """Run every task ``trials`` times against ``provider`` and return the trial records.

    ``provider`` is a registered name (``"scripted"``, ``"ollama"``, ...), an
    object with ``chat(messages)``, or a function of the messages. Backend
    options such as ``base_url=`` pass through to the backend. ``prompt`` is a
    prompt name of the suite (``"default"``, ``"strict"``) or the full system
    prompt text.

    Records go to ``out/<run_id>/`` as parquet. The run id is a hash of the
    spec (suite, provider, model, host, prompt hash, temperature, seed, JSON
    mode, limits): re-running the same spec into the same folder runs only the
    trials that are missing, so a killed run resumes where it stopped and a
    larger ``trials`` extends an earlier run. Trial ``i`` sends seed
    ``seed + i`` to the backend.

    ``trial_timeout`` (seconds) bounds one trial: a trial still running then
    is recorded as ``infra_error`` and the run goes on (its thread is left to
    finish in the background). ``on_record`` is called with each new record as
    it completes.

    Returns every record of this spec for the chosen tasks and trials, the
    ones from earlier runs included, sorted by task and trial.
    """
    the_suite = get_suite(suite)
    trials = check_positive("trials", trials)
    concurrency = check_positive("concurrency", concurrency)
    max_turns = check_positive("max_turns", max_turns)
    max_format_errors = check_positive("max_format_errors", max_format_errors)
    if trial_timeout is not None and not (isinstance(trial_timeout, int | float) and trial_timeout > 0):
        raise ValueError(f"trial_timeout must be a positive number of seconds, got {trial_timeout!r}")
    task_ids = list(the_suite.task_ids if tasks is None else tasks)
    if isinstance(tasks, str) or not task_ids:
        raise ValueError(f"tasks must be a non-empty list of task ids from {the_suite.task_ids}")
    for task_id in task_ids:
        the_suite.task(task_id)
    name, text = resolve_prompt(the_suite, prompt, prompt_name)
    if temperature is not None and (
        not isinstance(temperature, int | float) or not math.isfinite(temperature)
    ):
        raise ValueError(f"temperature must be a number, got {temperature!r}")

    if isinstance(provider, str):
        provider_options.update(temperature=temperature, json_mode=json_mode)
        if provider == "scripted":
            provider_options.setdefault("suite", the_suite)
    backend = make_provider(provider, model, **provider_options)
    described = backend.describe()
    spec = RunSpec(
        suite=the_suite.name,
        provider=described["provider"],
        model=described["model"],
        base_url_host=described["base_url_host"],
        prompt_hash=prompt_hash(text),
        temperature=temperature,
        seed=seed,
        json_mode=json_mode,
        max_turns=max_turns,
        max_format_errors=max_format_errors,
        settings={k: v for k, v in described["provider_meta"].items() if k not in _NOT_IDENTITY},
    )
    run_id = spec.run_id
    base = {
        **described,
        "run_id": run_id,
        "suite": the_suite.name,
        "prompt_hash": spec.prompt_hash,
        "prompt_name": name,
        "system_prompt": text,
        "temperature": temperature,
        "json_mode": json_mode,
        "harness_version": __version__,
    }
    out_dir = Path(out)
    _note_prompt_changes(out_dir, spec)
    done = existing_trials(out_dir, run_id)
    todo = [(t, i) for t in task_ids for i in range(trials) if (t, i) not in done]
    if done:
        log.info("run %s: %d trials already in %s, %d to run", run_id, len(done), out_dir, len(todo))
    if todo:
        write_spec(out_dir, run_id, asdict(spec))
    episode_options = {"system_prompt": text, "max_turns": max_turns, "max_format_errors": max_format_errors}

    def one_trial(task_id: str, trial: int) -> dict[str, Any]:
        return _trial_record(the_suite, backend, base, task_id, trial, seed, episode_options)

    def timed_out(task_id: str, trial: int, elapsed: float) -> dict[str, Any]:
        started = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=elapsed)
        error = f"trial timed out after {elapsed:.1f} s (trial_timeout={trial_timeout}): no answer in time"
        return _record(base, task_id, trial, seed, _infra(started, error, elapsed))

    execute_trials(
        one_trial,
        todo,
        concurrency=concurrency,
        out=out_dir,
        run_id=run_id,
        desc=f"{spec.provider}/{spec.model}",
        progress=progress,
        on_record=on_record,
        timeout=trial_timeout,
        on_timeout=timed_out,
    )
    return load_trials(out_dir, run_id, task_ids, trials)
