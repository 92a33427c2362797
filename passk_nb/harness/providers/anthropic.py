"""The Anthropic API through the official ``anthropic`` SDK (Messages API).

The system prompt goes in ``system``; consecutive turns of one role are merged. ``temperature``
is sent only where the SDK still has it (else refused), seed and JSON mode are refused; native
tool calling uses ``tool_use`` / ``tool_result`` blocks. The SDK's retries are off: the shared
retry loop, deadline, body caps and failure classes of the HTTP backends apply, and under the
asyncio runner the request goes through their transport without importing the SDK. A refusal
(``stop_reason: "refusal"``) is the model's answer, flagged ``refusal: true``.

Every detail (headers, base URL, key, what is recorded): ``docs/guide/backends.md``.

>>> system, turns = to_anthropic_messages([
...     {"role": "system", "content": "Be brief."},
...     {"role": "user", "content": "Hi"},
...     {"role": "user", "content": "Refund O1001."}])
>>> system, turns
('Be brief.', [{'role': 'user', 'content': 'Hi\\n\\nRefund O1001.'}])
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import re
import threading
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from passk_nb.harness.protocol import NativeCall
from passk_nb.harness.providers.base import Message, ProviderError, Reply
from passk_nb.harness.providers.http import DEFAULT_POOL_SIZE, RemoteProvider, Transient, parse_retry_after
from passk_nb.harness.providers.transport import Session

__all__ = [
    "AnthropicProvider",
    "to_anthropic_messages",
    "to_anthropic_native",
    "anthropic_tools",
    "sdk_takes_temperature",
    "guarded_client",
]


@cache
def _sdk() -> Any:
    """The ``anthropic`` SDK, imported on first use: it takes seconds to import, and a missing key
    or a wrong argument should be reported before paying that."""
    return importlib.import_module("anthropic")


@cache
def sdk_identity() -> tuple[str, str]:
    """``(SDK version, API version it sends)`` of the installed SDK, read from its files without
    importing it (the import takes seconds: the asyncio and batch paths never need it); from the
    imported SDK when its files do not say."""
    try:
        version = importlib.metadata.version("anthropic")
        spec = importlib.util.find_spec("anthropic")
        folder = next(iter(spec.submodule_search_locations or [])) if spec else None
        text = Path(folder, "_constants.py").read_text(encoding="utf-8") if folder else ""
        found = re.search(r'^ANTHROPIC_API_VERSION\s*=\s*"([^"]+)"', text, re.MULTILINE)
    except (ImportError, OSError, ValueError):
        found = None
    if found is None:
        sdk = _sdk()
        return sdk.__version__, sdk._constants.ANTHROPIC_API_VERSION
    return version, found.group(1)


@cache
def sdk_takes_temperature() -> bool:
    """Whether the installed SDK can send ``temperature`` (SDK 2.x and API version 2026-10-21 cannot)."""
    return "temperature" in inspect.signature(_sdk().resources.messages.Messages.create).parameters


def guarded_client(provider: RemoteProvider, limits: Any) -> Any:
    """The SDK's own HTTP client (``anthropic.DefaultHttpxClient``: its proxies and socket options)
    reading each reply whole, as the HTTP backends do: within ``provider.timeout`` in all, under its
    body caps, stopping when the trial is given up on. A failure (429/5xx, 4xx, a redirect, which is
    not followed, an empty body) raises the provider's own :class:`Transient` / :class:`ProviderError`,
    which :meth:`AnthropicProvider._create_once` takes back from the SDK's wrapping.
    ``limits``: the connection-pool limits (the SDK's ``httpx2.Limits``).
    """
    anthropic = _sdk()
    httpx2 = importlib.import_module(type(limits).__module__.split(".")[0])
    dropped = ("content-encoding", "content-length", "transfer-encoding")

    class GuardedClient(anthropic.DefaultHttpxClient):  # type: ignore[name-defined]
        def send(self, request: Any, *, stream: bool = False, **kwargs: Any) -> Any:
            where = f"{request.method} {request.url.path}"
            deadline = time.monotonic() + provider.timeout
            response = super().send(request, stream=True, **kwargs)
            try:
                raw = provider.read_body(response, where, deadline)
            finally:
                response.close()
            provider.check_reply(response, raw, where)
            headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in dropped]
            return httpx2.Response(response.status_code, headers=headers, content=raw, request=request)

    return GuardedClient(limits=limits, follow_redirects=False)


def to_anthropic_messages(messages: list[Message]) -> tuple[str | None, list[dict[str, str]]]:
    """Split off the system prompt and merge same-role neighbours: ``(system, messages)``. A turn
    with no text (an empty or blank reply) is left out: the API refuses empty and whitespace-only
    content, and the harness's feedback on it follows anyway.

    >>> system, turns = to_anthropic_messages([
    ...     {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
    ...     {"role": "assistant", "content": " "}, {"role": "user", "content": "Reply in JSON."}])
    >>> system, [t["role"] for t in turns], turns[0]["content"].splitlines()
    ('Be brief.', ['user'], ['Hi', '', 'Reply in JSON.'])
    """
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system") or None
    turns: list[dict[str, str]] = []
    for m in messages:
        if m["role"] == "system" or not m["content"].strip():
            continue
        if turns and turns[-1]["role"] == m["role"]:
            turns[-1]["content"] += "\n\n" + m["content"]
        else:
            turns.append({"role": m["role"], "content": m["content"]})
    return system, turns


def anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool definitions (:meth:`~passk_nb.harness.suites.base.Suite.tool_definitions`) in the Messages
    API form.

    >>> anthropic_tools([{"name": "get_order", "description": "One order", "parameters": {"type": "object"}}])
    [{'name': 'get_order', 'description': 'One order', 'input_schema': {'type': 'object'}}]
    """
    return [
        {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in tools
    ]


def _blocks(m: Message) -> list[dict[str, Any]]:
    if m["role"] == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": m["tool_call_id"],
                "content": m["content"],
                "is_error": bool(m.get("is_error")),
            }
        ]
    text = [{"type": "text", "text": m["content"]}] if m["content"] else []
    calls = [
        {
            "type": "tool_use",
            "id": c.id,
            "name": c.name,
            "input": c.arguments if isinstance(c.arguments, dict) else {},
        }
        for c in m.get("tool_calls") or []
    ]
    return text + calls


def to_anthropic_native(messages: list[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """Like :func:`to_anthropic_messages` for native tool calling: every turn's content is a list of
    blocks; an assistant turn's calls are ``tool_use`` blocks, and results (role ``tool``) are
    ``tool_result`` blocks of a user turn, merged with any user text that follows. An empty turn (a
    reply with neither text nor calls) is left out: the API refuses empty content.

    >>> call = NativeCall("toolu_1", "get_order", {"order_id": "O1"})
    >>> system, turns = to_anthropic_native([
    ...     {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
    ...     {"role": "assistant", "content": "", "tool_calls": [call]},
    ...     {"role": "tool", "tool_call_id": "toolu_1", "name": "get_order", "content": "{}",
    ...      "is_error": False}])
    >>> [t["role"] for t in turns], turns[2]["content"][0]["type"], turns[2]["content"][0]["tool_use_id"]
    (['user', 'assistant', 'user'], 'tool_result', 'toolu_1')
    """
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system") or None
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "system":
            continue
        role = "user" if m["role"] == "tool" else m["role"]
        blocks = _blocks(m)
        if not blocks:  # an empty reply: the API takes no empty turn, and the feedback follows anyway
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return system, turns


class _Attributes(dict[str, Any]):
    """A reply's JSON object read by attribute, as the SDK's models are (a missing one is None)."""

    def __getattr__(self, name: str) -> Any:
        return self.get(name)


def as_attributes(value: Any) -> Any:
    """JSON as :meth:`AnthropicProvider.read_reply` reads the SDK's models: objects by attribute
    (a tool call's ``input`` stays the JSON it was)."""
    if isinstance(value, dict):
        return _Attributes({k: v if k == "input" else as_attributes(v) for k, v in value.items()})
    if isinstance(value, list):
        return [as_attributes(v) for v in value]
    return value


@dataclass
class _SDKClient:
    """The SDK's client of a provider and its ``with_seed`` copies, built on first use (the blocking
    path only); ``connections``: the pool size ``size_pool`` asked for above the SDK's default."""

    client: Any = None
    connections: int | None = None
    retired: list[Any] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class AnthropicProvider(RemoteProvider):
    """Chat with a Claude model through the Anthropic Messages API.

    Options: those of :class:`~passk_nb.harness.providers.http.RemoteProvider`
    (``max_tokens``, ``timeout``, ``max_attempts``, ``api_key_env``, ...).

    Usage (needs a running backend, so not run as a doctest)::

        from passk_nb.harness.runner import run
        run("anthropic", "claude-haiku-4-5", trials=4, temperature=1.0)
    """

    name = "anthropic"
    native_tools = True
    default_base_url = "https://api.anthropic.com"
    base_url_env = "ANTHROPIC_BASE_URL"
    default_api_key_env = "ANTHROPIC_API_KEY"

    def __init__(self, model: str | None = None, **kwargs: Any):
        if kwargs.get("json_mode"):
            raise ValueError(
                "the anthropic provider has no JSON mode; run it with json_mode=False "
                "(the protocol is enforced by the parser either way)"
            )
        super().__init__(model, **kwargs)
        if not self._api_key:
            raise ValueError(
                f"the anthropic provider needs an API key: set ${self.api_key_env} "
                "(or name another variable with api_key_env=)"
            )
        if kwargs.get("temperature") is not None and not sdk_takes_temperature():
            raise ValueError(
                f"anthropic SDK {sdk_identity()[0]} has no temperature: the API version it "
                "sends rejects sampling parameters; leave temperature unset for anthropic"
            )
        self._retired: list[Session] = []
        self._sdk_client = _SDKClient()
        self._session = self._make_session(DEFAULT_POOL_SIZE)

    @property
    def _client(self) -> Any:
        """The SDK's client (``anthropic.Anthropic``), shared with the ``with_seed`` copies and built
        on first use: importing the SDK takes seconds, and only the blocking path needs it."""
        shared = self._sdk_client
        with shared.lock:
            if shared.client is None:
                anthropic = _sdk()
                shared.client = anthropic.Anthropic(
                    api_key=self._api_key,
                    base_url=self.base_url,
                    max_retries=0,
                    timeout=self.timeout,
                    http_client=guarded_client(self, self._sdk_limits()),
                )
            return shared.client

    def _sdk_limits(self) -> Any:
        """The SDK's connection-pool limits (its ``httpx2.Limits``): its default, or one connection
        kept alive per request in flight when ``size_pool`` asked for more."""
        default = _sdk().DEFAULT_CONNECTION_LIMITS
        n = self._sdk_client.connections
        if n is None:
            return default
        return type(default)(max_connections=n, max_keepalive_connections=n, keepalive_expiry=30.0)

    def _make_session(self, size: int) -> Session:
        """The asyncio runner's connections (the transport of the HTTP backends)."""
        return Session(size, timeout=self.timeout, headers=self.sdk_headers(), base_url=self.base_url)

    def sdk_headers(self) -> dict[str, str]:
        """The headers the SDK sends (API version, key, client identification), for requests that
        go around its client: the asyncio path and the batch API. Taken from a table, not from the
        SDK's client, so that these paths never import it (a test holds them to the SDK's own)."""
        version, api_version = sdk_identity()
        return {
            "Accept": "application/json",
            "User-Agent": f"Anthropic/Python {version}",
            "X-Stainless-Lang": "python",
            "X-Stainless-Package-Version": version,
            "anthropic-version": api_version,
            "Authorization": f"Bearer {self._api_key}",
        }

    #: Trials run as asyncio tasks: each request is awaited on the transport loop (:meth:`achat`).
    speaks_asyncio = True

    def _create_once(self, request: dict[str, Any]) -> Any:
        anthropic = _sdk()
        try:
            return self._client.messages.create(**request)
        except anthropic.APITimeoutError:
            raise Transient("timeout", f"no reply within {self.timeout:g} s") from None
        except anthropic.APIConnectionError as exc:
            cause = exc.__cause__
            if isinstance(cause, ProviderError | Transient):  # raised by guarded_client
                raise cause from None
            detail = f"{type(cause).__name__}: {cause}" if cause else str(exc)
            raise Transient("connection error", detail) from None
        except anthropic.APIStatusError as exc:
            status, body = exc.status_code, self.excerpt(exc.response.text)
            if status == 429 or status >= 500:
                retry_after = parse_retry_after(exc.response.headers.get("retry-after"))
                raise Transient(
                    f"HTTP {status}", body, retry_after=retry_after, pause_all=status == 429
                ) from None
            raise ProviderError(f"HTTP {status} (not retried) from POST /v1/messages: {body}") from None
        except anthropic.AnthropicError as exc:
            raise ProviderError(f"Anthropic SDK: {type(exc).__name__}: {self.excerpt(str(exc))}") from None

    def request(self, messages: list[Message]) -> dict[str, Any]:
        """The keyword arguments given to ``client.messages.create`` for ``messages``."""
        system, turns = to_anthropic_messages(messages)
        request: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "messages": turns}
        if system is not None:
            request["system"] = system
        if self.temperature is not None:
            request["temperature"] = self.temperature
        return request

    def read_reply(self, response: Any, native: bool = False) -> Reply:
        """The text, token counts and answering model of a Messages API response (and, ``native``,
        its ``tool_use`` blocks as tool calls)."""
        if isinstance(response, str | bytes):  # what the SDK returns for a body that is not JSON
            raise ProviderError(f"Anthropic reply is not JSON: {self.excerpt(str(response), 120)!r}")
        blocks = getattr(response, "content", None) or []
        texts = [
            block.text
            for block in blocks
            if getattr(block, "type", None) == "text" and isinstance(getattr(block, "text", None), str)
        ]
        calls = [
            NativeCall(
                str(getattr(block, "id", "") or f"toolu_{i}"),
                getattr(block, "name", ""),
                getattr(block, "input", None),
            )
            for i, block in enumerate(blocks)
            if native and getattr(block, "type", None) == "tool_use"
        ]
        refused = getattr(response, "stop_reason", None) == "refusal"
        if not texts and not calls and not refused:
            raise ProviderError(
                "Anthropic reply has no text content block" + (" and no tool_use block" if native else "")
            )
        usage = getattr(response, "usage", None)
        return Reply(
            "".join(texts),
            input_tokens=getattr(usage, "input_tokens", None),
            output_tokens=getattr(usage, "output_tokens", None),
            meta={"resolved_model": getattr(response, "model", None)}
            | ({"refusal": True} if refused else {}),
            tool_calls=calls,
        )

    def chat(self, messages: list[Message]) -> Reply:
        request = self.request(messages)
        return self.send(lambda: self.read_reply(self._create_once(request)))

    def native_request(self, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The keyword arguments of ``client.messages.create`` with ``tools`` offered."""
        request = self.request(messages)
        request["system"], request["messages"] = to_anthropic_native(messages)
        if request["system"] is None:
            del request["system"]
        request["tools"] = anthropic_tools(tools)
        return request

    def chat_native(self, messages: list[Message], tools: list[dict[str, Any]]) -> Reply:
        """One reply with ``tools`` offered; its ``tool_use`` blocks in ``Reply.tool_calls``."""
        request = self.native_request(messages, tools)
        return self.send(lambda: self.read_reply(self._create_once(request), native=True))

    async def achat(self, messages: list[Message]) -> Reply:
        """:meth:`chat` awaited on the transport loop: the same request body, checks, caps and
        retries, through the transport of the HTTP backends instead of the SDK's client."""
        return await self._apost_message(self.request(messages), native=False)

    async def achat_native(self, messages: list[Message], tools: list[dict[str, Any]]) -> Reply:
        """:meth:`chat_native` awaited on the transport loop."""
        return await self._apost_message(self.native_request(messages, tools), native=True)

    async def _apost_message(self, body: dict[str, Any], *, native: bool) -> Reply:
        session = self._session

        async def attempt() -> Reply:
            data = await self._apost_once(session, "/v1/messages", body)
            return self.read_reply(as_attributes(data), native=native)

        return await self.asend(attempt)

    def meta(self) -> dict[str, Any]:
        sdk_version, api_version = sdk_identity()
        return {**super().meta(), "sdk_version": sdk_version, "api_version": api_version}

    #: Idle connections the SDK's own pool keeps (of 1000 at most).
    SDK_KEEPALIVE = 100

    def size_pool(self, concurrency: int) -> None:
        """One shared pool for all trials (the SDK client); above the SDK's 100 kept-alive
        connections, a pool that keeps one per request in flight."""
        if concurrency > self._session.size:
            self._retired.append(self._session)
            self._session = self._make_session(concurrency)
        shared = self._sdk_client
        with shared.lock:
            if concurrency <= self.SDK_KEEPALIVE or shared.connections is not None:
                return
            shared.connections = concurrency
            if shared.client is not None:  # else it is built with these limits when first used
                shared.retired.append(shared.client)
                shared.client = shared.client.with_options(
                    http_client=guarded_client(self, self._sdk_limits())
                )

    def reopen_pool(self, concurrency: int) -> None:
        # the parent's, on its loop: kept (dropped, aiohttp would warn of them) and never closed here
        self._parents = [*self._retired, self._session]
        self._retired = []
        self._session = self._make_session(concurrency)

    def close(self) -> None:
        """Close the HTTP connections (the SDK's, where it was used)."""
        shared = self._sdk_client
        sdk_clients = [*shared.retired, *([shared.client] if shared.client is not None else [])]
        for client in [*self._retired, *sdk_clients, self._session]:
            client.close()
