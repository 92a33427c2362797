"""The batch layer: run many trials concurrently and stream their records to disk.

With an output folder, every trial is claimed before it runs
(:class:`passk_nb.data.trial_claims.TrialClaims`): two processes running the same
spec into one folder split the trials between them instead of running each
twice. Records reach disk at least every second; the claim of a trial is
released once its record is on disk. SIGINT (Ctrl-C) and SIGTERM both stop
the run after writing every completed trial. At the end the run's parts are
merged into one (:func:`passk_nb.data.store.merge`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import inspect
import logging
import os
import queue
import signal
import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
from tqdm.auto import tqdm

from passk_nb.data.records import frame_from_records, storable_record, table_from_records
from passk_nb.data.redact import Redactor
from passk_nb.data.store import StoredTrials, load, load_merged, merge_known, write_part
from passk_nb.data.trial_claims import TrialClaims
from passk_nb.harness.budget import Budget
from passk_nb.harness.loop_workers import LoopWorkers, run_in_workers, timed_trial
from passk_nb.harness.providers.base import STOPS_RUN, cancel_scope, clock_scope
from passk_nb.harness.providers.transport import shared_loop

log = logging.getLogger("passk_nb")


def load_trials(
    out: Path, run_id: str, tasks: Sequence[str], trials: int, merged: tuple[Path, pa.Table] | None = None
) -> pd.DataFrame:
    """The stored records of ``run_id`` for ``tasks`` and trials ``0..trials-1``; ``merged``: the part
    the run's merge left and what it holds (:func:`execute_trials`' ``on_merge``), taken from memory
    when it is still the run folder's only record file."""
    run_dir = out / run_id
    frame = None if merged is None else load_merged(run_dir, *merged)
    if frame is None:
        frame = load(run_dir) if run_dir.is_dir() else frame_from_records([])
    return frame[frame["task"].isin(list(tasks)) & (frame["trial"] < trials)].reset_index(drop=True)


#: The most bytes of Arrow tables a writer keeps of the parts it wrote, for the merge at the end
#: (which then need not read them back); past it, it keeps none.
KEEP_WRITTEN_BYTES = 256 * 2**20


#: The most records a part holds (:class:`_Writer`): a part is written at least every second, and
#: before it holds more. A part's cost is mostly per column chunk: 200 records cost ~10 µs of CPU
#: each to write, 2,000 ~2 µs, so a fast run's parts are a second's records, not 200.
PART_RECORDS = 2000


class _Writer:
    """Buffers records and writes a part file every ``every_s`` seconds or ``every_n`` records.

    After each write it releases the claims of the trials written (``claims``). It keeps the table
    of each part it wrote (``written_tables``) while they fit in :data:`KEEP_WRITTEN_BYTES`.
    """

    def __init__(self, out: Path, run_id: str, every_s: float = 1.0, every_n: int = PART_RECORDS):
        self.out, self.run_id, self.every_s, self.every_n = out, run_id, every_s, every_n
        self.pending: list[dict[str, Any]] = []
        self.parts: list[Path] = []
        self.last = time.monotonic()
        self.written = 0
        self.claims: TrialClaims | None = None
        self.stored: StoredTrials | None = None  # told of each part written, so it never reads them
        self.written_tables: dict[Path, pa.Table] | None = {}
        self.kept_bytes = 0

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
            if self.stored is not None:
                table = table_from_records(records, storable=True)  # each one storable_record's
                self.parts.append(self.stored.write_part(records, table))
                self.keep(self.parts[-1], table)
            else:
                self.parts.append(write_part(records, self.out, self.run_id))
            self.written += len(records)
            if self.claims is not None:
                self.claims.release((r["task"], r["trial"]) for r in records)
        self.last = time.monotonic()

    def keep(self, part: Path, table: pa.Table) -> None:
        if self.written_tables is None:
            return
        self.kept_bytes += table.nbytes
        if self.kept_bytes > KEEP_WRITTEN_BYTES:
            self.written_tables = None  # the merge reads them back instead
        else:
            self.written_tables[part] = table


