"""plot_cost: points at known costs and pass^k, bars from the intervals, unpriced configurations named."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

import passk_nb
from passk_nb.stats.cost import cost_summary, with_cost
from passk_nb.view.cost_plots import plot_cost

K = 2


def records() -> pd.DataFrame:
    """cheap: tasks pass 4,4,4,2,0 of 4 (pass^2 = (3 + 1/6) / 5); dear: all pass; local: no tokens."""
    rows = []
    for model, successes, tokens in (
        ("cheap", (4, 4, 4, 2, 0), (1000, 100)),
        ("dear", (4, 4, 4, 4, 4), (1000, 100)),
        ("local", (4, 4, 3, 2, 4), (None, None)),
    ):
        for t, c in enumerate(successes):
            for i in range(4):
                rows.append(
                    {
                        "task": f"t{t}",
                        "model": model,
                        "trial": i,
                        "passed": i < c,
                        "outcome": "pass" if i < c else "wrong_state",
                        "input_tokens": tokens[0],
                        "output_tokens": tokens[1],
                        "latency_s": 0.5 if model == "local" else 2.0,
                    }
                )
    return pd.DataFrame(rows)


PRICES = {"cheap": (1.0, 2.0), "dear": (3.0, 15.0)}
PASS_CHEAP = (3 + 1 / 6) / 5


def priced(df: pd.DataFrame, *, prices=None, price_in=None, price_out=None, **options) -> pd.DataFrame:
    """cost_summary() at k=K of ``df``, its tokens priced first when prices are given."""
    if prices is not None or price_in is not None or price_out is not None:
        df = with_cost(df, prices=prices, price_in=price_in, price_out=price_out)
    return cost_summary(df, k=K, **options)


def points(ax):
    return {c.get_label(): (c.lines[0].get_xdata()[0], c.lines[0].get_ydata()[0]) for c in ax.containers}


def test_points_sit_at_the_cost_of_one_reliable_success_and_the_unpriced_model_is_named():
    ax = plot_cost(priced(records(), prices=PRICES, n_boot=0), title="t")
    got = points(ax)
    assert set(got) == {"cheap", "dear"}
    per_trial_cheap = (1000 * 1.0 + 100 * 2.0) / 1e6
    assert got["cheap"] == pytest.approx((K * per_trial_cheap / PASS_CHEAP, PASS_CHEAP))
    assert got["dear"] == pytest.approx((K * 0.0045, 1.0))
    notes = " ".join(t.get_text() for t in ax.texts)
    assert "not drawn" in notes and "local" in notes and "token counts" in notes
    assert "reliable success" in ax.get_xlabel() and "USD" in ax.get_xlabel()


def test_bars_are_the_pass_hat_k_interval_and_its_cost():
    df = records()
    summary = cost_summary(with_cost(df, prices=PRICES), k=K, by="model", n_boot=100)
    row = summary.set_index("model").loc["cheap"]
    assert 0 < row["pass^k_lo"] < PASS_CHEAP < row["pass^k_hi"] <= 1
    ax = plot_cost(priced(df, prices=PRICES, by="model", n_boot=100), title="t")
    (container,) = [c for c in ax.containers if c.get_label() == "cheap"]
    segments = [seg for col in container.lines[2] for seg in col.get_segments()]
    horizontal = [s for s in segments if s[0][1] == s[1][1]]
    vertical = [s for s in segments if s[0][0] == s[1][0]]
    assert sorted(horizontal[0][:, 0]) == pytest.approx(
        [row["per_reliable_success_lo"], row["per_reliable_success_hi"]]
    )
    assert sorted(vertical[0][:, 1]) == pytest.approx([row["pass^k_lo"], row["pass^k_hi"]])


@pytest.mark.parametrize(("x", "factor"), [("trial", 1), ("task", K)])
def test_per_trial_and_per_task_axes(x, factor):
    ax = plot_cost(priced(records(), price_in=3.0, price_out=15.0, n_boot=0), x=x, title="t")
    got = points(ax)
    assert got["cheap"][0] == pytest.approx(0.0045 * factor)
    assert got["dear"][0] == pytest.approx(0.0045 * factor)


def test_wall_time_for_a_local_model_without_prices():
    ax = plot_cost(priced(records(), measure="latency_s", n_boot=0), x="trial", title="t")
    got = points(ax)
    assert got["local"][0] == pytest.approx(0.5) and got["dear"][0] == pytest.approx(2.0)
    assert "seconds" in ax.get_xlabel()


def test_the_result_draws_itself_with_plot_cost():
    summary = cost_summary(with_cost(records(), prices=PRICES), k=K, n_boot=0)
    assert points(summary.plot(title="t")) == points(plot_cost(summary, title="t"))


def test_never_k_in_a_row_is_named_not_drawn_at_infinity():
    df = records()
    df.loc[df["model"] == "dear", ["passed", "outcome"]] = [False, "wrong_state"]
    ax = plot_cost(priced(df, prices=PRICES, n_boot=0), title="t")
    assert "dear" not in points(ax)
    assert "never 2 in a row" in " ".join(t.get_text() for t in ax.texts)


def test_wide_cost_ranges_get_a_log_axis():
    ax = plot_cost(priced(records(), prices={"cheap": (0.01, 0.02), "dear": (30.0, 150.0)}, n_boot=0))
    assert ax.get_xscale() == "log"
    assert plot_cost(priced(records(), prices=PRICES, n_boot=0), logx=False).get_xscale() == "linear"


def test_errors_say_what_to_give():
    with pytest.raises(ValueError, match="cost_usd"):
        cost_summary(records(), k=K)
    with pytest.raises(TypeError, match=r"plot_cost\(passk_nb.stats.cost_summary\(df, k=...\)\)"):
        plot_cost(with_cost(records(), prices=PRICES))
    with pytest.raises(ValueError, match="choose one of"):
        plot_cost(priced(records(), prices=PRICES), x="token")


def test_draws_on_the_given_axes_and_is_in_the_flat_api():
    _, ax = plt.subplots()
    assert passk_nb.view.plot_cost(priced(records(), prices=PRICES, n_boot=0), ax=ax) is ax
    assert np.isfinite(points(ax)["dear"][0])
