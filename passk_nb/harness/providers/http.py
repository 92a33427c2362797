"""What every network backend shares: its base URL and credentials, one connection pool, retries
(:mod:`passk_nb.harness.providers.retry`), and secrets kept out of every message.

:class:`RemoteProvider` is the base of the network backends (Ollama, OpenAI-compatible servers,
the Anthropic SDK): the URL and API key, the retry loop, the redaction of secrets (API keys,
passwords in URLs, bearer tokens become ``[REDACTED]`` in every error and log message).
:class:`HTTPProvider` adds JSON over HTTP through a :class:`ConnectionPool` shared by every
thread of the run, and :func:`get_field` reads a reply's fields with an error naming the one
missing.

>>> basic_credentials("user", "pass")
'dXNlcjpwYXNz'
>>> get_field({"choices": [{"message": {"content": "hi"}}]}, "choices.0.message.content", str, where="reply")
'hi'
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib.util
import json
import logging
import os
import threading
import time
import zlib
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp
import httpx

from passk_nb.data.redact import BODY_EXCERPT_CHARS, Redactor, short
from passk_nb.harness.arguments import check_seconds
from passk_nb.harness.protocol import ACTION_SCHEMA
from passk_nb.harness.providers.adaptive import AdaptiveLimit
from passk_nb.harness.providers.base import (
    BaseProvider,
    Message,
    ProviderError,
    Reply,
    cancelled,
    check_usage,
)
from passk_nb.harness.providers.retry import (
    Retrier,
    RetryPolicy,
    Transient,
    parse_retry_after,
)
from passk_nb.harness.providers.transport import (
    Limits,
    Received,
    Session,
    awaited_on_loop,
    on_loop,
    read_reply,
)
from passk_nb.harness.spec import schema_id

log = logging.getLogger("passk_nb.harness.providers")

#: A request body's JSON, as ``json.dumps(body, ensure_ascii=False)`` writes it, by one encoder (each
#: ``json.dumps`` with an option builds its own: ~1 µs a request).
_request_json = json.JSONEncoder(ensure_ascii=False).encode


#: Largest reply body read from the wire (32 MiB; ``max_body_bytes=``): a reply is a few KB.
DEFAULT_MAX_BODY_BYTES = 32 * 2**20
#: Largest reply once decompressed (128 MiB; ``max_decompressed_bytes=``): stops a gzip bomb.
DEFAULT_MAX_DECOMPRESSED_BYTES = 128 * 2**20
#: Connections a provider keeps before ``run()`` sizes its pool to the run's concurrency.
DEFAULT_POOL_SIZE = 16
#: Most connections in one httpx client of a :class:`ConnectionPool`: httpcore scans every
#: connection of its pool for each request, so one pool of 256 costs twice the CPU per request
#: of 8 pools of 32 (``benchmarks/bench_runner.py``).
STRIPE_CONNECTIONS = 32


def pool_limits(concurrency: int) -> httpx.Limits:
    """Connection-pool limits for ``concurrency`` requests in flight: one connection each, all kept alive.

    httpx's own default keeps only 20 idle connections, so above 20 in flight every
    request past the 20th would open (and then drop) a fresh connection.

    >>> pool_limits(256)
    Limits(max_connections=256, max_keepalive_connections=256, keepalive_expiry=30.0)
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"a connection pool needs a whole number of connections ≥ 1, got {concurrency!r}")
    return httpx.Limits(
        max_connections=concurrency, max_keepalive_connections=concurrency, keepalive_expiry=30.0
    )


