"""Test doubles for the real backends: fake servers on 127.0.0.1 and a fake ``claude`` executable.

The servers (threads in the test process) speak the Ollama, OpenAI and Anthropic formats.

Each server replays the suite's known-good scripts (the reply for a
conversation is what :class:`ScriptedProvider` says), records every request it
receives (time, path, headers, JSON body), and can inject faults: an HTTP
status with headers (429 + Retry-After, 500, 401 ...), a dropped connection, a
hang, a body that is not JSON, a reply without the text field.

A request that offers ``tools`` is answered in the API's native tool-calling
format (OpenAI ``tool_calls`` with JSON-string arguments and ``call_…`` ids,
Anthropic ``tool_use`` blocks with ``toolu_…`` ids, Ollama ``tool_calls`` with
object arguments and no id): the step of the script becomes the calls, an
answer the reply's text. ``server.issued_ids`` lists the call ids handed out,
so a test can check that the next request echoes them.

Faults come from ``server.faults`` (a list, consumed one per chat request) or
from ``server.rule`` (a function of the request body returning a Fault or
None). The Anthropic server also speaks the streaming Messages API
(``"stream": true``) that the real ``claude`` CLI uses, and, with
``flattened=True``, understands the one-prompt form the claude-code provider
sends.

:func:`write_fake_claude` writes a stand-in for the ``claude`` CLI; :func:`require`
skips a test whose tool is missing, or fails it when ``PASSK_REQUIRE_ALL`` is set (CI).
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

import pytest

from passk_nb.harness.providers.claude_code import unflatten_prompt
from passk_nb.harness.providers.scripted import ScriptedProvider

CHAT_PATHS = {"ollama": "/api/chat", "openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


@dataclass
class Fault:
    """What the server does instead of answering normally."""

    # "status", "drop", "hang", "not_json", "no_text", "echo_headers" (an error quoting the
    # credentials sent), "quote_headers" (a normal reply whose text quotes them), "usage" (a normal
    # reply reporting `size` input and output tokens), "refusal" (the model refuses with the text
    # `body`: OpenAI `content: null` + `refusal`, Anthropic `stop_reason: "refusal"`, Ollama plain
    # text, its only form), and hostile bodies:
    # "trickle" (one byte every `seconds`), "endless" (a chunked body that never ends),
    # "big" (`size` bytes), "gzip_bomb" (a small gzip body that inflates to `size` bytes)
    kind: str
    status: int = 500
    headers: dict[str, str] = field(default_factory=dict)
    body: str = '{"error": "injected fault"}'
    seconds: float = 0.0
    size: int = 0

    @classmethod
    def http(cls, status: int, body: str = '{"error": "injected fault"}', **headers: str) -> Fault:
        return cls("status", status, {k.replace("_", "-"): v for k, v in headers.items()}, body)

    @classmethod
    def drop(cls) -> Fault:
        return cls("drop")

    @classmethod
    def hang(cls, seconds: float) -> Fault:
        return cls("hang", seconds=seconds)


@dataclass
class Seen:
    """One request the server received."""

    t: float
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    fault: Fault | None = None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _as_object(arguments: Any) -> Any:
    """Arguments as an object for the wires that carry objects (JSON text decoded; other text kept)."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


class _Server(ThreadingHTTPServer):
    request_queue_size = 1024  # hundreds of clients connect at once in the runner benchmark


