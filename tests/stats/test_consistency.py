"""consistency(): do a task's passing trials take the same calls, arguments and turns?"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

import passk_nb


def transcript(*calls: tuple[str, str]) -> str:
    steps = [{"kind": "reply", "action": {"tool": tool, "args": {"order_id": arg}}} for tool, arg in calls]
    return json.dumps(
        [
            {"kind": "task", "role": "user", "content": "x"},
            *steps,
            {"kind": "reply", "action": {"answer": "ok"}},
        ]
    )


def test_the_scripted_agent_does_the_same_thing_every_time(tmp_path):
    df = passk_nb.run("scripted", trials=4, out=tmp_path, progress=False)
    out = passk_nb.stats.consistency(df)
    assert len(out) == 5 and (out["n_pass"] == 4).all()
    assert (out[["same_tools", "same_arguments", "same_turns"]] == 1.0).all().all()
    assert (out["n_sequences"] == 1).all()


def test_shares_follow_the_passing_trials_only():
    rng = np.random.default_rng(5)
    # task a: 10 passing trials, 7 with the usual calls, 2 with another order id, 1 with an extra lookup
    usual, other_id, extra = (
        transcript(("get_order", "O1"), ("refund_order", "O1")),
        transcript(("get_order", "O2"), ("refund_order", "O1")),
        transcript(("get_order", "O1"), ("get_order", "O1"), ("refund_order", "O1")),
    )
    passing = [usual] * 7 + [other_id] * 2 + [extra]
    failing = [transcript(("refund_order", "O9"))] * 5  # never counted
    order = rng.permutation(15)
    df = pd.DataFrame(
        {
            "model": "m",
            "task": "a",
            "passed": np.array([True] * 10 + [False] * 5)[order],
            "transcript": np.array(passing + failing, dtype=object)[order],
            "n_turns": np.array([3] * 9 + [4] + [2] * 5)[order],
        }
    )
    row = passk_nb.stats.consistency(df).iloc[0]
    assert row["model"] == "m" and row["n_trials"] == 15 and row["n_pass"] == 10
    assert row["same_tools"] == 0.9  # the extra lookup is the only other tool sequence
    assert row["same_arguments"] == 0.7 and row["n_sequences"] == 3
    assert row["same_turns"] == 0.9


def test_a_task_that_never_passed_has_no_consistency():
    df = pd.DataFrame(
        {
            "task": ["a", "a", "b"],
            "passed": [False, False, True],
            "transcript": [transcript(("x", "1"))] * 3,
            "n_turns": 2,
        }
    )
    out = passk_nb.stats.consistency(df, by=()).set_index("task")
    assert np.isnan(out.loc["a", "same_tools"]) and out.loc["a", "n_pass"] == 0
    assert out.loc["b", "same_tools"] == 1.0


def test_consistency_summary_weights_tasks_by_their_passing_trials_and_the_explorer_shows_it(tmp_path):
    df = passk_nb.run("scripted", trials=2, out=tmp_path, progress=False)
    table = passk_nb.stats.consistency(df)
    total = passk_nb.stats.consistency_summary(table)
    assert len(total) == 1 and total["n_pass"].iloc[0] == 10 and total["tasks_passed"].iloc[0] == 5
    assert total["same_arguments"].iloc[0] == 1.0
    explorer = passk_nb.explore(df, k=2, n_boot=0, static=True)
    shown = explorer.consistency_summary()
    assert shown is not None and shown["n_pass"].iloc[0] == 10
    assert "Consistency when it succeeds" in explorer.static_html()
    explorer.filters["task"].value = ("refund-delivered",)
    assert explorer.consistency_summary()["n_pass"].iloc[0] == 2  # follows the filters
    assert (
        passk_nb.explore(df.drop(columns="transcript"), k=2, n_boot=0, static=True).consistency_summary()
        is None
    )


def test_a_large_explorer_reads_no_transcript_until_its_checkbox_is_ticked(tmp_path, monkeypatch):
    from passk_nb.view import widgets

    df = passk_nb.run("scripted", trials=2, out=tmp_path, progress=False)
    monkeypatch.setattr(widgets, "CONSISTENCY_ROWS", len(df) - 1)  # this frame counts as large
    read = []
    monkeypatch.setattr(
        widgets, "consistency", lambda *a, **k: read.append(1) or passk_nb.stats.consistency(*a, **k)
    )
    explorer = passk_nb.explore(df, k=2, n_boot=0, static=True)
    assert not read and "Consistency when it succeeds" not in explorer.static_html()
    explorer.show_consistency.value = True
    assert len(read) == 1 and "Consistency when it succeeds" in explorer.static_html()
    explorer.filters["task"].value = ("refund-delivered",)
    assert len(read) == 1  # read once, every selection after that from the same table
