"""HTTP trials past one core: ``run(..., workers=N)`` with a backend whose requests are coroutines.

One process runs its asyncio trials on one core. With ``workers=N`` the run forks N worker
processes, each running its own event loop (uvloop where installed) with its share of the trials
in flight (``concurrency / N``) and connections of its own, and sending each finished record back
down a pipe, as a plain dict; the calling process stays the only writer of the run folder.

The claims stay in the calling process, where the records are written: it claims the trials a
lease at a time (:class:`~passk_nb.harness.batch._Claimer`), deals them to the workers (at most
twice a worker's share ahead), and releases each claim once its record is on disk, as in one
process. So a ``kill -9`` is as safe as ever: of the calling process, the kernel drops its claims
and the workers, reading end of file on their pipe, exit at once (a trial they held is neither
stored nor claimed, and a resume runs it); of a worker, the trials dealt to it and not returned
become ``infra_error`` records (a resume runs them again) and a fresh worker takes the rest. A
worker that says nothing for :data:`HUNG_S` seconds (it sends a heartbeat every second, so its
loop is blocked) is ended the same way. Claiming in the workers instead would need a claim taken
in one process and released in another after the write: the byte-range locks belong to the
process (the open file) that took them.

A trial's deadline (``trial_timeout``) is kept where it runs, by :func:`timed_trial`, the same
coroutine the in-process loop uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from passk_nb.harness.executors import become_worker
from passk_nb.harness.providers.base import CancelFlag, cancel_scope
from passk_nb.harness.providers.transport import new_loop, use_loop

#: How often a worker says it is alive (seconds).
HEARTBEAT_S = 1.0

#: A worker silent this long (seconds; its loop is blocked) is ended and its trials recorded lost.
HUNG_S = 60.0

Job = tuple[Any, int]
Trial = Callable[[Any, int], Awaitable[dict[str, Any]]]
OnTimeout = Callable[[Any, int, float], dict[str, Any]]


async def timed_trial(
    fn: Trial, job: Job, timeout: float | None, on_timeout: OnTimeout | None
) -> dict[str, Any]:
    """``fn(*job)`` within ``timeout`` seconds: past it the trial is cancelled (its request closed)
    and ``on_timeout(*job, elapsed)`` is its record; its cancel event is set either way, for
    anything it left in a worker thread."""
    event, started = CancelFlag(), time.monotonic()
    limit = None if timeout is None else asyncio.timeout(timeout)
    try:
        with cancel_scope(event):
            if limit is None:  # no deadline, no timer: asyncio.timeout(None) cost µs a trial
                return await fn(*job)
            async with limit:
                return await fn(*job)
    except TimeoutError:
        if limit is None or not limit.expired():
            raise  # not the trial's timeout: a harness failure, raised in the caller
        assert on_timeout is not None
        return on_timeout(*job, time.monotonic() - started)
    finally:
        event.set()


@dataclass(frozen=True)
class LoopWorkers:
    """How a run's HTTP trials go to worker processes (:func:`run_in_workers`): ``count`` of them,
    each first calling ``prepare(share)`` (the backend's own connections, ``share`` of them); a
    trial whose worker died or hung is ``on_lost(task, trial, why)``."""

    count: int
    prepare: Callable[[int], None]
    on_lost: Callable[[Any, int, str], dict[str, Any]]


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it pickles, else a RuntimeError saying what it was."""
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"a trial in a worker process raised {exc!r}")
    return exc


def _serve(
    conn: Connection,
    fn: Trial,
    share: int,
    timeout: float | None,
    on_timeout: OnTimeout | None,
    prepare: Callable[[int], None],
    inherited: Sequence[Callable[[], None]],
) -> None:
    """A worker process: its own loop (the process's transport loop), ``share`` trials in flight."""
    become_worker()  # Ctrl-C reaches the calling process alone, which ends its workers
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for close in inherited:  # the calling process's: its claims file, the other workers' pipes
        with contextlib.suppress(OSError):
            close()
    loop = new_loop()
    use_loop(loop)
    loop.run_until_complete(_work(loop, conn, fn, share, timeout, on_timeout, prepare))


