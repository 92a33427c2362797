"""Severity: suites declare how bad each failure is, and the one judge writes it on every trial."""

import dataclasses
import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

import passk_nb
from passk_nb.data.store import load
from passk_nb.harness.fingerprint import suite_fingerprint
from passk_nb.harness.grading import judge
from passk_nb.harness.regrade import regrade
from passk_nb.harness.suites import Verdict, get_suite, make_suite, task

ORDERS = get_suite("orders")

#: what each agent does on each task, instead of the known-good script (None: the script)
BEHAVIOUR = {
    # refunds another customer's order instead of the one asked for
    "refund-delivered": [
        {"tool": "refund_order", "args": {"order_id": "O1004", "amount": 18.75}},
        {"answer": "Refunded."},
    ],
    # does nothing and says so
    "cancel-pending-lookup": [{"answer": "I cannot help with that."}],
    # cancels nothing, yet tells the customer the shipped order is cancelled
    "cancel-shipped-refusal": [
        {"tool": "get_order", "args": {"order_id": "O1007"}},
        {"answer": "Your order O1007 is cancelled."},
    ],
    # refunds the damaged order, then never answers: max_turns after a wrong-order refund
    "refund-damaged-shipped": [{"tool": "refund_order", "args": {"order_id": "O1001", "amount": 79.99}}]
    + [{"tool": "get_order", "args": {"order_id": "O1005"}}] * 20,
}


def mixed_agent(messages):
    task_ = next(t for t in ORDERS.tasks if t.prompt == messages[1]["content"])
    script = BEHAVIOUR.get(task_.id) or [dict(step) for step in task_.script]
    turn = sum(m["role"] == "assistant" for m in messages)
    return json.dumps(script[min(turn, len(script) - 1)])


def test_the_judge_writes_each_failure_s_severity_from_the_suite_s_table(tmp_path):
    df = passk_nb.run(mixed_agent, trials=1, out=tmp_path, progress=False, max_turns=4)
    got = df.set_index("task")[["outcome", "severity"]].to_dict("index")
    assert got["refund-delivered"] == {"outcome": "wrong_state", "severity": "harmful"}
    assert got["cancel-pending-lookup"] == {"outcome": "wrong_state", "severity": "benign"}
    assert got["cancel-shipped-refusal"] == {"outcome": "false_claim", "severity": "misleading"}
    assert got["refund-damaged-shipped"] == {"outcome": "max_turns", "severity": "harmful"}
    assert got["address-change-pending"] == {"outcome": "pass", "severity": "none"}
    # stored as run: the folder holds the same column
    stored = load(tmp_path).set_index("task")["severity"]
    assert stored.to_dict() == df.set_index("task")["severity"].to_dict()


def test_regrade_labels_a_trial_exactly_as_the_run_did_and_by_the_current_table(tmp_path):
    df = passk_nb.run(mixed_agent, trials=1, out=tmp_path, progress=False, max_turns=4)
    again = regrade(df, suite=ORDERS)
    assert again["severity"].tolist() == df["severity"].tolist()
    lenient = dataclasses.replace(ORDERS, severity={**ORDERS.severity, "wrong_change": "benign"})
    relabelled = regrade(df, suite=lenient).set_index("task")["severity"]
    assert relabelled["refund-delivered"] == "benign"
    assert relabelled["refund-damaged-shipped"] == "benign"  # its outcome, max_turns, is benign too
    assert relabelled["cancel-shipped-refusal"] == "misleading"


def test_a_check_s_named_failure_is_ranked_by_the_suite_s_table():
    def check(before, after):
        return Verdict("wrong_state", "refunded a shipped order", failure="refund_shipped")

    refund = task(id="t", prompt="p", check=check, script=[{"answer": "ok"}])
    suite = make_suite(
        "named",
        instructions="i",
        tools=list(ORDERS.tools.values()),
        initial_state=ORDERS.initial_state,
        tasks=[refund],
        severity={"refund_shipped": "harmful"},
    )
    state = suite.initial_state()
    assert judge(suite, refund, state, state, final_answer="ok", seen=[]).severity == "harmful"
    plain = dataclasses.replace(suite, severity={})
    assert judge(plain, refund, state, state, final_answer="ok", seen=[]).severity == "benign"


def test_a_severity_outside_the_scale_is_refused_naming_the_key():
    with pytest.raises(ValueError, match=r"severity\['no_change'\]: severity 'awful' is not one of"):
        dataclasses.replace(ORDERS, severity={"no_change": "awful"})


def test_the_severity_table_is_no_part_of_the_suite_s_identity():
    edited = dataclasses.replace(ORDERS, severity={"no_change": "harmful"})
    assert suite_fingerprint(edited) == suite_fingerprint(ORDERS)
    bare = dataclasses.replace(ORDERS, severity={})
    assert suite_fingerprint(bare) == suite_fingerprint(ORDERS)


def test_records_written_before_the_column_load_as_not_graded(tmp_path):
    passk_nb.run("scripted", trials=1, out=tmp_path, progress=False)
    for part in tmp_path.rglob("*.parquet"):
        table = pq.read_table(part)
        pq.write_table(table.drop_columns(["severity"]), part)
    old = load(tmp_path)
    assert (old["severity"] == "").all()
    assert pd.api.types.is_string_dtype(old["severity"])
