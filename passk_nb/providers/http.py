"""What every network backend shares: retries with backoff, a provider-wide rate-limit pause, and secrets.

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
  <short body>"``; the runner turns it into an ``infra_error`` row;
- secrets (API keys, passwords in URLs, bearer tokens) are replaced by
  ``[REDACTED]`` in every error and log message.

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

import datetime as dt
import email.utils
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx

from passk_nb.providers.base import BaseProvider, Message, ProviderError, Reply

__all__ = [
    "REDACTED",
    "Redactor",
    "RetryPolicy",
    "Transient",
    "Retrier",
    "parse_retry_after",
    "provider_error",
    "short",
    "RemoteProvider",
    "HTTPProvider",
    "get_field",
    "get_count",
]

log = logging.getLogger("passk_nb.providers")
T = TypeVar("T")

REDACTED = "[REDACTED]"
#: Longest piece of a server's reply quoted in an error message.
BODY_EXCERPT_CHARS = 300


class Redactor:
    """Replaces known secrets, and anything shaped like a credential, with ``[REDACTED]``.

    Known secrets are the exact strings given (an API key, a URL password).
    On top, bearer tokens, ``x-api-key: ...``/``api_key=...`` pairs and
    ``sk-...`` keys are masked, so a server that echoes a header back cannot
    leak it through an error message. The repr never shows a secret.

    >>> redact = Redactor(["s3cr3t-value"])
    >>> redact("bad key s3cr3t-value; Authorization: Bearer abc.def")
    'bad key [REDACTED]; Authorization: Bearer [REDACTED]'
    >>> redact
    Redactor(1 secret)
    """

    _PATTERNS: ClassVar[tuple[re.Pattern[str], ...]] = (
        re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]+"),
        re.compile(
            r"(?i)(\b(?:x-api-key|api[_-]?key|authorization)[\"']?\s*[:=]\s*[\"']?)(?!bearer\s)[^\s\"',;}]+"
        ),
        re.compile(r"()\bsk-[A-Za-z0-9_-]{8,}"),
    )

    def __init__(self, secrets: Iterable[str | None] = ()):
        # Longest first, so a secret that contains another is masked whole.
        self._secrets = tuple(sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True))

    def __call__(self, text: object) -> str:
        out = str(text)
        for secret in self._secrets:
            out = out.replace(secret, REDACTED)
        for pattern in self._PATTERNS:
            out = pattern.sub(lambda m: m.group(1) + REDACTED, out)
        return out

    def __repr__(self) -> str:
        n = len(self._secrets)
        return f"Redactor({n} secret{'' if n == 1 else 's'})"


def short(text: str, limit: int = BODY_EXCERPT_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters.

    >>> short("a\\n b " * 3, limit=8)
    'a b a b…'
    """
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit].rstrip() + "…"


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
            if not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{name} must be a number ≥ 0, got {value!r}")

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