class Served:
    """A threaded HTTP server on 127.0.0.1 in a daemon thread, for a context manager: subclasses
    call :meth:`_serve` with their handler class and may extend :meth:`_stopping`."""

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._httpd = _Server(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def _stopping(self) -> None:
        """Called first on exit (e.g. to release handlers that wait)."""

    def __exit__(self, *exc: object) -> None:
        self._stopping()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


class FakeServer(Served):
    """A fake backend of one wire format; use as a context manager.

    >>> with FakeServer("ollama") as server:
    ...     server.url.startswith("http://127.0.0.1:")
    True
    """

    def __init__(
        self,
        wire: str,
        *,
        suite: str = "orders",
        scripts: dict[str, list[Any]] | None = None,
        flattened: bool = False,
        faults: list[Fault] | None = None,
        rule: Callable[[Any], Fault | None] | None = None,
        latency: float = 0.0,
        keep_alive: bool = False,
        admit: int | None = None,
    ):
        if wire not in CHAT_PATHS:
            raise ValueError(f"wire must be one of {sorted(CHAT_PATHS)}")
        self.wire, self.flattened = wire, flattened
        self.faults: list[Fault] = list(faults or [])
        self.rule = rule
        self.latency = latency  # seconds before each chat reply (faults included)
        self.keep_alive = (
            keep_alive  # HTTP/1.1 with persistent connections (default: HTTP/1.0, one per request)
        )
        self.admit = admit  # at most this many requests served at once; 429 above it
        self.active = 0  # requests being served now (with admit)
        self.admitted: list[int] = []  # requests being served as each was admitted (with admit)
        self.rejected = 0  # requests answered 429 for being over admit
        self.connections_opened = 0  # TCP connections accepted so far
        self.connections_open = 0  # open right now
        self.max_connections_open = 0  # the most open at once
        self.requests: list[Seen] = []
        self.body_bytes_sent = 0  # bytes of hostile bodies written so far
        self.hostile_body_done = threading.Event()  # a hostile body ended (the client stopped reading)
        self.scripted = ScriptedProvider(suite=suite, scripts=scripts)
        self.issued_ids: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._serve(self._handler())

    def _stopping(self) -> None:
        self._stop.set()

    # -- what the tests look at ------------------------------------------------------------------
    def chat_requests(self) -> list[Seen]:
        with self._lock:
            return [r for r in self.requests if r.path == CHAT_PATHS[self.wire]]

    # -- conversation -> reply ----------------------------------------------------------------------
    def messages_of(self, body: dict[str, Any]) -> list[dict[str, str]]:
        """The conversation in the provider contract's form."""
        messages = [
            {"role": m["role"], "content": _text_of(m.get("content"))} for m in body.get("messages", [])
        ]
        if self.wire == "anthropic":
            system = body.get("system")
            system_text = system if isinstance(system, str) else _text_of(system)
            messages = [{"role": "system", "content": system_text}, *messages]
        if self.flattened:
            last_user = next(m["content"] for m in reversed(messages) if m["role"] == "user")
            messages = [messages[0], *unflatten_prompt(last_user)]
        return messages

    def reply_text(self, body: dict[str, Any]) -> str:
        return self.scripted.chat(self.messages_of(body))

    def native_message(self, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        """The scripted step as ``(text, calls)``, each call ``{"id", "name", "arguments"}`` with an id
        in the wire's style (none for Ollama) and the arguments as the scripted step gives them."""
        reply = self.scripted.chat_native(self.messages_of(body), [])
        calls = []
        for call in reply.tool_calls:
            with self._lock:
                n = len(self.issued_ids)
                call_id = {"openai": f"call_{n:04d}abc", "anthropic": f"toolu_{n:04d}xyz"}.get(self.wire)
                if call_id is not None:
                    self.issued_ids.append(call_id)
            calls.append({"id": call_id, "name": call.name, "arguments": call.arguments})
        return reply.text, calls

    def native_json(
        self, body: dict[str, Any], text: str, calls: list[dict[str, Any]], n_in: int = 11, n_out: int = 5
    ) -> dict[str, Any]:
        """A reply in the wire's native tool-calling format."""
        model = body.get("model")
        if self.wire == "openai":
            message: dict[str, Any] = {"role": "assistant", "content": (text or None) if calls else text}
            if calls:
                message["tool_calls"] = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {
                            "name": c["name"],
                            "arguments": c["arguments"]
                            if isinstance(c["arguments"], str)
                            else json.dumps(c["arguments"]),
                        },
                    }
                    for c in calls
                ]
            return chat_completion(model, message, "tool_calls" if calls else "stop", n_in, n_out)
        if self.wire == "ollama":
            ollama_message: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                ollama_message["tool_calls"] = [
                    {"function": {"name": c["name"], "arguments": _as_object(c["arguments"])}} for c in calls
                ]
            return {
                "model": model,
                "created_at": "2025-01-01T00:00:00Z",
                "message": ollama_message,
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": n_in,
                "eval_count": n_out,
            }
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [
            {"type": "tool_use", "id": c["id"], "name": c["name"], "input": _as_object(c["arguments"])}
            for c in calls
        ]
        return {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": f"{model}-20250101",
            "content": content,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": n_in, "output_tokens": n_out},
        }

    def _next_fault(self, body: Any) -> Fault | None:
        fault = self.rule(body) if self.rule else None
        with self._lock:
            if fault is None and self.faults:
                fault = self.faults.pop(0)
        return fault

    # -- HTTP -------------------------------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if server.keep_alive else "HTTP/1.0"
            # headers and body are two writes: with Nagle's algorithm the body waits for the client's
            # delayed ACK of the headers (~40 ms a reply), as no real model server makes a client wait
            disable_nagle_algorithm = True

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections_opened += 1
                    server.connections_open += 1
                    server.max_connections_open = max(server.max_connections_open, server.connections_open)

            def finish(self) -> None:
                try:
                    super().finish()
                finally:
                    with server._lock:
                        server.connections_open -= 1

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                pass

            def _send(
                self,
                status: int,
                body: str | bytes,
                headers: dict[str, str] | None = None,
                content_type: str = "application/json",
            ) -> None:
                data = body.encode() if isinstance(body, str) else body
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass

            def _read(self) -> Seen:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                seen = Seen(
                    time.monotonic(),
                    self.command,
                    self.path.split("?")[0],
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                with server._lock:
                    server.requests.append(seen)
                return seen

            def do_GET(self) -> None:
                seen = self._read()
                self._send(404, json.dumps({"error": f"no route {seen.path}"}))

            def do_HEAD(self) -> None:
                self._read()
                self._send(404, b"")

            def do_POST(self) -> None:
                seen = self._read()
                if server.admit is None:
                    self._post(seen)
                    return
                with server._lock:  # a server that admits only so many requests at once
                    busy = server.active >= server.admit
                    if busy:
                        server.rejected += 1
                    else:
                        server.active += 1
                        server.admitted.append(server.active)
                if busy:
                    self._send(429, json.dumps({"error": {"message": "too many requests at once"}}))
                    return
                try:
                    self._post(seen)
                finally:
                    with server._lock:
                        server.active -= 1

            def _post(self, seen: Seen) -> None:
                if seen.path != CHAT_PATHS[server.wire] or not isinstance(seen.body, dict):
                    error = {"type": "not_found_error", "message": f"no route {seen.path}"}
                    self._send(404, json.dumps({"type": "error", "error": error}))
                    return
                fault = seen.fault = server._next_fault(seen.body)
                if server.latency:
                    server._stop.wait(server.latency)
                if fault is not None:
                    if fault.kind == "status":
                        self._send(fault.status, fault.body, fault.headers)
                        return
                    if fault.kind == "echo_headers":
                        keys = {
                            k: seen.headers[k] for k in ("authorization", "x-api-key") if k in seen.headers
                        }
                        self._send(fault.status, json.dumps({"error": "bad credentials", **keys}))
                        return
                    if fault.kind == "quote_headers":
                        keys = {
                            k: seen.headers[k] for k in ("authorization", "x-api-key") if k in seen.headers
                        }
                        quoted = f"You sent {json.dumps(keys)}"
                        if seen.body.get("tools"):
                            reply = server.native_json(seen.body, quoted, [])
                        else:
                            reply = server.reply_json(seen.body, quoted, 10, 10)
                        self._send(200, json.dumps(reply))
                        return
                    if fault.kind == "refusal":
                        self._send(200, json.dumps(server.refusal_json(seen.body, fault.body)))
                        return
                    if fault.kind == "drop":
                        self.close_connection = True
                        try:
                            self.connection.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass
                        return
                    if fault.kind in ("trickle", "endless", "big", "gzip_bomb"):
                        self._hostile_body(fault)
                        return
                    if fault.kind == "hang":
                        server._stop.wait(fault.seconds)
                    if fault.kind == "not_json":
                        self._send(200, b"<html>502 Bad Gateway</html>", content_type="text/html")
                        return
                    if fault.kind == "no_text":
                        self._send(200, json.dumps({"done": True, "choices": [], "content": []}))
                        return
                usage = {"n_in": fault.size, "n_out": fault.size} if fault and fault.kind == "usage" else {}
                if seen.body.get("tools"):
                    native_text, calls = server.native_message(seen.body)
                    self._send(200, json.dumps(server.native_json(seen.body, native_text, calls, **usage)))
                    return
                text = server.reply_text(seen.body)
                n_in = usage.get(
                    "n_in", sum(len(m["content"]) for m in server.messages_of(seen.body)) // 4 + 1
                )
                n_out = usage.get("n_out", len(text) // 4 + 1)
                if server.wire == "anthropic" and seen.body.get("stream"):
                    self._stream_anthropic(seen.body, text, n_in, n_out)
                    return
                self._send(200, json.dumps(server.reply_json(seen.body, text, n_in, n_out)))

            def _hostile_body(self, fault: Fault) -> None:
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    if fault.kind in ("big", "gzip_bomb"):
                        data = b" " * fault.size
                        if fault.kind == "gzip_bomb":
                            data = gzip.compress(data)
                            self.send_header("Content-Encoding", "gzip")
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        for i in range(0, len(data), 65536):
                            self.wfile.write(data[i : i + 65536])
                            server.body_bytes_sent += len(data[i : i + 65536])
                    else:
                        self.send_header("Transfer-Encoding", "chunked")
                        self.end_headers()
                        deadline = time.monotonic() + 30  # even an unprotected client gets an end
                        chunk = b" " * (1 if fault.kind == "trickle" else 65536)
                        while not server._stop.is_set() and time.monotonic() < deadline:
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                            self.wfile.flush()
                            server.body_bytes_sent += len(chunk)
                            if fault.seconds:
                                server._stop.wait(fault.seconds)
                        self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass
                finally:
                    self.close_connection = True
                    server.hostile_body_done.set()

            def _stream_anthropic(self, body: dict[str, Any], text: str, n_in: int, n_out: int) -> None:
                message = {
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model"),
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": n_in, "output_tokens": 1},
                }
                half = len(text) // 2
                events = [
                    ("message_start", {"type": "message_start", "message": message}),
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": 0,
                            "content_block": {"type": "text", "text": ""},
                        },
                    ),
                    ("ping", {"type": "ping"}),
                    *[
                        (
                            "content_block_delta",
                            {
                                "type": "content_block_delta",
                                "index": 0,
                                "delta": {"type": "text_delta", "text": part},
                            },
                        )
                        for part in (text[:half], text[half:])
                        if part
                    ],
                    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    (
                        "message_delta",
                        {
                            "type": "message_delta",
                            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                            "usage": {"output_tokens": n_out},
                        },
                    ),
                    ("message_stop", {"type": "message_stop"}),
                ]
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    self.end_headers()
                    for name, data in events:
                        self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                        self.wfile.flush()
                except OSError:
                    pass
                self.close_connection = True

        return Handler

    def refusal_json(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        """A refusal in the wire's own form (``text`` may be empty for Anthropic)."""
        if self.wire == "openai":
            message = {"role": "assistant", "content": None, "refusal": text}
            return chat_completion(body.get("model"), message, "stop", 10, 5)
        reply = self.reply_json(body, text, 10, 5)
        if self.wire == "anthropic":
            reply["content"], reply["stop_reason"] = reply["content"] if text else [], "refusal"
        return reply

    def reply_json(self, body: dict[str, Any], text: str, n_in: int, n_out: int) -> dict[str, Any]:
        model = body.get("model")
        if self.wire == "ollama":
            return {
                "model": model,
                "created_at": "2025-01-01T00:00:00Z",
                "message": {"role": "assistant", "content": text},
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": n_in,
                "eval_count": n_out,
            }
        if self.wire == "openai":
            return chat_completion(model, {"role": "assistant", "content": text}, "stop", n_in, n_out)
        return {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": f"{model}-20250101",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": n_in, "output_tokens": n_out},
        }


