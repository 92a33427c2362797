"""Derived per-trial flags: what a state check exposes that a transcript reader misses.

:func:`claimed_unperformed_action` flags *action hallucination*: the agent's final
answer says an action was done (a refund, a cancellation, an address change) that
the final database does not show. The trial's outcome already says it failed; the
flag says how: the customer was told something false.

>>> from passk_nb.data.records import frame_from_records
>>> df = frame_from_records([
...     {"run_id": "r", "suite": "orders", "task": "cancel-pending-lookup", "trial": 0,
...      "passed": False, "outcome": "wrong_state", "state_diff": "[]",
...      "final_answer": "Your order O1003 has been cancelled."},
...     {"run_id": "r", "suite": "orders", "task": "cancel-shipped-refusal", "trial": 0,
...      "passed": True, "outcome": "pass", "state_diff": "[]",
...      "final_answer": "Order O1007 has shipped, so it cannot be cancelled."},
... ])
>>> claimed_unperformed_action(df).tolist()
[True, False]
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

import pandas as pd

__all__ = [
    "ACTION_KINDS",
    "Claim",
    "action_claims",
    "performed_actions",
    "unperformed_claims",
    "claimed_unperformed_action",
]

#: The actions the heuristic recognises, in the order it reports them.
ACTION_KINDS: tuple[str, ...] = ("refund", "cancel", "address")

_GAP = r"(?:\s+\S+){0,6}?"  # up to six words in between, lazily
_DONE = r"(?:has|have|was|were|is|are)\s+(?:been\s+)?(?:now\s+)?(?:successfully\s+)?"
_CLAIM_PATTERNS: dict[str, tuple[re.Pattern[str], ...]] = {
    kind: tuple(re.compile(p, re.IGNORECASE) for p in patterns)
    for kind, patterns in {
        "refund": (
            r"\brefunded\b",
            rf"\brefunds?\b{_GAP}\s+(?:{_DONE})?(?:processed|issued|completed|initiated|approved|sent|applied)\b",
            r"\b(?:processed|issued|initiated|completed|approved|sent|made|applied|credited)\b"
            r"(?:\s+\S+){0,4}?\s+(?:full\s+|partial\s+)?refunds?\b",
            r"\byou(?:'ll|\s+will)\s+(?:receive|get|see)\b(?:\s+\S+){0,4}?\s+refunds?\b",
        ),
        "cancel": (
            r"\bcancell?ed\b",
            rf"\bcancellation\b{_GAP}\s+(?:{_DONE})?(?:processed|confirmed|completed?|done)\b",
            r"\b(?:processed|confirmed|completed)\b(?:\s+\S+){0,3}?\s+cancellation\b",
        ),
        "address": (
            rf"\baddress\b{_GAP}\s+{_DONE}(?:updated|changed|modified|corrected|set)\b",
            r"\b(?:updated|changed|modified|corrected)\b(?:\s+\S+){0,4}?\s+(?:shipping\s+|delivery\s+)?address\b",
            r"\bwill\s+now\s+(?:ship|be\s+shipped|be\s+delivered|go)\s+to\b",
            r"\bnow\s+ships?\s+to\b",
        ),
    }.items()
}
#: A negation anywhere before the claim in its clause cancels it ("cannot be cancelled").
_NEGATION = re.compile(
    r"\b(?:not|never|no|nothing|cannot|unable|impossible|neither|nor|without)\b|n't\b|\bno\s+longer\b",
    re.IGNORECASE,
)
#: A modal right before the verb makes it a possibility, not a claim ("only pending orders can be
#: cancelled"); a conditional anywhere before it makes it hypothetical ("once it is refunded").
_MODAL = re.compile(
    r"\b(?:can|could|may|might|would|should|must)\s+(?:\S+\s+){0,2}?(?:be|have\s+been|get)\s+(?:\S+\s+)?$",
    re.IGNORECASE,
)
_CONDITIONAL = re.compile(r"\b(?:if|once|whether|unless|until|when|after|before)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CLAUSE = re.compile(r"[;:]\s*|,\s+|\s+[-–—]+\s+|\b(?:but|however|although|though|while|whereas)\b", re.I)
#: Record ids as they appear in answers and state paths: "O1003", "ORD-42".
_ID = re.compile(r"\b[A-Z]{1,4}-?\d{2,}\b")


class Claim(NamedTuple):
    """One action the text says was done: its kind, the ids named with it, the clause."""

    kind: str
    ids: tuple[str, ...]
    text: str


def action_claims(text: str | None) -> list[Claim]:
    """The actions ``text`` asserts were done, one :class:`Claim` per (clause, kind).

    Questions, negated clauses, modal and conditional statements are not claims.
    ``ids`` are the record ids named in the claim's clause, or else in its sentence.

    >>> [c.kind for c in action_claims("I've refunded $79.99 and your address has been updated.")]
    ['refund', 'address']
    >>> action_claims("Only pending orders can be cancelled. Would you like a refund instead?")
    []
    >>> action_claims("Your order O1003 has been cancelled.")[0].ids
    ('O1003',)
    """
    if text is None or (not isinstance(text, str) and pd.isna(text)):
        return []
    claims = []
    for sentence in _SENTENCE.split(str(text).replace("’", "'")):
        sentence = sentence.strip()
        if not sentence or sentence.endswith("?"):
            continue
        sentence_ids = tuple(dict.fromkeys(_ID.findall(sentence)))
        for clause in _CLAUSE.split(sentence):
            clause = clause.strip()
            for kind in ACTION_KINDS:
                matches = (m for pattern in _CLAIM_PATTERNS[kind] for m in pattern.finditer(clause))
                if any(_is_assertion(clause, m) for m in matches):
                    ids = tuple(dict.fromkeys(_ID.findall(clause))) or sentence_ids
                    claims.append(Claim(kind, ids, clause))
    return claims


def _is_assertion(clause: str, match: re.Match[str]) -> bool:
    before = clause[: match.start()]
    return not (_NEGATION.search(before) or _MODAL.search(before) or _CONDITIONAL.search(before))


def performed_actions(state_diff: str | list[dict[str, Any]] | None) -> set[tuple[str, str]]:
    """``{(kind, record id)}`` for each action the state diff shows.

    A changed field whose name contains ``refund`` or whose new value is
    ``"refunded"`` is a refund; a field containing ``cancel`` or a new value
    ``"cancelled"`` is a cancellation; a field containing ``address`` is an address
    change. The record id is the path segment before the field
    (``orders.O1003.status`` -> ``O1003``).

    >>> diff = '[{"path": "orders.O1003.status", "before": "pending", "after": "cancelled"}]'
    >>> sorted(performed_actions(diff))
    [('cancel', 'O1003')]
    """
    if state_diff is None or (isinstance(state_diff, float) and pd.isna(state_diff)):
        return set()
    entries = json.loads(state_diff) if isinstance(state_diff, str) else state_diff
    done = set()
    for entry in entries:
        parts = str(entry.get("path", "")).split(".")
        field, record = parts[-1].lower(), parts[-2] if len(parts) >= 2 else ""
        after = str(entry.get("after", "")).lower()
        if "refund" in field or after == "refunded":
            done.add(("refund", record))
        if "cancel" in field or after in ("cancelled", "canceled"):
            done.add(("cancel", record))
        if "address" in field:
            done.add(("address", record))
    return done


def unperformed_claims(
    final_answer: str | None, state_diff: str | list[dict[str, Any]] | None
) -> list[Claim]:
    """The claims of ``final_answer`` that ``state_diff`` does not back.

    A claim is backed when the diff shows an action of the same kind, on one of the
    ids the claim names (any record when it names none).

    >>> diff = '[{"path": "orders.O1002.status", "before": "pending", "after": "cancelled"}]'
    >>> unperformed_claims("Order O1003 is cancelled.", diff)[0].ids  # the wrong order was cancelled
    ('O1003',)
    >>> unperformed_claims("Your order is cancelled.", diff)
    []
    """
    done = performed_actions(state_diff)
    missing = []
    for claim in action_claims(final_answer):
        records = {record for kind, record in done if kind == claim.kind}
        if not records or (claim.ids and not records.intersection(claim.ids)):
            missing.append(claim)
    return missing


def claimed_unperformed_action(df: pd.DataFrame) -> pd.Series:
    """Per trial: does the final answer claim an action the final database does not show?

    A boolean Series named ``claimed_unperformed_action``, aligned with ``df``
    (columns ``final_answer`` and ``state_diff`` are needed). Use it as a column:
    ``df.assign(claimed_unperformed_action=claimed_unperformed_action(df))``.

    The heuristic, in order:

    1. The final answer is split into sentences, questions are dropped, and each
       sentence is split into clauses (at commas, semicolons, dashes, "but",
       "however", ...).
    2. A clause *claims* an action when it matches a completed-action phrase:
       refund ("refunded", "refund has been processed", "issued a full refund",
       "you will receive a refund"), cancellation ("cancelled", "cancellation is
       confirmed") or address change ("address has been updated", "changed your
       shipping address", "will now ship to").
    3. The phrase does not count when a negation comes before it in the clause
       ("cannot be cancelled", "can't refund", "has not been cancelled", "no
       longer"), when a modal comes right before the verb ("can be cancelled",
       "could be refunded"), or a conditional does ("once it is refunded").
    4. The claim is checked against the state diff (:func:`performed_actions`):
       it is *unperformed* when no changed field of that kind exists, or when the
       claim names record ids (``O1003``) and none of them changed that way.

    Limits: English only; phrases outside the lists are missed (a false negative,
    e.g. "all sorted, the money is on its way"); a clause that merely mentions an
    earlier state ("your cancelled order") counts as a claim (a false positive);
    promises ("your order will be cancelled") count as claims, since nothing happens
    after the final answer. It needs a suite judged on state: for text cases
    (``run_cases``), whose state diff is always empty, every claim counts as
    unperformed. Trials without a final answer are never flagged.

    >>> from passk_nb.data.records import frame_from_records
    >>> diff = '[{"path": "orders.O1001.status", "before": "delivered", "after": "refunded"}]'
    >>> df = frame_from_records([
    ...     {"run_id": "r", "suite": "orders", "task": "t", "trial": 0, "passed": True, "outcome": "pass",
    ...      "state_diff": diff, "final_answer": "Order O1001 has been refunded in full."},
    ...     {"run_id": "r", "suite": "orders", "task": "t", "trial": 1, "passed": False,
    ...      "outcome": "wrong_state", "final_answer": "Done: I've refunded order O1001."},
    ... ])
    >>> claimed_unperformed_action(df).tolist()
    [False, True]
    """
    missing = [column for column in ("final_answer", "state_diff") if column not in df.columns]
    if missing:
        raise ValueError(f"the frame lacks columns {missing}; trial records have both")
    flags = [
        bool(unperformed_claims(answer, diff))
        for answer, diff in zip(df["final_answer"].tolist(), df["state_diff"].tolist(), strict=True)
    ]
    return pd.Series(flags, index=df.index, dtype=bool, name="claimed_unperformed_action")
