"""Task suites: every name you need to write one, and :func:`get_suite`, the one suite loader.

Built in: ``orders`` (an order-support desk, five tasks), ``bank`` (a payments desk, ten
tasks), ``starter`` (ten single-decision order-desk tasks, at a small local model's level) and
``starter2`` (the same ten tasks, each action task ending when its one action succeeds).
Your own: ``get_suite("my_module:SUITE")`` imports ``my_module`` as ``python -m`` would (the
working directory first), ``get_suite("path/to/suite.py:SUITE")`` loads a file,
installed packages can register suites under the entry-point group ``passk_nb.suites``, and
:func:`register_suite` adds one by name for this process. Every ``passk`` command loads
suites through :func:`get_suite`.

Writing a suite takes one import::

    from passk_nb.harness.suites import (
        ClaimVocabulary, Refusal, Verdict, answer, call, check_suite, make_suite, task, tool,
    )

>>> [get_suite(name).name for name in ("orders", "bank", "starter", "starter2")]
['orders', 'bank', 'starter', 'starter2']
>>> get_suite("passk_nb.harness.suites.bank:SUITE").name
'bank'

A suite says how bad each failure is (``make_suite(..., severity={"wrong_change": "harmful"})``,
keyed by an outcome or a check's ``Verdict(..., failure=name)``); the judge writes each trial's
``severity`` from it:

>>> get_suite("orders").severity_of("wrong_change"), get_suite("orders").severity_of("false_claim")
('harmful', 'misleading')
"""

from __future__ import annotations

from typing import Any

from passk_nb.data.claims import ClaimVocabulary
from passk_nb.harness.suites.base import Refusal, Suite, Verdict
from passk_nb.harness.suites.build import answer, call, make_suite, task, tool
from passk_nb.harness.suites.registry import builtin_suite, get_suite, register_suite

__all__ = [
    "ClaimVocabulary",
    "Refusal",
    "Suite",
    "Verdict",
    "answer",
    "builtin_suite",
    "call",
    "check_suite",
    "get_suite",
    "make_suite",
    "register_suite",
    "task",
    "tool",
]


def __getattr__(name: str) -> Any:
    if name == "check_suite":  # lazily: the checks run episodes, whose providers import this package
        from passk_nb.harness.suites.checks import check_suite

        return check_suite
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
