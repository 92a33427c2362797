"""Derived per-trial flags: what a state check exposes that a transcript reader misses.

:func:`claimed_unperformed_action` flags *action hallucination*: the agent's final
answer says an action was done (a refund, a cancellation, an address change) that
the final state does not show. The harness finds these claims as each trial ends,
with the suite's own vocabulary (:mod:`passk_nb.data.claims`), and stores them in the
``false_claims`` column; this flag reads that column, so it works on records from
any source and never needs the suite.

>>> from passk_nb.data.records import frame_from_records
>>> claim = '[{"kind": "cancel", "ids": ["O1003"], "text": "Your order O1003 has been cancelled"}]'
>>> df = frame_from_records([
...     {"run_id": "r", "suite": "orders", "task": "cancel-pending-lookup", "trial": 0,
...      "passed": False, "outcome": "wrong_state", "false_claims": claim},
...     {"run_id": "r", "suite": "orders", "task": "cancel-shipped-refusal", "trial": 0,
...      "passed": True, "outcome": "pass"},
... ])
>>> claimed_unperformed_action(df).tolist()
[True, False]
>>> claim_kinds(df).tolist()
['cancel', '']
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import pandas as pd

T = TypeVar("T")

__all__ = ["claimed_unperformed_action", "claim_kinds", "false_claims"]


def false_claims(value: object) -> list[dict[str, object]]:
    """The claims stored in one ``false_claims`` cell (an empty list for none or a missing cell)."""
    if not isinstance(value, str) or not value:
        return []
    try:
        claims = json.loads(value)
    except ValueError:
        return []
    return [c for c in claims if isinstance(c, dict)] if isinstance(claims, list) else []


def claimed_unperformed_action(df: pd.DataFrame) -> pd.Series:
    """Per trial: does the final answer claim an action the final state does not show?

    A boolean Series named ``claimed_unperformed_action``, aligned with ``df``. Records
    without a ``false_claims`` column (imported from elsewhere) are never flagged.

    How claims are found (see :mod:`passk_nb.data.claims`): the final answer is split
    into sentences and clauses; questions, negated ("cannot be cancelled"), modal ("can
    be refunded"), infinitive ("wait for it to be cancelled") and conditional ("once it is
    refunded", "will be cancelled once it is back") statements are dropped; what is
    left is matched against the suite's completed-action phrases; a claim is unperformed
    when the state diff shows no action of that kind on the records it names. Limits:
    English only; phrases outside the suite's lists are missed; "your cancelled order"
    counts as a claim; promises ("will be cancelled") count, since nothing happens after
    the final answer.
    """
    if "false_claims" not in df.columns:
        return pd.Series(False, index=df.index, dtype=bool, name="claimed_unperformed_action")
    flags = _per_cell(df["false_claims"], lambda value: bool(false_claims(value)), False)
    return pd.Series(flags, index=df.index, dtype=bool, name="claimed_unperformed_action")


def claim_kinds(df: pd.DataFrame) -> pd.Series:
    """Per trial: the kinds of the unperformed claims, comma-separated (``""`` for none)."""
    if "false_claims" not in df.columns:
        return pd.Series("", index=df.index, dtype=object, name="claim_kinds")
    kinds = _per_cell(
        df["false_claims"], lambda v: ", ".join(sorted({str(c.get("kind")) for c in false_claims(v)})), ""
    )
    return pd.Series(kinds, index=df.index, dtype=object, name="claim_kinds")


def _per_cell(cells: pd.Series, read: Callable[[object], T], missing: T) -> np.ndarray:
    """``read`` of every cell, decoding each distinct value once (most trials share ``[]`` or none):
    ``missing`` for a missing cell."""
    codes, values = pd.factorize(cells)
    read_once = np.array([read(value) for value in values] + [missing], dtype=object)
    return read_once[codes]  # code -1, a missing cell: the last entry