class BackendHung(TimeoutError):
    """Trials given up on (``trial_timeout``) never return, and no thread is left to run the rest."""


#: How long a run waits, with every thread stuck in a trial it gave up on, before it stops with
#: :class:`BackendHung` (HTTP backends end such requests at their ``timeout``).
STALL_GRACE_S = 60.0

#: How many trials on the transport loop start before it next polls its sockets (:func:`_run_on_loop`).
RAMP_STEP = 8

#: Returned in place of a record for a trial another process stored meanwhile.
_SKIPPED: dict[str, Any] = {}

#: The most trials a run claims at once, with one lock call and one look at the store (:class:`_Claimer`).
LEASE = 64


class _Claimer:
    """The claims of a run's trials as the schedulers take them: new trials a lease at a time
    (:meth:`lease`: one lock call per run of consecutive trials and one look at the store for all,
    where a claim and a look each cost a system call per trial), a trial found held elsewhere
    alone (:meth:`claim`, :meth:`is_done`). A trial claimed and found stored is released and
    skipped. At most ``size`` trials are claimed and not yet started.

    With a ``gate`` (a run's budget) the lease is one trial, taken when a worker is free, so the
    gate is asked as each trial starts: ``"stop"`` skips it unclaimed, ``"wait"`` holds it as if
    another process had it, and a trial that then does not run is given back (``gate.cancel``).
    """

    def __init__(
        self,
        claims: TrialClaims,
        stored: StoredTrials,
        key_of: Callable[[Any, int], tuple[str, int]],
        size: int,
        gate: Budget | None = None,
    ):
        self.claims, self.stored, self.key_of, self.size = claims, stored, key_of, size
        self.gate = gate
        self.refused: set[tuple[Any, int]] = set()  # jobs the gate did not let start: never stored

    def lease(
        self, jobs: list[tuple[Any, int]]
    ) -> tuple[list[tuple[Any, int]], list[tuple[Any, int]], list[tuple[Any, int]]]:
        """Claim ``jobs``: ``(to run, stored elsewhere or refused by the gate, held elsewhere)``."""
        if self.gate is not None:
            run: list[tuple[Any, int]] = []
            skip: list[tuple[Any, int]] = []
            held: list[tuple[Any, int]] = []
            for job in jobs:
                if not self.claim(job):
                    held.append(job)
                else:
                    (skip if self.is_done(job) else run).append(job)
            return run, skip, held
        keys = [self.key_of(*job) for job in jobs]
        ours = self.claims.try_claim_many(keys)
        done = set(self.stored.stored_among(key for key, mine in zip(keys, ours, strict=True) if mine))
        if done:
            self.claims.release(done)
        run, skip, held = [], [], []
        for job, key, mine in zip(jobs, keys, ours, strict=True):
            (held if not mine else skip if key in done else run).append(job)
        return run, skip, held

    def take(
        self, todo: deque[tuple[Any, int]], ready: deque[tuple[Any, int]], later: deque[tuple[Any, int]]
    ) -> list[tuple[Any, int]]:
        """Lease the next jobs of ``todo`` (at most :attr:`size`): the claimed ones go to ``ready``,
        those held elsewhere to ``later``; returns those to skip (stored elsewhere, or refused)."""
        run, skip, held = self.lease([todo.popleft() for _ in range(min(len(todo), self.size))])
        ready.extend(run)
        later.extend(held)
        return skip

    def claim(self, job: tuple[Any, int]) -> bool:
        """Whether ``job`` is taken: claimed (and let start by the gate), or refused by the gate."""
        decision = "start" if self.gate is None else self.gate.decide()
        if decision == "stop":
            self.refused.add(job)
            return True  # taken, then skipped by is_done: no claim held
        if decision == "start" and self.claims.try_claim(self.key_of(*job)):
            return True
        if decision == "start" and self.gate is not None:
            self.gate.cancel()
        return False

    def is_done(self, job: tuple[Any, int]) -> bool:
        """Whether a taken ``job`` is not to run: refused by the gate, or stored meanwhile."""
        if job in self.refused:
            return True
        key = self.key_of(*job)
        if self.stored.has(key):
            self.claims.release([key])
            if self.gate is not None:
                self.gate.cancel()
            return True
        return False


