"""Where a Python agent's trials run: threads (the default), processes (``workers=N``), or Ray.

A computing agent holds the GIL, so threads run its trials one at a time: ``workers=N`` runs each
trial in one of N worker processes (forked on Linux: no pickling), ``executor="ray"`` as a Ray
task. The calling process stays the scheduler and the single writer of the run folder. A trial's
deadline starts when a worker takes it; a trial given up on is ended where it runs (its worker
killed and replaced, its Ray task cancelled); a trial whose process died runs again (once in the
pool, up to ``max_retries`` by Ray), and one that dies every time is the agent's failure.

In full: ``docs/guide/scaling.md``.

>>> trials = make_executor("processes", workers=2, state={"offset": 10})
>>> trials.call(_add_offset, 5)
15
>>> trials.close()
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import pickle
import queue
import signal
import threading
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any

from passk_nb.harness.providers.base import (
    Cancel,
    TrialGivenUp,
    cancel_event,
    delay_scope,
    note_injected_delay,
    trial_clock,
)

__all__ = ["EXECUTORS", "WorkerLost", "make_executor"]

#: The places trials can run.
EXECUTORS = ("threads", "processes", "ray")

#: How often a thread waiting on a worker looks whether its trial was given up on (seconds).
POLL_S = 0.05

#: What a worker process was given (its run's agent, suite and options), set once per process.
_STATE: dict[str, Any] = {}


class WorkerLost(RuntimeError):
    """The process running a trial died each time it was tried: the trial is recorded as lost."""


def _init(state: dict[str, Any]) -> None:
    _STATE.clear()
    _STATE.update(state)


def _add_offset(state: dict[str, Any], value: int) -> int:  # the doctest's trial
    return int(state["offset"]) + value


def become_worker() -> None:
    """A forked worker's first step: its own process group (ending it ends whatever it started;
    the terminal's Ctrl-C reaches the calling process alone) and the default SIGTERM (not the
    calling process's handler)."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _serve(conn: Connection, state: dict[str, Any]) -> None:
    """A worker process: run each ``(fn, args)`` sent down ``conn`` as ``fn(state, *args)`` and send
    back ``("done", result)`` or ``("raised", exception)``, noting injected delays on the way, until
    the pipe closes. A process the agent forked that comes back here ends instead of answering."""
    become_worker()
    _init(state)
    me = os.getpid()

    def answer(message: tuple[str, Any]) -> None:
        if os.getpid() != me:
            os._exit(0)
        try:
            conn.send(message)
        except Exception as exc:  # the result does not pickle
            conn.send(("raised", RuntimeError(f"the trial's result cannot leave its worker: {exc!r}")))

    while True:
        try:
            fn, args = conn.recv()
        except (EOFError, OSError):
            return
        with delay_scope(lambda active: answer(("delay", active))):
            try:
                reply: tuple[str, Any] = ("done", fn(state, *args))
            except BaseException as exc:  # re-raised in the calling process
                reply = ("raised", exc)
        answer(reply)


class _Worker:
    """One worker process, its own process group, and the calling process's end of its pipe."""

    def __init__(self, context: Any, state: dict[str, Any]):
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, state), name="passk-worker")
        self.process.start()
        child.close()
        with contextlib.suppress(OSError):  # also here: the group exists before any kill
            os.setpgid(self.process.pid, self.process.pid)
        self.ended = False

    def end(self) -> None:
        """Kill the process and everything in its process group, and reap it."""
        if self.ended:
            return
        self.ended = True
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.process.kill()
        self.process.join(10)
        self.conn.close()

    def run(self, fn: Callable[..., Any], args: tuple[Any, ...], event: Cancel | None) -> tuple[str, Any]:
        """Run ``fn(state, *args)`` here: ``("done", result)``, ``("raised", exception)``,
        ``("died", None)`` when the process died, ``("given up", None)`` once ``event`` is set."""
        payload = bytes(ForkingPickler.dumps((fn, args)))  # a pickling error is the caller's, raised here
        try:
            self.conn.send_bytes(payload)
            while True:
                if self.conn.poll(POLL_S):
                    kind, value = self.conn.recv()
                    if kind != "delay":
                        return kind, value
                    if event is None or not event.is_set():
                        note_injected_delay(value)
                elif not self.process.is_alive():
                    if not self.conn.poll(0):  # its last words read first, if any
                        return "died", None
                elif event is not None and event.is_set():
                    return "given up", None
        except (EOFError, OSError):
            return "died", None
        except Exception as exc:  # its answer did not unpickle here
            return "raised", RuntimeError(f"the trial's result could not be read from its worker: {exc!r}")


