"""The side-by-side transcript view: aligned by step, the first differing step highlighted, escaped."""

import json
import re

import pandas as pd
import pytest

import passk_nb
from passk_nb.view.transcript_html import DIFFER_COLOR, transcript_pair_html
from passk_nb.view.widgets import browse_transcripts, compare_transcripts

HOSTILE = "<script>alert('x')</script><img src=x onerror=alert(1)>"


def entries(*actions, say=HOSTILE):
    out = [{"kind": "task", "role": "user", "content": f"Cancel O1, please {say}"}]
    for action in actions:
        out.append(
            {"kind": "reply", "role": "assistant", "action": action, "content": json.dumps(action) + say}
        )
        if "tool" in action:
            out.append({"kind": "tool_result", "role": "user", "content": f"result {say}"})
    return json.dumps(out)


GET = {"tool": "get_order", "args": {"order_id": "O1"}}
CANCEL = {"tool": "cancel_order", "args": {"order_id": "O1"}}
WRONG = {"tool": "cancel_order", "args": {"order_id": "O2"}}


def record(trial, passed, *actions, answer=HOSTILE):
    return {
        "task": "cancel",
        "model": "m",
        "trial": trial,
        "passed": passed,
        "outcome": "pass" if passed else "wrong_state",
        "final_answer": answer,
        "state_diff": json.dumps([{"path": "orders.O1.status", "before": HOSTILE, "after": "cancelled"}]),
        "transcript": entries(*actions, {"answer": "done"}),
    }


def step_rows(page):
    """{step: (highlighted, HTML of the row of panes)} from the pair page."""
    rows = re.findall(r"<b>step (\d+)</b>(.*?)</td></tr><tr style='([^']*)'>(.*?)</tr>", page)
    return {int(n): (DIFFER_COLOR in style, mark, body) for n, mark, style, body in rows}


def test_the_first_differing_step_is_highlighted_and_named():
    page = transcript_pair_html(record(0, True, GET, CANCEL), record(1, False, GET, WRONG))
    rows = step_rows(page)
    assert sorted(rows) == [0, 1, 2]
    assert [rows[i][0] for i in range(3)] == [False, True, False]
    assert "first difference" in rows[1][1] and "first difference" not in rows[0][1]
    assert "first difference at step 1</b>: left cancel_order(order_id=&quot;O1&quot;)" in page
    assert "right cancel_order(order_id=&quot;O2&quot;)" in page
    left, right = rows[1][2].split("</td><td", 1)
    assert "O1" in left and "O2" in right  # aligned: each side's own step 1 in its own pane


def test_html_in_the_transcripts_is_escaped_in_both_panes():
    page = transcript_pair_html(record(0, True, GET, CANCEL), record(1, False, GET, WRONG))
    assert "<script>" not in page and "<img" not in page
    escaped = page.count("&lt;script&gt;")
    # per pane: customer message, 2 tool results + 3 raw replies, the state diff, the final answer
    assert escaped >= 2 * 7
    for _, _, body in step_rows(page).values():
        left, right = body.split("</td><td", 1)
        assert "&lt;script&gt;" in left and "&lt;script&gt;" in right


def test_a_trial_that_stops_early_differs_where_it_stopped():
    page = transcript_pair_html(record(0, True, GET, CANCEL), record(1, False, GET))
    rows = step_rows(page)
    assert rows[1][0] and "first difference at step 1" in page
    assert "answer" in page.split("first difference at step 1")[1].split("</div>")[0]
    assert "(ended)" in rows[2][2]  # the shorter trial has no step 2


def test_same_actions_are_said_and_nothing_is_highlighted():
    page = transcript_pair_html(record(0, True, GET, CANCEL), record(1, False, GET, CANCEL, answer="no"))
    assert "same actions at every step" in page
    assert not any(highlighted for highlighted, _, _ in step_rows(page).values())


def test_key_args_decide_what_counts_as_a_different_action():
    with_reason = {"tool": "get_order", "args": {"order_id": "O1", "why": "check"}}
    left, right = record(0, True, GET, CANCEL), record(1, False, with_reason, CANCEL)
    assert "first difference at step 0" in transcript_pair_html(left, right)
    assert "same actions" in transcript_pair_html(left, right, key_args={"get_order": ["order_id"]})


def frame():
    return pd.DataFrame(
        [
            record(0, True, GET, CANCEL),
            record(1, False, GET, WRONG),
            record(2, True, GET, CANCEL),
            {**record(0, False, WRONG), "task": "other"},
        ]
    )


def test_compare_transcripts_sets_a_failure_beside_a_success_of_its_task():
    page = compare_transcripts(frame()).data
    assert "first difference at step 1" in page
    assert page.index("trial 0") < page.index("trial 1")  # the passing trial on the left
    assert passk_nb.view.compare_transcripts is compare_transcripts


def test_compare_transcripts_says_when_there_is_no_pair():
    df = frame()
    with pytest.raises(ValueError, match="no passing trial of task 'other'"):
        compare_transcripts(df, right=3)
    with pytest.raises(ValueError, match="no failing trial"):
        compare_transcripts(df[df["passed"]])
    with pytest.raises(ValueError, match="left=99"):
        compare_transcripts(df, left=99, right=1)


def test_the_browser_shows_a_chosen_second_trial_beside_the_first():
    browser = browse_transcripts(frame(), static=False)
    assert "passk-transcript-pair" not in browser.view.value
    browser.trial.value = 1
    browser.beside.value = 0
    page = browser.view.value
    assert "passk-transcript-pair" in page and "first difference at step 1" in page
    assert "<script>" not in page
    browser.beside.value = None
    assert "passk-transcript-pair" not in browser.view.value


def test_the_default_partner_is_the_closest_success():
    df = pd.DataFrame(
        [
            record(0, True, CANCEL),  # skipped the lookup, still passed: shares nothing with the failure
            record(1, False, GET, WRONG),
            record(2, True, GET, CANCEL),  # shares the lookup with the failure
        ]
    )
    page = compare_transcripts(df).data
    assert "first difference at step 1" in page and "trial 2" in page and "trial 0" not in page
