"""The network backends' HTTP transport: aiohttp sessions on one asyncio loop in a background thread.

Each request of a trial's thread is a coroutine submitted to the loop (:func:`on_loop`), so the
connections, their keep-alive and the reading of replies cost the CPU of an asyncio client, not
of a thread-per-request client: measured by ``python benchmarks/bench_runner.py --floor``
against a minimal server, about a third of the CPU per request of threads with ``httpx.Client``
(docs/benchmarks.md). One loop serves every provider of the process; each provider holds one
:class:`Session` (aiohttp's connection pool, sized to the run's concurrency). The loop uses
uvloop when it is installed.

A reply is read chunk by chunk within the request's deadline and both size caps
(:func:`read_reply`): the body on the wire and, decompressed here rather than by aiohttp, the
body it inflates to, so that neither a trickling server, an endless body nor a gzip bomb can hold
a trial or its memory. A trial given up on (``trial_timeout``) cancels its request, which closes
the connection.

>>> session = Session(4, timeout=5.0)
>>> session.size
4
>>> session.close()
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import urllib.request
import zlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import aiohttp
from multidict import CIMultiDict

from passk_nb.harness.providers.base import ProviderError, cancel_event

T = TypeVar("T")
#: How often a trial's thread looks whether its trial was given up on while the loop works.
CANCEL_POLL_S = 0.5

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def new_loop() -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's where it is installed, else asyncio's own."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def shared_loop() -> asyncio.AbstractEventLoop:
    """The process's transport loop, started on first use in a daemon thread (uvloop if installed)."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            loop = new_loop()
            threading.Thread(target=loop.run_forever, name="passk-http", daemon=True).start()
            _loop = loop
        return _loop


def use_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Make ``loop`` the process's transport loop: in a worker process forked from a run
    (:mod:`~passk_nb.harness.loop_workers`), which runs its own loop on its main thread, in place
    of the parent's (whose thread was not forked)."""
    global _loop, _loop_lock
    _loop, _loop_lock = loop, threading.Lock()  # a lock the parent's thread held at the fork is dropped


def on_loop(coroutine: Coroutine[Any, Any, T], *, where: str = "request") -> T:
    """Run ``coroutine`` on the transport loop and wait for it in this thread; cancel it (and raise
    :class:`ProviderError`) as soon as the trial running here is given up on."""
    future = asyncio.run_coroutine_threadsafe(coroutine, shared_loop())
    event = cancel_event()
    if event is None:
        return future.result()
    while not concurrent.futures.wait([future], timeout=CANCEL_POLL_S).done:
        if event.is_set():  # (the coroutine's own TimeoutError is a TimeoutError too: not this way)
            future.cancel()
            raise ProviderError(f"{where}: the trial was given up on (trial_timeout); reply no longer read")
    return future.result()


async def awaited_on_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """Await ``coroutine`` on the transport loop from a task on any loop: directly when the task runs
    there (the asyncio runner), else through the loop's thread. Cancelling the task cancels it."""
    if asyncio.get_running_loop() is _loop:  # the runner's tasks, each request: no lock taken
        return await coroutine
    loop = shared_loop()
    if asyncio.get_running_loop() is loop:
        return await coroutine
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, loop))


class Session:
    """One aiohttp client session on the transport loop: ``size`` connections, all kept alive.

    Redirects are never followed, compressed replies reach :func:`read_reply` as they are on the
    wire, and the environment's proxy for ``base_url`` (``HTTP(S)_PROXY`` unless ``NO_PROXY``
    names the host) is read once here: aiohttp's ``trust_env`` would read it again for every
    request, which measured 0.6 ms of CPU each.
    """

    def __init__(
        self,
        size: int,
        *,
        timeout: float,
        headers: dict[str, str] | None = None,
        base_url: str | None = None,
    ):
        self.size = size
        self.proxy = env_proxy(base_url)

        async def make() -> aiohttp.ClientSession:
            connector = aiohttp.TCPConnector(limit=size, limit_per_host=0, keepalive_timeout=30.0)
            return aiohttp.ClientSession(
                connector=connector,
                headers={"Accept-Encoding": "gzip, deflate", **(headers or {})},
                auto_decompress=False,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=min(timeout, 10.0), sock_read=timeout),
            )

        self.session = on_loop(make())

    def close(self) -> None:
        if not self.session.closed:
            on_loop(self.session.close())