class RecordingProxy:
    """An HTTP(S) proxy on 127.0.0.1 that forwards nothing: it records each request line and answers 403.

    Point ``HTTPS_PROXY``/``HTTP_PROXY`` at ``url`` (with ``NO_PROXY=127.0.0.1``) to see
    which outside hosts a program tries to reach: ``seen`` holds lines such as
    ``"CONNECT api.anthropic.com:443 HTTP/1.1"``.
    """

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                try:
                    conn.settimeout(5)
                    self.seen.append(conn.recv(4096).decode("latin-1").split("\r\n")[0])
                    conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    pass

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._sock.close()
        self._thread.join(timeout=5)


def required_all() -> bool:
    """Must every test run here? ``PASSK_REQUIRE_ALL`` is set (``.ci/run`` sets it)."""
    return os.environ.get("PASSK_REQUIRE_ALL", "") not in ("", "0")


def in_ci() -> bool:
    """Is this CI: ``CI`` is true (as CI services set it) or ``PASSK_REQUIRE_ALL`` is set?"""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes") or required_all()


def ci_only(why: str) -> pytest.MarkDecorator:
    """Run the test only in CI (:func:`in_ci`); elsewhere skip it, saying ``why``."""
    return pytest.mark.skipif(not in_ci(), reason=f"{why}; runs in CI (CI=true or PASSK_REQUIRE_ALL=1)")


