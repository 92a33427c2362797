"""Any OpenAI-compatible server: ``POST {base_url}/v1/chat/completions``.

llama.cpp, vLLM, LM Studio and hosted APIs all speak it. Sends ``temperature``, the per-trial
``seed`` and ``max_tokens``; ``json_mode`` adds ``response_format`` (with the action schema under
``json_schema=True``, llama.cpp's form). Native tool calling uses ``tools`` / ``tool_calls`` and
``role: "tool"`` results. A refusal is the model's answer, flagged ``refusal: true``. The base URL
is ``base_url``, else ``$OPENAI_BASE_URL``, else ``http://127.0.0.1:8080``; the key, from
``$OPENAI_API_KEY``, is sent only when set.

In full: ``docs/guide/backends.md``.

>>> p = OpenAIProvider("local", base_url="http://127.0.0.1:8080/v1", seed=3, json_mode=True, api_key_env=None)
>>> p.path, p.request_body([{"role": "user", "content": "hi"}])["response_format"]
('/chat/completions', {'type': 'json_object'})
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from passk_nb.harness.protocol import NativeCall
from passk_nb.harness.providers.base import Message, ProviderError, Reply
from passk_nb.harness.providers.http import HTTPProvider, action_schema, get_count, get_field

__all__ = ["OpenAIProvider", "openai_messages", "openai_tools"]


def function_calls(message: dict[str, Any], where: str, path: str) -> tuple[str, list[NativeCall]]:
    """The text and the function calls of an OpenAI-style message (``tool_calls`` of
    ``{"id", "function": {"name", "arguments"}}``; Ollama's too). A call without an id gets
    ``call_<i>``; arguments are kept as received (text or an object) for the episode to check.

    >>> message = {"content": None, "tool_calls": [{"function": {"name": "get_order", "arguments": "{}"}}]}
    >>> function_calls(message, "reply", "message")
    ('', [NativeCall(id='call_0', name='get_order', arguments='{}')])
    """
    content, raw_calls = message.get("content"), message.get("tool_calls") or []
    if not isinstance(raw_calls, list) or not all(isinstance(c, dict) for c in raw_calls):
        raise ProviderError(f"{where} has a {path}.tool_calls that is not a list of objects")
    if not raw_calls and not isinstance(content, str):
        raise ProviderError(f"{where} has neither {path}.content (a str) nor {path}.tool_calls")
    calls = []
    for i, c in enumerate(raw_calls):
        function = c.get("function") if isinstance(c.get("function"), dict) else {}
        call_id = c.get("id") if isinstance(c.get("id"), str) and c.get("id") else f"call_{i}"
        calls.append(NativeCall(call_id, function.get("name") or "", function.get("arguments")))
    return (content if isinstance(content, str) else ""), calls


def refusal(data: dict[str, Any]) -> Reply | None:
    """The model's refusal as its reply (``message.refusal`` when there is no content and no call),
    or None: a refusal is the model's answer, never a backend failure.

    >>> refusal({"choices": [{"message": {"content": None, "refusal": "I can't help."}}]}).text
    "I can't help."
    """
    message = get_field(data, "choices.0.message", dict, where="chat-completions reply")
    text = message.get("refusal")
    content = message.get("content")
    if not isinstance(text, str) or message.get("tool_calls") or isinstance(content, str) and content:
        return None
    return Reply(
        text,
        input_tokens=get_count(data, "usage.prompt_tokens"),
        output_tokens=get_count(data, "usage.completion_tokens"),
        meta={"refusal": True},
    )


def openai_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool definitions (:meth:`~passk_nb.harness.suites.base.Suite.tool_definitions`) in the
    chat-completions form.

    >>> openai_tools([{"name": "get_order", "description": "One order", "parameters": {"type": "object"}}])
    [{'type': 'function', 'function': {'name': 'get_order', 'description': 'One order', \
'parameters': {'type': 'object'}}}]
    """
    return [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t["description"], "parameters": t["parameters"]},
        }
        for t in tools
    ]


def _arguments_text(arguments: Any) -> str:
    """Arguments as chat completions carries them: the JSON string as received, else JSON text."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """The conversation in chat-completions form: assistant turns with their ``tool_calls`` and
    ``role: "tool"`` results with the ``tool_call_id`` they answer; plain turns as they are.

    >>> call = NativeCall("call_1", "get_order", '{"order_id": "O1"}')
    >>> sent = openai_messages([
    ...     {"role": "assistant", "content": "", "tool_calls": [call]},
    ...     {"role": "tool", "tool_call_id": "call_1", "name": "get_order", "content": "{}",
    ...      "is_error": False}])
    >>> sent[0]["tool_calls"][0]["function"], sent[1]
    ({'name': 'get_order', 'arguments': '{"order_id": "O1"}'}, {'role': 'tool', 'tool_call_id': 'call_1', \
'content': '{}'})
    """
    out: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
        elif m.get("tool_calls"):
            calls = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": _arguments_text(c.arguments)},
                }
                for c in m["tool_calls"]
            ]
            # no text: no content field (the API allows it; llama_cpp.server refuses content: null)
            turn = {"role": "assistant", **({"content": m["content"]} if m["content"] else {})}
            out.append({**turn, "tool_calls": calls})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


class OpenAIProvider(HTTPProvider):
    """Chat with any server that speaks the OpenAI chat-completions API.

    Options: those of :class:`~passk_nb.harness.providers.http.RemoteProvider`
    (``max_tokens``, ``timeout``, ``max_attempts``, ``api_key_env``, ...).

    Usage (needs a running backend, so not run as a doctest)::

        from passk_nb.harness.runner import run
        run("openai", "local", base_url="http://127.0.0.1:8080", trials=4)
    """

    name = "openai"
    native_tools = True
    default_base_url = "http://127.0.0.1:8080"
    base_url_env = "OPENAI_BASE_URL"
    default_api_key_env = "OPENAI_API_KEY"

    def __init__(self, model: str | None = None, **kwargs: Any):
        super().__init__(model, **kwargs)
        #: What every path of the API starts with below the base URL: none when it ends in /v1.
        self.prefix = "" if urlsplit(self.base_url or "").path.endswith("/v1") else "/v1"
        self.path = f"{self.prefix}/chat/completions"

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
        refused = refusal(data)
        if refused is not None:
            return refused
        text = get_field(data, "choices.0.message.content", str, where="chat-completions reply")
        return Reply(
            text,
            input_tokens=get_count(data, "usage.prompt_tokens"),
            output_tokens=get_count(data, "usage.completion_tokens"),
        )

    def native_body(self, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The request body with ``tools`` offered (:meth:`chat_native` sends it)."""
        return {
            **self.request_body(messages),
            "messages": openai_messages(messages),
            "tools": openai_tools(tools),
            # the API's default with tools, said explicitly: llama_cpp.server's function-calling
            # chat formats ignore the tools without it
            "tool_choice": "auto",
        }

    @staticmethod
    def read_native_reply(data: dict[str, Any]) -> Reply:
        """The text, tool calls and token counts of a chat-completions answer with tools offered."""
        refused = refusal(data)
        if refused is not None:
            return refused
        message = get_field(data, "choices.0.message", dict, where="chat-completions reply")
        content, calls = function_calls(message, "chat-completions reply", "choices.0.message")
        return Reply(
            content,
            input_tokens=get_count(data, "usage.prompt_tokens"),
            output_tokens=get_count(data, "usage.completion_tokens"),
            tool_calls=calls,
        )