def progress_file() -> Any:
    """Where a progress bar writes: standard error, or the stream ``passk`` gives bars (which keeps
    the carriage returns a bar redraws its line with, while every other text has them escaped)."""
    return getattr(sys.stderr, "progress_stream", sys.stderr)


class _Jobs:
    """What the threads of :func:`_run_concurrently` share, every field under ``lock``: the jobs
    not started (``later``: claimed by another process when first tried), the running ones'
    clocks (``started``) and cancel events, those given up on, and the count of workers alive,
    of abandoned threads still running, and of replacements owed."""

    def __init__(
        self,
        jobs: list[tuple[Any, int]],
        concurrency: int,
        timeout: float | None,
        tick: float | None,
        claimer: _Claimer | None = None,
    ):
        self.concurrency, self.timeout, self.tick, self.claimer = concurrency, timeout, tick, claimer
        self.lock = threading.Lock()
        self.todo: deque[tuple[Any, int]] = deque(jobs)
        self.ready: deque[tuple[Any, int]] = deque()  # claimed (a lease), not started
        self.later: deque[tuple[Any, int]] = deque()  # claimed by another process when first tried
        self.results: queue.SimpleQueue[tuple[tuple[Any, int], dict[str, Any] | None, BaseException | None]]
        self.results = queue.SimpleQueue()
        self.started: dict[tuple[Any, int], float] = {}
        self.cancels: dict[tuple[Any, int], threading.Event] = {}
        self.abandoned: set[tuple[Any, int]] = set()
        self.count = {"workers": 0, "abandoned_alive": 0, "owed": 0}
        self.stop = threading.Event()
        self.stalled_since: float | None = None

    def next_job(self) -> tuple[tuple[Any, int] | None, bool]:
        """The next job to run: ``(job, False)`` claimed already, ``(job, True)`` to claim (held
        elsewhere when first tried), ``(None, False)`` when none is left."""
        with self.lock:
            while not self.ready and self.todo:
                if self.claimer is None:
                    self.ready.append(self.todo.popleft())
                    continue
                for job in self.claimer.take(self.todo, self.ready, self.later):
                    self.results.put((job, _SKIPPED, None))
            if self.ready:
                return self.ready.popleft(), False
            if self.later:
                return self.later.popleft(), True
        return None, False

    def set_clock(self, job: tuple[Any, int], running: bool) -> None:
        """The job's clock stops while it waits for a worker and starts when one takes it
        (:func:`~passk_nb.harness.providers.base.trial_clock`)."""
        with self.lock:
            if job in self.abandoned or job not in self.cancels:
                return
            if running:
                self.started[job] = time.monotonic()
            else:
                self.started.pop(job, None)

    def pop_expired(self) -> tuple[tuple[Any, int], float, bool] | None:
        """The longest-running job if it is over ``timeout``, given up on, with whether a
        replacement worker is to start now; else None."""
        if self.timeout is None:
            return None
        with self.lock:
            if not self.started:
                return None
            job = min(self.started, key=self.started.__getitem__)
            elapsed = time.monotonic() - self.started[job]
            if elapsed < self.timeout:
                return None
            del self.started[job]
            self.abandoned.add(job)
            if job in self.cancels:
                self.cancels[job].set()
            self.count["workers"] -= 1
            self.count["abandoned_alive"] += 1
            replace_now = self.count["abandoned_alive"] <= self.concurrency
            if replace_now:
                self.count["workers"] += 1
            else:
                self.count["owed"] += 1
        return job, elapsed, replace_now

    def wait_time(self) -> float | None:
        waits = [] if self.tick is None else [self.tick]
        if self.timeout is not None:
            with self.lock:
                oldest = min(self.started.values(), default=time.monotonic())
            waits.append(max(0.0, oldest + self.timeout - time.monotonic()))
            waits.append(1.0)  # to notice a stall (see stalled())
        return min(waits, default=None)

    def stalled(self) -> bool:
        """No worker left, replacements owed, jobs waiting, for longer than a grace period."""
        with self.lock:
            stuck = self.count["workers"] == 0 and self.count["owed"] > 0 and bool(self.todo or self.later)
        if not stuck:
            self.stalled_since = None
            return False
        self.stalled_since = self.stalled_since or time.monotonic()
        return time.monotonic() - self.stalled_since > STALL_GRACE_S + 4 * (self.timeout or 0.0)


