"""Retrying transient backend failures: backoff with jitter, Retry-After, a provider-wide pause on 429.

One retry loop serves all backends (Ollama, OpenAI-compatible servers, the
Anthropic SDK), so they behave alike under faults and record attempts alike:

- a request that fails with 429, a 5xx, a dropped connection or a timeout is
  retried, up to ``max_attempts`` requests in all, after an exponential backoff
  with full jitter; a ``Retry-After`` header is honoured (capped);
- a 429 or a ``Retry-After`` pauses *every* request of the provider (and of its
  ``with_seed`` copies) until the pause is over, so a run backs off as a whole
  instead of hammering a rate-limited server from each worker thread;
- any other 4xx, or a reply without the expected fields, is not retried;
- when the attempts are used up the request raises :class:`ProviderError` with
  an ``attempts`` attribute and a reason such as ``"HTTP 500 after 4 attempts:
  <short body>"``; the runner turns it into an ``infra_error`` row.

>>> policy = RetryPolicy(max_attempts=3, backoff_base=0.0)
>>> calls = []
>>> def flaky():
...     calls.append(1)
...     if len(calls) < 3:
...         raise Transient("HTTP 503", "busy")
...     return "ok"
>>> Retrier(policy).call(flaky)
('ok', 3)
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import email.utils
import itertools
import logging
import math
import random
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from passk_nb.data.redact import Redactor, short
from passk_nb.harness.providers.adaptive import AdaptiveLimit
from passk_nb.harness.providers.base import (
    ProviderError,
    apace_request,
    cancellable_sleep,
    cancelled,
    pace_request,
)

log = logging.getLogger("passk_nb.harness.providers")
T = TypeVar("T")


def provider_error(message: str, attempts: int) -> ProviderError:
    """A :class:`ProviderError` carrying the number of requests made (the episode records it).

    >>> provider_error("HTTP 400 (not retried): bad model", 1).attempts
    1
    """
    error = ProviderError(message)
    error.attempts = attempts  # type: ignore[attr-defined]
    return error


def parse_retry_after(value: str | None, *, now: dt.datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date; None if absent/invalid.

    >>> parse_retry_after("1.5")
    1.5
    >>> now = dt.datetime(2015, 10, 21, 7, 28, tzinfo=dt.UTC)
    >>> parse_retry_after("Wed, 21 Oct 2015 07:28:05 GMT", now=now)
    5.0
    >>> parse_retry_after("soon") is None
    True
    """
    if value is None or not value.strip():
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        seconds = (when - (now or dt.datetime.now(dt.UTC))).total_seconds()
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        return None
    return max(0.0, seconds)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry.

    ``max_attempts`` counts every request, the first included (1 = no retry).
    Attempt ``n`` failing waits ``uniform(0, min(backoff_max, backoff_base * 2**(n-1)))``
    seconds ("full jitter"), or the server's ``Retry-After`` when that is
    longer, capped at ``retry_after_max``.

    >>> RetryPolicy(backoff_base=1.0, backoff_max=5.0).delay(10, random.Random(0)) <= 5.0
    True
    >>> RetryPolicy(retry_after_max=2.0).delay(1, random.Random(0), retry_after=30)
    2.0
    """

    max_attempts: int = 4
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    retry_after_max: float = 120.0

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ValueError(f"max_attempts must be a whole number ≥ 1, got {self.max_attempts!r}")
        for name in ("backoff_base", "backoff_max", "retry_after_max"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise ValueError(f"{name} must be a finite number ≥ 0, got {value!r}")

    def delay(self, attempt: int, rng: random.Random, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        ceiling = min(self.backoff_max, self.backoff_base * 2 ** min(attempt - 1, 60))
        wait = rng.uniform(0.0, ceiling)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.retry_after_max))
        return wait


class Transient(Exception):
    """A failure worth retrying: 429, 5xx, a dropped connection, a timeout.

    ``kind`` names it (``"HTTP 503"``, ``"timeout"``), ``detail`` says more
    (a short body excerpt), ``retry_after`` is the server's wish in seconds.
    ``pause_all`` makes every request of the provider wait (rate limits).
    """

    def __init__(
        self, kind: str, detail: str = "", *, retry_after: float | None = None, pause_all: bool = False
    ):
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind, self.detail, self.retry_after, self.pause_all = kind, detail, retry_after, pause_all


def overloaded(failure: Transient) -> bool:
    """Whether a failure says the server is over capacity: 429, 503 or 529 (Anthropic's "overloaded").

    >>> overloaded(Transient("HTTP 503")), overloaded(Transient("timeout"))
    (True, False)
    """
    return failure.pause_all or failure.kind in ("HTTP 429", "HTTP 503", "HTTP 529")


@dataclass
class _Tried:
    """What one attempt left for the retry loop: its transient failure, None if it succeeded."""

    failure: Transient | None = None


class _Attempt(contextlib.AbstractContextManager[_Tried]):
    """One attempt of :class:`Retrier`: a :class:`ProviderError` is raised with the attempts made, a
    :class:`Transient` is kept in ``failure`` (to retry), and the adaptive slot is given back with
    what the attempt said of the server (also when the trial is cancelled). A class, not a
    ``@contextmanager`` generator, which cost several times the CPU on every request."""

    def __init__(self, redact: Redactor, attempt: int, limit: AdaptiveLimit | None, started: float | None):
        self.redact, self.attempt, self.limit, self.started = redact, attempt, limit, started
        self.tried = _Tried()

    def __enter__(self) -> _Tried:
        return self.tried

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        outcome = "ok" if kind is None else "other"
        try:
            if isinstance(exc, ProviderError):
                raise provider_error(self.redact(exc), self.attempt) from None
            if isinstance(exc, Transient):
                self.tried.failure, outcome = exc, ("overload" if overloaded(exc) else "other")
                return True
            return False
        finally:
            if self.limit is not None and self.started is not None:
                self.limit.release(self.started, outcome)


class Retrier:
    """Runs a request with retries (see :class:`RetryPolicy`) and returns ``(result, attempts)``.

    Every attempt waits for the run's rate limit first (:func:`~.base.pace_request`).
    The request is a function that returns the result, raises
    :class:`Transient` (retried) or raises :class:`ProviderError` (not
    retried). One retrier is shared by a provider and its ``with_seed`` copies,
    from many threads: a rate-limit pause applies to all of them.

    >>> Retrier(RetryPolicy(max_attempts=2, backoff_base=0)).call(lambda: 42)
    (42, 1)
    """

    def __init__(
        self,
        policy: RetryPolicy | None = None,
        *,
        redact: Redactor | None = None,
        label: str = "backend",
        seed: int | str = 0,
    ):
        self.policy = policy or RetryPolicy()
        self.redact = redact or Redactor()
        self.label = label
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._paused_until = 0.0
        #: Adaptive concurrency (:mod:`~passk_nb.harness.providers.adaptive`), when the run asks for it.
        self.adaptive: AdaptiveLimit | None = None

    def _pause(self, seconds: float) -> None:
        with self._lock:
            self._paused_until = max(self._paused_until, time.monotonic() + seconds)

    def _pause_left(self) -> float:
        with self._lock:
            return self._paused_until - time.monotonic()

    def _wait_for_pause(self) -> None:
        while (remaining := self._pause_left()) > 0 and not cancelled():
            cancellable_sleep(min(remaining, 1.0))

    def call(self, request: Callable[[], T], *, until: float | None = None) -> tuple[T, int]:
        """Run ``request`` until it succeeds, fails for good, or the attempts are used up.

        ``until`` (a :func:`time.monotonic` time) marks ``request`` idempotent, a read of something
        that goes on meanwhile (a batch's status: the batch runs, and is billed, whether or not it
        is asked): a transient failure is then retried, past ``max_attempts``, while the wait ends
        before ``until``.
        """
        for attempt in itertools.count(1):
            self._wait_for_pause()
            self._check_cancelled(attempt)
            limit = self.adaptive
            try:
                started = None if limit is None else limit.acquire()
            except ProviderError as exc:
                raise provider_error(str(exc), attempt - 1) from None
            with self._attempt(attempt, limit, started) as tried:
                pace_request()
                result = request()
            if tried.failure is None:
                return result, attempt
            cancellable_sleep(self._backoff(attempt, tried.failure, until))
        raise AssertionError("unreachable")  # pragma: no cover

    async def acall(self, request: Callable[[], Awaitable[T]]) -> tuple[T, int]:
        """:meth:`call` on an asyncio loop: ``await request()``, and every wait (the provider's
        pause, the adaptive limit, the rate limit, the backoff) awaited. A cancelled task stops at
        its next await; the slot it held is given back."""
        for attempt in range(1, self.policy.max_attempts + 1):
            while (remaining := self._pause_left()) > 0:
                await asyncio.sleep(min(remaining, 1.0))
            self._check_cancelled(attempt)
            limit = self.adaptive
            started = None if limit is None else await limit.aacquire()
            with self._attempt(attempt, limit, started) as tried:
                await apace_request()
                result = await request()
            if tried.failure is None:
                return result, attempt
            await asyncio.sleep(self._backoff(attempt, tried.failure))
        raise AssertionError("unreachable")  # pragma: no cover

    def _attempt(self, attempt: int, limit: AdaptiveLimit | None, started: float | None) -> _Attempt:
        """One attempt, blocking or awaited alike (:class:`_Attempt`)."""
        return _Attempt(self.redact, attempt, limit, started)

    def _check_cancelled(self, attempt: int) -> None:
        if attempt > 1 and cancelled():
            raise provider_error(
                "the trial was given up on (trial_timeout); no further attempts", attempt - 1
            )

    def _backoff(self, attempt: int, failure: Transient, until: float | None = None) -> float:
        """After failed attempt ``attempt``: the seconds to wait before the next (pausing every request
        of the provider on a rate limit), or the final error when the attempts are used up (and,
        with ``until``, the wait would end past it)."""
        attempts = self.policy.max_attempts
        kind, detail = self.redact(failure.kind), self.redact(failure.detail)

        def used_up() -> ProviderError:
            plural = "attempt" if attempt == 1 else "attempts"
            message = f"{kind} after {attempt} {plural}" + (f": {detail}" if detail else "")
            return provider_error(message, attempt)

        if attempt >= attempts and until is None:
            raise used_up()
        with self._lock:
            wait = self.policy.delay(attempt, self._rng, failure.retry_after)
        if attempt >= attempts and time.monotonic() + wait > (until or 0.0):
            raise used_up()
        if failure.pause_all or failure.retry_after is not None:
            self._pause(wait)
        log.warning(
            "%s: %s (attempt %d%s); retrying in %.2f s",
            self.label,
            short(f"{kind}: {detail}" if detail else kind, 200),
            attempt,
            f" of {attempts}" if until is None else ", retried while what it reads goes on",
            wait,
        )
        return wait