def require(available: bool, what: str) -> None:
    """Skip the test when ``what`` is missing, or fail it when ``PASSK_REQUIRE_ALL`` is set (CI sets it)."""
    if available:
        return
    if required_all():
        pytest.fail(f"{what} is missing, and PASSK_REQUIRE_ALL is set: this test must run here")
    pytest.skip(f"{what} is missing (set PASSK_REQUIRE_ALL=1 to make this a failure)")


def mentions(body: Any, text: str) -> bool:
    """Whether a request body contains ``text`` anywhere (to aim a fault at one task)."""
    return text in json.dumps(body, ensure_ascii=False)


FAKE_CLAUDE_HELP = """Usage: claude [options] [command] [prompt]
  --bare                  Minimal mode
  --model <model>         Model for the current session
  --no-session-persistence  Don't save sessions
  --output-format <format>  "text", "json" or "stream-json"
  -p, --print             Print response and exit
  --system-prompt <prompt>  System prompt to use for the session
  --tools <tools...>      Built-in tools to make available
"""

_FAKE_CLAUDE = r'''#!{python}
"""A stand-in for the claude CLI, written by the tests: logs each call and replays known-good scripts."""
import json, os, sys, time

LOG, SCRIPTS, HELP = {log!r}, {scripts!r}, {help!r}
mode = os.environ.get("FAKE_CLAUDE_MODE", "ok")
args = sys.argv[1:]
if args == ["--version"]:
    print("2.1.332 (Claude Code)")
    sys.exit(0)
if args == ["--help"]:
    print(HELP.replace("--bare", "--barely") if mode == "old" else HELP)
    sys.exit(0)
prompt = sys.stdin.read()
with open(f"/proc/{{os.getppid()}}/cmdline", "rb") as f:
    parent = f.read().split(b"\0")[0].decode()
keep = ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "DISABLE_TELEMETRY", "CLAUDE_CODE_DISABLE_THINKING", "CLAUDE_CODE_MAX_OUTPUT_TOKENS")
with open(LOG, "a") as f:
    f.write(json.dumps({{"argv": args, "stdin": prompt, "cwd": os.getcwd(), "listing": os.listdir("."),
                        "parent": parent, "env": {{k: os.environ.get(k) for k in keep}}}}) + "\n")
if mode == "not_logged_in":
    print(json.dumps({{"type": "result", "subtype": "success", "is_error": True,
                      "result": "Not logged in \u00b7 Please run /login"}}))
    sys.exit(1)
if mode == "sleep":
    time.sleep(30)
if mode == "spawn":  # a helper process of its own, as the real CLI starts, then hang
    import subprocess
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with open(os.environ["FAKE_CLAUDE_HELPER_PID"], "w") as f:
        f.write(str(helper.pid))
    time.sleep(30)
if mode in ("spawn_setsid", "spawn_daemon"):  # a helper in a session of its own (setsid), then hang
    import subprocess
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    starter = ("import os, subprocess, sys; p = subprocess.Popen(" + repr(sleeper)
               + ", start_new_session=True)"
               + "; open(os.environ['FAKE_CLAUDE_HELPER_PID'], 'w').write(str(p.pid))")
    if mode == "spawn_setsid":
        exec(starter)
    else:  # daemonised: started by an intermediate process that exits, so its parent is gone
        subprocess.run([sys.executable, "-c", starter])
    time.sleep(30)
if mode == "garbage":
    sys.stderr.write("crashed; key was " + os.environ.get("ANTHROPIC_API_KEY", "") + "\n")
    print("Segmentation fault")
    sys.exit(139)
if mode == "quote_key":  # the model's answer quotes the key it was given
    answer = json.dumps({{"answer": "your key: " + os.environ.get("ANTHROPIC_API_KEY", "")}})
    print(json.dumps({{"type": "result", "is_error": False, "result": answer}}))
    sys.exit(0)
if mode == "echo_key":
    print(json.dumps({{"type": "result", "is_error": True,
                      "result": "invalid x-api-key " + os.environ.get("ANTHROPIC_API_KEY", "")}}))
    sys.exit(1)
task = next((t for t in SCRIPTS if "[user]\n" + t["prompt"] in prompt), None)
if task is None:
    print(json.dumps({{"type": "result", "is_error": True, "result": "fake claude: unknown conversation"}}))
    sys.exit(1)
step = prompt.count("\n\n[assistant]\n")
print(json.dumps({{"type": "result", "subtype": "success", "is_error": False,
                  "result": json.dumps(task["steps"][step]),
                  "usage": {{"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 7}},
                  "total_cost_usd": 0.001, "modelUsage": {{"claude-fake-1": {{}}}}}}))
'''


