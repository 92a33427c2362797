"""The batch layer: run many trials concurrently and stream their records to disk."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from passk_nb.data.records import frame_from_records, storable_record
from passk_nb.data.store import compact, load, write_part


def load_trials(out: Path, run_id: str, tasks: Sequence[str], trials: int) -> pd.DataFrame:
    """The stored records of ``run_id`` for ``tasks`` and trials ``0..trials-1``."""
    frame = load(out / run_id) if (out / run_id).is_dir() else frame_from_records([])
    return frame[frame["task"].isin(list(tasks)) & (frame["trial"] < trials)].reset_index(drop=True)


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
    :func:`passk_nb.harness.cases.run_cases`.
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
            record = storable_record(record)  # the boundary: texts escaped, numbers range-checked
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
