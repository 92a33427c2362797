"""The provider contract: one method, ``chat(messages) -> str``.

``messages`` is a list of ``{"role": ..., "content": str}``; any object with such a ``chat``, or a
plain function of the messages, is a provider. Built-in backends subclass :class:`BaseProvider`
to report tokens and retries (a :class:`Reply`), take a per-trial seed and describe themselves in
each record; one that raises makes the trial an ``infra_error``. With ``native_tools`` a backend
also has ``chat_native(messages, tools) -> Reply``, whose reply carries the model's tool calls.

The native message forms, in full: ``docs/guide/backends.md``.

>>> class Echo(BaseProvider):
...     name = "echo"
...     def chat(self, messages):
...         return Reply('{"answer": "hi"}', input_tokens=3, output_tokens=2)
>>> Echo(model="m").describe()["provider"]
'echo'
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable
from urllib.parse import urlsplit

from passk_nb.data.redact import Redactor

if TYPE_CHECKING:
    from passk_nb.harness.protocol import NativeCall

__all__ = [
    "Message",
    "Reply",
    "ChatProvider",
    "BaseProvider",
    "ProviderError",
    "url_host",
    "Cancel",
    "CancelFlag",
    "cancel_scope",
    "cancelled",
    "clock_scope",
    "trial_clock",
    "delay_scope",
    "note_injected_delay",
    "injected_delay",
    "TrialGivenUp",
    "pace_scope",
    "pace_request",
    "apace_scope",
    "apace_request",
    "MAX_USAGE_TOKENS",
    "check_usage",
]


class CancelFlag:
    """A trial's cancel event as :class:`threading.Event` offers it (``set``, ``is_set``, ``wait``),
    its lock and condition made only when a thread first waits on it: a trial on the transport
    loop only sets it and reads it, and an Event's condition cost ~3 µs a trial there.

    >>> flag = CancelFlag(); flag.is_set(), flag.wait(0)
    (False, False)
    >>> flag.set(); flag.is_set(), flag.wait(0)
    (True, True)
    """

    __slots__ = ("_set", "_event")
    _making = threading.Lock()  # two first waiters make one event

    def __init__(self) -> None:
        self._set = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True  # before reading _event: a waiter making it sees the flag or is woken
        event = self._event
        if event is not None:
            event.set()

    def wait(self, timeout: float | None = None) -> bool:
        with self._making:
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        if self._set:  # set before the event existed
            event.set()
        return event.wait(timeout)


#: What a trial is cancelled by: an Event (a trial on a thread) or a :class:`CancelFlag` (on a loop).
Cancel = threading.Event | CancelFlag

#: The trial's cancel event and rate-limit wait, per thread and per asyncio task: a context
#: variable is both (a thread starts with none set; a task starts with its creator's).
_cancel: contextvars.ContextVar[Cancel | None] = contextvars.ContextVar("passk_cancel", default=None)
_pace: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar("passk_pace", default=None)
_apace: contextvars.ContextVar[Callable[[], Awaitable[None]] | None] = contextvars.ContextVar(
    "passk_apace", default=None
)
#: The trial's deadline owner told when its clock runs (:func:`trial_clock`), and the harness's own
#: injected delays (:func:`note_injected_delay`), per thread and per asyncio task.
_clock: contextvars.ContextVar[Callable[[bool], None] | None]
_clock = contextvars.ContextVar("passk_clock", default=None)
_delay: contextvars.ContextVar[Callable[[bool], None] | None]
_delay = contextvars.ContextVar("passk_delay", default=None)


class _Scoped(contextlib.AbstractContextManager[None]):
    """``var`` set to ``value`` for the calls inside, then what it was before. A class, not a
    generator: each trial enters several scopes, and ``@contextmanager`` cost ~5x the CPU."""

    __slots__ = ("var", "value", "token")

    def __init__(self, var: contextvars.ContextVar[Any], value: Any):
        self.var, self.value = var, value

    def __enter__(self) -> None:
        self.token = self.var.set(self.value)

    def __exit__(self, *exc: object) -> None:
        self.var.reset(self.token)


def pace_scope(before_request: Callable[[], None]) -> _Scoped:
    """Run the calls in this thread with ``before_request`` called before every request a backend sends.

    The rate limiter (:class:`~passk_nb.harness.pacing.Paced`) sets it; a backend whose
    ``paces_each_request`` is true calls :func:`pace_request` before each request, retries
    included, so every request on the wire waits for the limit, whatever method sent it.

    >>> waited = []
    >>> with pace_scope(lambda: waited.append(1)):
    ...     pace_request(); pace_request()
    >>> pace_request(); len(waited)
    2
    """
    return _Scoped(_pace, before_request)


def pace_request() -> None:
    """Wait for the rate limit, if one is set for this thread (see :func:`pace_scope`)."""
    before = _pace.get()
    if before is not None:
        before()


def apace_scope(before_request: Callable[[], Awaitable[None]]) -> _Scoped:
    """:func:`pace_scope` for an asyncio task: ``await before_request()`` before every request.

    >>> import asyncio
    >>> waited = []
    >>> async def wait(): waited.append(1)
    >>> async def trial():
    ...     with apace_scope(wait):
    ...         await apace_request(); await apace_request()
    >>> asyncio.run(trial()); len(waited)
    2
    """
    return _Scoped(_apace, before_request)


async def apace_request() -> None:
    """Await the rate limit set for this task (see :func:`apace_scope`), if any."""
    before = _apace.get()
    if before is not None:
        await before()


def cancel_scope(event: Cancel) -> _Scoped:
    """Run the calls in this thread under ``event``: once it is set, :func:`cancelled` is true.

    The batch layer sets the event of a trial it gave up on (``trial_timeout``)
    or of every trial when the run stops early; the built-in backends then stop
    reading replies, skip retries and end their subprocesses.

    >>> stop = threading.Event()
    >>> with cancel_scope(stop):
    ...     before = cancelled(); stop.set(); after = cancelled()
    >>> before, after, cancelled()
    (False, True, False)
    """
    return _Scoped(_cancel, event)


def cancelled() -> bool:
    """Whether the trial running in this thread was given up on (see :func:`cancel_scope`)."""
    event = _cancel.get()
    return event is not None and event.is_set()


class TrialGivenUp(BaseException):
    """The trial running in this thread was given up on while the harness itself waited (for a
    worker, or an injected delay): it stops there, and the record its deadline owner wrote stands."""


def clock_scope(set_running: Callable[[bool], None]) -> _Scoped:
    """Run a trial with ``set_running`` told when its clock runs (see :func:`trial_clock`)."""
    return _Scoped(_clock, set_running)


def trial_clock(running: bool) -> None:
    """Tell the trial's deadline owner that the trial waits for a worker (False: its clock stops)
    or that a worker took it (True: its clock starts now). Without an owner, nothing happens.

    >>> seen = []
    >>> with clock_scope(seen.append):
    ...     trial_clock(False); trial_clock(True)
    >>> trial_clock(True); seen
    [False, True]
    """
    set_running = _clock.get()
    if set_running is not None:
        set_running(running)


def delay_scope(note: Callable[[bool], None]) -> _Scoped:
    """Run a trial with ``note`` told when the harness's own injected delay starts (True) and ends
    (False): a trial whose time runs out inside one is timed out by the harness, not the agent."""
    return _Scoped(_delay, note)


def note_injected_delay(active: bool) -> None:
    """Tell the trial's :func:`delay_scope` that an injected delay starts or ends (if it has one)."""
    note = _delay.get()
    if note is not None:
        note(active)


