"""What a Python agent or a suite does, as a short hash: edited code is a new run, never an old result.

A function agent's identity cannot be its name: a notebook cell edited and run again
defines a new function with the same name, and two lambdas are both ``<lambda>``.
:func:`fingerprint` hashes what decides the agent's behaviour that Python can see:

- its code: bytecode, constants (nested functions and lambdas included), the names it uses;
- its default and keyword-default values; a ``functools.partial``'s function, arguments and keywords;
- the values of closure variables and of module globals it reads: plain data (numbers, strings,
  bytes, None, containers of those, numpy arrays) in full, however large;
- functions it calls that are defined in the same module (or closed over), recursively;
- objects of classes defined there (an object with ``chat``, a callable object, a config):
  every method the class defines and the instance's state (``__dict__`` and ``__slots__``).

Anything else it reads (a client object, a random generator, a remote service) is hashed by
its type only: :func:`blind_spots` names those, and ``run`` refuses to resume a run of such an
agent unless you pin the identity yourself: ``run(agent, model="my-agent", version="v3")``.
:func:`suite_fingerprint` is the same hash over everything that decides a suite's outcomes.

>>> def agent(messages):
...     return '{"answer": "no"}'
>>> before = fingerprint(agent)
>>> def agent(messages):
...     return '{"answer": "yes"}'
>>> fingerprint(agent) != before
True
>>> same, other = fingerprint(lambda m: "a"), fingerprint(lambda m: "b")
>>> fingerprint(lambda m: "a") == same, same == other
(True, False)
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import re
import types
from typing import Any

from passk_nb.harness.suites.base import Suite

_PLAIN = (type(None), bool, int, float, complex, str, bytes)
_DATA = (*_PLAIN, tuple, list, set, frozenset, dict)
#: Types whose instances decide nothing an agent measures: hashed by type, not counted as blind.
_INERT = (types.ModuleType, type(re.compile("")), type(functools.lru_cache))


def fingerprint(obj: Any) -> str:
    """12 hex characters that change when the agent's code or plain-data inputs change."""
    return _Hasher(obj).digest.hexdigest()[:12]


def blind_spots(obj: Any) -> list[str]:
    """The types of the values ``obj`` reads that :func:`fingerprint` sees by type only, sorted.

    >>> import random
    >>> rng = random.Random(0)
    >>> blind_spots(lambda messages: rng.choice(["a", "b"]))
    ['random.Random']
    >>> blind_spots(lambda messages: "a")
    []
    """
    return sorted(_Hasher(obj).blind)


def suite_fingerprint(suite: Suite) -> str:
    """12 hex characters that change when anything deciding a suite's outcomes changes: each task's
    prompt, check (``expect`` values, ``check=`` code), refusal rule and script, the initial state,
    the tools' code and signatures, the system prompts and the claim vocabulary.

    >>> from passk_nb.harness.suites import get_suite
    >>> suite_fingerprint(get_suite("orders")) == suite_fingerprint(get_suite("orders"))
    True
    >>> suite_fingerprint(get_suite("orders")) != suite_fingerprint(get_suite("bank"))
    True
    """
    tasks = [
        ("task", t.id, t.prompt, t.check, t.script, repr(t.refusal), t.do_nothing_passes) for t in suite.tasks
    ]
    tools = [
        ("tool", name, t.description, t.signature(), repr(dict(t.params)), inspect.unwrap(t.fn))
        for name, t in suite.tools.items()
    ]
    whole = (suite.name, tasks, tools, suite.initial_state, suite.initial_state(), dict(suite.prompts))
    return fingerprint((whole, repr(suite.claims)))


