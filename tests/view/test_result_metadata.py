"""Tables and plots read a result's by and ci from the frame (.attrs), never from its column order."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from passk_nb.stats.cost import cost_summary
from passk_nb.stats.report import report_frame
from passk_nb.stats.summary import curve, summarize
from passk_nb.view.cost_plots import plot_cost
from passk_nb.view.plots import plot_curve
from passk_nb.view.tables import report_costs, report_notes, summary_table


def records() -> pd.DataFrame:
    rows = [
        {
            "run_id": f"r-{model}",
            "suite": "s",
            "model": model,
            "task": f"t{t}",
            "trial": i,
            "passed": i < c,
            "outcome": "pass" if i < c else "wrong_state",
            "input_tokens": 1000,
            "output_tokens": 100,
            "cost_usd": 0.01,
            "error": None,
            "claims": None,
        }
        for model, cs in (("big", (4, 4, 3, 4, 2)), ("small", (4, 1, 0, 2, 0)))
        for t, c in enumerate(cs)
        for i in range(4)
    ]
    return pd.DataFrame(rows)


DF = records()


def test_summary_table_groups_by_what_the_summary_says_not_by_the_columns_before_k() -> None:
    summary = summarize(DF, k=2, by="model")
    summary.insert(0, "note", ["a", "b"])
    table = summary_table(summary)
    assert "note" not in table.columns and "model" in table.columns
    with pytest.raises(ValueError, match="does not say which columns it was grouped by"):
        summary_table(pd.DataFrame(summary))


def test_plot_curve_labels_the_level_the_curve_was_computed_at() -> None:
    frame = curve(DF, by="model", ci=0.8, n_boot=0)
    ax = plot_curve(frame)
    assert "80% interval" in ax.get_legend().get_title().get_text()
    framed = frame.copy()
    framed.insert(0, "note", framed["model"].map({"big": "n1", "small": "n2"}))  # no grouping column
    labels = [t.get_text() for t in plot_curve(framed).get_legend().get_texts()]
    assert not any("note" in label for label in labels)
    with pytest.raises(TypeError, match="a frame without .attrs"):
        plot_curve(pd.DataFrame(frame))
    plt.close("all")


def test_plot_cost_reads_by_from_the_cost_frame() -> None:
    cost = cost_summary(DF, k=2, by="model", n_boot=0)
    with pytest.raises(TypeError, match="a frame without .attrs"):
        plot_cost(pd.DataFrame(cost))
    plot_cost(cost)  # reads by from the frame
    plt.close("all")


def test_a_priced_report_still_says_it_is_per_task() -> None:
    report = report_frame(DF, k=2, by=["model", "task"], n_boot=0)
    priced = report_costs(report, DF, k=2, by=["model", "task"], price_in=3, price_out=15)
    assert priced.attrs["by"] == ("model", "task")
    assert "unbiased estimates for each task" in report_notes(priced)[0]
