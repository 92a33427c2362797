"""The Ollama backend: ``POST {base_url}/api/chat`` with ``stream: false``.

Sends ``options.temperature``, ``options.seed`` (the runner's per-trial seed)
and ``options.num_predict`` (``max_tokens``); with ``json_mode`` it also sends
``format: "json"``, which constrains the output to JSON (and so changes what is
measured), or, with ``json_schema=True``, ``format: <the action protocol's JSON
Schema>``. Reads ``message.content``, and the token counts
``prompt_eval_count`` and ``eval_count``.

The base URL is ``base_url``, else ``$OLLAMA_HOST`` (``host:port`` is fine),
else ``http://127.0.0.1:11434``. Retries, timeouts and redaction: see
:mod:`passk_nb.harness.providers.http`.

>>> p = OllamaProvider("llama3.1:8b", base_url="http://127.0.0.1:11434", temperature=0.2)
>>> p.request_body([{"role": "user", "content": "hi"}])["options"]
{'num_predict': 1024, 'temperature': 0.2}
>>> p.describe()["base_url_host"]
'127.0.0.1:11434'
"""

from __future__ import annotations

from typing import Any

from passk_nb.harness.providers.base import Message, Reply
from passk_nb.harness.providers.http import HTTPProvider, action_schema, get_count, get_field

__all__ = ["OllamaProvider"]


class OllamaProvider(HTTPProvider):
    """Chat with a model served by Ollama (``ollama serve``).

    Options: those of :class:`~passk_nb.harness.providers.http.RemoteProvider`
    (``max_tokens``, ``timeout``, ``max_attempts``, ``backoff_base``, ...), and
    ``options``: extra Ollama options merged into ``options`` (e.g.
    ``{"num_ctx": 8192}``), recorded in ``provider_meta``.

    Usage (needs a running backend, so not run as a doctest)::

        from passk_nb.harness.runner import run
        run("ollama", "llama3.1:8b", trials=4, temperature=0.7)
    """

    name = "ollama"
    default_base_url = "http://127.0.0.1:11434"
    base_url_env = "OLLAMA_HOST"
    default_api_key_env = None

    def __init__(self, model: str | None = None, *, options: dict[str, Any] | None = None, **kwargs: Any):
        super().__init__(model, **kwargs)
        self.options = dict(options or {})

    path = "/api/chat"

    def request_body(self, messages: list[Message]) -> dict[str, Any]:
        """The JSON body sent to ``/api/chat`` for ``messages``."""
        options: dict[str, Any] = {"num_predict": self.max_tokens, **self.options}
        if self.temperature is not None:
            options["temperature"] = self.temperature
        if self.seed is not None:
            options["seed"] = self.seed
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "stream": False,
            "options": options,
        }
        if self.json_mode:
            body["format"] = action_schema(self.json_schema) if self.json_schema else "json"
        return body

    @staticmethod
    def read_reply(data: dict[str, Any]) -> Reply:
        """The reply text and token counts of an ``/api/chat`` answer."""
        text = get_field(data, "message.content", str, where="Ollama reply")
        return Reply(
            text,
            input_tokens=get_count(data, "prompt_eval_count"),
            output_tokens=get_count(data, "eval_count"),
        )

    def meta(self) -> dict[str, Any]:
        return {**super().meta(), **({"options": self.options} if self.options else {})}