class _Hasher:
    """One sha256 over ``obj``, and the types it could see by type only (``blind``)."""

    def __init__(self, obj: Any):
        self.digest = hashlib.sha256()
        self.seen: set[int] = set()
        self.blind: set[str] = set()
        self.keep: list[Any] = []  # objects whose id() is in seen stay alive until the end
        self.feed(obj, _module_of(obj))

    def put(self, *parts: object) -> None:
        for part in parts:
            self.digest.update(repr(part).encode("utf-8", "backslashreplace"))
            self.digest.update(b"\x00")

    def first_visit(self, obj: Any) -> bool:
        if id(obj) in self.seen:
            self.put("seen", type(obj).__name__)
            return False
        self.seen.add(id(obj))
        self.keep.append(obj)
        return True

    def feed(self, obj: Any, module: str | None) -> None:
        """Anything ``obj`` is: data in full, code with what it reads, objects by their state."""
        if isinstance(obj, _PLAIN):
            self.put(type(obj).__name__, obj)
            return
        if isinstance(obj, types.FunctionType):
            self.function(obj)
            return
        if not self.first_visit(obj):
            return
        if isinstance(obj, tuple | list | set | frozenset):
            items = sorted(obj, key=repr) if isinstance(obj, set | frozenset) else obj
            self.put(type(obj).__name__, len(obj))
            if _all_plain(items):  # one repr in C: a million numbers in a fraction of a second
                self.put(list(items))
                return
            for item in items:
                self.feed(item, module)
        elif isinstance(obj, dict):
            self.put("dict", len(obj))
            if _all_plain(obj) and _all_plain(obj.values()):
                self.put(sorted(obj.items(), key=lambda item: repr(item[0])))
                return
            for key in sorted(obj, key=repr):
                self.feed(key, module)
                self.feed(obj[key], module)
        elif isinstance(obj, functools.partial):
            self.put("partial")
            self.feed(obj.func, _module_of(obj.func))
            self.feed(obj.args, module)
            self.feed(obj.keywords, module)
        elif isinstance(obj, types.MethodType):
            self.put("method")
            self.feed(obj.__func__, _module_of(obj.__func__))
            self.instance(obj.__self__)
        elif isinstance(obj, types.CodeType):
            self.code(obj, globals_={})
        elif isinstance(obj, types.BuiltinFunctionType | type):
            self.put("ref", getattr(obj, "__module__", ""), getattr(obj, "__qualname__", ""))
        elif _is_array(obj):
            self.put("array", str(obj.dtype), obj.shape)
            self.digest.update(obj.tobytes())
        elif isinstance(obj, _INERT):
            self.put("inert", type(obj).__qualname__, getattr(obj, "pattern", ""), getattr(obj, "flags", 0))
        elif callable(obj) or hasattr(obj, "chat") or type(obj).__module__ == module:
            self.instance(obj)
        else:
            self.opaque(obj)

    def opaque(self, obj: Any) -> None:
        name = f"{type(obj).__module__}.{type(obj).__qualname__}"
        self.put("opaque", name)
        self.blind.add(name)

    def function(self, fn: types.FunctionType) -> None:
        if id(fn) in self.seen:  # recursion, or a function that refers to itself
            self.put("seen-function", fn.__qualname__)
            return
        self.seen.add(id(fn))
        self.keep.append(fn)
        module = fn.__module__
        self.put("function")
        self.code(fn.__code__, globals_=fn.__globals__, module=module)
        self.feed(fn.__defaults__, module)
        self.feed(fn.__kwdefaults__, module)
        for cell in fn.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                value = None
            self.value(value, module)

    def code(self, code: types.CodeType, globals_: dict[str, Any], module: str | None = None) -> None:
        self.digest.update(code.co_code)
        self.put(code.co_names, code.co_varnames, code.co_argcount, code.co_kwonlyargcount)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self.code(const, globals_, module)
            else:
                self.feed(const, module)
        for name in code.co_names:
            if name in globals_:
                self.value(globals_[name], module)

    def value(self, value: Any, module: str | None) -> None:
        """A global or closure value: data, same-module code and objects in full, library code by name."""
        if isinstance(value, types.FunctionType | type) and value.__module__ != module:
            self.put("ref", value.__module__, value.__qualname__)
        elif isinstance(value, type):
            self.cls(value)
        else:
            self.feed(value, module)

    def instance(self, obj: Any) -> None:
        cls = type(obj)
        self.cls(cls)
        for name, value in _state(obj):
            self.put("attr", name)
            self.value(value, cls.__module__)

    def cls(self, cls: type) -> None:
        if not self.first_visit(cls):
            return
        self.put("class", cls.__qualname__)
        for klass in inspect.getmro(cls):
            if klass is object or klass.__module__ == "builtins":
                continue
            for name, member in sorted(vars(klass).items()):
                if isinstance(member, staticmethod | classmethod):
                    member = member.__func__
                if isinstance(member, types.FunctionType):
                    self.put("def", name)
                    self.function(member)
                elif isinstance(member, _PLAIN) and not name.startswith("__"):
                    self.put("const", name, member)


def _module_of(obj: Any) -> str | None:
    target = obj.func if isinstance(obj, functools.partial) else obj
    module = getattr(target, "__module__", None)
    return module if isinstance(module, str) else type(target).__module__


def _state(obj: Any) -> list[tuple[str, Any]]:
    """An object's attributes: its ``__dict__`` and the ``__slots__`` of its classes, by name."""
    state = dict(getattr(obj, "__dict__", {}) or {})
    for klass in type(obj).__mro__:
        slots = vars(klass).get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(obj, name):
                state[name] = getattr(obj, name)
    return sorted(state.items())


_PLAIN_TYPES = frozenset(_PLAIN)


def _all_plain(items: Any) -> bool:
    return all(type(item) in _PLAIN_TYPES for item in items)


def _is_array(obj: Any) -> bool:
    return type(obj).__module__ == "numpy" and hasattr(obj, "tobytes") and hasattr(obj, "dtype")
