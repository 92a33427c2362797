"""Re-grade stored trials under the suite's current checks, without calling any model.

A trial record keeps the transcript of every action the agent took. Replaying those
actions against the suite's seeded initial state rebuilds the final state exactly (the
tools are deterministic; :func:`regrade` checks the rebuilt diff against the stored
one), and :func:`~passk_nb.harness.grading.judge` then decides the outcome as a new
trial would be judged. Trials that ended before an answer (``format_error``,
``max_turns``, ``infra_error``, ``agent_error``) keep their outcome; their state check
and false claims are recomputed.

>>> import tempfile, passk_nb
>>> df = passk_nb.run("scripted", trials=1, out=tempfile.mkdtemp(), progress=False)
>>> again = regrade(df)
>>> bool(again["passed"].all()), int(again["regrade_changed"].sum())
(True, 0)
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from passk_nb.data.ids import content_id
from passk_nb.data.records import COLUMNS
from passk_nb.data.transcript import parse_transcript
from passk_nb.harness.grading import judge, tool_result_text, trial_severity
from passk_nb.harness.suites import builtin_suite, get_suite
from passk_nb.harness.suites.base import Suite, diff_states

#: Outcomes decided before the check could run: re-grading keeps them.
ENDED_EARLY = frozenset({"format_error", "max_turns", "infra_error", "agent_error"})


class RegradeError(ValueError):
    """A stored trial cannot be replayed faithfully (truncated arguments, a diff that differs)."""


def regrade(df: pd.DataFrame, suite: str | Suite | None = None) -> pd.DataFrame:
    """``df`` with each trial judged again by the suite's current checks.

    ``suite`` (a :class:`Suite` or anything :func:`~passk_nb.harness.suites.get_suite` loads)
    grades every row; without it, each row's ``suite`` must name a built-in or registered
    suite: records are data, and a module they name is never imported. Returns a copy
    with ``outcome``, ``passed``, ``state_ok``, ``error``, ``false_claims`` and ``severity`` recomputed,
    plus ``outcome_before`` and ``regrade_changed`` (the verdict changed). Rows that
    cannot be replayed faithfully raise :class:`RegradeError` naming the trial.
    """
    out = df.copy()
    before = df["outcome"].astype(str)
    grading = None if suite is None else get_suite(suite)
    results = [
        _regrade_row(row, grading if grading is not None else builtin_suite(str(row["suite"])))
        for row in df.to_dict("records")
    ]
    for column in ("outcome", "passed", "state_ok", "error", "false_claims", "severity"):
        out[column] = [r[column] for r in results]
    out["passed"] = out["passed"].astype(bool)
    out["state_ok"] = out["state_ok"].astype(bool)
    out["outcome_before"] = before.to_numpy()
    out["regrade_changed"] = (out["outcome"].astype(str) != before).to_numpy()
    return out


def _regrade_row(row: dict[str, Any], suite: Suite) -> dict[str, Any]:
    where = f"{row.get('run_id')}/{row.get('task')}/trial {row.get('trial')}"
    task = suite.task(str(row["task"]))
    env = suite.make_env()
    start = env.snapshot()
    seen: list[str] = []
    final_answer = None
    for entry in parse_transcript(row.get("transcript")):
        action = entry.get("action") if entry.get("kind") == "reply" else None
        if not isinstance(action, dict):
            continue
        if "answer" in action:
            final_answer = (
                row.get("final_answer") if isinstance(row.get("final_answer"), str) else action["answer"]
            )
            break
        args = action.get("args")
        if not isinstance(args, dict) or "_truncated" in args:
            raise RegradeError(
                f"{where}: a tool call's arguments were truncated when stored; it cannot be replayed"
            )
        seen.append(tool_result_text(env.try_call(str(action.get("tool")), args)))
    end = env.final_state()
    stored = row.get("state_diff")
    if isinstance(stored, str) and json.loads(stored) != json.loads(
        json.dumps(diff_states(start, end), default=str)
    ):
        raise RegradeError(f"{where}: replaying the transcript does not rebuild the stored final state")
    verdict = judge(suite, task, start, end, final_answer=final_answer, seen=seen)
    if row["outcome"] in ENDED_EARLY:
        return {
            "outcome": row["outcome"],
            "passed": False,
            "state_ok": verdict.state_ok,
            "error": row.get("error"),
            "false_claims": verdict.false_claims_json,
            "severity": trial_severity(suite, verdict, str(row["outcome"])),
        }
    return {
        "outcome": verdict.outcome,
        "passed": verdict.outcome == "pass",
        "state_ok": verdict.state_ok,
        "error": None if verdict.outcome == "pass" else verdict.reason,
        "false_claims": verdict.false_claims_json,
        "severity": trial_severity(suite, verdict, verdict.outcome),
    }


def regraded_records(df: pd.DataFrame, again: pd.DataFrame, grader: dict[str, str]) -> pd.DataFrame:
    """The re-graded rows as records of new runs: new ``run_id``, ``suite_hash`` (the grading suite's
    version), ``config`` and ``provider_meta``."""
    out = again[list(COLUMNS)].copy()
    new_ids = {old: content_id(["regrade", old, grader["checks"]]) for old in df["run_id"].unique()}
    out["run_id"] = df["run_id"].map(new_ids).to_numpy()
    out["suite_hash"] = grader["checks"]  # the verdicts are this suite version's
    out["config"] = [
        f"{c}, checks={grader['checks']}"
        if isinstance(c, str) and c and c != "default"
        else f"checks={grader['checks']}"
        for c in df["config"]
    ]
    out["provider_meta"] = [
        json.dumps({**provider_meta(meta), "grader": {**grader, "regraded_from": str(run)}}, default=str)
        for meta, run in zip(df["provider_meta"], df["run_id"], strict=True)
    ]
    return out


def provider_meta(text: object) -> dict[str, Any]:
    """A record's ``provider_meta`` as a dict (empty when missing or not a JSON object)."""
    try:
        value = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