def injected_delay(seconds: float) -> None:
    """Sleep the harness's own injected delay (a latency fault), noted (:func:`note_injected_delay`)
    and cut short when the trial is given up on: it then raises :class:`TrialGivenUp` (the delay's
    end is not noted, so the timeout stays the harness's)."""
    note_injected_delay(True)
    cancellable_sleep(seconds)
    if cancelled():
        raise TrialGivenUp("the trial was given up on during an injected delay")
    note_injected_delay(False)


def cancel_event() -> Cancel | None:
    """The event of the trial running in this thread, if any."""
    return _cancel.get()


def cancellable_sleep(seconds: float) -> None:
    """Sleep, but wake up as soon as the trial running in this thread is given up on."""
    event = cancel_event()
    if event is None:
        time.sleep(seconds)
    else:
        event.wait(seconds)


#: One conversation message: ``role`` and ``content`` (text), and in native tool calling
#: ``tool_calls`` (assistant) or ``tool_call_id``, ``name``, ``is_error`` (role ``tool``).
Message = dict[str, Any]


#: The key of an episode's fields when the agent raised KeyboardInterrupt: the batch stores the
#: trial, then stops the run as Ctrl-C does.
STOPS_RUN = "_stops_run"


class AgentError(Exception):
    """Code the user wrote (a function agent, a ``chat`` object) raised: the agent's failure.

    ``details`` holds the innermost frames of the traceback, kept in the trial's record;
    ``stops_run``: the agent raised KeyboardInterrupt, so the run stops once this trial is stored.
    """

    def __init__(self, message: str, details: str = "", *, stops_run: bool = False):
        super().__init__(message)
        self.details = details
        self.stops_run = stops_run


