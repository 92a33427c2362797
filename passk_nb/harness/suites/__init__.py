"""Task suites. ``get_suite(name)`` returns a registered :class:`~passk_nb.harness.suites.base.Suite`.

>>> get_suite("orders").name
'orders'
"""

from __future__ import annotations

from passk_nb.harness.suites.base import Suite
from passk_nb.harness.suites.orders import SUITE as ORDERS

SUITES: dict[str, Suite] = {ORDERS.name: ORDERS}


def get_suite(suite: str | Suite) -> Suite:
    """A suite by name (or the suite itself); unknown names list the known ones."""
    if isinstance(suite, Suite):
        return suite
    try:
        return SUITES[suite]
    except KeyError:
        raise ValueError(f"unknown suite {suite!r}; choose from {sorted(SUITES)}") from None


def register_suite(suite: Suite) -> None:
    """Make ``suite`` available by name to ``run`` and the CLI."""
    SUITES[suite.name] = suite
