"""Task suites. ``get_suite(name)`` returns a :class:`~passk_nb.harness.suites.base.Suite`.

Built in: ``orders`` (an order-support desk, five tasks) and ``bank`` (a payments desk, ten
tasks). Your own: ``get_suite("my_package.my_module:SUITE")`` imports it, installed packages
can register suites under the entry-point group ``passk_nb.suites``, and
:func:`register_suite` adds one by name for this process.

>>> get_suite("orders").name, get_suite("bank").name
('orders', 'bank')
>>> get_suite("passk_nb.harness.suites.bank:SUITE").name
'bank'
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from passk_nb.harness.suites.bank import SUITE as BANK
from passk_nb.harness.suites.base import Suite
from passk_nb.harness.suites.orders import SUITE as ORDERS

SUITES: dict[str, Suite] = {ORDERS.name: ORDERS, BANK.name: BANK}
#: Entry-point group under which installed packages register suites (``name = "module:SUITE"``).
ENTRY_POINT_GROUP = "passk_nb.suites"


def get_suite(suite: str | Suite) -> Suite:
    """A suite by name, by ``module:ATTRIBUTE``, from an installed package's entry point, or the
    suite itself; unknown names list the known ones."""
    if isinstance(suite, Suite):
        return suite
    if not isinstance(suite, str) or not suite:
        raise ValueError(f"suite must be a suite name or 'module:SUITE', got {suite!r}")
    if suite in SUITES:
        return SUITES[suite]
    if ":" in suite:
        return _import_suite(suite)
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name == suite:
            return _checked(point.load(), f"entry point {point.value!r}")
    raise ValueError(
        f"unknown suite {suite!r}; choose from {sorted(SUITES)}, give 'module:SUITE' "
        f"(a Suite object in an importable module), or install a package registering one under "
        f"the entry-point group {ENTRY_POINT_GROUP!r}"
    )


def _import_suite(spec: str) -> Suite:
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name!r} for suite {spec!r}: {exc}") from None
    if not hasattr(module, attribute):
        raise ValueError(f"module {module_name!r} has no {attribute!r}; give module:NAME of a Suite object")
    return _checked(getattr(module, attribute), spec)


def _checked(value: object, where: str) -> Suite:
    if not isinstance(value, Suite):
        raise ValueError(f"{where} is a {type(value).__name__}, not a Suite; build one with make_suite()")
    return value


def register_suite(suite: Suite) -> None:
    """Make ``suite`` available by name to ``run`` and the CLI."""
    SUITES[suite.name] = suite
