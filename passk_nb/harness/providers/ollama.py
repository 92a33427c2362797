"""The Ollama backend: ``POST {base_url}/api/chat`` with ``stream: false``.

Sends ``options.temperature``, ``options.seed`` (the runner's per-trial seed)
and ``options.num_predict`` (``max_tokens``); with ``json_mode`` it also sends
``format: "json"``, which constrains the output to JSON (and so changes what is
measured), or, with ``json_schema=True``, ``format: <the action protocol's JSON
Schema>``. Reads ``message.content``, and the token counts
``prompt_eval_count`` and ``eval_count``.

Native tool calling (``run(protocol="native")``): the suite's tools go out in
``tools`` (the OpenAI form, ``{"type": "function", "function": {...}}``); the
reply's ``message.tool_calls`` (``function.name``, ``function.arguments`` as an
object; no call id, so calls are numbered ``call_<n>``) are the calls, an
assistant turn goes back with its ``tool_calls``, and each result as
``{"role": "tool", "content": result, "tool_name": tool}``.

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

import json
from typing import Any

from passk_nb.harness.providers.base import Message, Reply
from passk_nb.harness.providers.http import HTTPProvider, action_schema, get_count, get_field
from passk_nb.harness.providers.openai import function_calls, openai_tools

__all__ = ["OllamaProvider", "ollama_messages"]


def _arguments_object(arguments: Any) -> dict[str, Any]:
    """Arguments as ``/api/chat`` takes them back: an object (a JSON text of one is decoded; anything
    else, which Ollama would refuse, goes back as ``{}``: the call was answered as a format error)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return {}
    return arguments if isinstance(arguments, dict) else {}


def ollama_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """The conversation in ``/api/chat`` form: assistant turns with ``tool_calls`` (arguments as
    objects) and ``role: "tool"`` results naming their tool in ``tool_name``.

    >>> from passk_nb.harness.protocol import NativeCall
    >>> call = NativeCall("call_0", "get_order", {"order_id": "O1"})
    >>> ollama_messages([
    ...     {"role": "assistant", "content": "", "tool_calls": [call]},
    ...     {"role": "tool", "tool_call_id": "call_0", "name": "get_order", "content": "{}",
    ...      "is_error": False}])
    [{'role': 'assistant', 'content': '', 'tool_calls': [{'function': {'name': 'get_order', \
'arguments': {'order_id': 'O1'}}}]}, {'role': 'tool', 'content': '{}', 'tool_name': 'get_order'}]
    """
    out: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "tool":
            out.append({"role": "tool", "content": m["content"], "tool_name": m["name"]})
        elif m.get("tool_calls"):
            calls = [
                {"function": {"name": c.name, "arguments": _arguments_object(c.arguments)}}
                for c in m["tool_calls"]
            ]
            out.append({"role": "assistant", "content": m["content"], "tool_calls": calls})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


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
    native_tools = True
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

    def native_body(self, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The request body with ``tools`` offered (:meth:`chat_native` sends it)."""
        return {
            **self.request_body(messages),
            "messages": ollama_messages(messages),
            "tools": openai_tools(tools),
        }

    @staticmethod
    def read_native_reply(data: dict[str, Any]) -> Reply:
        """The text, tool calls and token counts of an ``/api/chat`` answer with tools offered."""
        message = get_field(data, "message", dict, where="Ollama reply")
        content, calls = function_calls(message, "Ollama reply", "message")
        return Reply(
            content,
            input_tokens=get_count(data, "prompt_eval_count"),
            output_tokens=get_count(data, "eval_count"),
            tool_calls=calls,
        )

    def meta(self) -> dict[str, Any]:
        return {**super().meta(), **({"options": self.options} if self.options else {})}
