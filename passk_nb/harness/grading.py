"""Judging a trial: the task's state check, the refusal rules, and the answer's false claims.

One pure function, :func:`judge`, used by the episode as a trial ends and by
:func:`passk_nb.harness.regrade.regrade` on stored trials, so a re-graded trial is
judged exactly as a new one would be.

>>> from passk_nb.harness.suites import get_suite
>>> suite = get_suite("orders")
>>> task = suite.task("cancel-shipped-refusal")
>>> state = suite.initial_state()
>>> judge(suite, task, state, state, final_answer="Done!", seen=[]).outcome  # answered blind
'no_lookup'
>>> seen = ['{"order_id": "O1007", "status": "shipped"}']
>>> judge(suite, task, state, state, final_answer="Your order O1007 is cancelled.", seen=seen).outcome
'false_claim'
>>> refusal = "O1007 has shipped; it cannot be cancelled."
>>> judge(suite, task, state, state, final_answer=refusal, seen=seen).outcome
'pass'
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from passk_nb.data.claims import Claim, claims_json, unperformed_claims
from passk_nb.data.records import OUTCOMES
from passk_nb.harness.suites.base import Suite, SuiteError, Task, Verdict, diff_states


@dataclass(frozen=True)
class Judgement:
    """The verdict on a trial's end state: outcome, reason, whether the state passed the check,
    the answer's claims the state does not back, and the state's changes (:func:`diff_states`)."""

    outcome: str
    reason: str
    state_ok: bool
    false_claims: tuple[Claim, ...]
    diff: tuple[dict[str, Any], ...] = ()

    @property
    def false_claims_json(self) -> str:
        return claims_json(list(self.false_claims))


def judge(
    suite: Suite,
    task: Task,
    before: dict[str, Any],
    after: dict[str, Any],
    *,
    final_answer: str | None,
    seen: Sequence[str],
) -> Judgement:
    """Judge a finished trial from its initial and final states, its final answer and the texts
    of its successful tool results (``seen``).

    The task's check decides on the state alone (``pass``, ``wrong_state``,
    ``unrequested_change``). A refusal task that passed that check must also have looked at
    the record (else ``no_lookup``) and must not claim the refused action (else
    ``false_claim``). A check may return a bool (True: ``pass``, False: ``wrong_state``);
    anything else than a :class:`Verdict` with an outcome of ``OUTCOMES`` is a
    :class:`~passk_nb.harness.suites.base.SuiteError` naming the task.
    """
    verdict = checked_verdict(suite, task, task.check(before, after))
    diff = diff_states(before, after)
    claims = tuple(unperformed_claims(final_answer, diff, suite.claims)) if suite.claims else ()
    outcome, reason = verdict.outcome, verdict.reason
    refusal = task.refusal
    if verdict.ok and refusal is not None:
        if not any(refusal.record in text for text in seen):
            outcome, reason = "no_lookup", f"answered without looking at {refusal.record}"
        else:
            claimed = [c for c in claims if c.kind in refusal.claims]
            if claimed:
                outcome, reason = (
                    "false_claim",
                    f"nothing changed, yet the answer claims: {claimed[0].text!r}",
                )
    return Judgement(outcome, reason, verdict.ok, claims, tuple(diff))


def checked_verdict(suite: Suite, task: Task, value: Any) -> Verdict:
    """What a task's check returned, as a :class:`Verdict`: a bool is accepted, anything else refused.

    >>> from passk_nb.harness.suites import get_suite
    >>> suite = get_suite("orders")
    >>> checked_verdict(suite, suite.tasks[0], False)
    Verdict(outcome='wrong_state', reason='the check returned False')
    """
    if isinstance(value, bool):
        return (
            Verdict("pass", "the check returned True")
            if value
            else Verdict("wrong_state", "the check returned False")
        )
    where = f"suite {suite.name!r}, task {task.id!r}: its check returned"
    if not isinstance(value, Verdict):
        raise SuiteError(
            f"{where} {type(value).__name__} {value!r:.60}; return True/False or Verdict(outcome, reason)"
        )
    if value.outcome not in OUTCOMES:
        raise SuiteError(f"{where} the outcome {value.outcome!r}, which is not one of {list(OUTCOMES)}")
    return value


def tool_result_text(result: dict[str, Any]) -> str:
    """The text of a successful tool result as :func:`judge` searches it (``""`` for an error)."""
    return "" if "error" in result else json.dumps(result.get("ok"), ensure_ascii=False, default=str)
