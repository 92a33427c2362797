"""Provider batch APIs: every waiting trial's next turn in one batch, at the batch price.

Anthropic's Message Batches and OpenAI's Batch API answer within 24 hours at half the price of
the same requests sent one by one. ``run(..., batch=True)`` wraps the ``anthropic`` or ``openai``
backend in a :class:`BatchProvider`: each trial runs as usual (same episode, checks, records),
but a model turn is not sent on its own. The :class:`Batcher` collects the turns that arrive
while it waits (``window`` seconds after the last one, or ``max_requests``), submits them as
one batch *round*, polls it every ``poll`` seconds until it ends, and hands each trial its
result; the trials then ask for their next turns, which form the next round, until every
trial ends. A run of T-turn trials thus waits for about T batches.

Resumable at any point. Each request has a ``custom_id`` derived from its trial and its body
(:func:`custom_id`); each submitted batch is written to ``<run folder>/_batches.jsonl``
(round, batch id, custom ids) as soon as the API gives its id. A run killed while a batch is
processed is re-run as usual; its unfinished trials replay their episodes, and a request whose
custom id a recorded batch already holds is answered from that batch (polled again if it had
not ended), never submitted again: a batch is paid for once. Requests that expired or were
canceled go into the next round (at most ``max_attempts`` times); an errored request ends its
trial as ``infra_error`` with the API's message (an overload is retried like an expiry).
Left: a kill in the moment between the API's accepting a batch and the journal's line (one
HTTP reply) would submit that round again.

Each reply's ``provider_meta`` lists its requests' ``batches`` (round, batch id, custom id), so
every record says which batches answered it.

Wire formats (each API's reference; the fake servers of the tests speak the same):

- Anthropic: ``POST /v1/messages/batches`` ``{"requests": [{"custom_id", "params"}]}`` →
  a ``message_batch`` (``id``, ``processing_status`` ``in_progress|canceling|ended``,
  ``results_url``); ``GET /v1/messages/batches/{id}``; the results as JSONL lines
  ``{"custom_id", "result": {"type": "succeeded", "message"} | {"type": "errored", "error":
  {"type": "error", "error": {"type", "message"}}} | {"type": "expired"} | {"type": "canceled"}}``.
- OpenAI: the requests as a JSONL file ``{"custom_id", "method": "POST", "url":
  "/v1/chat/completions", "body"}`` uploaded by ``POST /v1/files`` (multipart, ``purpose=batch``),
  then ``POST /v1/batches`` ``{"input_file_id", "endpoint", "completion_window": "24h"}`` → a
  ``batch`` (``id``, ``status`` ``validating|in_progress|finalizing|completed|failed|expired|
  cancelling|cancelled``, ``output_file_id``, ``error_file_id``); ``GET /v1/batches/{id}``;
  ``GET /v1/files/{id}/content`` gives JSONL lines ``{"custom_id", "response": {"status_code",
  "body"}, "error": null | {"code", "message"}}`` (``code: "batch_expired"`` for an expiry).

>>> custom_id(("refund-delivered", 0), {"model": "m", "messages": []})
'p4529b7e098f8a5e64b50ad113c891ffee537094d09f2a887'
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from passk_nb.harness.providers.base import Message, ProviderError, Reply
from passk_nb.harness.providers.retry import provider_error

__all__ = [
    "TRIAL",
    "Batcher",
    "BatchProvider",
    "Outcome",
    "custom_id",
    "batch_wire",
    "JOURNAL_FILE",
]

#: The trial a request belongs to, ``(task, trial)``: set by the runner around each trial, read
#: by :class:`BatchProvider` to name the request.
TRIAL: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar("passk_trial", default=None)

#: The journal of submitted batches, in the run's folder (``_`` files are not records).
JOURNAL_FILE = "_batches.jsonl"

#: The most a batch's results are read to (beside ``max_body_bytes`` per request).
MAX_RESULTS_BYTES = 1 << 30

#: Error types an API reports for a request it could not serve now (retried in the next round).
TRANSIENT_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error", "server_error"})


def _obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (a field the reply left out)."""
    return value if isinstance(value, dict) else {}


