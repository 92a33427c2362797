"""The plots of a run with until= draw the frames stats returns (decide_by_round, trials_by_round)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

import passk_nb


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    until = passk_nb.Until("gate=0.6 ci=0.9")
    out = tmp_path_factory.mktemp("until")
    df = passk_nb.run("scripted", trials=1, out=out, progress=False, until=until, max_trials=200)
    return df, until.question


def test_plot_rounds_draws_the_anytime_interval_of_every_round(stopped):
    df, question = stopped
    path = passk_nb.stats.decide_by_round(df, question)
    ax = passk_nb.view.plot_rounds(path)
    lines = ax.get_lines()
    np.testing.assert_allclose(lines[0].get_ydata(), path["lo"])  # the band's edges are stats' bounds
    np.testing.assert_allclose(lines[1].get_ydata(), path["hi"])
    np.testing.assert_allclose(lines[0].get_xdata(), path["trials"])
    assert "decided (round" in " ".join(t.get_text() for t in ax.get_legend().get_texts())
    again = path.plot()  # the result picks its plot
    np.testing.assert_allclose(again.get_lines()[0].get_ydata(), path["lo"])
    with pytest.raises(TypeError, match=r"plot_rounds\(passk_nb.stats.decide_by_round\(df, question\)\)"):
        passk_nb.view.plot_rounds(df)
    plt.close("all")


def test_plot_round_trials_stacks_each_tasks_trials_by_round(stopped):
    df, _ = stopped
    spent = passk_nb.stats.trials_by_round(df)
    ax = passk_nb.view.plot_round_trials(spent)
    heights = sum(p.get_height() for p in ax.patches)
    assert heights == len(df) == spent["trials"].sum()
    assert len(ax.patches) == df["task"].nunique() * spent["round"].nunique()
    plt.close("all")


def test_plot_rounds_of_a_capped_run_says_which_looks_are_anytime_valid(tmp_path):
    question = passk_nb.stats.Question.parse("precision=0.01 final=3")
    df = passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, until=passk_nb.Until(question))
    path = passk_nb.stats.decide_by_round(df, question)
    ax = passk_nb.view.plot_rounds(path)
    np.testing.assert_allclose(ax.get_lines()[1].get_ydata(), path["hi"])  # the last look's too
    title = ax.get_title(loc="left")
    assert "anytime-valid before n = 3" in title and "valid at every look" not in title
    plt.close("all")