def write_fake_claude(folder: Path, log: Path, suite: str = "orders") -> Path:
    """Write an executable ``claude`` into ``folder`` that logs each call to ``log`` (JSON lines).

    It answers ``--version`` and ``--help``, and otherwise reads the flattened
    prompt from stdin, finds the task by its prompt in a ``[user]`` block and
    the step by the number of ``[assistant]`` blocks, and prints the CLI's JSON
    result with the next step of the task's known-good script. ``FAKE_CLAUDE_MODE``
    selects a failure instead: ``not_logged_in``, ``sleep``, ``spawn`` (starts a helper process,
    writes its pid to ``$FAKE_CLAUDE_HELPER_PID``, hangs), ``spawn_setsid`` (the helper calls
    setsid), ``spawn_daemon`` (the helper calls setsid and its parent exits), ``garbage``, ``quote_key``,
    ``echo_key``, ``old`` (a ``--help`` without ``--bare``).
    """
    from passk_nb.harness.suites import get_suite

    scripts = [{"prompt": t.prompt, "steps": list(t.script)} for t in get_suite(suite).tasks]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "claude"
    path.write_text(
        _FAKE_CLAUDE.format(python=sys.executable, log=str(log), scripts=scripts, help=FAKE_CLAUDE_HELP)
    )
    path.chmod(0o755)
    return path


def chat_completion(model: Any, message: dict[str, Any], finish_reason: str, n_in: int, n_out: int) -> dict:
    """An OpenAI chat-completions response holding one choice."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out},
    }


def clean_backend_env(monkeypatch: Any) -> None:
    """No backend URL or key from the developer's environment; a dummy Anthropic key (the fake
    server takes any)."""
    for name in ("OLLAMA_HOST", "OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000")


def run_against(wire: str, server: FakeServer, tmp_path: Any, **options: Any) -> Any:
    """``passk_nb.run`` of one trial per task of the orders suite against a fake ``server``
    speaking ``wire``, records under ``tmp_path/runs``; ``options`` override."""
    import passk_nb

    options = {"trials": 1, "progress": False, "out": tmp_path / "runs", "concurrency": 2, **options}
    return passk_nb.run(wire, "test-model", base_url=server.url, **options)