class Retrier:
    """Runs a request with retries (see :class:`RetryPolicy`) and returns ``(result, attempts)``.

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

    def _pause(self, seconds: float) -> None:
        with self._lock:
            self._paused_until = max(self._paused_until, time.monotonic() + seconds)

    def _wait_for_pause(self) -> None:
        while True:
            with self._lock:
                remaining = self._paused_until - time.monotonic()
            if remaining <= 0:
                return
            time.sleep(remaining)

    def call(self, request: Callable[[], T]) -> tuple[T, int]:
        """Run ``request`` until it succeeds, fails for good, or the attempts are used up."""
        attempts = self.policy.max_attempts
        for attempt in range(1, attempts + 1):
            self._wait_for_pause()
            try:
                return request(), attempt
            except ProviderError as exc:
                raise provider_error(self.redact(exc), attempt) from None
            except Transient as exc:
                kind, detail = self.redact(exc.kind), self.redact(exc.detail)
                if attempt == attempts:
                    plural = "attempt" if attempts == 1 else "attempts"
                    message = f"{kind} after {attempts} {plural}" + (f": {detail}" if detail else "")
                    raise provider_error(message, attempt) from None
                with self._lock:
                    wait = self.policy.delay(attempt, self._rng, exc.retry_after)
                if exc.pause_all or exc.retry_after is not None:
                    self._pause(wait)
                log.warning(
                    "%s: %s (attempt %d of %d); retrying in %.2f s",
                    self.label,
                    short(f"{kind}: {detail}" if detail else kind, 200),
                    attempt,
                    attempts,
                    wait,
                )
                time.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover


def _normalise_url(url: str) -> tuple[str, httpx.BasicAuth | None, str | None]:
    """``(url without credentials or trailing slash, basic auth from them, the password)``."""
    url = url.strip()
    if "://" not in url:
        raise ValueError(f"base URL {Redactor()(url)!r} has no scheme; write it as http://{Redactor()(url)}")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"base URL {Redactor()(url)!r} must start with http:// or https://")
    if not parts.hostname:
        raise ValueError(f"base_url {Redactor()(url)!r} has no host; expected e.g. http://127.0.0.1:8080")
    auth = password = None
    if parts.username or parts.password:
        password = parts.password
        auth = httpx.BasicAuth(parts.username or "", parts.password or "")
    netloc = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    if parts.port:
        netloc += f":{parts.port}"
    clean = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    return clean, auth, password


class RemoteProvider(BaseProvider):
    """Base of the network backends: base URL, API key from the environment, retries, redaction.

    Options every network backend takes (besides ``temperature``, ``seed``,
    ``base_url``, ``json_mode``):

    - ``json_schema``: with ``json_mode``, constrain replies to the action
      protocol's JSON Schema (:data:`passk_nb.protocol.ACTION_SCHEMA`) rather
      than to any JSON object, where the backend supports it (Ollama, llama.cpp);
      format errors then all but vanish from what is measured;
    - ``max_tokens``: longest reply (Ollama ``num_predict``), default 1024;
    - ``timeout``: seconds to wait for a reply, per request (default 120);
    - ``max_attempts``, ``backoff_base``, ``backoff_max``, ``retry_after_max``:
      see :class:`RetryPolicy`;
    - ``api_key_env``: the environment variable holding the API key (default:
      the backend's, e.g. ``OPENAI_API_KEY``; None: send none). The key is
      read once, sent only in a header, and masked in every message.

    The base URL is ``base_url``, else the class's environment variable
    (``base_url_env``), else ``default_base_url``. Credentials in the URL
    (``http://user:pass@host``) become basic auth and never reach a record.
    """

    default_base_url: ClassVar[str] = "http://127.0.0.1"
    base_url_env: ClassVar[str | None] = None
    default_api_key_env: ClassVar[str | None] = None

    def __init__(
        self,
        model: str | None = None,
        *,
        temperature: float | None = None,
        seed: int | None = None,
        base_url: str | None = None,
        json_mode: bool = False,
        json_schema: bool = False,
        max_tokens: int = 1024,
        timeout: float = 120.0,
        max_attempts: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        retry_after_max: float = 120.0,
        api_key_env: str | None = "",
    ):
        if not model:
            raise ValueError(f"the {self.name} provider needs a model name (model=... / --model)")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be a whole number ≥ 1, got {max_tokens!r}")
        if not isinstance(timeout, int | float) or timeout <= 0:
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        from_env = os.environ.get(self.base_url_env) if self.base_url_env else None
        if from_env and "://" not in from_env:  # OLLAMA_HOST is often host:port
            from_env = "http://" + from_env.strip()
        url = base_url or from_env or self.default_base_url
        clean_url, self._auth, password = _normalise_url(url)
        super().__init__(model, temperature=temperature, seed=seed, base_url=clean_url, json_mode=json_mode)
        if json_schema and not json_mode:
            raise ValueError("json_schema=True constrains JSON mode: pass json_mode=True too")
        self.json_schema = json_schema
        self.max_tokens = max_tokens
        self.timeout = float(timeout)
        self.api_key_env = self.default_api_key_env if api_key_env == "" else api_key_env
        api_key = os.environ.get(self.api_key_env) if self.api_key_env else None
        self._api_key = api_key or None
        self.redact = Redactor([api_key, password])
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

    def excerpt(self, text: str, limit: int = BODY_EXCERPT_CHARS) -> str:
        """``text`` on one line with secrets masked, then cut (masked first: no half secret survives)."""
        return short(self.redact(text), limit)

    def meta(self) -> dict[str, Any]:
        """Settings that change what is measured or how hard the backend was tried."""
        return {
            "max_tokens": self.max_tokens,
            "timeout_s": self.timeout,
            "max_attempts": self.retry_policy.max_attempts,
            **({"json_schema": True} if self.json_schema else {}),
        }


class HTTPProvider(RemoteProvider):
    """A :class:`RemoteProvider` that speaks JSON over HTTP with one shared ``httpx.Client``.

    Subclasses set ``path``, build the request body (:meth:`request_body`) and
    read the reply (:meth:`read_reply`); :meth:`post_json` does the request,
    the classification of failures and the retries.
    """

    path: str = "/"

    def request_body(self, messages: list[Message]) -> dict[str, Any]:
        raise NotImplementedError

    @staticmethod
    def read_reply(data: dict[str, Any]) -> Reply:
        raise NotImplementedError

    def chat(self, messages: list[Message]) -> Reply:
        reply, attempts = self.post_json(self.path, self.request_body(messages), self.read_reply)
        reply.attempts = attempts
        return reply

    def __init__(self, model: str | None = None, **options: Any):
        super().__init__(model, **options)
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        self._client = httpx.Client(
            base_url=self.base_url or "",
            auth=self._auth,
            headers=headers,
            timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)),
        )

    def close(self) -> None:
        """Close the HTTP connections (the provider is unusable afterwards)."""
        self._client.close()

    def _post_once(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        where = f"POST {path}"
        try:
            response = self._client.post(path, json=body)
        except httpx.TimeoutException:
            raise Transient("timeout", f"{where}: no reply within {self.timeout:g} s") from None
        except httpx.UnsupportedProtocol as exc:  # a bad base URL: retrying cannot help
            raise ProviderError(f"{where}: {exc}") from None
        except httpx.TransportError as exc:
            raise Transient("connection error", f"{where}: {type(exc).__name__}: {exc}") from None
        status = response.status_code
        if status == 429 or status >= 500:
            raise Transient(
                f"HTTP {status}",
                self.excerpt(response.text),
                retry_after=parse_retry_after(response.headers.get("retry-after")),
                pause_all=status == 429,
            )
        if status >= 400:
            raise ProviderError(f"HTTP {status} (not retried) from {where}: {self.excerpt(response.text)}")
        try:
            data = response.json()
        except ValueError:
            raise ProviderError(
                f"reply to {where} is not JSON: {self.excerpt(response.text, 120)!r}"
            ) from None
        if not isinstance(data, dict):
            raise ProviderError(
                f"reply to {where} is not a JSON object: {self.excerpt(response.text, 120)!r}"
            )
        return data

    def post_json(
        self, path: str, body: dict[str, Any], read: Callable[[dict[str, Any]], T]
    ) -> tuple[T, int]:
        """POST ``body`` to ``base_url + path`` with retries: ``(read(reply as a dict), attempts)``.

        A :class:`ProviderError` from ``read`` (a missing field) is not retried
        and carries the number of attempts made.
        """
        return self.retrier.call(lambda: read(self._post_once(path, body)))


def get_field(data: Any, path: str, kind: type, *, where: str) -> Any:
    """``data[a][b]...`` for ``path`` "a.b..." (numbers index lists); a ProviderError naming what is missing.

    >>> get_field({"message": {"content": "hi"}}, "message.content", str, where="Ollama reply")
    'hi'
    >>> get_field({"message": {}}, "message.content", str, where="Ollama reply")
    Traceback (most recent call last):
    ...
    passk_nb.providers.base.ProviderError: Ollama reply has no message.content (a str)
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
