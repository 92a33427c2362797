"""Backends. ``make_provider`` turns a name, an object with ``chat`` or a function into a provider.

>>> make_provider("scripted").name
'scripted'
>>> make_provider(lambda messages: '{"answer": "hi"}', model="toy").describe()["model"]
'toy'
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from passk_nb.harness.providers.base import (
    AgentError,
    BaseProvider,
    ChatProvider,
    Message,
    ProviderError,
    Reply,
)
from passk_nb.harness.providers.function import CallableProvider

__all__ = [
    "AgentError",
    "BaseProvider",
    "ChatProvider",
    "Message",
    "ProviderError",
    "Reply",
    "PROVIDERS",
    "NETWORK_PROVIDERS",
    "make_provider",
    "native_providers",
]

#: Registered backend names -> "module:class" (imported only when used).
PROVIDERS: dict[str, str] = {
    "scripted": "passk_nb.harness.providers.scripted:ScriptedProvider",
    "ollama": "passk_nb.harness.providers.ollama:OllamaProvider",
    "openai": "passk_nb.harness.providers.openai:OpenAIProvider",
    "anthropic": "passk_nb.harness.providers.anthropic:AnthropicProvider",
    "claude-code": "passk_nb.harness.providers.claude_code:ClaudeCodeProvider",
    "llama-cpp": "passk_nb.harness.providers.local:LlamaCppProvider",
}


#: The registered backends that talk to a server over HTTP (subclasses of
#: :class:`~passk_nb.harness.providers.http.RemoteProvider`): each must pass the hostile-server
#: tests (``tests/harness/test_hostile_http.py`` runs them over this tuple, and checks it is complete).
NETWORK_PROVIDERS: tuple[str, ...] = ("anthropic", "ollama", "openai")


def _load(name: str) -> type[BaseProvider]:
    module, _, cls = PROVIDERS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def native_providers() -> tuple[str, ...]:
    """The registered backends with native tool calling (``run(protocol="native")``): those whose
    class says ``native_tools``.

    >>> native_providers()
    ('anthropic', 'ollama', 'openai', 'scripted')
    """
    return tuple(sorted(name for name in PROVIDERS if _load(name).native_tools))


def make_provider(provider: Any, model: str | None = None, **options: Any) -> BaseProvider:
    """Resolve ``provider`` into a :class:`BaseProvider`.

    ``provider`` is a registered name (see :data:`PROVIDERS`), a
    :class:`BaseProvider`, any object with a ``chat(messages)`` method, or a
    plain function of the messages. Backend options (``base_url=``,
    ``temperature=``, ...) are passed to a named backend's constructor.
    """
    if isinstance(provider, str):
        if provider not in PROVIDERS:
            raise ValueError(
                f"unknown provider {provider!r}; choose from {sorted(PROVIDERS)}, "
                "or pass an object with a chat(messages) method or a function"
            )
        try:
            return _load(provider)(model, **options)
        except TypeError as exc:
            unexpected = re.search(r"unexpected keyword argument '(\w+)'", str(exc))
            if unexpected is None:
                raise
            raise ValueError(
                f"the {provider} provider does not take the option {unexpected.group(1)!r}; "
                "see its documentation for the options it takes"
            ) from None
    if isinstance(provider, BaseProvider):
        return provider
    if isinstance(provider, ChatProvider):
        wrapped = CallableProvider(
            provider.chat,
            model=model or getattr(provider, "model", None) or type(provider).__name__,
            identity=provider,
            **options,
        )
        wrapped.name = str(getattr(provider, "name", "callable"))
        return wrapped
    if callable(provider):
        return CallableProvider(provider, model=model, **options)
    raise TypeError(
        f"provider must be a name from {sorted(PROVIDERS)}, an object with chat(messages), "
        f"or a function of the messages; got {type(provider).__name__}"
    )