def _run_concurrently(
    fn: Callable[[Any, int], dict[str, Any]],
    jobs: list[tuple[Any, int]],
    concurrency: int,
    timeout: float | None = None,
    on_timeout: Callable[[Any, int, float], dict[str, Any]] | None = None,
    tick: float | None = None,
    claimer: _Claimer | None = None,
) -> Iterator[dict[str, Any] | None]:
    """Yield ``fn(*job)`` for every job as it completes, at most ``concurrency`` at a time.

    With ``tick``, None is yielded whenever ``tick`` seconds pass with no job
    finishing, so the caller can do periodic work (flush records to disk).

    With ``claimer``, a job runs only once claimed (:class:`_Claimer`: a lease at a time): a job
    claimed elsewhere is put back and waited for after the others; once claimed, a job another
    process stored is skipped.

    Jobs run on daemon threads, so a backend that never answers cannot keep
    the process alive. This is the one owner of every job's deadline, whatever runs it: a job's
    clock starts when its thread takes it, or, when the job waits for a worker process or Ray task
    slot, when a worker takes it (:func:`~passk_nb.harness.providers.base.trial_clock`). A job
    still running after ``timeout`` seconds is abandoned: its cancel event is set (see
    :func:`passk_nb.harness.providers.base.cancel_scope`; the built-in backends
    stop their requests), ``on_timeout(*job, elapsed)`` is yielded in its
    place, a new worker takes over, and the late result is dropped. At most
    ``concurrency`` abandoned threads are alive at once: beyond that, a
    replacement starts only when an abandoned thread ends, and when none ever
    does, :class:`BackendHung` is raised. On an early exit (an exception,
    Ctrl-C, the generator closed) no new job starts and every running job's
    cancel event is set.
    """
    pool = _Jobs(jobs, concurrency, timeout, tick, claimer)

    def acquire(job: tuple[Any, int]) -> bool:
        """Wait for the claim of a job held elsewhere (False: the run stops)."""
        assert claimer is not None
        while not pool.stop.is_set():
            if claimer.claim(job):
                return True
            pool.stop.wait(0.05)
        return False

    def worker() -> None:
        while not pool.stop.is_set():
            job, waited = pool.next_job()
            if job is None:
                break
            if waited:
                if not acquire(job):
                    with pool.lock:
                        pool.later.append(job)
                    continue
                if claimer is not None and claimer.is_done(job):
                    pool.results.put((job, _SKIPPED, None))
                    continue
            event = threading.Event()
            with pool.lock:
                pool.started[job], pool.cancels[job] = time.monotonic(), event
            try:
                with cancel_scope(event), clock_scope(functools.partial(pool.set_clock, job)):
                    outcome: tuple[Any, Any, Any] = (job, fn(*job), None)
            except BaseException as exc:  # re-raised in the caller's thread
                outcome = (job, None, exc)
            pool.results.put(outcome)
            with pool.lock:
                pool.cancels.pop(job, None)
                if job in pool.abandoned:
                    pool.count["abandoned_alive"] -= 1
                    if pool.count["owed"] == 0:
                        return  # a replacement worker took this one's place
                    pool.count["owed"] -= 1  # this thread becomes the replacement that was owed
                    pool.count["workers"] += 1
        with pool.lock:
            pool.count["workers"] -= 1

    def spawn() -> None:
        threading.Thread(target=worker, daemon=True, name="passk-trial").start()

    with pool.lock:
        pool.count["workers"] = min(concurrency, len(jobs))
    for _ in range(min(concurrency, len(jobs))):
        spawn()
    delivered = 0
    try:
        while delivered < len(jobs):
            try:
                job, record, error = pool.results.get(timeout=pool.wait_time())
            except queue.Empty:
                expired = pool.pop_expired()
                if expired is None:
                    if pool.stalled():
                        alive, waiting = pool.count["abandoned_alive"], len(pool.todo) + len(pool.later)
                        raise BackendHung(
                            f"{alive} trials given up on after trial_timeout={timeout} s "
                            "are still running and ignore cancellation, so no thread is left for the "
                            f"{waiting} trials not started; the records so far are saved: "
                            "fix the backend (or raise trial_timeout) and run again to resume"
                        ) from None
                    yield None  # a tick: nothing finished yet
                    continue
                (task_id, trial), elapsed, replace_now = expired
                if replace_now:
                    spawn()
                delivered += 1
                assert on_timeout is not None
                yield on_timeout(task_id, trial, elapsed)
                continue
            with pool.lock:
                if job in pool.abandoned:
                    continue  # finished after it was given up on: already recorded
                pool.started.pop(job, None)
            if error is not None:
                raise error
            delivered += 1
            if record is not _SKIPPED:
                yield record
    finally:
        pool.stop.set()
        with pool.lock:
            for event in pool.cancels.values():
                event.set()


