"""Pacing requests to a rate limit (requests or tokens per minute) instead of waiting for 429s.

``run(rate_limit="600rpm")`` (``"90000tpm"``, or both) shares one :class:`RateLimiter` among all
trials: a token bucket in its "virtual scheduling" form (GCRA), each request reserving the next
free slot, up to one second's budget at once. Tokens are estimated on reserving and settled from
the reply. Every request on the wire is paced, retries included; none waits longer than 60 s.

How, in full: ``docs/guide/scaling.md``.

>>> RateLimit.parse("600rpm,90000tpm")
RateLimit(requests_per_min=600.0, tokens_per_min=90000.0)
>>> clock = FakeClock()
>>> limiter = RateLimiter(RateLimit.parse("120rpm"), clock=clock, sleep=clock.sleep)
>>> [limiter.acquire() for _ in range(5)]  # seconds each request waited
[0.0, 0.0, 0.5, 0.5, 0.5]
>>> clock.now  # 2 requests per second, 2 at once: the 3rd at 0.5 s, the 5th at 1.5 s
1.5
"""

from __future__ import annotations

import asyncio
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from passk_nb.harness.providers.base import Reply, apace_scope, cancellable_sleep, check_usage, pace_scope

__all__ = ["RateLimit", "RateLimiter", "Paced", "FakeClock", "estimate_tokens", "WINDOW_S"]

#: The longest any one request waits, and the most one request is charged: one minute's budget.
WINDOW_S = 60.0

_PART = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(rpm|tpm|rps|tps)\s*$", re.IGNORECASE)
_UNIT = {"rpm": ("requests", 1.0), "rps": ("requests", 60.0), "tpm": ("tokens", 1.0), "tps": ("tokens", 60.0)}


@dataclass(frozen=True)
class RateLimit:
    """A budget per minute of requests and/or tokens (None: no limit on that one).

    >>> RateLimit.parse("10rps")
    RateLimit(requests_per_min=600.0, tokens_per_min=None)
    """

    requests_per_min: float | None = None
    tokens_per_min: float | None = None

    def __post_init__(self) -> None:
        for name in ("requests_per_min", "tokens_per_min"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf
            ):
                raise ValueError(f"{name} must be a number > 0 (or None), got {value!r}")
        if self.requests_per_min is None and self.tokens_per_min is None:
            raise ValueError("a rate limit needs requests_per_min, tokens_per_min or both")

    @classmethod
    def parse(cls, value: str | RateLimit) -> RateLimit:
        """``"600rpm"``, ``"90000tpm"``, ``"10rps"``, ``"1500tps"`` or two of them joined by a comma."""
        if isinstance(value, RateLimit):
            return value
        if not isinstance(value, str) or not value.strip():
            raise ValueError(
                f"rate_limit must be text such as '600rpm', '90000tpm' or '600rpm,90000tpm', got {value!r}"
            )
        found: dict[str, float] = {}
        for part in value.split(","):
            match = _PART.match(part)
            if match is None:
                raise ValueError(
                    f"rate limit {part.strip()!r} not understood: write a number and a unit, rpm "
                    "(requests per minute), tpm (tokens per minute), rps or tps, e.g. '600rpm' or "
                    "'600rpm,90000tpm'"
                )
            kind, per_min = _UNIT[match.group(2).lower()]
            if kind in found:
                raise ValueError(f"rate limit {value!r} gives the {kind} budget twice; give it once")
            found[kind] = float(match.group(1)) * per_min
        return cls(found.get("requests"), found.get("tokens"))

    def __str__(self) -> str:
        parts = [f"{self.requests_per_min:g}rpm"] if self.requests_per_min else []
        return ",".join(parts + ([f"{self.tokens_per_min:g}tpm"] if self.tokens_per_min else []))


