"""Adaptive concurrency: how many requests of one provider are in flight, found by AIMD.

A server that admits N requests at once answers 429 ("slow down") or 503/529 ("overloaded")
above N. Pausing on each one, as a fixed pool of ``concurrency`` workers does, turns every
rejected request into a retry and, with few attempts, into lost trials. :class:`AdaptiveLimit`
lets at most ``limit`` requests of a provider be on the wire and moves the limit as TCP moves
its window:

- it starts low (``START``, or ``concurrency`` when that is lower) and, until the first
  overload, grows by one for every clean reply (doubling per round trip: *slow start*);
- after that it grows by ``1/limit`` per clean reply (about one per round trip: *additive
  increase*);
- an overload reply halves it (*multiplicative decrease*), at most once per round trip: replies
  to requests sent before the last cut do not cut again;
- it never exceeds the run's ``concurrency`` (the ceiling) and never falls below one.

Other failures (timeouts, dropped connections, 500, 4xx) leave it as it is. One limit is shared
by a provider and its ``with_seed`` copies, from every worker thread.

>>> limit = AdaptiveLimit(ceiling=16, start=2)
>>> for _ in range(6):
...     limit.release(limit.acquire(), "ok")
>>> limit.limit  # slow start: +1 per clean reply, up to the ceiling
8.0
>>> limit.release(limit.acquire(), "overload"); limit.limit
4.0
>>> limit.release(limit.acquire(), "ok"); limit.limit  # additive now: +1/limit
4.25
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import Callable

from passk_nb.harness.providers.base import ProviderError, cancelled

#: The limit a run starts from (or its concurrency, when lower).
START = 8
#: What a finished request says about the server's capacity.
OUTCOMES = ("ok", "overload", "other")


class AdaptiveLimit:
    """At most ``limit`` requests in flight, the limit moved by AIMD (module docstring).

    ``ceiling``: the most ever in flight (the run's ``concurrency``); ``start``: the first limit.
    :meth:`acquire` blocks until a slot is free and returns the request's start time, which
    :meth:`release` takes back with the outcome.
    """

    def __init__(self, ceiling: int, *, start: int = START, clock: Callable[[], float] = time.monotonic):
        self.in_flight = 0
        self.most_in_flight = 0
        self.cuts = 0
        self._clock = clock
        self._cut_at = -math.inf
        self._ready = threading.Condition()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self.set_ceiling(ceiling, start=start)

    def set_ceiling(self, ceiling: int, *, start: int = START) -> None:
        """A new ceiling (``run()`` sets its ``concurrency``); the limit starts again from ``start``."""
        if ceiling < 1:
            raise ValueError(f"the ceiling of in-flight requests must be ≥ 1, got {ceiling}")
        with self._ready:
            self.ceiling = ceiling
            self.limit = float(max(1, min(start, ceiling)))
            self.slow_start = True
            self._notify()

    def acquire(self) -> float:
        """Wait for a free slot (giving up if the trial is), take it, and return the start time."""
        with self._ready:
            while self.in_flight >= int(self.limit):
                if cancelled():
                    raise ProviderError("the trial was given up on (trial_timeout) while waiting to send")
                self._ready.wait(0.25)
            return self._take()

    async def aacquire(self) -> float:
        """:meth:`acquire` for an asyncio task: waits without blocking the loop (a cancelled task
        stops waiting by its CancelledError)."""
        loop = asyncio.get_running_loop()
        while True:
            with self._ready:
                if self.in_flight < int(self.limit):
                    return self._take()
                waiter = loop.create_future()
                self._waiters.append((loop, waiter))
            with contextlib.suppress(TimeoutError):  # re-checked at least every 0.25 s, as acquire
                await asyncio.wait_for(waiter, 0.25)

    def _take(self) -> float:
        """Take a slot (the caller holds the lock) and return its start time."""
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        return self._clock()

    def _notify(self) -> None:
        """Wake every waiting thread and task (the caller holds the lock)."""
        self._ready.notify_all()
        waiters, self._waiters = self._waiters, []
        for loop, waiter in waiters:
            loop.call_soon_threadsafe(_wake, waiter)

    def release(self, started: float, outcome: str) -> None:
        """Give the slot back; ``outcome`` (:data:`OUTCOMES`) moves the limit."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        with self._ready:
            self.in_flight -= 1
            if outcome == "overload":
                if started >= self._cut_at:  # sent after the last cut: news, not an echo of it
                    self.limit = max(1.0, self.limit / 2)
                    self._cut_at = self._clock()
                    self.slow_start = False
                    self.cuts += 1
            elif outcome == "ok":
                step = 1.0 if self.slow_start else 1.0 / self.limit
                self.limit = min(float(self.ceiling), self.limit + step)
            self._notify()

    def status(self) -> str:
        """What the progress bar shows: requests in flight and the current limit."""
        return f"in flight {self.in_flight}/{int(self.limit)}"


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
