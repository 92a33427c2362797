"""A figure of one group labels it by what differs (nothing: "all trials") and says once, in the
title, what the group is: the "differing fields only" rule of the report, in one-group legends."""

import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from passk_nb.stats.cost import cost_summary  # noqa: E402
from passk_nb.stats.counts import counts  # noqa: E402
from passk_nb.stats.forecast import forecast  # noqa: E402
from passk_nb.stats.summary import curve  # noqa: E402
from passk_nb.view.axes import set_title, wrap_fields  # noqa: E402
from passk_nb.view.cost_plots import plot_cost  # noqa: E402
from passk_nb.view.forecast_plots import plot_forecast  # noqa: E402
from passk_nb.view.labels import ONE_GROUP, figure_labels  # noqa: E402
from passk_nb.view.plots import plot_curve, plot_outcomes, plot_tasks  # noqa: E402
from passk_nb.view.report_html import _curves, config_keys  # noqa: E402
from tests.helpers.records import records_from_marks as records  # noqa: E402

CONFIG = "temperature=0.7, max_turns=6, max_tokens=192"
ONE = records(
    {
        ("SmolLM2", "7441de23b0e2", t): m
        for t, m in zip("abcdef", ["1101", "1111", "0000", "1100", "1110", "1"], strict=True)
    },
    prompt_names={"7441de23b0e2": "default"},
).assign(config=CONFIG, latency_s=1.5)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def drawn_texts(ax) -> list[str]:
    """Every text of the figure as drawn: title, legend, ticks, axis labels, annotations."""
    figure = ax.figure
    figure.canvas.draw()
    texts = [t.get_text() for t in figure.findobj(Text)]
    return [t for t in texts if t]


def draw(name: str, by):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few tasks: intervals and forecasts are declined, with warnings
        if name == "plot_cost":
            return plot_cost(cost_summary(ONE, k=2, by=by, measure="latency_s", n_boot=50))
        if name == "plot_forecast":
            return plot_forecast(forecast(ONE, by=by, n_boot=50))
        if name == "plot_curve":
            return plot_curve(curve(ONE, by=by))
        return {"plot_tasks": plot_tasks, "plot_outcomes": plot_outcomes}[name](counts(ONE, by=by))


PLOTS = ["plot_curve", "plot_tasks", "plot_outcomes", "plot_forecast", "plot_cost"]


@pytest.mark.parametrize("name", PLOTS)
@pytest.mark.parametrize("by", [("model", "config"), None])
def test_a_one_group_figure_says_what_the_group_is_once(name, by):
    ax = draw(name, by)
    texts = drawn_texts(ax)
    joined = "\n".join(texts)
    # every field of the configuration comes exactly once in the whole figure, in the title
    for field in ("temperature=0.7", "max_turns=6", "max_tokens=192"):
        assert joined.count(field) == 1, (field, texts)
    assert joined.count("SmolLM2") == 1, texts
    title = ax.get_title(loc="left")
    assert "max_turns=6" in title and "SmolLM2" in title
    assert title.splitlines()[-1].startswith(f"{ONE_GROUP}: ") or f"\n{ONE_GROUP}: " in title
    if by is None:  # the default grouping: every identity field is said, once
        assert "default (7441de2)" in title and "orders" in title
    # the line, bar, column or point of the one group is called by the short name
    labels = [text for text in texts if text != title]
    assert any(text.split(" — ")[0].split(" (n=")[0] == ONE_GROUP for text in labels), labels


def test_a_one_group_figure_keeps_labels_of_several_groups_to_what_differs():
    two = ONE.assign(config=[CONFIG.replace("0.7", "0.0") if t in "abc" else CONFIG for t in ONE["task"]])
    two["run_id"] = two["config"]
    labels, described = figure_labels(two, ("model", "config"))
    assert described == ""
    assert sorted(labels.unique()) == ["temperature=0.0", "temperature=0.7"]
    ax = plot_outcomes(counts(two, by=("model", "config")))
    assert [t.get_text().split(" (n=")[0] for t in ax.get_yticklabels()] == [
        "temperature=0.0",
        "temperature=0.7",
    ]
    assert "max_turns" not in ax.get_title(loc="left")


def test_the_title_says_the_group_only_where_it_does_not_already():
    fig, ax = plt.subplots()
    set_title(ax, "pass^k of SmolLM2", "default", note="SmolLM2")
    assert ax.get_title(loc="left") == "pass^k of SmolLM2"  # already said
    set_title(ax, "pass^k", "default", note="SmolLM2")
    assert ax.get_title(loc="left") == f"pass^k\n{ONE_GROUP}: SmolLM2"
    ax.set_title("", loc="left")
    set_title(ax, "", "default", note="SmolLM2")  # no title asked for: none
    assert ax.get_title(loc="left") == ""


def test_a_long_note_wraps_between_fields_never_inside_one():
    note = f"orders · test · SmolLM2 · default (7441de2) · {CONFIG}, json=schema, seed=1234567"
    lines = wrap_fields(f"{ONE_GROUP}: {note}", 40).splitlines()
    assert len(lines) > 2 and all(len(line) <= 40 for line in lines)
    fields = [f.strip(" ,·") for line in lines for f in line.replace(" · ", ", ").split(", ")]
    assert {"max_turns=6", "max_tokens=192", "json=schema", "seed=1234567"} <= set(fields)


@pytest.mark.parametrize("count", [1, 2])
def test_report_curve_panels_name_their_configuration_only_in_their_title(count):
    two = ONE.assign(model=["m1" if t in "abc" else "m2" for t in ONE["task"]]) if count == 2 else ONE
    report = two.groupby("model", as_index=False).size()
    keys, names, labelled = config_keys(two, report, ["model"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ax = _curves(
            two.assign(configuration=labelled.to_numpy()),
            names,
            k=2,
            ci=0.95,
            n_boot=0,
            seed=0,
            infra="exclude",
        )
    texts = drawn_texts(ax)
    if count == 1:  # the report's one configuration is "all trials": no note repeats it
        assert ax.get_title(loc="left") == "Capability (pass@k) vs reliability (pass^k) as k grows"
    else:  # the shared legend lists metrics, not a stray "all trials" of each panel
        assert ONE_GROUP not in texts
        assert [a.get_title(loc="left") for a in ax.figure.axes if a.get_visible()] == names