async def _work(
    loop: asyncio.AbstractEventLoop,
    conn: Connection,
    fn: Trial,
    share: int,
    timeout: float | None,
    on_timeout: OnTimeout | None,
    prepare: Callable[[int], None],
) -> None:
    try:
        await loop.run_in_executor(None, prepare, share)  # opens this process's connections
    except Exception as exc:
        conn.send(("raised", _portable(exc)))
        return
    jobs: asyncio.Queue[Job | None] = asyncio.Queue()
    ended: list[tuple[Job, dict[str, Any] | None, BaseException | None]] = []

    def send(message: Any) -> None:
        try:
            conn.send(message)
        except (OSError, EOFError):  # the calling process is gone: nobody to hand records to
            os._exit(0)

    def hand_off() -> None:  # the trials that ended in one iteration of the loop, in one message
        try:
            message = ("done", ended[:])
            ended.clear()
            send(message)
        except Exception as exc:  # a record that does not pickle
            send(("raised", RuntimeError(f"a record cannot leave its worker process: {exc!r}")))

    def deliver(done: tuple[Job, dict[str, Any] | None, BaseException | None]) -> None:
        if not ended:
            loop.call_soon(hand_off)
        ended.append(done)

    def readable() -> None:
        try:
            while conn.poll():
                dealt = conn.recv()
                for job in dealt if dealt is not None else [None] * share:
                    jobs.put_nowait(job)
        except (OSError, EOFError):  # the calling process is gone (killed): its claims are too
            os._exit(0)

    async def runner() -> None:
        while (job := await jobs.get()) is not None:
            try:
                deliver((job, await timed_trial(fn, job, timeout, on_timeout), None))
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # re-raised in the calling process, which stops the run
                deliver((job, None, _portable(exc)))

    async def heartbeat() -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            send(("beat", None))

    loop.add_reader(conn.fileno(), readable)
    beat = loop.create_task(heartbeat())
    await asyncio.gather(*(runner() for _ in range(share)))
    beat.cancel()
    if ended:
        hand_off()


class _Worker:
    """One worker process and the calling process's end of its pipe; ``out``: the jobs dealt to it
    and not returned."""

    def __init__(self, context: Any, args: tuple[Any, ...]):
        self.conn, child = context.Pipe()
        *given, inherited = args  # closed in the worker, with this end of its own pipe: its EOF says we died
        served = (child, *given, [*inherited, self.conn.close])
        self.process = context.Process(target=_serve, args=served, name="passk-loop", daemon=True)
        self.process.start()
        child.close()
        self.out: dict[Job, None] = {}
        self.heard = time.monotonic()

    def deal(self, jobs: list[Job] | None) -> bool:
        """Send ``jobs`` (None: no more); False when the worker is gone."""
        try:
            self.conn.send(jobs)
        except (OSError, EOFError):
            return False
        self.out.update(dict.fromkeys(jobs or ()))
        return True

    def end(self) -> None:
        """Kill the process and reap it."""
        with contextlib.suppress(OSError):
            self.process.kill()
        self.process.join(10)
        self.conn.close()


def check_fork() -> None:
    """Refuse where processes cannot fork (Windows, some sandboxes): the run checks this before it
    writes anything, so a refused run leaves no spec behind."""
    if not hasattr(os, "fork") or "fork" not in multiprocessing.get_all_start_methods():
        raise ValueError(
            "workers= with an HTTP backend forks its worker processes, and this platform has no fork: "
            "drop workers= (raise concurrency= instead: one process keeps many requests in flight)"
        )


