"""Fake batch APIs on 127.0.0.1: Anthropic's Message Batches and OpenAI's Batch API.

Each server answers the chat endpoint one request at a time too, and answers every request of a
batch as :class:`~tests.helpers.fake_servers.FakeServer` would answer it alone (the suite's
known-good script), in the wire format of each API's reference:

- Anthropic: ``POST /v1/messages/batches`` (``{"requests": [{"custom_id", "params"}]}``),
  ``GET /v1/messages/batches/{id}`` (``processing_status``, ``request_counts``, ``results_url``),
  ``GET /v1/messages/batches/{id}/results`` (JSONL of ``{"custom_id", "result"}``);
- OpenAI: ``POST /v1/files`` (multipart, ``purpose=batch``, a JSONL file of ``{"custom_id",
  "method", "url", "body"}``), ``POST /v1/batches``, ``GET /v1/batches/{id}`` (``status``,
  ``output_file_id``, ``error_file_id``), ``GET /v1/files/{id}/content``.

What a test controls: ``polls_before_end`` (a batch reports itself in progress for that many
status requests), ``hold`` (while set, no batch ends), ``fate(custom_id, body)`` returning
``"expired"``, ``"canceled"``, ``"errored"``, ``"overloaded"`` or None (answered),
``rate_limited_polls`` (the first that many status requests answer 429 with ``Retry-After: 1``),
``failed_batches`` (OpenAI: the first that many batches fail as a whole, ``token_limit_exceeded``),
``forgotten`` (batch ids answered 404, as an API that no longer knows them), ``mangle(batch,
lines)`` (the results file's lines as served: to damage, repeat or add lines). Also
``("errored", message)`` for an error with that message, ``batch_id(n)`` naming the n-th batch,
and ``prefix``: a path every route lives below (a proxy's, e.g. ``/seg``). What it reads:
``batches`` (each submitted batch's id and custom ids), ``polls``, ``chat_requests``.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Callable
from email import message_from_bytes
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.helpers.fake_servers import FakeServer, Served

__all__ = ["BatchServer"]


def _iso(seconds: float) -> str:
    """A time as Anthropic's API writes it (RFC 3339, UTC)."""
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class BatchServer(Served):
    """A fake batch API of one wire (``"anthropic"`` or ``"openai"``); use as a context manager."""

    def __init__(
        self,
        wire: str,
        *,
        suite: str = "orders",
        polls_before_end: int = 1,
        fate: Callable[[str, dict[str, Any]], Any] | None = None,
        rate_limited_polls: int = 0,
        failed_batches: int = 0,
        mangle: Callable[[dict[str, Any], list[str]], list[str]] | None = None,
        batch_id: Callable[[int], str] | None = None,
        prefix: str = "",
    ):
        if wire not in ("anthropic", "openai"):
            raise ValueError("wire must be 'anthropic' or 'openai'")
        self.wire = wire
        self.replies = FakeServer(wire, suite=suite)  # its reply logic only (never started)
        self.polls_before_end = polls_before_end
        self.fate = fate
        self.rate_limited_polls, self.failed_batches, self.mangle = rate_limited_polls, failed_batches, mangle
        self.forgotten: set[str] = set()
        self.batch_id = batch_id or (lambda n: f"{'msgbatch' if wire == 'anthropic' else 'batch'}_{n:04d}")
        self.prefix = prefix
        self.hold = threading.Event()
        self.batches: list[dict[str, Any]] = []  # {"id", "custom_ids", "requests", "polls", "results"}
        self.files: dict[str, bytes] = {}
        self.polls = 0
        self.chat_requests = 0
        self.lock = threading.Lock()
        self._serve(self._handler())

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self.replies._httpd.server_close()

    # -- answers --------------------------------------------------------------------------------
    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The reply the chat endpoint gives to ``body`` (native when it offers tools)."""
        if body.get("tools"):
            text, calls = self.replies.native_message(body)
            return self.replies.native_json(body, text, calls)
        return self.replies.reply_json(body, self.replies.reply_text(body), 11, 5)

    def _result(self, cid: str, body: dict[str, Any]) -> dict[str, Any]:
        fate = self.fate(cid, body) if self.fate else None
        fate, message = fate if isinstance(fate, tuple) else (fate, f"injected {fate}")
        if self.wire == "anthropic":
            if fate in ("expired", "canceled"):
                return {"custom_id": cid, "result": {"type": fate}}
            if fate in ("errored", "overloaded"):
                kind = "overloaded_error" if fate == "overloaded" else "invalid_request_error"
                error = {"type": "error", "error": {"type": kind, "message": message}}
                return {"custom_id": cid, "result": {"type": "errored", "error": error}}
            return {"custom_id": cid, "result": {"type": "succeeded", "message": self.answer(body)}}
        line: dict[str, Any] = {"id": f"batch_req_{cid[:8]}", "custom_id": cid}
        if fate == "expired":
            return {**line, "response": None, "error": {"code": "batch_expired", "message": "window passed"}}
        if fate == "canceled":
            return {**line, "response": None, "error": {"code": "batch_cancelled", "message": "cancelled"}}
        if fate in ("errored", "overloaded"):
            status = 503 if fate == "overloaded" else 400
            error = {"message": message, "type": "invalid_request_error", "code": fate}
            return {
                **line,
                "response": {"status_code": status, "request_id": "r", "body": {"error": error}},
                "error": None,
            }
        return {
            **line,
            "response": {"status_code": 200, "request_id": "r", "body": self.answer(body)},
            "error": None,
        }

    def _ended(self, batch: dict[str, Any]) -> bool:
        """One more look at ``batch``: has it ended? (results made when it does)"""
        batch["polls"] += 1
        if self.hold.is_set() or batch["polls"] <= self.polls_before_end:
            return False
        if batch["results"] is None:
            failed = self.wire == "openai" and int(batch["id"].split("_")[-1]) < self.failed_batches
            batch["failed"] = failed
            batch["results"] = [] if failed else [self._result(cid, body) for cid, body in batch["requests"]]
        return True

    def _lines(self, batch: dict[str, Any], results: list[dict[str, Any]]) -> bytes:
        """A results file as served (``mangle`` may damage it)."""
        lines = [json.dumps(r) for r in results]
        return "\n".join(self.mangle(batch, lines) if self.mangle else lines).encode()

    def _status(self, batch: dict[str, Any]) -> dict[str, Any]:
        ended = self._ended(batch)
        results = batch["results"] or []
        if self.wire == "anthropic":
            kinds = [r["result"]["type"] for r in results]
            counts = {k: kinds.count(k) for k in ("succeeded", "errored", "canceled", "expired")}
            counts["processing"] = 0 if ended else len(batch["requests"])
            return {
                "id": batch["id"],
                "type": "message_batch",
                "processing_status": "ended" if ended else "in_progress",
                "request_counts": counts,
                "results_url": (
                    f"{self.url}{self.prefix}/v1/messages/batches/{batch['id']}/results" if ended else None
                ),
                "created_at": _iso(batch["created"]),
                "expires_at": _iso(batch["created"] + 86400),
                "ended_at": _iso(time.time()) if ended else None,
            }
        status: dict[str, Any] = {
            "id": batch["id"],
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "input_file_id": batch["input_file_id"],
            "completion_window": "24h",
            "created_at": int(batch["created"]),
            "expires_at": int(batch["created"] + 86400),
            "status": "completed" if ended else "in_progress",
            "output_file_id": None,
            "error_file_id": None,
            "request_counts": {"total": len(batch["requests"]), "completed": 0, "failed": 0},
        }
        if ended and batch.get("failed"):
            status["status"] = "failed"
            status["errors"] = {
                "object": "list",
                "data": [
                    {
                        "code": "token_limit_exceeded",
                        "message": "Enqueued token limit reached for test-model in organization org-x.",
                        "param": None,
                        "line": None,
                    }
                ],
            }
        elif ended:
            good = [r for r in results if r.get("response") and r["response"]["status_code"] == 200]
            bad = [r for r in results if r not in good]
            for key, lines in (("output_file_id", good), ("error_file_id", bad)):
                if lines:
                    file_id = f"file-{key[:3]}-{batch['id']}"
                    self.files[file_id] = self._lines(batch, lines)
                    status[key] = file_id
            status["request_counts"] = {"total": len(results), "completed": len(good), "failed": len(bad)}
        return status

    # -- HTTP -----------------------------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args: Any) -> None:
                pass

            def reply(self, status: int, data: Any, kind: str = "application/json") -> None:
                raw = data if isinstance(data, bytes) else json.dumps(data).encode()
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("content-length") or 0))

            def find(self, batch_id: str) -> dict[str, Any] | None:
                if batch_id in server.forgotten:
                    return None
                return next((b for b in server.batches if b["id"] == batch_id), None)

            def rate_limited(self) -> bool:
                """The first ``rate_limited_polls`` status requests answer 429 (Retry-After: 1)."""
                if server.rate_limited_polls <= 0:
                    return False
                server.rate_limited_polls -= 1
                raw = json.dumps({"error": {"type": "rate_limit_error", "message": "slow down"}}).encode()
                self.send_response(429)
                self.send_header("retry-after", "1")
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def below_prefix(self) -> bool:
                """Take the prefix off the path; False (and a 404) when the path is not below it."""
                if not self.path.startswith(server.prefix + "/"):
                    self.reply(
                        404, {"error": {"message": f"no route {self.path} (not below {server.prefix})"}}
                    )
                    return False
                self.path = self.path[len(server.prefix) :]
                return True

            def do_POST(self) -> None:
                raw = self.body()
                if not self.below_prefix():
                    return
                with server.lock:
                    if self.path in ("/v1/messages", "/v1/chat/completions"):
                        server.chat_requests += 1
                        self.reply(200, server.answer(json.loads(raw)))
                    elif self.path == "/v1/messages/batches" and server.wire == "anthropic":
                        requests = json.loads(raw)["requests"]
                        batch = {
                            "id": server.batch_id(len(server.batches)),
                            "requests": [(r["custom_id"], r["params"]) for r in requests],
                            "polls": 0,
                            "results": None,
                            "created": time.time(),
                        }
                        batch["custom_ids"] = [cid for cid, _ in batch["requests"]]
                        server.batches.append(batch)
                        self.reply(200, server._status({**batch, "polls": -(10**9)}))
                    elif self.path == "/v1/files" and server.wire == "openai":
                        message = message_from_bytes(
                            b"content-type: " + self.headers["content-type"].encode() + b"\r\n\r\n" + raw,
                            policy=HTTP,
                        )
                        parts = {
                            p.get_param("name", header="content-disposition"): p for p in message.iter_parts()
                        }
                        if parts["purpose"].get_content().strip() != "batch":
                            self.reply(400, {"error": {"message": "purpose must be batch"}})
                            return
                        file_id = f"file-in-{len(server.files):04d}"
                        server.files[file_id] = parts["file"].get_payload(decode=True)
                        self.reply(200, {"id": file_id, "object": "file", "purpose": "batch"})
                    elif self.path == "/v1/batches" and server.wire == "openai":
                        spec = json.loads(raw)
                        assert (
                            spec["endpoint"] == "/v1/chat/completions" and spec["completion_window"] == "24h"
                        )
                        lines = [
                            json.loads(line) for line in server.files[spec["input_file_id"]].splitlines()
                        ]
                        assert all(
                            line["method"] == "POST" and line["url"] == "/v1/chat/completions"
                            for line in lines
                        )
                        batch = {
                            "id": server.batch_id(len(server.batches)),
                            "input_file_id": spec["input_file_id"],
                            "requests": [(line["custom_id"], line["body"]) for line in lines],
                            "polls": 0,
                            "results": None,
                            "created": time.time(),
                        }
                        batch["custom_ids"] = [cid for cid, _ in batch["requests"]]
                        server.batches.append(batch)
                        self.reply(
                            200, {**server._status({**batch, "polls": -(10**9)}), "status": "validating"}
                        )
                    else:
                        self.reply(404, {"error": {"message": f"no route POST {self.path}"}})

            def do_GET(self) -> None:
                if not self.below_prefix():
                    return
                with server.lock:
                    parts = self.path.strip("/").split("/")
                    if server.wire == "anthropic" and parts[:3] == ["v1", "messages", "batches"]:
                        batch = self.find(parts[3]) if len(parts) > 3 else None
                        if batch is None:
                            self.reply(
                                404,
                                {
                                    "type": "error",
                                    "error": {"type": "not_found_error", "message": "no batch"},
                                },
                            )
                        elif len(parts) == 4:
                            if not self.rate_limited():
                                server.polls += 1
                                self.reply(200, server._status(batch))
                        elif batch["results"] is None:
                            self.reply(
                                400,
                                {
                                    "type": "error",
                                    "error": {"type": "invalid_request_error", "message": "not ended"},
                                },
                            )
                        else:
                            self.reply(200, server._lines(batch, batch["results"]), "application/binary")
                    elif server.wire == "openai" and parts[:2] == ["v1", "batches"] and len(parts) == 3:
                        batch = self.find(parts[2])
                        if batch is None:
                            self.reply(404, {"error": {"message": "no batch"}})
                        elif not self.rate_limited():
                            server.polls += 1
                            self.reply(200, server._status(batch))
                    elif (
                        server.wire == "openai" and parts[:2] == ["v1", "files"] and parts[3:] == ["content"]
                    ):
                        content = server.files.get(parts[2])
                        if content is None:
                            self.reply(404, {"error": {"message": "no file"}})
                        else:
                            self.reply(200, content, "application/octet-stream")
                    else:
                        self.reply(404, {"error": {"message": f"no route GET {self.path}"}})

        return Handler
