"""Where a Python agent's trials run: threads (the default), processes (``workers=N``), or Ray.

A Python agent that spends its time computing holds the GIL, so threads run one trial at a time
however high ``concurrency`` is. ``run(..., workers=N)`` runs each trial in one of N worker
processes; ``run(..., executor="ray")`` runs each as a Ray task on a cluster. Either way the
calling process keeps everything else: the scheduler, claims, timeouts, the progress bar and the
run folder, of which it stays the single writer (no shared filesystem is needed, and every
crash-safety guarantee holds). A trial that the workers cannot finish because its process died
(the agent called ``os._exit``, ran out of memory, its node was lost) is run again on another
worker: Ray re-runs a lost task (up to ``max_retries`` times); the process pool is rebuilt and the
trial resubmitted once. One that dies every time is recorded as the agent's failure.

Processes are forked on Linux (the agent, a notebook's function included, need not pickle);
elsewhere they are spawned, and the agent must pickle (a module-level function). Ray pickles the
agent with cloudpickle. A trial given up on (``trial_timeout``) is recorded at once; its worker
finishes it in the background.

>>> trials = make_executor("processes", workers=2, state={"offset": 10})
>>> trials.call(_add_offset, 5)
15
>>> trials.close()
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import pickle
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

__all__ = ["EXECUTORS", "WorkerLost", "make_executor"]

#: The places trials can run.
EXECUTORS = ("threads", "processes", "ray")

#: What a worker process was given (its run's agent, suite and options), set once per process.
_STATE: dict[str, Any] = {}


class WorkerLost(RuntimeError):
    """The process running a trial died each time it was tried: the trial is recorded as lost."""


def _init(state: dict[str, Any]) -> None:
    _STATE.clear()
    _STATE.update(state)


def _in_worker(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(_STATE, *args)


def _add_offset(state: dict[str, Any], value: int) -> int:  # the doctest's trial
    return int(state["offset"]) + value


class ProcessTrials:
    """Trials in a pool of ``workers`` processes, each given ``state`` once."""

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
        self._lock = threading.Lock()
        self._pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            self.workers, mp_context=self._context, initializer=_init, initargs=(self.state,)
        )

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(state, *args)`` in a worker; run again once in a new pool if its process died."""
        for attempt in (1, 2):
            with self._lock:
                pool = self._pool
            try:
                return pool.submit(_in_worker, fn, *args).result()
            except BrokenProcessPool:
                with self._lock:
                    if self._pool is pool:  # the first thread to see it replaces the pool
                        pool.shutdown(wait=False, cancel_futures=True)
                        self._pool = self._new_pool()
                if attempt == 2:
                    raise WorkerLost(
                        "the worker process running this trial died twice (the agent may call os._exit, "
                        "crash the interpreter or run out of memory)"
                    ) from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            self._pool.shutdown(wait=False, cancel_futures=True)


def _ray_trial(state: dict[str, Any], fn: Callable[..., Any], *args: Any) -> Any:
    return fn(state, *args)


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
        self._remote = self.ray.remote(max_retries=self.MAX_RETRIES)(_ray_trial)

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return self.ray.get(self._remote.remote(self._state, fn, *args))
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