class ProcessTrials:
    """Trials in ``workers`` processes of our own, each given ``state`` once; each trial has a
    worker to itself until it ends, dies or is given up on (then the worker is replaced)."""

    def __init__(self, workers: int, state: dict[str, Any]):
        methods = multiprocessing.get_all_start_methods()
        self._context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        if self._context.get_start_method() != "fork":
            try:
                pickle.dumps(state)
            except Exception as exc:
                raise ValueError(
                    f"workers= starts processes by spawning here, so the agent must pickle (a function "
                    f"defined at module level, not in a notebook or a closure): {exc}"
                ) from None
        self.workers, self.state = workers, state
        self._lock = threading.Condition()
        self._closed = False
        self._busy: set[_Worker] = set()
        self._idle = [_Worker(self._context, state) for _ in range(workers)]

    def _take(self, event: Cancel | None) -> _Worker:
        """An idle worker, once one is free; TrialGivenUp if the trial is given up on first."""
        with self._lock:
            while not self._idle:
                if self._closed or (event is not None and event.is_set()):
                    raise TrialGivenUp("the trial was given up on while it waited for a worker")
                self._lock.wait(POLL_S)
            worker = self._idle.pop()
            self._busy.add(worker)
            return worker

    def _give_back(self, worker: _Worker, healthy: bool) -> None:
        """``worker`` free again; one that died or was given up on is ended and replaced."""
        if not healthy:
            worker.end()
        with self._lock:
            self._busy.discard(worker)
            if self._closed:
                worker.end()
                return
        if not healthy:
            worker = _Worker(self._context, self.state)
        with self._lock:
            if self._closed:
                worker.end()
                return
            self._idle.append(worker)
            self._lock.notify()

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(state, *args)`` in a worker; run again once on a fresh worker if its process died."""
        event = cancel_event()
        for attempt in (1, 2):
            trial_clock(False)  # waiting for a worker is not the trial's time
            worker = self._take(event)
            trial_clock(True)
            kind: str = "died"
            try:
                kind, value = worker.run(fn, args, event)
            finally:
                self._give_back(worker, healthy=kind in ("done", "raised"))
            if kind == "done":
                return value
            if kind == "raised":
                raise value
            if kind == "given up":
                raise TrialGivenUp("the trial was given up on: its worker was ended")
            if attempt == 2:
                raise WorkerLost(
                    "the worker process running this trial died twice (the agent may call os._exit, "
                    "crash the interpreter or run out of memory)"
                )
        raise AssertionError("unreachable")

    def close(self) -> None:
        """End every worker (a trial still running was given up on), so the process can exit."""
        with self._lock:
            self._closed = True
            workers = [*self._idle, *self._busy]
            self._idle.clear()
            self._lock.notify_all()
        for worker in workers:
            worker.end()


def _ray_trial(state: dict[str, Any], fn: Callable[..., Any], *args: Any) -> Iterator[tuple[str, Any]]:
    """A trial as a streaming Ray task: ``("started", None)`` once a worker runs it, each injected
    delay's ``("delay", active)``, then ``("done", result)`` or ``("raised", exception)``."""
    yield "started", None
    messages: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()

    def work() -> None:
        with delay_scope(lambda active: messages.put(("delay", active))):
            try:
                messages.put(("done", fn(state, *args)))
            except BaseException as exc:  # re-raised in the calling process
                messages.put(("raised", exc))

    threading.Thread(target=work, daemon=True, name="passk-trial").start()
    while True:
        kind, value = messages.get()
        yield kind, value
        if kind != "delay":
            return


class RayTrials:
    """Trials as Ray tasks: on the cluster at ``address`` (default: ``$RAY_ADDRESS``, else a local
    one started here and stopped at the end)."""

    #: How many times Ray re-runs a trial whose worker was lost.
    MAX_RETRIES = 3

    def __init__(self, state: dict[str, Any], address: str | None = None, num_cpus: int | None = None):
        try:
            self.ray = importlib.import_module("ray")
        except ImportError:
            raise ValueError(
                "executor='ray' needs Ray: pip install 'passk-nb[ray]' (or ray), then pass the cluster's "
                "address (ray_address=, passk run --ray ADDRESS) or none for a local one"
            ) from None
        self.started = not self.ray.is_initialized()
        if self.started:
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address is None and not os.environ.get("RAY_ADDRESS"):
                options["num_cpus"] = num_cpus
            self.ray.init(address=address, **options)
        self._state = self.ray.put(state)
        self._remote = self.ray.remote(num_returns="streaming", max_retries=self.MAX_RETRIES)(_ray_trial)

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(state, *args)`` as a Ray task, timed from when a worker starts it, cancelled (its
        worker killed) when the trial is given up on."""
        event = cancel_event()
        trial_clock(False)  # waiting in Ray's queue (a worker starting) is not the trial's time
        stream = self._remote.remote(self._state, fn, *args)
        try:
            while True:
                if not self.ray.wait([stream], timeout=POLL_S)[0]:
                    if event is not None and event.is_set():
                        self.ray.cancel(stream, force=True)
                        raise TrialGivenUp("the trial was given up on: its Ray task was cancelled")
                    continue
                kind, value = self.ray.get(next(stream))
                if kind == "started":
                    trial_clock(True)
                elif kind == "delay":
                    if event is None or not event.is_set():
                        note_injected_delay(value)
                elif kind == "done":
                    return value
                else:
                    raise value
        except (self.ray.exceptions.WorkerCrashedError, self.ray.exceptions.NodeDiedError) as exc:
            raise WorkerLost(
                f"the Ray worker running this trial was lost {self.MAX_RETRIES + 1} times: {exc}"
            ) from None

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()


def make_executor(
    executor: str, *, workers: int | None, state: dict[str, Any], address: str | None = None
) -> ProcessTrials | RayTrials:
    """The trials' executor: ``"processes"`` (``workers`` of them) or ``"ray"``."""
    if executor == "processes":
        return ProcessTrials(workers or os.cpu_count() or 1, state)
    if executor == "ray":
        return RayTrials(state, address, num_cpus=workers)
    raise ValueError(f"executor must be one of {list(EXECUTORS)}, got {executor!r}")
