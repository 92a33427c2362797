"""What a Python agent does, as a short hash: edited code is a new run, never an old result.

A function agent's identity cannot be its name: a notebook cell edited and run again
defines a new function with the same name, and two lambdas are both ``<lambda>``.
:func:`fingerprint` hashes what decides the agent's behaviour that Python can see:

- its code: bytecode, constants (nested functions and lambdas included), the names it uses;
- its default and keyword-default values;
- the values of closure variables and of module globals it reads, where they are plain data
  (numbers, strings, bytes, None, and tuples, lists, sets and dicts of those);
- functions it calls that are defined in the same module (or closed over), recursively;
- for an object with ``chat`` (or a callable object): every method its class defines and the
  plain-data attributes of the instance.

Anything else it reads (a client object, a random generator, a remote service) is hashed by
its type only: the fingerprint cannot see inside it. Pin the identity yourself then with
``run(agent, model="my-agent", version="v3")``.

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

import hashlib
import inspect
import types
from typing import Any

#: Plain data containers larger than this are hashed by type and length only.
_MAX_ITEMS = 10_000
_PLAIN = (type(None), bool, int, float, complex, str, bytes)
_DATA = (*_PLAIN, tuple, list, set, frozenset, dict)


def fingerprint(obj: Any) -> str:
    """12 hex characters that change when the agent's code or plain-data inputs change."""
    digest = hashlib.sha256()
    _feed(obj, digest, set(), module=getattr(obj, "__module__", None))
    return digest.hexdigest()[:12]


def _feed(obj: Any, digest: Any, seen: set[int], module: str | None) -> None:
    def put(*parts: object) -> None:
        for part in parts:
            digest.update(repr(part).encode("utf-8", "backslashreplace"))
            digest.update(b"\x00")

    if isinstance(obj, _PLAIN):
        put(type(obj).__name__, obj)
        return
    if id(obj) in seen:
        put("seen", type(obj).__name__)
        return
    seen.add(id(obj))
    if isinstance(obj, tuple | list | set | frozenset):
        items = sorted(obj, key=repr) if isinstance(obj, set | frozenset) else obj
        put(type(obj).__name__, len(obj))
        if len(obj) <= _MAX_ITEMS:
            for item in items:
                _feed(item, digest, seen, module)
        return
    if isinstance(obj, dict):
        put("dict", len(obj))
        if len(obj) <= _MAX_ITEMS:
            for key in sorted(obj, key=repr):
                _feed(key, digest, seen, module)
                _feed(obj[key], digest, seen, module)
        return
    if isinstance(obj, types.MethodType):
        put("method")
        _feed(obj.__func__, digest, seen, module)
        _feed_instance(obj.__self__, digest, seen, module)
        return
    if isinstance(obj, types.FunctionType):
        seen.discard(id(obj))  # _feed_function does its own bookkeeping
        _feed_function(obj, digest, seen, module)
        return
    if isinstance(obj, types.CodeType):
        _feed_code(obj, digest, seen, module, globals_={})
        return
    if isinstance(obj, types.ModuleType | types.BuiltinFunctionType | type):
        put("ref", getattr(obj, "__module__", ""), getattr(obj, "__qualname__", getattr(obj, "__name__", "")))
        return
    if callable(obj) or hasattr(obj, "chat"):
        _feed_instance(obj, digest, seen, module)
        return
    put("opaque", type(obj).__module__, type(obj).__qualname__)


def _feed_function(fn: types.FunctionType, digest: Any, seen: set[int], module: str | None) -> None:
    if id(fn) in seen:  # recursion, or a function that refers to itself
        digest.update(f"seen-function:{fn.__qualname__}\x00".encode())
        return
    seen.add(id(fn))
    digest.update(b"function\x00")
    _feed_code(fn.__code__, digest, seen, module, globals_=fn.__globals__)
    _feed(fn.__defaults__, digest, seen, module)
    _feed(fn.__kwdefaults__, digest, seen, module)
    for cell in fn.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            value = None
        _feed_value(value, digest, seen, module)


def _feed_code(
    code: types.CodeType, digest: Any, seen: set[int], module: str | None, globals_: dict[str, Any]
) -> None:
    digest.update(code.co_code)
    digest.update(repr((code.co_names, code.co_varnames, code.co_argcount, code.co_kwonlyargcount)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _feed_code(const, digest, seen, module, globals_)
        else:
            _feed(const, digest, seen, module)
    for name in code.co_names:
        if name in globals_:
            _feed_value(globals_[name], digest, seen, module)


def _feed_value(value: Any, digest: Any, seen: set[int], module: str | None) -> None:
    """A global or closure value: data and same-module functions in full, anything else by type."""
    if isinstance(value, types.FunctionType):
        if value.__module__ == module:
            _feed_function(value, digest, seen, module)
        else:
            digest.update(f"ref:{value.__module__}.{value.__qualname__}\x00".encode())
        return
    if isinstance(value, _DATA):
        _feed(value, digest, seen, module)
        return
    if isinstance(value, type) and value.__module__ == module:
        _feed_class(value, digest, seen, module)
        return
    digest.update(f"type:{type(value).__module__}.{type(value).__qualname__}\x00".encode())


def _feed_instance(obj: Any, digest: Any, seen: set[int], module: str | None) -> None:
    cls = type(obj)
    _feed_class(cls, digest, seen, cls.__module__)
    state = getattr(obj, "__dict__", {})
    for key in sorted(state):
        value = state[key]
        if isinstance(value, _DATA):
            digest.update(f"attr:{key}\x00".encode())
            _feed(value, digest, seen, module)


def _feed_class(cls: type, digest: Any, seen: set[int], module: str | None) -> None:
    if id(cls) in seen:
        return
    seen.add(id(cls))
    digest.update(f"class:{cls.__qualname__}\x00".encode())
    for klass in inspect.getmro(cls):
        if klass is object or klass.__module__ in ("builtins",):
            continue
        for name, member in sorted(vars(klass).items()):
            if isinstance(member, types.FunctionType):
                digest.update(f"def:{name}\x00".encode())
                _feed_function(member, digest, seen, klass.__module__)
            elif isinstance(member, staticmethod | classmethod) and isinstance(
                member.__func__, types.FunctionType
            ):
                _feed_function(member.__func__, digest, seen, klass.__module__)
            elif isinstance(member, _PLAIN) and not name.startswith("__"):
                digest.update(f"const:{name}={member!r}\x00".encode())