def env_proxy(url: str | None) -> str | None:
    """The proxy the environment names for ``url``: ``HTTPS_PROXY``/``HTTP_PROXY`` (any case) by its
    scheme, None when there is none or ``NO_PROXY`` names its host.

    >>> env_proxy(None) is None
    True
    """
    if not url:
        return None
    parts = urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return urllib.request.getproxies().get(parts.scheme)


@dataclass(frozen=True)
class Received:
    """What the reply said besides its body, in the shape the providers read (httpx's names)."""

    status_code: int
    headers: CIMultiDict[str]
    encoding: str | None


@dataclass(frozen=True)
class Limits:
    """What one reply may cost: ``deadline`` seconds in all, ``wire`` bytes read, ``body`` bytes
    once decompressed; ``too_slow(size)``, ``too_big(status)``, ``too_big_inflated(status, wire)``
    build the errors (the provider's wording, shared with its other transports)."""

    deadline: float
    wire: int
    body: int
    too_slow: Callable[[int], Exception]
    too_big: Callable[[int], Exception]
    too_big_inflated: Callable[[int, int], Exception]


async def read_reply(session: Session, url: str, payload: bytes, limits: Limits) -> tuple[Received, bytes]:
    """POST ``payload`` (JSON) to ``url`` and read the whole reply within ``limits``.

    A timeout raises :class:`TimeoutError` when nothing came back and ``limits.too_slow`` when
    part of the body did; aiohttp's own errors pass through (the caller classifies them).
    """
    wire = size = 0
    try:
        async with asyncio.timeout(limits.deadline):
            async with session.session.post(
                url,
                data=payload,
                headers={"Content-Type": "application/json"},
                allow_redirects=False,
                proxy=session.proxy,
            ) as response:
                inflate = _inflater(response.headers.get("Content-Encoding", ""))
                parts: list[bytes] = []
                async for chunk in response.content.iter_any():
                    wire += len(chunk)
                    if wire > limits.wire:
                        raise limits.too_big(response.status)
                    data = inflate(chunk, limits.body - size + 1)
                    size += len(data)
                    parts.append(data)
                    if size > limits.body:
                        raise limits.too_big_inflated(response.status, wire)
                received = Received(response.status, CIMultiDict(response.headers), response.charset)
    except TimeoutError:
        if wire:
            raise limits.too_slow(size) from None
        raise
    return received, b"".join(parts)


def _inflater(encoding: str) -> Callable[[bytes, int], bytes]:
    """``inflate(chunk, at_most)`` for a ``Content-Encoding`` of gzip, deflate or none; a bomb stops
    at ``at_most`` bytes of output per chunk (the caller refuses the reply once past its cap)."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return lambda chunk, at_most: chunk
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise zlib.error(f"unsupported Content-Encoding {encoding!r}")
    state: dict[str, Any] = {"d": zlib.decompressobj(16 + zlib.MAX_WBITS if "gzip" in encoding else 0)}

    def inflate(chunk: bytes, at_most: int) -> bytes:
        decoder = state["d"]
        try:
            return decoder.decompress(chunk, max(1, at_most))
        except zlib.error:
            if encoding != "deflate" or state.get("raw"):
                raise
            state["d"], state["raw"] = zlib.decompressobj(-zlib.MAX_WBITS), True  # a raw deflate body
            return state["d"].decompress(chunk, max(1, at_most))

    return inflate
