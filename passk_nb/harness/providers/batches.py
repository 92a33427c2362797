"""Provider batch APIs: every waiting trial's next turn in one batch, at the batch price.

``run(..., batch=True)`` wraps the ``anthropic`` or ``openai`` backend in a :class:`BatchProvider`:
the :class:`Batcher` collects the model turns of the trials in flight into one batch *round*,
polls it every ``poll`` seconds, and hands each trial its result. Each request's ``custom_id``
derives from its trial and body (:func:`custom_id`) and each submitted batch is journalled in
``<run folder>/_batches.jsonl`` as soon as it has an id, so a killed run, or another process
taking over its trials, polls the batch again and never pays for a request twice. Failed polls
retry until the batch's window ends (:data:`WINDOW_GRACE_S` after); lost requests go into the
next round, up to ``max_attempts``.

Resumption, failures and both APIs' wire formats: ``docs/guide/scaling.md``.

>>> custom_id(("refund-delivered", 0), {"model": "m", "messages": []})
'p4529b7e098f8a5e64b50ad113c891ffee537094d09f2a887'
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import datetime as dt
import hashlib
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from passk_nb.data.store import append_line
from passk_nb.harness.providers.base import Message, ProviderError, Reply, cancel_scope
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

log = logging.getLogger("passk_nb.harness.providers")
T = TypeVar("T")

#: The trial a request belongs to, ``(task, trial)``: set by the runner around each trial, read
#: by :class:`BatchProvider` to name the request.
TRIAL: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar("passk_trial", default=None)

#: The journal of submitted batches, in the run's folder (``_`` files are not records).
JOURNAL_FILE = "_batches.jsonl"

#: The most a batch's results are read to (read line by line: memory holds the batch's own results).
MAX_RESULTS_BYTES = 1 << 30

#: How long a batch has to end (both APIs: 24 hours), when neither the API nor the journal says.
WINDOW_S = 24 * 3600.0
#: How long past the end of its window a batch is still polled through failures (it then ends, as
#: expired, at the API's own pace).
WINDOW_GRACE_S = 3600.0

#: Error types an API reports for a request it could not serve now (retried in the next round).
TRANSIENT_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error", "server_error"})

#: Outcomes of a request its batch did not answer: it goes into the next round.
UNANSWERED = frozenset({"expired", "canceled", "failed", "gone", "unreadable", "missing"})


def _obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (a field the reply left out)."""
    return value if isinstance(value, dict) else {}


def custom_id(trial: tuple[str, int], body: dict[str, Any]) -> str:
    """The request's id in a batch: a hash of its trial and its body (at most 64 of
    ``[a-zA-Z0-9_-]``, as both APIs require). The same trial at the same turn asks the same
    body again after a kill, so its id finds the batch that already holds it."""
    text = json.dumps([list(trial), body], sort_keys=True, ensure_ascii=False, default=str)
    return "p" + hashlib.sha256(text.encode()).hexdigest()[:48]


def _expiry(info: dict[str, Any]) -> float | None:
    """When a batch's window ends (seconds since the epoch), from its ``expires_at`` (OpenAI:
    seconds; Anthropic: RFC 3339); None if it does not say.

    >>> _expiry({"expires_at": 1700000000}), _expiry({"expires_at": "2023-11-14T22:13:20Z"})
    (1700000000.0, 1700000000.0)
    """
    value = info.get("expires_at")
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if not isinstance(value, str):
        return None
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp()


@dataclass(frozen=True)
class Outcome:
    """One request's result from its batch: ``kind`` is ``succeeded`` (``data`` the reply's JSON),
    ``errored`` (``message``; ``transient`` when the API was only busy), or one of
    :data:`UNANSWERED`: ``expired``, ``canceled``, ``failed`` (the batch failed as a whole),
    ``gone`` (the API no longer knows the batch), ``unreadable`` (its result line could not be
    read, or contradicts another), ``missing`` (the batch ended without it)."""

    kind: str
    data: Any = None
    message: str = ""
    transient: bool = False

    @property
    def again(self) -> bool:
        """Whether the request goes into the next round (its batch did not answer it for good)."""
        return self.kind in UNANSWERED or (self.kind == "errored" and self.transient)


@dataclass
class _Batch:
    """What a batch's status said: whether it ended, and what its results need."""

    batch_id: str
    ended: bool
    status: str
    info: dict[str, Any] = field(default_factory=dict)


