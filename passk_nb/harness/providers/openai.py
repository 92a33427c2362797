"""Any OpenAI-compatible server: ``POST {base_url}/v1/chat/completions``.

llama.cpp's ``llama-server``, ``llama_cpp.server``, vLLM, LM Studio and hosted
APIs all speak it. Sends ``temperature``, ``seed`` (the runner's per-trial
seed) and ``max_tokens``; with ``json_mode`` it also sends ``response_format:
{"type": "json_object"}`` (plus ``"schema"``, the action protocol's JSON Schema,
with ``json_schema=True``: llama.cpp's form of schema-constrained output).
Reads ``choices[0].message.content`` and the token counts in ``usage``.

The base URL is ``base_url``, else ``$OPENAI_BASE_URL``, else
``http://127.0.0.1:8080`` (a local server: nothing is sent to a paid API by
accident). A base URL that already ends in ``/v1`` (the usual form of
``OPENAI_BASE_URL``) is not given a second one. The API key is optional: it is
read from ``$OPENAI_API_KEY`` (another variable with ``api_key_env=``) and sent
as ``Authorization: Bearer ...`` only when set.

>>> p = OpenAIProvider("local", base_url="http://127.0.0.1:8080/v1", seed=3, json_mode=True, api_key_env=None)
>>> p.path, p.request_body([{"role": "user", "content": "hi"}])["response_format"]
('/chat/completions', {'type': 'json_object'})
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from passk_nb.harness.providers.base import Message, Reply
from passk_nb.harness.providers.http import HTTPProvider, action_schema, get_count, get_field

__all__ = ["OpenAIProvider"]


class OpenAIProvider(HTTPProvider):
    """Chat with any server that speaks the OpenAI chat-completions API.

    Options: those of :class:`~passk_nb.harness.providers.http.RemoteProvider`
    (``max_tokens``, ``timeout``, ``max_attempts``, ``api_key_env``, ...).

    Usage (needs a running backend, so not run as a doctest)::

        from passk_nb.harness.runner import run
        run("openai", "local", base_url="http://127.0.0.1:8080", trials=4)
    """

    name = "openai"
    default_base_url = "http://127.0.0.1:8080"
    base_url_env = "OPENAI_BASE_URL"
    default_api_key_env = "OPENAI_API_KEY"

    def __init__(self, model: str | None = None, **kwargs: Any):
        super().__init__(model, **kwargs)
        has_v1 = urlsplit(self.base_url or "").path.endswith("/v1")
        self.path = "/chat/completions" if has_v1 else "/v1/chat/completions"

    def request_body(self, messages: list[Message]) -> dict[str, Any]:
        """The JSON body sent to ``/v1/chat/completions`` for ``messages``."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "max_tokens": self.max_tokens,
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.seed is not None:
            body["seed"] = self.seed
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
            if self.json_schema:  # the llama.cpp / Anyscale form; servers without it fall back to JSON
                body["response_format"]["schema"] = action_schema(self.json_schema)
        return body

    @staticmethod
    def read_reply(data: dict[str, Any]) -> Reply:
        """The reply text and token counts of a chat-completions answer."""
        text = get_field(data, "choices.0.message.content", str, where="chat-completions reply")
        return Reply(
            text,
            input_tokens=get_count(data, "usage.prompt_tokens"),
            output_tokens=get_count(data, "usage.completion_tokens"),
        )
