"""What a Python agent or a suite does, as a short hash: edited code is a new run, never an old result.

:func:`fingerprint` hashes what decides an agent's behaviour that Python can see: its code,
defaults and partial arguments, the plain data it reads from closures and globals, your own
functions, modules and classes it uses (recursively); library code by name. Anything else (a
client, a random generator) is hashed by type only: :func:`blind_spots` names those, and ``run``
resumes such an agent only under a pinned ``version=``. :func:`suite_fingerprint` is the same
hash over everything that decides a suite's outcomes.

What exactly is hashed: ``docs/guide/running.md``.

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
import os
import re
import site
import sys
import sysconfig
import types
from typing import Any

from passk_nb.harness.suites.base import Suite

_PLAIN = (type(None), bool, int, float, complex, str, bytes)
_DATA = (*_PLAIN, tuple, list, set, frozenset, dict)
#: Types whose instances decide nothing an agent measures: hashed by type, not counted as blind.
_INERT = (types.ModuleType, type(re.compile("")))
#: Descriptors a class holds for its slots and C attributes: the instance's state is hashed instead.
_SLOT_DESCRIPTORS = (types.MemberDescriptorType, types.GetSetDescriptorType)
#: Class attributes Python itself puts there (``abc``), which decide nothing.
_MACHINERY = frozenset({"_abc_impl"})
#: Ints longer than this many bits are hashed as hex (``repr`` refuses more than 4,300 digits).
_BIG_INT_BITS = 10_000


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
    prompt, check (``expect`` values, ``check=`` code), refusal rule, script and ``ends_after``, the
    initial state, the tools' code and signatures, the system prompts and the claim vocabulary.

    >>> from passk_nb.harness.suites import get_suite
    >>> suite_fingerprint(get_suite("orders")) == suite_fingerprint(get_suite("orders"))
    True
    >>> suite_fingerprint(get_suite("orders")) != suite_fingerprint(get_suite("bank"))
    True
    """
    tasks = [
        # ends_after only when set: the fingerprints of suites without it stay what their records hold
        ("task", t.id, t.prompt, t.check, t.script, repr(t.refusal), t.do_nothing_passes)
        + ((("ends_after", t.ends_after),) if t.ends_after is not None else ())
        for t in suite.tasks
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
        self.root = _module_of(obj)
        self.feed(obj, self.root)

    def own(self, module: str | None, here: str | None) -> bool:
        """Whether code of ``module`` is hashed in full: the module being walked, the agent's, or
        any module that is not library code."""
        return module in (here, self.root) or not _is_library(module)

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
            if isinstance(obj, int) and obj.bit_length() > _BIG_INT_BITS:
                self.put("bigint", hex(obj))
            else:
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
        elif callable(obj) and isinstance(getattr(obj, "__wrapped__", None), types.FunctionType):
            self.put("wrapped", type(obj).__qualname__)  # functools.cache, lru_cache, wraps
            self.value(obj.__wrapped__, module)
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
            if isinstance(value, types.ModuleType) and not _is_library(value.__name__):
                self.module_attributes(value, _names(fn.__code__))

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
                value = globals_[name]
                self.value(value, module)
                if isinstance(value, types.ModuleType) and not _is_library(value.__name__):
                    self.module_attributes(value, code.co_names)

    def module_attributes(self, mod: types.ModuleType, names: tuple[str, ...]) -> None:
        """The attributes of your module ``mod`` that code naming ``names`` may read (``mod.X``)."""
        attributes = vars(mod)
        for name in names:
            if name in attributes and not name.startswith("__"):
                self.put("module-attr", mod.__name__, name)
                self.value(attributes[name], mod.__name__)

    def value(self, value: Any, module: str | None) -> None:
        """A global or closure value: data, your code and objects in full, library code by name."""
        if isinstance(value, types.FunctionType | type) and not self.own(value.__module__, module):
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
            mine = self.own(klass.__module__, cls.__module__)
            for name, member in sorted(vars(klass).items()):
                if isinstance(member, staticmethod | classmethod):
                    member = member.__func__
                if isinstance(member, property):
                    self.put("property", name)
                    for accessor in (member.fget, member.fset, member.fdel):
                        self.feed(accessor, klass.__module__)
                elif isinstance(member, functools.cached_property):
                    self.put("cached_property", name)
                    self.feed(member.func, klass.__module__)
                elif isinstance(member, types.FunctionType):
                    self.put("def", name)
                    self.function(member)
                elif name.startswith("__") or name in _MACHINERY or isinstance(member, _SLOT_DESCRIPTORS):
                    continue
                elif isinstance(member, _PLAIN):
                    self.put("const", name, member)
                elif mine:
                    self.member(name, member, klass.__module__)

    def member(self, name: str, member: Any, module: str) -> None:
        """Class-level data of your class (``ANSWERS = [...]``, an enum's members, a nested class) in
        full; an object of a library type there is hashed by its type, as before, without counting
        as blind (a class attribute holding a lock or a logger decides nothing)."""
        self.put("member", name)
        if isinstance(member, (*_DATA, types.FunctionType, type, functools.partial)) or self.own(
            type(member).__module__, module
        ):
            self.value(member, module)
        else:
            self.put("library-member", type(member).__module__, type(member).__qualname__)


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
    """Whether every item is a plain value one ``repr`` can write (an int of over 4,300 digits is not)."""
    return all(
        type(item) in _PLAIN_TYPES and (type(item) is not int or item.bit_length() <= _BIG_INT_BITS)
        for item in items
    )


def _names(code: types.CodeType) -> tuple[str, ...]:
    """The names ``code`` and the functions nested in it use (globals and attributes)."""
    nested = (_names(c) for c in code.co_consts if isinstance(c, types.CodeType))
    return code.co_names + tuple(name for names in nested for name in names)


@functools.cache
def _library_roots() -> tuple[str, ...]:
    """Folders holding library code: the standard library and every site-packages folder (read once
    per process, not once per module file)."""
    paths = sysconfig.get_paths()
    roots = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    roots.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    roots.add(site.getusersitepackages())
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots if r)


@functools.cache
def _library_file(file: str) -> bool:
    return os.path.realpath(file).startswith(_library_roots())


def _is_library(name: str | None) -> bool:
    """Whether module ``name`` is library code (the standard library, an installed package,
    passk-nb) rather than yours (``__main__``, a notebook, your project's files).

    >>> _is_library("json"), _is_library("passk_nb.harness.runner"), _is_library("__main__")
    (True, True, False)
    """
    if name is None or name.partition(".")[0] == "passk_nb":
        return True
    module = sys.modules.get(name)
    if name == "__main__" or module is None:  # a script, a notebook, code made by exec(): yours
        return False
    file = getattr(module, "__file__", None)
    return True if file is None else _library_file(file)  # no file: built in, or a namespace


def _is_array(obj: Any) -> bool:
    return type(obj).__module__ == "numpy" and hasattr(obj, "tobytes") and hasattr(obj, "dtype")