def _run_on_loop(
    fn: Callable[[Any, int], Awaitable[dict[str, Any]]],
    jobs: list[tuple[Any, int]],
    concurrency: int,
    timeout: float | None = None,
    on_timeout: Callable[[Any, int, float], dict[str, Any]] | None = None,
    tick: float | None = None,
    claimer: _Claimer | None = None,
) -> Iterator[dict[str, Any] | None]:
    """:func:`_run_concurrently` for trials that are coroutines: ``concurrency`` tasks on the
    transport loop (:mod:`~passk_nb.harness.providers.transport`) instead of as many threads,
    yielding the same stream (records, None on a ``tick``) to the calling thread.

    A trial still running after ``timeout`` seconds is cancelled (its request is closed) and
    ``on_timeout(*job, elapsed)`` is yielded instead; its cancel event is set too, for anything it
    runs in a worker thread. On an early exit every running trial is cancelled.

    The trials that end in one iteration of the loop reach the calling thread together (one
    hand-off, not one wake-up of that thread per trial).
    """
    loop = shared_loop()
    Done = tuple[tuple[Any, int], dict[str, Any] | None, BaseException | None]
    results: queue.SimpleQueue[list[Done]] = queue.SimpleQueue()
    ended: list[Done] = []  # this iteration's, on the loop's thread

    def hand_off() -> None:
        results.put(ended[:])
        ended.clear()

    def deliver(done: Done) -> None:
        if not ended:
            loop.call_soon(hand_off)
        ended.append(done)

    todo: deque[tuple[Any, int]] = deque(jobs)
    later: deque[tuple[Any, int]] = deque()  # claimed by another process when first tried
    ready: deque[tuple[Any, int]] = deque()  # claimed (a lease), not started

    def lease() -> None:
        """Claim the next jobs of ``todo`` (a lease: one lock call, one look at the store)."""
        if claimer is None:
            ready.append(todo.popleft())
            return
        for job in claimer.take(todo, ready, later):
            deliver((job, _SKIPPED, None))

    async def worker() -> None:
        while todo or later or ready:
            if not ready and todo:
                lease()
                continue
            if ready:
                job = ready.popleft()
            else:  # held by another process when first tried: wait for it, then it may be stored
                job = later.popleft()
                assert claimer is not None
                while not claimer.claim(job):
                    await asyncio.sleep(0.05)
                if claimer.is_done(job):
                    deliver((job, _SKIPPED, None))
                    continue
            try:
                deliver((job, await timed_trial(fn, job, timeout, on_timeout), None))
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # re-raised in the caller's thread
                deliver((job, None, exc))
                return

    async def main() -> None:
        # The trials start RAMP_STEP at a time, the loop polling its sockets in between: started all
        # in one step, 1,024 trials sent nothing until the last had run its first step (~1 s).
        workers: list[asyncio.Task[None]] = []
        try:
            for n in range(min(concurrency, len(jobs))):
                workers.append(loop.create_task(worker()))
                if n % RAMP_STEP == RAMP_STEP - 1:
                    await asyncio.sleep(0)
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()

    running = asyncio.run_coroutine_threadsafe(main(), loop)
    delivered = 0
    try:
        while delivered < len(jobs):
            try:
                done = results.get(timeout=tick if tick is not None else 1.0)
            except queue.Empty:
                if running.done() and results.empty():
                    running.result()  # the loop's own failure, if any
                    raise RuntimeError("the trials' tasks ended before every trial was delivered") from None
                if tick is not None:
                    yield None
                continue
            for _, record, error in done:
                if error is not None:
                    raise error
                delivered += 1
                if record is not _SKIPPED:
                    yield record
    finally:
        running.cancel()