def custom_id(trial: tuple[str, int], body: dict[str, Any]) -> str:
    """The request's id in a batch: a hash of its trial and its body (at most 64 of
    ``[a-zA-Z0-9_-]``, as both APIs require). The same trial at the same turn asks the same
    body again after a kill, so its id finds the batch that already holds it."""
    text = json.dumps([list(trial), body], sort_keys=True, ensure_ascii=False, default=str)
    return "p" + hashlib.sha256(text.encode()).hexdigest()[:48]


@dataclass(frozen=True)
class Outcome:
    """One request's result in an ended batch: ``kind`` is ``succeeded`` (``data`` the reply's
    JSON), ``errored`` (``message``; ``transient`` when the API was only busy), ``expired`` or
    ``canceled``."""

    kind: str
    data: Any = None
    message: str = ""
    transient: bool = False


@dataclass
class _Batch:
    """What a batch's status said: whether it ended, and what its results need."""

    batch_id: str
    ended: bool
    status: str
    info: dict[str, Any] = field(default_factory=dict)


class _Wire:
    """A batch API over HTTP: submit, poll, results; the requests go through the backend's own
    checks (``read_body``/``check_reply``: deadline, body caps, classification), with its retries."""

    def __init__(self, provider: Any):
        self.provider = provider
        self._client = self.make_client()

    def make_client(self) -> httpx.Client:
        """The one httpx client of the batch calls (they are few: one connection is enough)."""
        raise NotImplementedError

    def close(self) -> None:
        self._client.close()

    def call(self, method: str, path: str, *, cap: int | None = None, **send: Any) -> bytes:
        """One API call with the backend's retries and checks; the reply's body (at most ``cap``
        bytes, default the backend's ``max_body_bytes``)."""
        reader = self.provider
        if cap is not None and cap > reader.max_body_bytes:
            reader = copy.copy(reader)
            reader.max_body_bytes = cap
            reader.max_decompressed_bytes = max(cap, reader.max_decompressed_bytes)
        where = f"{method} {path}"

        def once() -> bytes:
            response, raw = reader.read_httpx(self._client, method, path, where, **send)
            reader.check_reply(response, raw, where)
            return raw

        raw, _ = self.provider.retrier.call(once)
        return raw

    def json(self, method: str, path: str, **send: Any) -> dict[str, Any]:
        """One API call's JSON object, decoded as the backend decodes its chat replies."""
        where = f"{method} {path}"

        def once() -> dict[str, Any]:
            return self.provider._decode(
                *self.provider.read_httpx(self._client, method, path, where, **send), where
            )

        data, _ = self.provider.retrier.call(once)
        return data

    def lines(self, method: str, path: str, cap: int) -> list[dict[str, Any]]:
        """A JSONL body's objects (a line that is not one is a ProviderError naming it)."""
        raw = self.call(method, path, cap=cap)
        out = []
        for number, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError:
                item = None
            if not isinstance(item, dict) or not isinstance(item.get("custom_id"), str):
                excerpt = self.provider.excerpt(line, 120)
                raise ProviderError(
                    f"line {number} of {method} {path} is not a result with a custom_id: {excerpt!r}"
                )
            out.append(item)
        return out

    def path_of(self, url: str) -> str | None:
        """The path of ``url`` below the base URL (what the client joins to the base, as for every
        other request), or None when ``url`` points elsewhere: the key goes only to the base."""
        base, target = urlsplit(self.provider.base_url or ""), urlsplit(url)
        inside = target.path.startswith(base.path.rstrip("/") + "/")
        if (target.scheme, target.netloc) != (base.scheme, base.netloc) or not inside:
            return None
        return target.path[len(base.path.rstrip("/")) :] + (f"?{target.query}" if target.query else "")

    def _id_of(self, data: dict[str, Any], where: str) -> str:
        value = data.get("id")
        if not isinstance(value, str) or not value:
            raise ProviderError(
                f"reply to {where} has no batch id: {self.provider.excerpt(str(data), 120)!r}"
            )
        return value

    # what each API defines
    def body(self, messages: list[Message], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
        raise NotImplementedError

    def read(self, data: Any, native: bool) -> Reply:
        raise NotImplementedError

    def submit(self, requests: list[tuple[str, dict[str, Any]]], round_no: int) -> str:
        raise NotImplementedError

    def poll(self, batch_id: str) -> _Batch:
        raise NotImplementedError

    def results(self, batch: _Batch, n_requests: int) -> dict[str, Outcome]:
        raise NotImplementedError


class AnthropicBatches(_Wire):
    """Anthropic's Message Batches API (``/v1/messages/batches``)."""

    def make_client(self) -> httpx.Client:
        p = self.provider
        return httpx.Client(
            base_url=p.base_url or "",
            headers=p.sdk_headers(),  # what the SDK and the asyncio path send: version, key, client
            timeout=httpx.Timeout(p.timeout, connect=min(p.timeout, 10.0)),
            follow_redirects=False,
        )

    def body(self, messages: list[Message], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
        return (
            self.provider.request(messages)
            if tools is None
            else self.provider.native_request(messages, tools)
        )

    def read(self, data: Any, native: bool) -> Reply:
        from passk_nb.harness.providers.anthropic import as_attributes

        if not isinstance(data, dict):
            raise ProviderError("a batch result's message is not a JSON object")
        return self.provider.read_reply(as_attributes(data), native=native)  # as the asyncio path reads

    def submit(self, requests: list[tuple[str, dict[str, Any]]], round_no: int) -> str:
        body = {"requests": [{"custom_id": cid, "params": params} for cid, params in requests]}
        return self._id_of(self.json("POST", "/v1/messages/batches", json=body), "POST /v1/messages/batches")

    def poll(self, batch_id: str) -> _Batch:
        data = self.json("GET", f"/v1/messages/batches/{batch_id}")
        status = str(data.get("processing_status"))
        return _Batch(batch_id, status == "ended", status, data)

    def results(self, batch: _Batch, n_requests: int) -> dict[str, Outcome]:
        url = batch.info.get("results_url")
        path = (self.path_of(url) if isinstance(url, str) else None) or (
            f"/v1/messages/batches/{batch.batch_id}/results"
        )
        cap = min(MAX_RESULTS_BYTES, self.provider.max_body_bytes * max(1, n_requests))
        out = {}
        for line in self.lines("GET", path, cap):
            result = _obj(line.get("result"))
            kind = result.get("type")
            if kind == "succeeded":
                out[line["custom_id"]] = Outcome("succeeded", result.get("message"))
            elif kind in ("expired", "canceled"):
                out[line["custom_id"]] = Outcome(str(kind))
            else:
                error = _obj(result.get("error"))
                inner = _obj(error.get("error")) or error
                kind_of_error = str(inner.get("type", "unknown error"))
                text = f"{kind_of_error}: {inner.get('message', '')}".strip(": ")
                out[line["custom_id"]] = Outcome(
                    "errored", message=text, transient=kind_of_error in TRANSIENT_ERRORS
                )
        return out


class OpenAIBatches(_Wire):
    """OpenAI's Batch API (``/v1/files`` and ``/v1/batches``, endpoint ``/v1/chat/completions``)."""

    #: A batch in one of these states has ended.
    ENDED = frozenset({"completed", "failed", "expired", "cancelled"})

    def __init__(self, provider: Any):
        super().__init__(provider)
        self.prefix = provider.prefix  # as the chat path's: "" when the base URL ends in /v1

    def make_client(self) -> httpx.Client:
        return self.provider._make_client(1)  # the chat path's httpx client: base URL, auth, key

    def body(self, messages: list[Message], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
        return (
            self.provider.request_body(messages)
            if tools is None
            else self.provider.native_body(messages, tools)
        )

    def read(self, data: Any, native: bool) -> Reply:
        if not isinstance(data, dict):
            raise ProviderError("a batch result's response body is not a JSON object")
        return self.provider.read_native_reply(data) if native else self.provider.read_reply(data)

    def submit(self, requests: list[tuple[str, dict[str, Any]]], round_no: int) -> str:
        lines = [
            json.dumps(
                {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": body},
                ensure_ascii=False,
            )
            for cid, body in requests
        ]
        upload = self.json(
            "POST",
            f"{self.prefix}/files",
            data={"purpose": "batch"},
            files={"file": (f"passk-round-{round_no}.jsonl", "\n".join(lines).encode(), "application/jsonl")},
        )
        file_id = self._id_of(upload, f"POST {self.prefix}/files")
        created = self.json(
            "POST",
            f"{self.prefix}/batches",
            json={
                "input_file_id": file_id,
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
                "metadata": {"passk_round": str(round_no)},
            },
        )
        return self._id_of(created, f"POST {self.prefix}/batches")

    def poll(self, batch_id: str) -> _Batch:
        data = self.json("GET", f"{self.prefix}/batches/{batch_id}")
        status = str(data.get("status"))
        return _Batch(batch_id, status in self.ENDED, status, data)

    def results(self, batch: _Batch, n_requests: int) -> dict[str, Outcome]:
        cap = min(MAX_RESULTS_BYTES, self.provider.max_body_bytes * max(1, n_requests))
        out: dict[str, Outcome] = {}
        for key in ("output_file_id", "error_file_id"):
            file_id = batch.info.get(key)
            if not isinstance(file_id, str) or not file_id:
                continue
            for line in self.lines("GET", f"{self.prefix}/files/{file_id}/content", cap):
                out[line["custom_id"]] = self._outcome(line)
        if batch.status == "failed":  # refused as a whole (validation): every request with its reason
            errors = _obj(batch.info.get("errors"))
            reasons = [e.get("message", "") for e in errors.get("data") or [] if isinstance(e, dict)]
            message = "batch failed: " + ("; ".join(map(str, reasons)) or "no reason given")
            return {"*": Outcome("errored", message=message)}
        return out

    @staticmethod
    def _outcome(line: dict[str, Any]) -> Outcome:
        response, error = _obj(line.get("response")), _obj(line.get("error"))
        if response.get("status_code") == 200 and not error:
            return Outcome("succeeded", response.get("body"))
        if error.get("code") == "batch_expired":
            return Outcome("expired")
        if error.get("code") == "batch_cancelled":
            return Outcome("canceled")
        status = response.get("status_code")
        detail = _obj(_obj(response.get("body")).get("error")) or error
        message = f"HTTP {status}: " if status else ""
        message += f"{detail.get('code') or detail.get('type') or 'error'}: {detail.get('message', '')}"
        transient = isinstance(status, int) and (status == 429 or status >= 500)
        return Outcome("errored", message=message, transient=transient)


def batch_wire(provider: Any) -> _Wire:
    """The batch API of ``provider`` (an ``anthropic`` or ``openai`` backend), or a ValueError."""
    from passk_nb.harness.providers.anthropic import AnthropicProvider
    from passk_nb.harness.providers.openai import OpenAIProvider

    if isinstance(provider, AnthropicProvider):
        return AnthropicBatches(provider)
    if isinstance(provider, OpenAIProvider):
        return OpenAIBatches(provider)
    raise ValueError(
        f"batch=True sends requests through a provider's batch API (anthropic, openai); the "
        f"{getattr(provider, 'name', type(provider).__name__)} backend has none: run it without batch"
    )


class Batcher:
    """Rounds of batches on the transport loop: collects requests, submits, polls, answers.

    Every method runs on the loop (:func:`~passk_nb.harness.providers.transport.shared_loop`);
    the API calls run in worker threads. ``journal``: the run folder's ``_batches.jsonl``
    (None: nothing is written, and nothing resumes).
    """

    def __init__(
        self,
        wire: _Wire,
        *,
        poll: float = 30.0,
        window: float = 1.0,
        max_requests: int = 10_000,
        journal: Path | None = None,
    ):
        self.wire, self.poll, self.window, self.max_requests = wire, poll, window, max_requests
        self.journal = journal
        self.rounds = 0  # the last round submitted (by this run or one before it)
        self.submitted = 0  # batches submitted by this process
        self._known: dict[str, tuple[int, str]] = {}  # custom id -> (round, batch id) of its last batch
        self._sizes: dict[str, int] = {}  # batch id -> its number of requests
        self._watches: dict[str, asyncio.Future[dict[str, Outcome]]] = {}
        self._pending: dict[str, dict[str, Any]] = {}
        self._round: asyncio.Future[tuple[int, str]] | None = None
        self._deadline = 0.0
        if journal is not None:
            self._read_journal(journal)

    def _read_journal(self, path: Path) -> None:
        if not path.exists():
            return
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            try:
                entry = json.loads(line)
                round_no, batch_id, ids = (
                    int(entry["round"]),
                    str(entry["batch_id"]),
                    list(entry["custom_ids"]),
                )
            except (ValueError, KeyError, TypeError):
                if number == len(lines):
                    continue  # the last line of a run killed while writing it
                raise ValueError(
                    f"{path}, line {number}, is not a batch entry (round, batch_id, custom_ids): "
                    f"{line[:120]!r}; the file is written by run(batch=True): restore it, or delete it "
                    "to submit every request again"
                ) from None
            self.rounds = max(self.rounds, round_no)
            self._sizes[batch_id] = len(ids)
            for cid in ids:
                self._known[str(cid)] = (round_no, batch_id)

    def _write_journal(self, entry: dict[str, Any]) -> None:
        if self.journal is None:
            return
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        with self.journal.open("a", encoding="utf-8") as f:  # masked, as every record on its way to disk
            f.write(json.dumps(self.wire.provider.redact.known(entry)) + "\n")
            f.flush()
            os.fsync(f.fileno())

    async def ask(self, cid: str, body: dict[str, Any], *, again: bool = False) -> tuple[Outcome, int, str]:
        """The result of request ``cid`` (``body``) and the round and batch that answered it: from the
        batch that already holds it (a resumed run), else from the next round. ``again``: a new
        round even if a batch holds it (its result expired)."""
        known = None if again else self._known.get(cid)
        if known is None:
            known = await asyncio.shield(self._enqueue(cid, body))
        round_no, batch_id = known
        results = await asyncio.shield(self._watch(batch_id))
        outcome = results.get(cid) or results.get("*")
        if outcome is None:
            outcome = Outcome("errored", message=f"batch {batch_id} ended without a result for request {cid}")
        return outcome, round_no, batch_id

    def _enqueue(self, cid: str, body: dict[str, Any]) -> asyncio.Future[tuple[int, str]]:
        loop = asyncio.get_running_loop()
        if self._round is None:
            self._round = loop.create_future()
            loop.create_task(self._flush_when_quiet(), context=contextvars.Context())
        self._pending[cid] = body
        self._deadline = loop.time() + self.window
        if len(self._pending) >= self.max_requests:
            self._deadline = loop.time()
        return self._round

    async def _flush_when_quiet(self) -> None:
        loop = asyncio.get_running_loop()
        while (left := self._deadline - loop.time()) > 0:
            await asyncio.sleep(left)
        requests, future = list(self._pending.items()), self._round
        self._pending, self._round = {}, None
        assert future is not None
        self.rounds += 1
        round_no = self.rounds
        try:
            batch_id = await asyncio.to_thread(self.wire.submit, requests, round_no)
        except BaseException as exc:
            future.set_exception(exc)
            return
        self.submitted += 1
        ids = [cid for cid, _ in requests]
        self._write_journal({"round": round_no, "batch_id": batch_id, "custom_ids": ids, "at": time.time()})
        self._sizes[batch_id] = len(ids)
        for cid in ids:
            self._known[cid] = (round_no, batch_id)
        future.set_result((round_no, batch_id))

    def _watch(self, batch_id: str) -> asyncio.Future[dict[str, Outcome]]:
        watch = self._watches.get(batch_id)
        if watch is None:
            loop = asyncio.get_running_loop()
            watch = loop.create_task(self._until_ended(batch_id), context=contextvars.Context())
            self._watches[batch_id] = watch
        return watch

    async def _until_ended(self, batch_id: str) -> dict[str, Outcome]:
        try:
            while not (batch := await asyncio.to_thread(self.wire.poll, batch_id)).ended:
                await asyncio.sleep(self.poll)
            return await asyncio.to_thread(self.wire.results, batch, self._sizes.get(batch_id, 1))
        except BaseException:
            del self._watches[batch_id]  # the next request of it polls again
            raise


class BatchProvider:
    """A backend whose model turns go through its batch API (see the module's docstring).

    Everything but the turns is the backend's own (``describe``, identity, checks): a batch run
    has the run id of the same run sent request by request, so either resumes the other.
    """

    speaks_asyncio = True

    def __init__(
        self, base: Any, *, poll: float = 30.0, window: float | None = None, batcher: Batcher | None = None
    ):
        self.base = base
        self.wire = batcher.wire if batcher is not None else batch_wire(base)
        self.batcher = batcher or Batcher(
            self.wire, poll=poll, window=min(1.0, poll) if window is None else window
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self.base, name)

    def attach_journal(self, path: Path) -> None:
        """Write submitted batches to ``path`` and answer from the batches it already lists."""
        self.batcher = Batcher(
            self.wire,
            poll=self.batcher.poll,
            window=self.batcher.window,
            max_requests=self.batcher.max_requests,
            journal=path,
        )

    def with_seed(self, seed: int | None) -> BatchProvider:
        return BatchProvider(self.base.with_seed(seed), batcher=self.batcher)

    def size_pool(self, concurrency: int) -> None:
        """Nothing to size: batch calls are few, on one client."""

    def close(self) -> None:
        self.wire.close()
        self.base.close()

    async def achat(self, messages: list[Message]) -> Reply:
        return await self._ask(self.wire.body(messages, None), native=False)

    async def achat_native(self, messages: list[Message], tools: list[dict[str, Any]]) -> Reply:
        return await self._ask(self.wire.body(messages, tools), native=True)

    async def _ask(self, body: dict[str, Any], *, native: bool) -> Reply:
        trial = TRIAL.get()
        if trial is None:
            raise ProviderError(
                "a batch request needs the trial it belongs to: run it through run(batch=True)"
            )
        cid = custom_id(trial, body)
        limit = self.base.retry_policy.max_attempts
        seen: list[dict[str, Any]] = []
        for attempt in range(1, limit + 1):
            outcome, round_no, batch_id = await self.batcher.ask(cid, body, again=attempt > 1)
            seen.append({"round": round_no, "batch_id": batch_id, "custom_id": cid, "result": outcome.kind})
            if outcome.kind == "succeeded":
                reply = self.wire.read(outcome.data, native)
                reply.meta = {**reply.meta, "batches": seen}
                return self.base._as_models(reply, attempt)
            if outcome.kind == "errored" and not outcome.transient:
                message = f"batch {batch_id} (round {round_no}): request errored: {outcome.message}"
                raise provider_error(self.base.excerpt(message), attempt)  # masked as the chat path's
        what = ", ".join(f"{s['result']} in batch {s['batch_id']}" for s in seen)
        message = f"no batch answered the request after {limit} rounds ({what})"
        raise provider_error(self.base.excerpt(message), limit)

    def chat(self, messages: list[Message]) -> Reply:
        """A turn outside a batch run (e.g. a probe) goes request by request."""
        return self.base.chat(messages)
