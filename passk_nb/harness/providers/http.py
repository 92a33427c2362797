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

import logging
import os
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx

from passk_nb.data.ids import content_id
from passk_nb.harness.protocol import ACTION_SCHEMA
from passk_nb.harness.providers.base import BaseProvider, Message, ProviderError, Reply
from passk_nb.harness.providers.redact import BODY_EXCERPT_CHARS, Redactor, short
from passk_nb.harness.providers.retry import (
    Retrier,
    RetryPolicy,
    Transient,
    parse_retry_after,
)

log = logging.getLogger("passk_nb.harness.providers")


T = TypeVar("T")


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

    - ``json_schema``: with ``json_mode``, constrain replies to a JSON Schema rather
      than to any JSON object, where the backend supports it (Ollama ``format``, an
      OpenAI-compatible llama.cpp server's ``response_format.schema``): True for the
      generic action protocol (:data:`passk_nb.harness.protocol.ACTION_SCHEMA`), or a
      schema dict (``run(json_mode="schema")`` sends the suite's own,
      :meth:`~passk_nb.harness.suites.base.Suite.action_schema`, whose hash is recorded);
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
        json_schema: bool | dict[str, Any] = False,
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
        if not isinstance(json_schema, bool | dict):
            raise ValueError(f"json_schema must be True, False or a JSON Schema dict, got {json_schema!r}")
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


def schema_id(json_schema: bool | dict[str, Any]) -> bool | str:
    """How a schema is recorded: True for the generic action schema, else the hash of the given one.

    >>> schema_id(True), schema_id({"type": "object"})
    (True, 'sha256:ff419ebbeba4')
    """
    if json_schema is True or not isinstance(json_schema, dict):
        return bool(json_schema)
    return "sha256:" + content_id(json_schema)


def action_schema(json_schema: bool | dict[str, Any]) -> dict[str, Any]:
    """The schema to send: the given one, or the generic :data:`~passk_nb.harness.protocol.ACTION_SCHEMA`."""
    return json_schema if isinstance(json_schema, dict) else ACTION_SCHEMA


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