def run_in_workers(
    fn: Trial,
    jobs: list[Job],
    concurrency: int,
    timeout: float | None,
    on_timeout: OnTimeout | None,
    tick: float | None,
    claimer: Any,
    *,
    workers: LoopWorkers,
    inherited: Sequence[Callable[[], None]] = (),
) -> Iterator[dict[str, Any] | None]:
    """Yield the record of ``fn(*job)`` for every job as it completes, run in ``workers.count``
    processes (``concurrency / count`` in flight in each): the stream of
    :func:`~passk_nb.harness.batch._run_on_loop` (None whenever ``tick`` seconds pass), the jobs
    claimed here through ``claimer`` (a lease at a time; a job held elsewhere waited for, one
    stored meanwhile skipped). ``inherited`` is closed in each worker (the calling process's
    files it must not keep open: its claims)."""
    check_fork()
    if not jobs:
        return
    context = multiprocessing.get_context("fork")
    count = max(1, min(workers.count, concurrency, len(jobs)))
    share = -(-concurrency // count)
    todo: deque[Job] = deque(jobs)
    ready: deque[Job] = deque()  # claimed, not dealt
    later: deque[Job] = deque()  # held by another process when first tried
    left = len(jobs)  # not yet delivered, skipped or lost
    pool: list[_Worker] = []
    finished = False

    def start() -> None:
        closing = [*inherited, *(worker.conn.close for worker in pool)]
        pool.append(_Worker(context, (fn, share, timeout, on_timeout, workers.prepare, closing)))

    def claim(room: int) -> int:
        """Claim up to ``room`` jobs into ``ready``: how many were skipped (stored elsewhere)."""
        skipped = 0
        while len(ready) < room and todo:
            if claimer is None:
                ready.append(todo.popleft())
                continue
            skipped += len(claimer.take(todo, ready, later))
        if not ready and not todo and later:  # only jobs held elsewhere: wait for their claims
            for _ in range(len(later)):
                job = later.popleft()
                if not claimer.claim(job):
                    later.append(job)
                elif claimer.is_done(job):
                    skipped += 1
                else:
                    ready.append(job)
        return skipped

    try:
        for _ in range(count):
            start()
        while left:
            left -= claim(sum(2 * share - len(worker.out) for worker in pool))
            for worker in pool:
                room = 2 * share - len(worker.out)
                if room > 0 and ready:
                    dealt = [ready.popleft() for _ in range(min(room, len(ready)))]
                    if not worker.deal(dealt):  # gone: found below, its jobs dealt again
                        ready.extendleft(reversed(dealt))
            if not left:
                break
            waits = [HEARTBEAT_S, *([tick] if tick is not None else []), *([0.05] if later else [])]
            heard = wait([w.conn for w in pool] + [w.process.sentinel for w in pool], timeout=min(waits))
            delivered = False
            for worker in list(pool):
                lost, gone = None, False
                try:
                    while worker.conn in heard and worker.conn.poll():
                        kind, value = worker.conn.recv()
                        worker.heard = time.monotonic()
                        if kind == "raised":
                            raise value
                        for job, record, error in value or ():
                            if error is not None:
                                raise error
                            del worker.out[job]
                            left -= 1
                            delivered = True
                            yield record
                except (EOFError, OSError):  # its pipe closed: it is ending
                    worker.process.join(10)
                    gone = True
                if gone or (worker.process.sentinel in heard and not worker.process.is_alive()):
                    lost = (
                        f"its worker process {worker.process.pid} died (exit code {worker.process.exitcode})"
                    )
                elif time.monotonic() - worker.heard > HUNG_S:
                    lost = f"its worker process {worker.process.pid} hung ({HUNG_S:.0f} s without a word)"
                if lost is None:
                    continue
                pool.remove(worker)
                worker.end()
                for job in worker.out:
                    left -= 1
                    delivered = True
                    yield workers.on_lost(*job, f"trial lost: {lost}; a resume runs it again")
                if todo or ready or later:
                    start()
            if not delivered and tick is not None:
                yield None
        finished = True
    finally:
        for worker in pool:
            if finished and worker.deal(None):
                worker.process.join(5)
            worker.end()