class _Gone(Exception):
    """The API answered 404 for a batch or its results: it no longer knows them. (Not a
    ProviderError: the retry loop passes it on untouched.)"""


class _Results:
    """What a batch's results files say of its requests (``ids``), gathered line by line."""

    def __init__(self, batch_id: str, ids: Collection[str]):
        self.batch_id, self.ids = batch_id, ids
        self.outcomes: dict[str, Outcome] = {}
        self.conflicting: set[str] = set()
        self.repeated = self.strangers = self.unreadable = 0
        self.first_unreadable = ""

    def add(self, cid: str, outcome: Outcome) -> None:
        """One line's result; a request given twice is noted (and distrusted if the two differ)."""
        earlier = self.outcomes.setdefault(cid, outcome)
        if earlier is not outcome:
            self.repeated += 1
            if earlier != outcome:
                self.conflicting.add(cid)

    def bad(self, where: str) -> None:
        self.unreadable += 1
        self.first_unreadable = self.first_unreadable or where

    def absorb(self, other: _Results) -> None:
        """Add what one file said (read whole, after its retries) to what the others said."""
        for cid, outcome in other.outcomes.items():
            self.add(cid, outcome)
        self.conflicting |= other.conflicting
        self.repeated += other.repeated
        self.strangers += other.strangers
        self.unreadable += other.unreadable
        self.first_unreadable = self.first_unreadable or other.first_unreadable

    def complete(self, batch: _Batch, failure: str = "") -> dict[str, Outcome]:
        """An outcome for each request of the batch: its result line's, else why it has none
        (``failure``: why the batch failed as a whole). Anything odd is logged."""
        b = self.batch_id
        if self.conflicting:
            log.warning(
                "batch %s: %d requests have two different results in its results; neither is taken, "
                "each goes into the next round",
                b,
                len(self.conflicting),
            )
        if self.repeated > len(self.conflicting):
            log.warning("batch %s: %d result lines repeat a request's result", b, self.repeated)
        if self.strangers:
            log.warning("batch %s: %d result lines are for requests not in it; ignored", b, self.strangers)
        if self.unreadable:
            log.warning(
                "batch %s: %d result lines could not be read (first: %s); the requests without a "
                "result go into the next round",
                b,
                self.unreadable,
                self.first_unreadable,
            )
        out = {}
        for cid in self.ids:
            found = self.outcomes.get(cid)
            if cid in self.conflicting:
                message = f"batch {b}'s results give this request two different results; neither taken"
                out[cid] = Outcome("unreadable", message=message)
            elif found is not None:
                out[cid] = found
            elif failure:
                out[cid] = Outcome("failed", message=failure)
            elif self.unreadable:
                message = (
                    f"batch {b} ended, but {self.unreadable} of its result lines could not be read "
                    f"(first: {self.first_unreadable}); this request's may be one"
                )
                out[cid] = Outcome("unreadable", message=message)
            else:
                message = f"batch {b} ended ({batch.status}) without a result for this request"
                out[cid] = Outcome("missing", message=message)
        return out


class _Lines:
    """A body's chunks in, its lines out to ``handle`` (a line longer than ``longest`` bytes as
    None), holding no more than one line of it."""

    def __init__(self, handle: Callable[[bytes | None], None], longest: int):
        self.handle, self.longest = handle, longest
        self.held = bytearray()
        self.overlong = False

    def feed(self, chunk: bytes) -> None:
        lines = chunk.split(b"\n")
        if len(lines) > 1:
            self._hold(lines[0])
            self._emit()
            for line in lines[1:-1]:
                self.handle(line if len(line) <= self.longest else None)
        self._hold(lines[-1])

    def close(self) -> None:
        if self.held or self.overlong:
            self._emit()

    def _hold(self, piece: bytes) -> None:
        if not self.overlong and piece:
            self.held += piece
            if len(self.held) > self.longest:
                self.held, self.overlong = bytearray(), True

    def _emit(self) -> None:
        line = None if self.overlong else bytes(self.held)
        self.held, self.overlong = bytearray(), False
        self.handle(line)


