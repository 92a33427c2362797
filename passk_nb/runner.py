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
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
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

__all__ = ["run", "RunSpec", "prompt_hash", "resolve_prompt"]

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


@dataclass(frozen=True)
class RunSpec:
    """Everything that identifies a run: trials of the same spec resume into each other."""

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

    @property
    def run_id(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def _check_positive(name: str, value: Any) -> int:
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
        if len(self.pending) >= self.every_n or time.monotonic() - self.last >= self.every_s:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            records, self.pending = self.pending, []
            self.parts.append(write_part(records, self.out, self.run_id))
        self.last = time.monotonic()

    def close(self) -> None:
        """Write what is left; after a failed write, the records that failed are not retried."""
        self.flush()


def _run_concurrently(
    fn: Callable[[str, int], dict[str, Any]], jobs: list[tuple[str, int]], concurrency: int
) -> Iterator[dict[str, Any]]:
    """Yield ``fn(*job)`` for every job as it completes, at most ``concurrency`` at a time.

    On an early exit (an exception, Ctrl-C, the generator closed) pending jobs
    are cancelled and running ones are left to finish in the background.
    """
    executor = ThreadPoolExecutor(max_workers=min(concurrency, max(len(jobs), 1)))
    finished: queue.SimpleQueue[Future[dict[str, Any]]] = queue.SimpleQueue()
    remaining = iter(jobs)

    def submit_next() -> int:
        job = next(remaining, None)
        if job is None:
            return 0
        executor.submit(fn, *job).add_done_callback(finished.put)
        return 1

    try:
        in_flight = sum(submit_next() for _ in range(concurrency))
        while in_flight:
            yield finished.get().result()
            in_flight += submit_next() - 1
    finally:
        executor.shutdown(wait=False, cancel_futures=True)


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


def _trial_record(
    suite: Suite,
    provider: BaseProvider,
    base: dict[str, Any],
    task_id: str,
    trial: int,
    seed: int | None,
    episode_options: dict[str, Any],
) -> dict[str, Any]:
    trial_seed = None if seed is None else seed + trial
    bound = provider.with_seed(trial_seed)
    started = dt.datetime.now(dt.UTC)
    try:
        fields = run_episode(suite, suite.task(task_id), bound, **episode_options)
    except Exception as exc:  # a harness bug must not stop the run; it is kept, visibly, as infra
        log.exception("harness error in task %s trial %d", task_id, trial)
        fields = {
            "outcome": "infra_error",
            "passed": False,
            "started_at": started,
            "error": f"harness error: {type(exc).__name__}: {exc}",
            "provider_meta": {},
        }
    meta = {**base["provider_meta"], **fields.pop("provider_meta")}
    return {
        **base,
        **fields,
        "task": task_id,
        "trial": trial,
        "seed": trial_seed,
        "provider_meta": json.dumps(meta, default=str),
    }


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

    Returns every record of this spec for the chosen tasks and trials, the
    ones from earlier runs included, sorted by task and trial.
    """
    the_suite = get_suite(suite)
    trials = _check_positive("trials", trials)
    concurrency = _check_positive("concurrency", concurrency)
    max_turns = _check_positive("max_turns", max_turns)
    max_format_errors = _check_positive("max_format_errors", max_format_errors)
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

    writer = _Writer(out_dir, run_id)
    bar = tqdm(total=len(todo), desc=f"{spec.provider}/{spec.model}", unit="trial", disable=not progress)
    try:
        for record in _run_concurrently(one_trial, todo, concurrency):
            writer.add(record)
            if on_record is not None:
                on_record(record)
            bar.update(1)
    finally:
        bar.close()
        writer.close()
    compact(writer.parts, out_dir, run_id)

    frame = load(out_dir / run_id) if (out_dir / run_id).is_dir() else frame_from_records([])
    keep = frame["task"].isin(task_ids) & (frame["trial"] < trials)
    return frame[keep].reset_index(drop=True)
