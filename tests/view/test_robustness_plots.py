"""The robustness figures draw exactly the numbers robustness() and robustness_tasks() return."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from passk_nb.stats.robustness import robustness, robustness_tasks
from passk_nb.view.robustness_plots import plot_robustness, plot_robustness_tasks


def _records() -> pd.DataFrame:
    broken = {"noop:*": "ab", "timeout:*": "c", "latency:*": ""}
    rows = [
        {"task": t, "model": "m", "faults": f, "passed": f == "none" or t not in broken[f] or i == 0}
        for t in "abcdef"
        for f in ("none", *broken)
        for i in range(4)
    ]
    df = pd.DataFrame(rows)
    df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    return df


def test_the_bars_and_intervals_are_robustness_columns():
    df = _records()
    table = robustness(df, k=2, n_boot=200, seed=1)
    fig, given = plt.subplots()
    ax = plot_robustness(table, ax=given)
    assert ax is given
    rows = table[table["metric"] == "pass^k"].reset_index(drop=True)
    bars = next(c for c in ax.containers if c.get_label() == "diff")
    widths = [patch.get_width() for patch in bars.patches]
    np.testing.assert_allclose(widths, rows["diff"])
    interval = next(c for c in ax.collections if c.get_gid() == "interval")
    ends = np.array([[seg[0][0], seg[1][0]] for seg in interval.get_segments()])
    np.testing.assert_allclose(ends, rows[["lo", "hi"]].to_numpy())
    ticks = {t.get_text(): t.get_position()[1] for t in ax.get_yticklabels()}
    assert sorted(ticks, key=ticks.get, reverse=True) == rows["faults"].tolist()  # first row on top
    notes = [t.get_text() for t in ax.texts]
    assert notes == [f"{b}/{n} tasks break" for b, n in zip(rows["n_broken"], rows["n_tasks"], strict=True)]


def test_the_heatmap_cells_are_robustness_tasks_deltas():
    df = _records()
    tasks = robustness_tasks(df, k=2)
    ax = plot_robustness_tasks(tasks)
    shown = ax.images[0].get_array()
    rows = [t.get_text() for t in ax.get_yticklabels()]
    columns = [t.get_text() for t in ax.get_xticklabels()]
    for i, arm in enumerate(rows):
        for j, task in enumerate(columns):
            want = tasks.loc[(tasks["faults"] == arm) & (tasks["task"] == task), "delta"].item()
            assert shown[i, j] == pytest.approx(want)
    assert shown.min() < 0  # noop breaks tasks a and b


def test_wrong_input_is_refused():
    df = _records()
    with pytest.raises(TypeError, match=r"plot_robustness\(passk_nb.robustness\(df, k=...\)\)"):
        plot_robustness(df)
    with pytest.raises(
        TypeError, match=r"this is what robustness\(\) returned.*robustness_tasks\(df, k=...\)"
    ):
        plot_robustness_tasks(robustness(df, k=1, n_boot=0))
    with pytest.raises(ValueError, match="metric must be"):
        plot_robustness(robustness(df, k=1), metric="pass@2")