class _Wire:
    """A batch API over HTTP: submit, poll, results; the requests go through the backend's own
    checks (``read_body``/``check_reply``: deadline, body caps, classification), with its retries.
    A read (a status, a results file) is retried by the same policy until the batch's window ends."""

    def __init__(self, provider: Any):
        self.provider = provider
        self._client = self.make_client()

    def make_client(self) -> httpx.Client:
        """The one httpx client of the batch calls (they are few: one connection is enough)."""
        raise NotImplementedError

    def close(self) -> None:
        self._client.close()

    def json(self, method: str, path: str, *, until: float | None = None, **send: Any) -> dict[str, Any]:
        """One API call's JSON object, decoded as the backend decodes its chat replies. ``until``
        marks a read (idempotent): retried until then (:meth:`Retrier.call`), and its 404 is
        :class:`_Gone`."""
        where = f"{method} {path}"

        def once() -> dict[str, Any]:
            response, raw = self.provider.read_httpx(self._client, method, path, where, **send)
            if until is not None and response.status_code == 404:
                raise self._gone(where, raw)
            return self.provider._decode(response, raw, where)

        data, _ = self.provider.retrier.call(once, until=until)
        return data

    def read_results(
        self, path: str, into: _Results, parse: Callable[[dict[str, Any]], Outcome], until: float | None
    ) -> None:
        """The JSONL results at ``path``, read line by line as they arrive (never whole): each
        result of one of the batch's requests, by ``parse``, goes ``into`` the results; a line
        that is not a result is counted there, failing only the requests left without one."""
        reader = self.provider
        if MAX_RESULTS_BYTES > reader.max_body_bytes:
            reader = copy.copy(reader)
            reader.max_body_bytes = MAX_RESULTS_BYTES
            reader.max_decompressed_bytes = max(MAX_RESULTS_BYTES, reader.max_decompressed_bytes)
        where, longest = f"GET {path}", self.provider.max_body_bytes

        def once() -> _Results:
            found, number = _Results(into.batch_id, into.ids), 0

            def line(raw: bytes | None) -> None:
                nonlocal number
                number += 1
                if raw is not None and not raw.strip():
                    return
                try:
                    item = None if raw is None else json.loads(raw)
                except ValueError:
                    item = None
                if not isinstance(item, dict) or not isinstance(item.get("custom_id"), str):
                    shown = (
                        f"longer than max_body_bytes={longest}"
                        if raw is None
                        else repr(self.provider.excerpt(raw.decode("utf-8", "replace"), 120))
                    )
                    found.bad(f"line {number} of {where}: {shown}")
                elif item["custom_id"] in found.ids:
                    found.add(item["custom_id"], parse(item))
                else:
                    found.strangers += 1

            lines = _Lines(line, longest)
            response, raw = reader.read_httpx(self._client, "GET", path, where, stream_to=lines.feed)
            if response.status_code == 404:
                raise self._gone(where, raw)
            if not 200 <= response.status_code < 300:
                reader.check_reply(response, raw, where)  # raises: retried, or the reason it is not
            lines.close()
            return found

        found, _ = self.provider.retrier.call(once, until=until)
        into.absorb(found)

    def _gone(self, where: str, raw: bytes) -> _Gone:
        return _Gone(
            f"{where} answered HTTP 404: {self.provider.excerpt(raw.decode('utf-8', 'replace'), 200)}"
        )

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

    def submit(self, requests: list[tuple[str, dict[str, Any]]], round_no: int) -> _Batch:
        raise NotImplementedError

    def poll(self, batch_id: str, until: float) -> _Batch:
        raise NotImplementedError

    def results(self, batch: _Batch, ids: Collection[str], until: float) -> dict[str, Outcome]:
        """An outcome for each request ``ids`` of the ended ``batch``."""
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

    def submit(self, requests: list[tuple[str, dict[str, Any]]], round_no: int) -> _Batch:
        body = {"requests": [{"custom_id": cid, "params": params} for cid, params in requests]}
        data = self.json("POST", "/v1/messages/batches", json=body)
        batch_id = self._id_of(data, "POST /v1/messages/batches")
        return _Batch(batch_id, False, str(data.get("processing_status")), data)

    def poll(self, batch_id: str, until: float) -> _Batch:
        data = self.json("GET", f"/v1/messages/batches/{batch_id}", until=until)
        status = str(data.get("processing_status"))
        return _Batch(batch_id, status == "ended", status, data)

    def results(self, batch: _Batch, ids: Collection[str], until: float) -> dict[str, Outcome]:
        url = batch.info.get("results_url")
        path = (self.path_of(url) if isinstance(url, str) else None) or (
            f"/v1/messages/batches/{batch.batch_id}/results"
        )
        found = _Results(batch.batch_id, ids)
        self.read_results(path, found, self._outcome, until)
        return found.complete(batch)

    def _outcome(self, line: dict[str, Any]) -> Outcome:
        result = _obj(line.get("result"))
        kind = result.get("type")
        if kind == "succeeded":
            return Outcome("succeeded", result.get("message"))
        if kind in ("expired", "canceled"):
            return Outcome(str(kind))
        error = _obj(result.get("error"))
        inner = _obj(error.get("error")) or error
        kind_of_error = str(inner.get("type", "unknown error"))
        text = f"{kind_of_error}: {inner.get('message', '')}".strip(": ")
        return Outcome(
            "errored", message=self.provider.excerpt(text), transient=kind_of_error in TRANSIENT_ERRORS
        )


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

    def submit(self, requests: list[tuple[str, dict[str, Any]]], round_no: int) -> _Batch:
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
        batch_id = self._id_of(created, f"POST {self.prefix}/batches")
        return _Batch(batch_id, False, str(created.get("status")), created)

    def poll(self, batch_id: str, until: float) -> _Batch:
        data = self.json("GET", f"{self.prefix}/batches/{batch_id}", until=until)
        status = str(data.get("status"))
        return _Batch(batch_id, status in self.ENDED, status, data)

    def results(self, batch: _Batch, ids: Collection[str], until: float) -> dict[str, Outcome]:
        found = _Results(batch.batch_id, ids)
        for key in ("output_file_id", "error_file_id"):
            file_id = batch.info.get(key)
            if isinstance(file_id, str) and file_id:
                self.read_results(f"{self.prefix}/files/{file_id}/content", found, self._outcome, until)
        failure = ""
        if batch.status == "failed":  # refused as a whole (validation, a token limit): tried again
            errors = _obj(batch.info.get("errors"))
            reasons = [
                ": ".join(str(e[k]) for k in ("code", "message") if e.get(k))
                for e in errors.get("data") or []
                if isinstance(e, dict)
            ]
            failure = self.provider.excerpt(
                f"batch {batch.batch_id} failed: " + ("; ".join(filter(None, reasons)) or "no reason given")
            )
        return found.complete(batch, failure)

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


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Mark ``future``'s failure as seen: the trial that waited for it may have been given up on."""
    if not future.cancelled():
        future.exception()


