"""Faces whose names load on first use, so ``import passk_nb.stats`` loads no statistic and
``passk --version`` stays light.

A face maps each public name to the module defining it; :func:`lazy_face` gives the face its
``__getattr__`` (PEP 562). Some names are also a submodule's (``stats.counts`` the function,
``stats/counts.py`` the module): the import system binds every submodule it loads on its
package, so the face keeps its own name instead, and ``from passk_nb.stats import counts``
is the function whichever module loaded first.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Mapping
from importlib import import_module
from types import ModuleType
from typing import Any


class Face(ModuleType):
    """A package module whose public names are not replaced by its submodules of the same name."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, ModuleType) and name in self.__dict__.get("__all__", ()):
            return  # the import system binding a submodule over a public name: keep the name
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        return sorted(self.__dict__.get("__all__", ()))


def lazy_face(
    package: str, names: Mapping[str, str], subpackages: Collection[str] = ()
) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: each of ``names`` (public name -> module defining it)
    imported on first use, and each of ``subpackages`` (``passk_nb.stats``) without an import."""
    module = sys.modules[package]
    module.__class__ = Face

    def __getattr__(name: str) -> Any:
        if name in subpackages:
            return import_module(f"{package}.{name}")
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(names[name]), name)
        module.__dict__[name] = value
        return value

    return __getattr__