class ConnectionPool:
    """The connections of one provider, shared by every thread: ``size`` in all, never more.

    Above :data:`STRIPE_CONNECTIONS` connections the pool is split into stripes (httpx
    clients of at most that many connections each); a request takes the stripe with
    the fewest requests in flight, so ``size`` requests in flight always find a
    connection. Each stripe keeps all of its connections alive.

    >>> pool = ConnectionPool(lambda n: httpx.Client(limits=pool_limits(n)), 100)
    >>> pool.sizes
    [25, 25, 25, 25]
    >>> with pool.client() as client:
    ...     isinstance(client, httpx.Client)
    True
    >>> pool.close()
    """

    def __init__(self, make: Callable[[int], httpx.Client], size: int):
        stripes = -(-size // STRIPE_CONNECTIONS)
        self.size = size
        self.sizes = [size // stripes + (i < size % stripes) for i in range(stripes)]
        self.clients = [make(n) for n in self.sizes]
        self._busy = [0] * stripes
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def client(self) -> Iterator[httpx.Client]:
        """The client of the least busy stripe, for one request."""
        with self._lock:
            i = min(range(len(self._busy)), key=self._busy.__getitem__)
            self._busy[i] += 1
        try:
            yield self.clients[i]
        finally:
            with self._lock:
                self._busy[i] -= 1

    def close(self) -> None:
        for client in self.clients:
            client.close()


def want_http2(http2: bool | None, base_url: str | None) -> bool:
    """Whether to offer HTTP/2: ``http2`` when given, else on for ``https://`` when ``h2`` is installed.

    HTTP/2 is negotiated during the TLS handshake (ALPN), so a server that speaks only
    HTTP/1.1 is still reached; over plain ``http://`` httpx always speaks HTTP/1.1.
    ``http2=True`` without the ``h2`` package is refused with the command that installs it.

    >>> want_http2(False, "https://api.example.com"), want_http2(None, "http://127.0.0.1:8080")
    (False, False)
    """
    if http2 is None:
        return (base_url or "").startswith("https://") and importlib.util.find_spec("h2") is not None
    if not isinstance(http2, bool):
        raise ValueError(f"http2 must be True, False or None (automatic), got {http2!r}")
    if http2 and importlib.util.find_spec("h2") is None:
        raise ValueError("http2=True needs the h2 package: pip install 'passk-nb[http2]' (or pip install h2)")
    return http2


def basic_credentials(user: str, password: str) -> str:
    """The value of ``Authorization: Basic`` for ``user`` and ``password`` (UTF-8, as httpx sends it).

    >>> basic_credentials("ann", "s3cret")
    'YW5uOnMzY3JldA=='
    """
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def _normalise_url(url: str) -> tuple[str, tuple[str, str] | None, list[str]]:
    """``(url without credentials or trailing slash, (user, password) from them, the secrets in them)``.

    The secrets are the password and the ``Basic`` header value built from the
    credentials, so that both are masked wherever they might be echoed.
    """
    url = url.strip()
    if "://" not in url:
        raise ValueError(f"base URL {Redactor()(url)!r} has no scheme; write it as http://{Redactor()(url)}")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"base URL {Redactor()(url)!r} must start with http:// or https://")
    if not parts.hostname:
        raise ValueError(f"base_url {Redactor()(url)!r} has no host; expected e.g. http://127.0.0.1:8080")
    auth, secrets = None, []
    if parts.username or parts.password:
        user, password = unquote(parts.username or ""), unquote(parts.password or "")
        auth = (user, password)
        secrets = [password, parts.password or "", basic_credentials(user, password)]
    netloc = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    if parts.port:
        netloc += f":{parts.port}"
    clean = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    return clean, auth, secrets


class _TransportErrors(contextlib.AbstractContextManager[None]):
    """The transport's failures as the retrier's: a timeout or a dropped connection is
    :class:`Transient`, a bad base URL a :class:`ProviderError`. A class, not a ``@contextmanager``
    generator, which cost several times the CPU on every request."""

    def __init__(self, where: str, timeout: float):
        self.where, self.timeout = where, timeout

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        where = self.where
        if isinstance(exc, TimeoutError):
            raise Transient("timeout", f"{where}: no reply within {self.timeout:g} s") from None
        if isinstance(exc, aiohttp.InvalidURL | aiohttp.NonHttpUrlClientError):  # a bad base URL
            raise ProviderError(f"{where}: {type(exc).__name__}: {exc}") from None
        if isinstance(exc, aiohttp.ClientError | OSError | zlib.error):
            raise Transient("connection error", f"{where}: {type(exc).__name__}: {exc}") from None


class RemoteProvider(BaseProvider):
    """Base of the network backends: base URL, API key from the environment, retries, redaction.

    Options every network backend takes (besides ``temperature``, ``seed``,
    ``base_url``, ``json_mode``):

    - ``json_schema``: with ``json_mode``, constrain replies to a JSON Schema rather
      than to any JSON object, where the backend supports it (Ollama ``format``, an
      OpenAI-compatible llama.cpp server's ``response_format.schema``): True for the
      generic action protocol (:data:`passk_nb.harness.protocol.ACTION_SCHEMA`), or a
      schema dict (``run(json_mode="schema")`` sends the suite's own,
      :meth:`~passk_nb.harness.suites.base.Suite.action_schema`, whose hash is recorded);
      format errors then all but vanish from what is measured;
    - ``max_tokens``: longest reply (Ollama ``num_predict``), default 1024;
    - ``timeout``: seconds a request may take in all, the whole reply included
      (default 120; also the longest wait for any single read);
    - ``max_attempts``, ``backoff_base``, ``backoff_max``, ``retry_after_max``:
      see :class:`RetryPolicy`;
    - ``api_key_env``: the environment variable holding the API key (default:
      the backend's, e.g. ``OPENAI_API_KEY``; None: send none). The key is
      read once, sent only in a header, and masked in every message;
    - ``max_body_bytes`` (default 32 MiB) and ``max_decompressed_bytes`` (default
      128 MiB) cap the reply on the wire and once decompressed; a larger reply fails
      the request (not retried). Redirects are not followed: a 3xx says where it points.

    The base URL is ``base_url``, else the class's environment variable
    (``base_url_env``), else ``default_base_url``. Credentials in the URL
    (``http://user:pass@host``) become basic auth and never reach a record; with
    a backend that sends its key as ``Authorization`` too, a key *and* URL
    credentials are refused (only one of them could be sent).

    Every secret the provider knows (the key, the URL's password and ``Basic``
    value) is masked in errors, logs and in the model's own replies (text, tool
    calls, metadata), so a server that echoes a header cannot put it in a record.
    Token counts no model can produce (above :data:`MAX_USAGE_TOKENS`) are kept
    as unknown, with a note in ``provider_meta``.
    """

    default_base_url: ClassVar[str] = "http://127.0.0.1"
    base_url_env: ClassVar[str | None] = None
    default_api_key_env: ClassVar[str | None] = None
    #: The header the API key goes in (``Authorization: Bearer``, or e.g. ``x-api-key``).
    key_header: ClassVar[str] = "authorization"
    paces_each_request = True

    def __init__(
        self,
        model: str | None = None,
        *,
        temperature: float | None = None,
        seed: int | None = None,
        base_url: str | None = None,
        json_mode: bool = False,
        json_schema: bool | dict[str, Any] = False,
        max_tokens: int = 1024,
        timeout: float = 120.0,
        max_attempts: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        retry_after_max: float = 120.0,
        api_key_env: str | None = "",
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    ):
        if not model:
            raise ValueError(f"the {self.name} provider needs a model name (model=... / --model)")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be a whole number ≥ 1, got {max_tokens!r}")
        check_seconds("timeout", timeout, allow_none=False)
        from_env = os.environ.get(self.base_url_env) if self.base_url_env else None
        if from_env and "://" not in from_env:  # OLLAMA_HOST is often host:port
            from_env = "http://" + from_env.strip()
        url = base_url or from_env or self.default_base_url
        clean_url, self._credentials, url_secrets = _normalise_url(url)
        super().__init__(model, temperature=temperature, seed=seed, base_url=clean_url, json_mode=json_mode)
        if json_schema and not json_mode:
            raise ValueError("json_schema=True constrains JSON mode: pass json_mode=True too")
        if not isinstance(json_schema, bool | dict):
            raise ValueError(f"json_schema must be True, False or a JSON Schema dict, got {json_schema!r}")
        self.json_schema = json_schema
        self.max_tokens = max_tokens
        self.timeout = float(timeout)
        self.api_key_env = self.default_api_key_env if api_key_env == "" else api_key_env
        api_key = os.environ.get(self.api_key_env) if self.api_key_env else None
        self._api_key = api_key or None
        if self._api_key and self._credentials and self.key_header == "authorization":
            raise ValueError(
                f"the base URL has credentials (sent as Authorization: Basic) and ${self.api_key_env} "
                f"is set (sent as Authorization: Bearer): only one can be sent. Remove the credentials "
                f"from the URL, or (where the {self.name} backend needs no key) unset "
                f"${self.api_key_env} or pass api_key_env=None"
            )
        for name, value in (
            ("max_body_bytes", max_body_bytes),
            ("max_decompressed_bytes", max_decompressed_bytes),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number of bytes ≥ 1, got {value!r}")
        self.max_body_bytes, self.max_decompressed_bytes = max_body_bytes, max_decompressed_bytes
        self.redact = Redactor([api_key, *url_secrets])
        self.retry_policy = RetryPolicy(
            max_attempts=max_attempts,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            retry_after_max=retry_after_max,
        )
        self.retrier = Retrier(
            self.retry_policy,
            redact=self.redact,
            label=f"{self.name}/{self.model}",
            seed=f"{self.name}:{self.model}",
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    def adapt_concurrency(self, ceiling: int) -> AdaptiveLimit:
        """One AIMD limit for this provider and its ``with_seed`` copies (they share the retrier)."""
        if self.retrier.adaptive is None:
            self.retrier.adaptive = AdaptiveLimit(ceiling)
        else:
            self.retrier.adaptive.set_ceiling(ceiling)
        return self.retrier.adaptive

    def send(self, request: Callable[[], Reply]) -> Reply:
        """``request()`` with retries (each attempt paced), then the reply as the model's: known
        secrets masked in its text, calls and metadata, impossible token counts unknown."""
        return self._as_models(*self.retrier.call(request))

    async def asend(self, request: Callable[[], Awaitable[Reply]]) -> Reply:
        """:meth:`send` on an asyncio loop (:meth:`Retrier.acall`)."""
        return self._as_models(*await self.retrier.acall(request))

    def _as_models(self, reply: Reply, attempts: int) -> Reply:
        reply = check_usage(self.redact.known(reply))
        reply.attempts = attempts
        return reply

    def excerpt(self, text: str, limit: int = BODY_EXCERPT_CHARS) -> str:
        """``text`` on one line with secrets masked, then cut (masked first: no half secret survives)."""
        return short(self.redact(text), limit)

    def read_body(self, response: Any, where: str, deadline: float) -> bytes:
        """The reply body, read chunk by chunk within the request's deadline and the size caps.

        Reading stops when the trial was given up on (``trial_timeout``), when
        the whole reply takes longer than ``timeout`` seconds (a server that
        trickles one byte at a time), or when the body on the wire or
        decompressed grows past ``max_body_bytes`` / ``max_decompressed_bytes``.
        ``response`` is an httpx response, or one of the same API (the Anthropic SDK's).
        """
        return b"".join(self.iter_body(response, where, deadline))

    def iter_body(self, response: Any, where: str, deadline: float) -> Iterator[bytes]:
        """The reply body chunk by chunk, each checked as :meth:`read_body` checks it (a body too
        large to hold whole, such as a batch's results, is read this way)."""
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if cancelled():
                raise ProviderError(
                    f"{where}: the trial was given up on (trial_timeout); reply no longer read"
                )
            if time.monotonic() > deadline:
                raise self.too_slow(where, size)
            if response.num_bytes_downloaded > self.max_body_bytes:
                raise self.too_big(where, response.status_code)
            if size > self.max_decompressed_bytes:
                raise self.too_big_inflated(where, response.status_code, response.num_bytes_downloaded)
            yield chunk

    def too_slow(self, where: str, size: int) -> Transient:
        return Transient(
            "timeout",
            f"{where}: the reply was not complete within {self.timeout:g} s "
            f"({size} bytes so far: the server sends it too slowly)",
        )

    def too_big(self, where: str, status: int) -> ProviderError:
        return ProviderError(
            f"reply to {where} is larger than max_body_bytes={self.max_body_bytes} (HTTP "
            f"{status}); not read further. Raise max_body_bytes= if it is genuine"
        )

    def too_big_inflated(self, where: str, status: int, wire: int) -> ProviderError:
        return ProviderError(
            f"reply to {where} decompresses to more than max_decompressed_bytes="
            f"{self.max_decompressed_bytes} (HTTP {status}, {wire} bytes on the wire); not read further"
        )

    def check_reply(self, response: Any, raw: bytes, where: str) -> str:
        """The text of a 2xx reply with a body; otherwise the failure, classified for the retry loop.

        429 and 5xx are :class:`Transient` (429 pauses the whole provider); other 4xx, a
        redirect (not followed) and an empty body are :class:`ProviderError`.
        """
        status = response.status_code
        text = raw.decode(response.encoding or "utf-8", errors="replace")
        if status == 429 or status >= 500:
            raise Transient(
                f"HTTP {status}",
                self.excerpt(text),
                retry_after=parse_retry_after(response.headers.get("retry-after")),
                pause_all=status == 429,
            )
        if status >= 400:
            raise ProviderError(f"HTTP {status} (not retried) from {where}: {self.excerpt(text)}")
        if 300 <= status < 400:
            location = self.excerpt(response.headers.get("location", "(no Location header)"), 200)
            raise ProviderError(
                f"HTTP {status} redirect from {where} to {location}, not followed: set base_url to "
                "the address the server points to"
            )
        kind = response.headers.get("content-type", "no content type")
        if not raw.strip():
            raise ProviderError(
                f"reply to {where} is empty (HTTP {status}, {self.excerpt(kind, 80)}): the server "
                "answered without a body"
            )
        return text

    async def _apost_once(self, session: Session, path: str, body: dict[str, Any]) -> dict[str, Any]:
        where = f"POST {path}"
        self._refuse_if_cancelled(where)
        with self._transport_errors(where):
            response, raw = await awaited_on_loop(self._read(session, path, body, where))
        return self._decode(response, raw, where)

    @staticmethod
    def _refuse_if_cancelled(where: str) -> None:
        if cancelled():
            raise ProviderError(f"{where}: the trial was given up on (trial_timeout); request not sent")

    def _read(
        self, session: Session, path: str, body: dict[str, Any], where: str
    ) -> Coroutine[Any, Any, tuple[Received, bytes]]:
        """The request as a coroutine for the transport loop, within the deadline and size caps."""
        limits = Limits(
            deadline=self.timeout,
            wire=self.max_body_bytes,
            body=self.max_decompressed_bytes,
            too_slow=lambda size: self.too_slow(where, size),
            too_big=lambda status: self.too_big(where, status),
            too_big_inflated=lambda status, wire: self.too_big_inflated(where, status, wire),
        )
        payload = _request_json(body).encode()
        return read_reply(session, f"{self.base_url}{path}", payload, limits)

    def _transport_errors(self, where: str) -> _TransportErrors:
        """The transport's failures as the retrier's (:class:`_TransportErrors`)."""
        return _TransportErrors(where, self.timeout)

    def read_httpx(
        self,
        client: httpx.Client,
        method: str,
        path: str,
        where: str,
        *,
        stream_to: Callable[[bytes], None] | None = None,
        **send: Any,
    ) -> tuple[Any, bytes]:
        """``method path`` through an httpx ``client``, its reply read whole within the deadline and
        caps (:meth:`read_body`); httpx's failures as the retrier's (a bad base URL is not retried).
        ``stream_to``: a 2xx reply's body goes to it chunk by chunk instead (``raw`` is then empty)."""
        deadline = time.monotonic() + self.timeout
        try:
            with client.stream(method, path, **send) as response:
                if stream_to is not None and 200 <= response.status_code < 300:
                    for chunk in self.iter_body(response, where, deadline):
                        stream_to(chunk)
                    raw = b""
                else:
                    raw = self.read_body(response, where, deadline)
        except httpx.TimeoutException:
            raise Transient("timeout", f"{where}: no reply within {self.timeout:g} s") from None
        except httpx.UnsupportedProtocol as exc:  # a bad base URL: retrying cannot help
            raise ProviderError(f"{where}: {exc}") from None
        except (httpx.TransportError, httpx.DecodingError) as exc:
            raise Transient("connection error", f"{where}: {type(exc).__name__}: {exc}") from None
        return response, raw

    def _decode(self, response: Any, raw: bytes, where: str) -> dict[str, Any]:
        """The reply's JSON object, once its status and size are checked."""
        text = self.check_reply(response, raw, where)
        status, kind = response.status_code, response.headers.get("content-type", "no content type")
        try:
            data = json.loads(raw)
        except ValueError:
            raise ProviderError(
                f"reply to {where} (HTTP {status}, {self.excerpt(kind, 80)}) is not JSON: "
                f"{self.excerpt(text, 120)!r}"
            ) from None
        if not isinstance(data, dict):
            raise ProviderError(
                f"reply to {where} (HTTP {status}) is not a JSON object: {self.excerpt(text, 120)!r}"
            )
        return data

    def output_constraint(self) -> str:
        return "schema" if self.json_schema else super().output_constraint()

    def meta(self) -> dict[str, Any]:
        """Settings that change what is measured or how hard the backend was tried."""
        return {
            "max_tokens": self.max_tokens,
            "timeout_s": self.timeout,
            "max_attempts": self.retry_policy.max_attempts,
            **({"json_schema": schema_id(self.json_schema)} if self.json_schema else {}),
        }


def action_schema(json_schema: bool | dict[str, Any]) -> dict[str, Any]:
    """The schema to send: the given one, or the generic :data:`~passk_nb.harness.protocol.ACTION_SCHEMA`."""
    return json_schema if isinstance(json_schema, dict) else ACTION_SCHEMA


class HTTPProvider(RemoteProvider):
    """A :class:`RemoteProvider` that speaks JSON over HTTP through one shared connection pool.

    Subclasses set ``path``, build the request body (:meth:`request_body`) and
    read the reply (:meth:`read_reply`); :meth:`post_reply` does the request,
    the classification of failures and the retries.

    One connection pool (:class:`ConnectionPool`: httpx clients of at most 32
    connections each) serves the provider and all its ``with_seed`` copies, from every
    worker thread. ``run()`` sizes it to the run's concurrency (:meth:`size_pool`): one
    kept-alive connection per trial in flight, never more in all.
    ``max_connections`` fixes the size instead (e.g. below the concurrency, for a
    server that accepts few connections). ``http2``: offer HTTP/2 (see :func:`want_http2`;
    default: on for ``https://`` when the ``h2`` package is installed).
    """

    path: str = "/"

    def request_body(self, messages: list[Message]) -> dict[str, Any]:
        raise NotImplementedError

    @staticmethod
    def read_reply(data: dict[str, Any]) -> Reply:
        raise NotImplementedError

    def native_body(self, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        raise NotImplementedError

    @staticmethod
    def read_native_reply(data: dict[str, Any]) -> Reply:
        raise NotImplementedError

    def chat(self, messages: list[Message]) -> Reply:
        return self.post_reply(self.path, self.request_body(messages), self.read_reply)

    def chat_native(self, messages: list[Message], tools: list[dict[str, Any]]) -> Reply:
        """One reply with ``tools`` offered; its ``tool_calls`` in ``Reply.tool_calls``."""
        return self.post_reply(self.path, self.native_body(messages, tools), self.read_native_reply)

    async def achat(self, messages: list[Message]) -> Reply:
        """:meth:`chat` awaited on the transport loop (the asyncio runner's path)."""
        return await self.apost_reply(self.path, self.request_body(messages), self.read_reply)

    async def achat_native(self, messages: list[Message], tools: list[dict[str, Any]]) -> Reply:
        """:meth:`chat_native` awaited on the transport loop."""
        return await self.apost_reply(self.path, self.native_body(messages, tools), self.read_native_reply)

    def __init__(
        self,
        model: str | None = None,
        *,
        max_connections: int | None = None,
        http2: bool | None = None,
        **options: Any,
    ):
        super().__init__(model, **options)
        if max_connections is not None:
            pool_limits(max_connections)  # checks it
        self.max_connections = max_connections
        self.http2 = want_http2(http2, self.base_url)
        self._retired: list[ConnectionPool | Session] = []
        self._pool = self._make_pool(max_connections or DEFAULT_POOL_SIZE)

    @property
    def speaks_asyncio(self) -> bool:  # type: ignore[override]  # a class constant elsewhere
        """HTTP/1.1 (the aiohttp session on the transport loop) does; HTTP/2 (httpx) blocks."""
        return isinstance(self._pool, Session)

    @property
    def pool_size(self) -> int:
        """Connections the shared pool holds at most (its size)."""
        return self._pool.size

    def _make_pool(self, size: int) -> ConnectionPool | Session:
        """HTTP/1.1: an aiohttp session on the transport loop (:mod:`.transport`, the fastest
        client measured); HTTP/2, which aiohttp does not speak: httpx clients."""
        if self.http2:
            return ConnectionPool(self._make_client, size)
        headers = self._bearer()
        if self._credentials:
            headers["Authorization"] = "Basic " + basic_credentials(*self._credentials)
        return Session(size, timeout=self.timeout, headers=headers, base_url=self.base_url)

    def _bearer(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def _make_client(self, size: int) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url or "",
            auth=httpx.BasicAuth(*self._credentials) if self._credentials else None,
            headers=self._bearer(),
            timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)),
            follow_redirects=False,
            limits=pool_limits(size),
            http2=self.http2,
        )

    def size_pool(self, concurrency: int) -> None:
        """Make the shared pool hold ``concurrency`` connections (unless ``max_connections`` fixed it).

        Called by ``run()`` before the first trial. The pool only grows; a replaced
        pool is closed with the provider, so requests still using it finish.
        """
        if self.max_connections is None and concurrency > self.pool_size:
            self._retired.append(self._pool)
            self._pool = self._make_pool(concurrency)

    def reopen_pool(self, concurrency: int) -> None:
        # the parent's, on its loop: kept (dropped, aiohttp would warn of them) and never closed here
        self._parents = [*self._retired, self._pool]
        self._retired = []
        self._pool = self._make_pool(self.max_connections or concurrency)

    def close(self) -> None:
        """Close the HTTP connections (the provider is unusable afterwards)."""
        for pool in [*self._retired, self._pool]:
            pool.close()

    def _post_once(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        where = f"POST {path}"
        self._refuse_if_cancelled(where)
        if isinstance(self._pool, Session):
            session = self._pool
            with self._transport_errors(where):
                response, raw = on_loop(self._read(session, path, body, where), where=where)
        else:
            with self._pool.client() as client:
                response, raw = self.read_httpx(client, "POST", path, where, json=body)
        return self._decode(response, raw, where)

    def post_reply(self, path: str, body: dict[str, Any], read: Callable[[dict[str, Any]], Reply]) -> Reply:
        """POST ``body`` to ``base_url + path`` with retries: ``read(reply as a dict)``, with the
        number of attempts made in its ``attempts``.

        A :class:`ProviderError` from ``read`` (a missing field) is not retried
        and carries the number of attempts made.
        """
        return self.send(lambda: read(self._post_once(path, body)))

    async def apost_reply(
        self, path: str, body: dict[str, Any], read: Callable[[dict[str, Any]], Reply]
    ) -> Reply:
        """:meth:`post_reply` awaited: the same request, checks, caps and retries, every wait
        awaited. HTTP/2 (httpx's pool, which blocks) runs in a worker thread."""
        session = self._pool
        if not isinstance(session, Session):
            return await asyncio.to_thread(self.post_reply, path, body, read)

        async def attempt() -> Reply:
            return read(await self._apost_once(session, path, body))

        return await self.asend(attempt)


def get_field(data: Any, path: str, kind: type, *, where: str) -> Any:
    """``data[a][b]...`` for ``path`` "a.b..." (numbers index lists); a ProviderError naming what is missing.

    >>> get_field({"message": {"content": "hi"}}, "message.content", str, where="Ollama reply")
    'hi'
    >>> get_field({"message": {}}, "message.content", str, where="Ollama reply")
    Traceback (most recent call last):
    ...
    passk_nb.harness.providers.base.ProviderError: Ollama reply has no message.content (a str)
    """
    value = data
    for key in path.split("."):
        try:
            value = value[int(key)] if isinstance(value, list) else value[key]
        except (KeyError, IndexError, TypeError, ValueError):
            value = None
            break
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise ProviderError(f"{where} has no {path} (a {kind.__name__})")
    return value


def get_count(data: Any, path: str) -> int | None:
    """An optional token count at ``path``, or None when absent.

    >>> get_count({"usage": {"prompt_tokens": 12}}, "usage.prompt_tokens"), get_count({}, "usage.x")
    (12, None)
    """
    try:
        return get_field(data, path, int, where="reply")
    except ProviderError:
        return None