@dataclass
class _Request:
    """A request waiting for the next round: its body, the batch that did not answer it (if any),
    and the future its round and batch go to."""

    body: dict[str, Any]
    failed: str | None
    answer: asyncio.Future[tuple[int, str]]


class Batcher:
    """Rounds of batches on the transport loop: collects requests, submits, polls, answers.

    Every method but :meth:`close` runs on the loop
    (:func:`~passk_nb.harness.providers.transport.shared_loop`); the API calls run in worker
    threads. ``journal``: the run folder's ``_batches.jsonl`` (None: nothing is written, and
    nothing resumes), which other processes running the same spec may append to too.
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
        self._members: dict[str, frozenset[str]] = {}  # batch id -> the custom ids it holds
        self._ends: dict[str, float] = {}  # batch id -> when its window ends (seconds since the epoch)
        self._read_to, self._lines_read = 0, 0  # how much of the journal was read
        self._watches: dict[str, asyncio.Task[dict[str, Outcome]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()  # watches and flushes, cancelled by close()
        self._pending: dict[str, _Request] = {}
        self._flushing = False
        self._deadline = 0.0
        self._closing = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._read_journal()

    def _read_journal(self) -> None:
        """Learn the batches the journal lists past what was read: at the start, and before each
        submit (another process writing this run may have appended its batches meanwhile)."""
        path = self.journal
        if path is None or not path.exists():
            return
        with path.open("rb") as f:
            f.seek(self._read_to)
            data = f.read()
        whole = data.rfind(b"\n") + 1  # past it: a line being written, or half of one a kill left
        for number, line in enumerate(data[:whole].split(b"\n")[:-1], self._lines_read + 1):
            try:
                entry = json.loads(line)
                round_no, batch_id = int(entry["round"]), str(entry["batch_id"])
                ids = [str(cid) for cid in entry["custom_ids"]]
                ends = float(entry.get("ends") or float(entry.get("at") or time.time()) + WINDOW_S)
            except (ValueError, KeyError, TypeError, AttributeError):
                raise ValueError(
                    f"{path}, line {number}, is not a batch entry (round, batch_id, custom_ids): "
                    f"{line[:120].decode('utf-8', 'replace')!r}; the file is written by run(batch=True): "
                    "restore it, or delete it to submit every request again"
                ) from None
            self._learn(round_no, batch_id, ids, ends)
            self._lines_read = number
        self._read_to += whole

    def _learn(self, round_no: int, batch_id: str, ids: list[str], ends: float) -> None:
        self.rounds = max(self.rounds, round_no)
        self._members[batch_id] = frozenset(ids)
        self._ends[batch_id] = ends
        for cid in ids:
            self._known[cid] = (round_no, batch_id)

    def _write_journal(self, entry: dict[str, Any]) -> None:
        """Append ``entry`` (masked) as one line of the journal."""
        if self.journal is None:
            return
        append_line(self.journal, json.dumps(self.wire.provider.redact.known(entry)).encode())

    async def ask(
        self, cid: str, body: dict[str, Any], *, failed: str | None = None
    ) -> tuple[Outcome, int, str]:
        """The result of request ``cid`` (``body``) and the round and batch that answered it: from the
        last batch that holds it (submitted by a run before, or by another process), else from the
        next round. ``failed``: the batch that did not answer it, never asked again."""
        known = self._known.get(cid)
        if known is None or known[1] == failed:
            known = await asyncio.shield(self._enqueue(cid, body, failed))
        round_no, batch_id = known
        results = await asyncio.shield(self._watch(batch_id))
        outcome = results.get(cid) or Outcome(
            "missing", message=f"batch {batch_id} ended without a result for request {cid}"
        )
        return outcome, round_no, batch_id

    def _spawn(self, work: Any) -> asyncio.Task[Any]:
        """A task of the batcher's own (no trial's context), cancelled by :meth:`close`."""
        self._loop = loop = asyncio.get_running_loop()
        task = loop.create_task(work, context=contextvars.Context())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_retrieved)
        return task

    async def _in_thread(self, call: Callable[..., T], *args: Any) -> T:
        """``call(*args)`` in a worker thread, stopped at its next wait once :meth:`close` runs."""

        def scoped() -> T:
            with cancel_scope(self._closing):
                return call(*args)

        return await asyncio.to_thread(scoped)

    def _enqueue(self, cid: str, body: dict[str, Any], failed: str | None) -> asyncio.Future[tuple[int, str]]:
        loop = asyncio.get_running_loop()
        request = self._pending.get(cid)
        if request is None:
            request = self._pending[cid] = _Request(body, failed, loop.create_future())
            request.answer.add_done_callback(_retrieved)
        if not self._flushing:
            self._flushing = True
            self._spawn(self._flush_when_quiet())
        self._deadline = loop.time() + self.window
        if len(self._pending) >= self.max_requests:
            self._deadline = loop.time()
        return request.answer

    async def _flush_when_quiet(self) -> None:
        loop = asyncio.get_running_loop()
        while (left := self._deadline - loop.time()) > 0:
            await asyncio.sleep(left)
        pending, self._pending, self._flushing = self._pending, {}, False
        try:
            self._read_journal()  # a batch another process submitted may hold some of them already
        except (ValueError, OSError) as exc:
            for request in pending.values():
                request.answer.set_exception(exc)
            return
        fresh = []
        for cid, request in pending.items():
            known = self._known.get(cid)
            if known is not None and known[1] != request.failed:
                request.answer.set_result(known)
            else:
                fresh.append((cid, request))
        if not fresh:
            return
        self.rounds += 1
        round_no = self.rounds
        try:
            batch = await self._in_thread(self.wire.submit, [(c, r.body) for c, r in fresh], round_no)
        except asyncio.CancelledError:  # closed
            for _, request in fresh:
                request.answer.cancel()
            raise
        except BaseException as exc:
            for _, request in fresh:
                request.answer.set_exception(exc)
            return
        self.submitted += 1
        ids, ends = [cid for cid, _ in fresh], _expiry(batch.info) or time.time() + WINDOW_S
        entry = {"round": round_no, "batch_id": batch.batch_id, "custom_ids": ids, "at": time.time()}
        try:
            self._write_journal({**entry, "ends": ends})
        except OSError as exc:  # the batch is submitted: answer from it all the same
            log.error(
                "batch %s could not be written to %s (%s): a resume would submit it again",
                batch.batch_id,
                self.journal,
                exc,
            )
        self._learn(round_no, batch.batch_id, ids, ends)
        for _, request in fresh:
            request.answer.set_result((round_no, batch.batch_id))

    def _watch(self, batch_id: str) -> asyncio.Task[dict[str, Outcome]]:
        watch = self._watches.get(batch_id)
        if watch is None:
            watch = self._watches[batch_id] = self._spawn(self._until_ended(batch_id))
        return watch

    def _until(self, batch_id: str) -> float:
        """Until when (:func:`time.monotonic`) the batch's reads are retried: the end of its window."""
        ends = self._ends.get(batch_id, time.time() + WINDOW_S)
        return time.monotonic() + max(0.0, ends + WINDOW_GRACE_S - time.time())

    async def _until_ended(self, batch_id: str) -> dict[str, Outcome]:
        """An outcome for each request of the batch, once it ended: its result, or ``gone`` for all
        of them when the API no longer knows the batch or its results (HTTP 404)."""
        try:
            try:
                batch = await self._ended(batch_id)
                ids = self._members.get(batch_id, frozenset())
                return await self._in_thread(self.wire.results, batch, ids, self._until(batch_id))
            except _Gone as exc:
                gone = Outcome("gone", message=f"the API no longer knows batch {batch_id}: {exc}")
                return dict.fromkeys(self._members.get(batch_id, ()), gone)
        except BaseException:
            self._watches.pop(batch_id, None)  # the next request of it polls again
            raise

    async def _ended(self, batch_id: str) -> _Batch:
        """The batch's status once it ended, polled every ``poll`` seconds (a 404 is believed when
        the next poll answers it too)."""
        lost = 0
        while True:
            try:
                batch = await self._in_thread(self.wire.poll, batch_id, self._until(batch_id))
            except _Gone:
                lost += 1
                if lost == 2:
                    raise
                await asyncio.sleep(self.poll)
                continue
            lost = 0
            self._ends[batch_id] = _expiry(batch.info) or self._ends.get(batch_id, time.time() + WINDOW_S)
            if batch.ended:
                return batch
            await asyncio.sleep(self.poll)

    def close(self) -> None:
        """Stop: every poll and submit is cancelled, and the calls they run in worker threads stop at
        their next wait (a run that gave up on trials leaves nothing running, nothing unreported)."""
        self._closing.set()
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        done = threading.Event()

        def cancel() -> None:
            for task in list(self._tasks):
                task.cancel()
            done.set()

        try:
            if asyncio.get_running_loop() is loop:
                cancel()
                return
        except RuntimeError:
            pass
        try:
            loop.call_soon_threadsafe(cancel)
        except RuntimeError:  # the loop has stopped: nothing of it runs
            return
        done.wait(5.0)


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
        self.batcher.close()
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
        failed: str | None = None
        for attempt in range(1, limit + 1):
            outcome, round_no, batch_id = await self.batcher.ask(cid, body, failed=failed)
            seen.append({"round": round_no, "batch_id": batch_id, "custom_id": cid, "result": outcome.kind})
            if outcome.kind == "succeeded":
                reply = self.wire.read(outcome.data, native)
                reply.meta = {**reply.meta, "batches": seen}
                return self.base._as_models(reply, attempt)
            if not outcome.again:
                message = f"batch {batch_id} (round {round_no}): request errored: {outcome.message}"
                raise provider_error(self.base.excerpt(message), attempt)  # masked as the chat path's
            failed = batch_id
        what = ", ".join(f"{s['result']} in batch {s['batch_id']}" for s in seen)
        last = f"; the last: {outcome.message}" if outcome.message else ""
        message = f"no batch answered the request after {limit} rounds ({what}){last}"
        raise provider_error(self.base.excerpt(message), limit)

    def chat(self, messages: list[Message]) -> Reply:
        """A turn outside a batch run (e.g. a probe) goes request by request."""
        return self.base.chat(messages)