class _Terminated(BaseException):
    """SIGTERM arrived: stop like Ctrl-C (completed trials are written), then end as SIGTERM asks."""


@contextlib.contextmanager
def _sigterm_flushes() -> Iterator[None]:
    """While running, turn SIGTERM into :class:`_Terminated`; after cleanup, end the process by SIGTERM.

    Only in the main thread and only when SIGTERM has its default action (a
    handler the program installed is left alone).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    try:
        previous = signal.getsignal(signal.SIGTERM)
    except (ValueError, AttributeError):  # pragma: no cover - no signals here
        previous = None
    if previous is not signal.SIG_DFL:
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise _Terminated()

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)  # ends the process now, every completed trial on disk
        raise
    finally:
        if signal.getsignal(signal.SIGTERM) is handler:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


#: The collector's first threshold while trials run (:func:`_collect_less`; Python's default is 700).
GC_THRESHOLD = 20_000

_gc_lock = threading.Lock()
_gc_state: dict[str, Any] = {"runs": 0, "restore": None}  # runs collecting less now; what to restore


@contextlib.contextmanager
def _collect_less() -> Iterator[None]:
    """While trials run, the garbage collector runs less often and skips the objects that existed
    before (``gc.freeze``): with a thousand trials in flight it took ~0.15 ms of CPU per one-turn
    trial (a fifth), half of it in full collections of every module's objects. Left alone when
    the program disabled the collector or froze objects itself; restored once the last run ends.
    """
    with _gc_lock:
        if _gc_state["runs"] == 0 and gc.isenabled() and gc.get_freeze_count() == 0:
            first, *older = _gc_state["restore"] = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(max(GC_THRESHOLD, first), *older)
        _gc_state["runs"] += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_state["runs"] -= 1
            restore = _gc_state["restore"]
            if _gc_state["runs"] == 0 and restore is not None:
                gc.set_threshold(*restore)
                gc.unfreeze()
                _gc_state["restore"] = None


def _merge_at_end(writer: _Writer) -> tuple[Path, pa.Table] | None:
    """Merge the run's parts: the part left and what it holds (None when there is none); a failure
    leaves every trial safe in its parts, and says so."""
    try:
        part, table = merge_known(writer.out, writer.run_id, writer.written_tables)
    except (OSError, ValueError) as exc:
        message = (
            f"merging the parts of run {writer.run_id} in {writer.out} failed ({exc}); every trial is "
            f"safe: this run's {writer.written} records are on disk in their own part files, and the "
            "next run of this spec merges them"
        )
        log.warning(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        return None
    return None if part is None or table is None else (part, table)


def execute_trials(
    one_trial: Callable[[Any, int], dict[str, Any]] | Callable[[Any, int], Awaitable[dict[str, Any]]],
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
    trial_key: Callable[[Any, int], tuple[str, int]] | None = None,
    keep_records: bool = True,
    status: Callable[[], str] | None = None,
    on_merge: Callable[[tuple[Path, pa.Table]], None] | None = None,
    redact: Redactor | None = None,
    gate: Budget | None = None,
    workers: LoopWorkers | None = None,
) -> list[dict[str, Any]]:
    """The batch layer: run ``one_trial(*job)`` for every job and keep the records.

    Runs at most ``concurrency`` jobs at once with a progress bar, streams the
    records to ``out/<run_id>/`` as crash-safe parts (nothing is written when
    ``out`` is None), claims each trial before running it so that another
    process running the same spec never runs it too (``trial_key(*job)`` is its
    ``(task, trial)``; default: the job itself), merges the run's parts at the
    end, and returns the new records in completion order. Shared by :func:`run`
    and :func:`passk_nb.harness.cases.run_cases`.

    ``one_trial`` may be a coroutine function: the trials then run as tasks on the transport loop
    (no thread per trial), with the same claims, timeouts, records and stops.

    ``status()``, when given, is shown beside the progress bar as each trial ends (the
    requests in flight under adaptive concurrency).

    With ``keep_records=False`` (and an ``out`` folder) the records are not kept
    in memory once on disk and the list returned is empty: memory then holds only
    the trials in flight, the records not yet written (at most ``every_n``) and, up to
    :data:`KEEP_WRITTEN_BYTES`, the Arrow tables of the parts written, for the merge.

    ``on_merge((part, table))`` is told of the part the merge at the end left and what it holds
    (for :func:`load_trials`).

    ``redact`` (the backend's: it knows the run's secrets) masks every record before it is kept,
    written or handed to ``on_record`` (:func:`~passk_nb.data.records.storable_record`).

    ``gate`` (a run's budget, :class:`~passk_nb.harness.budget.Budget`) is asked before each trial
    starts: ``decide()`` is ``"start"``, ``"wait"`` (asked again later, as a trial claimed elsewhere
    is) or ``"stop"`` (the trial is not run, nor stored); ``finished(record)`` hears of each record,
    ``cancel()`` of a started trial another process had stored. Trials in flight always finish.

    ``workers`` (coroutine trials only) runs them in worker processes, each on its own loop, this
    process claiming and writing (:func:`~passk_nb.harness.loop_workers.run_in_workers`).
    """
    if not keep_records and out is None:
        raise ValueError("keep_records=False needs an out folder: the records would be lost")
    writer = None if out is None else _Writer(out, run_id)
    key_of = trial_key or (lambda task, trial: (task, trial))
    claims = claimer = None
    if writer is not None and jobs:
        claims, stored = TrialClaims(writer.out, run_id), StoredTrials(writer.out, run_id)
        writer.claims, writer.stored = claims, stored
        claimer = _Claimer(
            claims, stored, key_of, 1 if gate is not None else max(1, min(LEASE, concurrency)), gate
        )

    records: list[dict[str, Any]] = []
    bar = tqdm(total=len(jobs), desc=desc, unit="trial", disable=not progress, file=progress_file())
    try:
        with _sigterm_flushes(), _collect_less():
            try:
                ticks = None if writer is None else writer.every_s
                schedule = _run_on_loop if inspect.iscoroutinefunction(one_trial) else _run_concurrently
                if workers is not None:
                    schedule = functools.partial(
                        run_in_workers, workers=workers, inherited=[] if claims is None else [claims.close]
                    )
                results = schedule(
                    one_trial,  # type: ignore[arg-type]
                    jobs,
                    concurrency,
                    timeout,
                    on_timeout,
                    tick=ticks,
                    claimer=claimer,
                )
                for record in results:
                    if record is None:
                        if writer is not None:
                            writer.flush_if_due()
                        continue
                    stops_run = record.pop(STOPS_RUN, False)
                    # the boundary: secrets masked, texts escaped, numbers range-checked
                    record = storable_record(record, redact)
                    if keep_records:
                        records.append(record)
                    if writer is not None:
                        writer.add(record)
                    if gate is not None:
                        gate.finished(record)
                    if on_record is not None:
                        on_record(record)
                    if status is not None:
                        bar.set_postfix_str(status(), refresh=False)
                    bar.update(1)
                    if stops_run:  # the agent raised KeyboardInterrupt: stop as Ctrl-C does
                        raise KeyboardInterrupt(f"raised by the agent in task {record.get('task')!r}")
            finally:
                if writer is not None:
                    writer.flush()
    finally:
        bar.close()
        if claims is not None:
            claims.close()
    if writer is not None and (writer.out / run_id).is_dir():
        merged = _merge_at_end(writer)  # also when nothing ran: a killed merge left trials twice
        if merged is not None and on_merge is not None:
            on_merge(merged)
    return records
