"""The card drawn: a row per measured share, 'not measured' where the run did not measure one,
costs in the table only; the plot takes the card, never trial records."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

import passk_nb
from passk_nb.stats.card import reliability_card
from passk_nb.view.card import card_table, plot_card


@pytest.fixture(scope="module")
def card(tmp_path_factory):
    out = tmp_path_factory.mktemp("cards")
    passk_nb.run("scripted", trials=3, out=out, progress=False)
    passk_nb.run("scripted", trials=3, out=out, progress=False, prompt="strict")
    return reliability_card(out, k=2, by="prompt_name", n_boot=50)


def test_the_plot_draws_each_configurations_values_and_says_what_was_not_measured(card):
    ax = plot_card(card)
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert ticks == list(dict.fromkeys(card.loc[card["axis"] != "cost", "measure"]))
    markers = [line for line in ax.lines if line.get_marker() == "o"]
    drawn = sorted(round(float(x), 6) for line in markers for x in line.get_xdata() if x == x)
    measured = card[(card["axis"] != "cost") & card["measured"]]
    values = measured["value"].dropna()
    assert values.size and drawn == sorted(round(v, 6) for v in values)  # one marker per measured value
    shares = card[card["axis"] != "cost"]
    unmeasured = set(shares["measure"]) - set(shares.loc[shares["measured"], "measure"])
    assert unmeasured and [t.get_text() for t in ax.texts].count("not measured") == len(unmeasured)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["default", "strict"]
    assert card.plot().get_title(loc="left") == ax.get_title(loc="left")  # Result.plot() draws it
    plt.close("all")


def test_the_table_has_a_column_per_configuration_and_the_plot_refuses_records(card):
    text = card_table(card, "markdown")
    assert "| axis | measure | default | strict |" in text and "∞" not in text
    with pytest.raises(TypeError, match=r"reliability_card\(df\)"):
        plot_card(pd.DataFrame(card.to_dict("list")))