#: Most tokens one request can use: more than any model's context (2**24, 16.8M). A reply
#: reporting more is not believed (:func:`check_usage`).
MAX_USAGE_TOKENS = 2**24


def check_usage(reply: Reply) -> Reply:
    """``reply`` with token counts that cannot be true (negative, or above :data:`MAX_USAGE_TOKENS`)
    set to unknown (None), and a note saying what was reported in ``meta["usage_note"]``.

    One reply reporting 10**12 tokens would otherwise stall a tokens-per-minute run for years.

    >>> reply = check_usage(Reply("hi", input_tokens=10**12, output_tokens=3))
    >>> reply.input_tokens, reply.output_tokens, reply.meta["usage_note"]
    (None, 3, 'input_tokens=1000000000000 reported: not possible (a count is 0 to 16777216), kept as unknown')
    """
    notes = []
    for name in ("input_tokens", "output_tokens"):
        value = getattr(reply, name)
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= MAX_USAGE_TOKENS:
            notes.append(f"{name}={value} reported")
            setattr(reply, name, None)
    if notes:
        reply.meta["usage_note"] = (
            f"{', '.join(notes)}: not possible (a count is 0 to {MAX_USAGE_TOKENS}), kept as unknown"
        )
    return reply


class ProviderError(RuntimeError):
    """The backend failed (not the agent): retries exhausted, server error, not logged in, ..."""


@dataclass
class Reply:
    """A model reply with what the backend reported about it."""

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    attempts: int = 1
    meta: dict[str, Any] = field(default_factory=dict)
    #: Native tool calling only: the tool calls of the reply, in order (empty: ``text`` answers).
    tool_calls: list[NativeCall] = field(default_factory=list)


@runtime_checkable
class ChatProvider(Protocol):
    """Anything with ``chat(messages) -> str`` (or a :class:`Reply`)."""

    def chat(self, messages: list[Message]) -> str | Reply: ...


_DICT_COPIED: dict[type, bool] = {}


def _copies_its_dict(cls: type) -> bool:
    """Whether ``copy.copy`` of a ``cls`` instance is a new instance with a copy of its ``__dict__``:
    no class of ``cls`` defines slots or its own copying."""
    plain = _DICT_COPIED.get(cls)
    if plain is None:
        own = ("__slots__", "__copy__", "__reduce_ex__", "__reduce__", "__getstate__", "__setstate__")
        plain = _DICT_COPIED[cls] = not any(name in k.__dict__ for k in cls.__mro__[:-1] for name in own)
    return plain


def url_host(url: str | None) -> str | None:
    """``host[:port]`` of a URL, with any credentials dropped.

    >>> url_host("http://user:secret@127.0.0.1:8080/v1")
    '127.0.0.1:8080'
    """
    if not url:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{host}:{parts.port}" if parts.port else host