class FakeClock:
    """A clock for tests: ``sleep`` moves ``now`` forward instead of waiting (one thread)."""

    def __init__(self, now: float = 0.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


class _Schedule:
    """One budget (GCRA): ``rate`` units a second; ``rate * burst_s`` units (at least 1) may start at once."""

    def __init__(self, per_min: float, burst_s: float):
        self.rate = per_min / 60.0
        self.interval = 1.0 / self.rate  # seconds one unit of budget takes to earn back
        self.tolerance = (max(1.0, self.rate * burst_s) - 1.0) * self.interval  # how far ahead it may run
        self.tat = -math.inf  # "theoretical arrival time": when the budget spent so far is earned back

    def earliest(self, now: float) -> float:
        return max(now, self.tat - self.tolerance)

    def spend(self, at: float, units: float) -> None:
        self.tat = max(self.tat, at) + self.charge(units)

    def charge(self, units: float) -> float:
        """Seconds of budget ``units`` take, at most one window (a single request never owes more)."""
        return max(-WINDOW_S, min(WINDOW_S, units * self.interval))


class RateLimiter:
    """Shared pacing for every worker thread: :meth:`acquire` before a request, :meth:`settle` after.

    ``clock`` and ``sleep`` are replaceable (see :class:`FakeClock`) so pacing is
    tested by counting, not by timing. ``burst_s``: seconds of budget that may
    start at once (default 1). A trial given up on (``trial_timeout``) stops waiting.

    >>> clock = FakeClock()
    >>> limiter = RateLimiter("60tpm", clock=clock, sleep=clock.sleep)
    >>> limiter.acquire(tokens=30), limiter.acquire(tokens=30), clock.now
    (0.0, 30.0, 30.0)
    """

    def __init__(
        self,
        limit: RateLimit | str,
        *,
        burst_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = cancellable_sleep,
    ):
        self.limit = RateLimit.parse(limit)
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        rpm, tpm = self.limit.requests_per_min, self.limit.tokens_per_min
        self._requests = None if rpm is None else _Schedule(rpm, burst_s)
        self._tokens = None if tpm is None else _Schedule(tpm, burst_s)
        self.started = 0  # requests let through

    def acquire(self, tokens: float = 0.0) -> float:
        """Wait for the slot of one request estimated at ``tokens``; returns the seconds waited."""
        wait = self.reserve(tokens)
        if wait > 0:
            self._sleep(wait)
        return wait

    async def aacquire(self, tokens: float = 0.0) -> float:
        """:meth:`acquire` on an asyncio loop: the wait is awaited, not slept."""
        wait = self.reserve(tokens)
        if wait > 0:
            await asyncio.sleep(wait)
        return wait

    def reserve(self, tokens: float = 0.0) -> float:
        """Take the slot of one request estimated at ``tokens`` and return how long to wait for it
        (never longer than a window); the caller waits."""
        with self._lock:
            now = self._clock()
            at = now
            if self._requests is not None:
                at = max(at, self._requests.earliest(now))
            if self._tokens is not None:
                at = max(at, self._tokens.earliest(now))
            at = min(at, now + WINDOW_S)  # no single wait longer than a window
            if self._tokens is not None:
                self._tokens.spend(at, tokens)
            if self._requests is not None:
                self._requests.spend(at, 1.0)
            self.started += 1
        return max(0.0, at - now)

    def settle(self, estimated: float, actual: float) -> None:
        """Charge the difference between a request's estimated and actual tokens (at most a window)."""
        if self._tokens is None or actual == estimated:
            return
        with self._lock:
            tokens = self._tokens
            tokens.tat += tokens.charge(min(actual, tokens.rate * WINDOW_S)) - tokens.charge(estimated)


def estimate_tokens(messages: Any) -> int:
    """A request's input tokens, estimated from its characters (4 per token).

    >>> estimate_tokens([{"role": "user", "content": "x" * 40}])
    11
    """
    chars = sum(len(str(m.get("content", ""))) for m in messages if isinstance(m, dict))
    return chars // 4 + 1


class Paced:
    """A provider whose every request waits for ``limiter`` first (everything else is the provider's).

    ``chat`` and ``chat_native`` are paced. A backend with ``paces_each_request`` (the network
    backends) waits before each request it sends, retries included; any other once per call.

    >>> clock = FakeClock()
    >>> class Echo:
    ...     def chat(self, messages):
    ...         return "ok"
    >>> paced = Paced(Echo(), RateLimiter("1rps", burst_s=0, clock=clock, sleep=clock.sleep))
    >>> [paced.chat([]) for _ in range(3)], clock.now
    (['ok', 'ok', 'ok'], 2.0)
    """

    def __init__(self, provider: Any, limiter: RateLimiter):
        self._provider, self._limiter = provider, limiter

    def __getattr__(self, name: str) -> Any:
        return getattr(self._provider, name)

    def chat(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        return self._send(self._provider.chat, messages, *args, **kwargs)

    def chat_native(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        return self._send(self._provider.chat_native, messages, *args, **kwargs)

    async def achat(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        return await self._asend("achat", self.chat, messages, *args, **kwargs)

    async def achat_native(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        return await self._asend("achat_native", self.chat_native, messages, *args, **kwargs)

    def _estimate(self, messages: Any) -> int:
        return estimate_tokens(messages) if self._limiter.limit.tokens_per_min else 0

    def _send(self, send: Callable[..., Any], messages: Any, *args: Any, **kwargs: Any) -> Any:
        estimate = self._estimate(messages)
        if getattr(self._provider, "paces_each_request", False):

            def wait() -> None:
                self._limiter.acquire(estimate)

            with pace_scope(wait):
                reply = send(messages, *args, **kwargs)
        else:
            self._limiter.acquire(estimate)
            reply = send(messages, *args, **kwargs)
        return self._settle(reply, estimate)

    async def _asend(
        self, name: str, blocking: Callable[..., Any], messages: Any, *args: Any, **kwargs: Any
    ) -> Any:
        """The awaited twin of :meth:`_send`; a provider that only blocks runs paced in a worker thread."""
        send = getattr(self._provider, name, None)
        if send is None:
            return await asyncio.to_thread(blocking, messages, *args, **kwargs)
        estimate = self._estimate(messages)
        if getattr(self._provider, "paces_each_request", False):

            async def wait() -> None:
                await self._limiter.aacquire(estimate)

            with apace_scope(wait):
                reply = await send(messages, *args, **kwargs)
        else:
            await self._limiter.aacquire(estimate)
            reply = await send(messages, *args, **kwargs)
        return self._settle(reply, estimate)

    def _settle(self, reply: Any, estimate: float) -> Any:
        """Charge the tokens the reply says it used (its own count, else an estimate)."""
        if self._limiter.limit.tokens_per_min:
            if isinstance(reply, Reply):
                reply = check_usage(reply)
            text = reply if isinstance(reply, str) else getattr(reply, "text", "")
            used_in = _count(getattr(reply, "input_tokens", None), estimate)
            used_out = _count(getattr(reply, "output_tokens", None), len(str(text)) // 4 + 1)
            self._limiter.settle(estimate, used_in + used_out)
        return reply


def _count(reported: Any, otherwise: float) -> float:
    """A reported token count, or ``otherwise`` when there is none (or it is not a number)."""
    ok = isinstance(reported, int | float) and not isinstance(reported, bool) and math.isfinite(reported)
    return float(reported) if ok else otherwise
