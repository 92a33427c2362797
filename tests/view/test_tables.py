"""Tables print the bounds summarize returns; they compute none of their own."""

from __future__ import annotations

from passk_nb.stats.report import report_frame
from passk_nb.stats.summary import summarize
from passk_nb.view.tables import report_display, summary_table
from tests.helpers.records import records_from_marks as records

MARKS = ["1111", "1101", "1100", "1111", "0111", "1011"]
DF = records({("m", "p", t): marks for t, marks in zip("abcdef", MARKS, strict=True)})


def lopsided(summary):
    """The summary with asymmetric fixed-task bounds, which value ± z·se cannot give."""
    return summary.assign(
        **{
            "pass^k_fixed_lo": summary["pass^k"] * 0.25,
            "pass^k_fixed_hi": summary["pass^k"] * 0.5 + 0.5,
            "pass@k_fixed_lo": summary["pass@k"] * 0.5,
            "pass@k_fixed_hi": summary["pass@k"] * 0.125 + 0.875,
        }
    )


def test_summary_table_prints_the_fixed_task_columns():
    summary = lopsided(summarize(DF, k=2, n_boot=0))
    row, data = summary_table(summary).iloc[0], summary.iloc[0]
    for metric in ("pass@k", "pass^k"):
        expected = f"[{data[f'{metric}_fixed_lo']:.3f}, {data[f'{metric}_fixed_hi']:.3f}]"
        assert row[f"{metric} 95% CI, these tasks"] == expected


def test_the_report_prints_the_fixed_task_columns():
    report = lopsided(report_frame(DF, k=2, by=["model"], n_boot=0))
    display, _ = report_display(report, by=["model"])
    data = report.iloc[0]
    assert display.loc[0, "these tasks"] == f"[{data['pass^k_fixed_lo']:.3f}, {data['pass^k_fixed_hi']:.3f}]"


def test_a_count_the_same_in_every_row_is_said_once_above_the_table():
    """At 40 configurations a column of zeros is noise: with several rows, a count the same in each
    leaves the table for the caption; one that differs stays; a single row keeps every column."""
    two = records({("m1", "p", t): "1100" for t in "abc"} | {("m2", "p", t): "1110" for t in "abc"})
    two.loc[(two["model"] == "m2") & (two["task"] == "a") & (two["trial"] == 3), "outcome"] = "agent_error"
    report = report_frame(two, k=2, by=["model"], n_boot=0)
    display, caption = report_display(report, by=["model"])
    assert caption == "infra excl.: 0, claimed not done: 0"
    assert list(display.columns[-2:]) == ["trials", "agent errors"]  # 0 and 1: it stays
    assert display["agent errors"].tolist() == ["0", "1"]
    one, caption = report_display(report.iloc[:1], by=["model"])
    assert caption == "model: m1" and list(one.columns[-3:]) == [
        "infra excl.",
        "claimed not done",
        "agent errors",
    ]