class BaseProvider:
    """Base class of the built-in providers.

    Subclasses set ``name`` and implement :meth:`chat`. ``temperature`` and
    ``seed`` are sent to the backend where it supports them; the runner gives
    each trial its own seed through :meth:`with_seed`.
    """

    name: str = "base"
    #: True for agents the user wrote (their exceptions and time-outs are ``agent_error``).
    user_code: bool = False
    #: True for backends that speak their API's native tool calling (:meth:`chat_native`).
    native_tools: ClassVar[bool] = False
    #: True for backends that call :func:`pace_request` before every request they send
    #: (retries included); the rate limiter paces the others once per ``chat`` call.
    paces_each_request: ClassVar[bool] = False
    #: Whether the backend's requests are coroutines (``achat``/``achat_native`` on the transport
    #: loop): the runner then runs its trials as asyncio tasks, not a thread each.
    speaks_asyncio: ClassVar[bool] = False
    #: Whether each trial's record says what it cost (``cost_usd`` in ``provider_meta``): a run
    #: keeps to ``budget_usd`` on that without token prices (:mod:`~passk_nb.harness.budget`).
    reports_cost: ClassVar[bool] = False
    #: Masks the backend's secrets (none here: a backend that holds one sets its own) in what it
    #: raises and logs, and in every record of its runs on their way to disk
    #: (:func:`~passk_nb.data.records.storable_record`).
    redact: Redactor = Redactor()

    def __init__(
        self,
        model: str | None = None,
        *,
        temperature: float | None = None,
        seed: int | None = None,
        base_url: str | None = None,
        json_mode: bool = False,
    ):
        self.model = model or ""
        self.temperature = temperature
        self.seed = seed
        self.base_url = base_url
        self.json_mode = json_mode

    def chat(self, messages: list[Message]) -> str | Reply:
        raise NotImplementedError

    def chat_native(self, messages: list[Message], tools: list[dict[str, Any]]) -> Reply:
        """One reply in native tool calling: ``tools`` go out as the API's tool definitions, the
        reply's tool calls come back in ``Reply.tool_calls`` (see the module's docstring)."""
        raise NotImplementedError(f"the {self.name} provider has no native tool calling")

    def check_prompt(self, system_prompt: str) -> None:
        """Raise ``ValueError`` before any trial when this backend cannot send ``system_prompt``."""

    def with_seed(self, seed: int | None) -> BaseProvider:
        """A shallow copy that sends ``seed`` (shared clients stay shared): its ``__dict__`` copied,
        as ``copy.copy`` does at a third of the cost (one per trial), unless the class copies itself
        its own way (``__slots__``, ``__copy__``, ``__reduce_ex__``, ``__getstate__``)."""
        cls = type(self)
        if _copies_its_dict(cls):
            clone = object.__new__(cls)
            clone.__dict__.update(self.__dict__)
        else:
            clone = copy.copy(self)
        clone.seed = seed
        return clone

    def describe(self) -> dict[str, Any]:
        """Record fields that identify this backend (never any secret)."""
        return {
            "provider": self.name,
            "model": self.model,
            "base_url_host": url_host(self.base_url),
            "json_mode": self.output_constraint(),
            "provider_meta": self.meta(),
        }

    def output_constraint(self) -> str:
        """How replies are constrained: ``"off"``, ``"json"`` (JSON mode) or ``"schema"``."""
        return "json" if self.json_mode else "off"

    def adapt_concurrency(self, ceiling: int) -> Any:  # an AdaptiveLimit (adaptive.py imports this module)
        """Steer this backend's requests in flight by AIMD, at most ``ceiling``
        (:mod:`~passk_nb.harness.providers.adaptive`); ``run(adaptive=True)`` calls it. Only
        network backends send requests a server can refuse for load."""
        raise ValueError(
            f"adaptive concurrency steers the requests a network backend sends; the {self.name} "
            "backend sends none: leave adaptive off and set concurrency"
        )

    def size_pool(self, concurrency: int) -> None:
        """Get ready for ``concurrency`` requests in flight at once (network backends size their
        connection pool); ``run()`` calls it before the first trial. Nothing to do here."""

    def reopen_pool(self, concurrency: int) -> None:
        """In a worker process forked from the run's (``workers=`` with a backend that speaks
        asyncio: :mod:`~passk_nb.harness.loop_workers`): open connections of its own on its loop,
        ``concurrency`` of them, forgetting the parent's. Only backends that speak asyncio have any."""
        raise ValueError(f"the {self.name} backend has no connections of its own to open in a worker")

    def close(self) -> None:
        """Release what the provider holds (connections, a server process); ``run()`` calls it
        for providers it created. Idempotent."""

    def meta(self) -> dict[str, Any]:
        """Extra backend details for the ``provider_meta`` column (e.g. a CLI version)."""
        return {}
