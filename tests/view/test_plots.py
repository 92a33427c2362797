"""Plots, rendered headless (Agg): check what was drawn, not only that nothing raised."""

from contextlib import nullcontext

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from passk_nb.stats.counts import counts  # noqa: E402
from passk_nb.stats.paired import flips  # noqa: E402
from passk_nb.stats.report import report_frame  # noqa: E402
from passk_nb.stats.summary import DECLINED, curve, summarize  # noqa: E402
from passk_nb.view.plots import (  # noqa: E402
    OUTCOME_COLORS,
    PALETTE,
    group_labels,
    plot_curve,
    plot_flips,
    plot_outcomes,
    plot_summary,
    plot_tasks,
)
from tests.helpers.records import records_from_marks as records  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


TWO_MODELS = records(
    {
        **{("big", "p1", t): "1111" for t in "abc"},
        ("small", "p1", "a"): "1110",
        ("small", "p1", "b"): "1x00",
        ("small", "p1", "c"): "0u00",
    }
)


def data_lines(ax):
    return [line for line in ax.get_lines() if not line.get_label().startswith("_")]


def legend_outside(ax) -> bool:
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    axes = ax.get_window_extent(renderer)
    return legend.x0 >= axes.x1 - 1 or legend.y1 <= axes.y0 + 1


# ---- plot_curve ---------------------------------------------------------------------------------


def test_curve_draws_one_line_per_group_and_metric_with_bands():
    ax = plot_curve(curve(TWO_MODELS, by="model", n_boot=200))
    lines = data_lines(ax)
    assert len(lines) == 2 * 2
    assert sorted(line.get_label() for line in lines) == [
        "big — pass@k",
        "big — pass^k",
        "small — pass@k",
        "small — pass^k",
    ]
    assert list(lines[0].get_xdata()) == [1, 2, 3, 4]
    # the same colour for both metrics of a group, a different one per group, from the palette
    colors = {line.get_label(): to_hex(line.get_color()).upper() for line in lines}
    assert colors["small — pass@k"] == colors["small — pass^k"] != colors["big — pass@k"]
    assert set(colors.values()) <= set(PALETTE)
    assert {line.get_linestyle() for line in lines} == {"-", "--"}
    assert len(ax.collections) >= 2  # interval bands
    assert ax.get_xlabel() == "k (number of tries)" and ax.get_ylabel()
    assert ax.get_title(loc="left")
    assert legend_outside(ax)


def test_curve_values_are_the_unbiased_estimates():
    ax = plot_curve(curve(TWO_MODELS, by="model", n_boot=0))
    small_hat = next(line for line in data_lines(ax) if line.get_label() == "small — pass^k")
    # small: tasks with 3/4, 1/4, 0/4 successes; pass^4 = mean(0, 0, 0) = 0, pass^1 = 4/12
    assert small_hat.get_ydata()[0] == pytest.approx(4 / 12)
    assert small_hat.get_ydata()[-1] == 0.0
    assert len(ax.collections) == 0  # n_boot=0: no bands


def test_curve_single_group_hatches_the_gap_and_marks_k():
    one = TWO_MODELS[TWO_MODELS["model"] == "small"]
    ax = plot_curve(curve(one, by="model", n_boot=100), at_k=2)
    assert len(data_lines(ax)) == 2
    assert any(c.get_hatch() == "//" for c in ax.collections)
    marker = [line for line in ax.get_lines() if line.get_label() == "_k"]
    assert len(marker) == 1 and list(marker[0].get_xdata()) == [2, 2]
    assert "gap: pass@k − pass^k" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_curve_accepts_a_curve_frame_metric_subset_and_an_existing_axes():
    frame = curve(TWO_MODELS, by=["model"], n_boot=0)
    fig, ax = plt.subplots()
    returned = plot_curve(frame, metrics=["pass^k"], ax=ax, title="")
    assert returned is ax
    assert len(data_lines(ax)) == 2
    assert ax.get_title(loc="left") == ""
    with pytest.raises(TypeError, match=r"plot_curve draws what curve\(\) returns; this is a frame without"):
        plot_curve(TWO_MODELS)
    with pytest.raises(
        TypeError, match=r"this is what summarize\(\) returned.*passk_nb.curve\(df\).plot\(\)"
    ):
        plot_curve(summarize(TWO_MODELS, k=2, n_boot=0))


def test_curve_marks_partially_covered_k_with_hollow_markers_and_a_note():
    # hard: 000, easy: 11111 -> pass^k .5, .5, .5, 1, 1: k = 4, 5 leave the hard task out
    df = records({("m", "p", "hard"): "000", ("m", "p", "easy"): "11111"})
    with pytest.warns(UserWarning, match="can rise"):
        ax = plot_curve(curve(df, by="model", n_boot=0), metrics=["pass^k"])
    hollow = [line for line in ax.get_lines() if line.get_label() == "_partial"]
    assert len(hollow) == 1 and list(hollow[0].get_xdata()) == [4, 5]
    assert hollow[0].get_markerfacecolor() == "white"
    assert any("hollow" in t.get_text() for t in ax.get_legend().get_texts())


def test_curve_band_is_the_fixed_task_interval_when_tasks_are_too_few():
    with pytest.warns(UserWarning, match="no interval for new tasks"):
        ax = plot_curve(curve(TWO_MODELS, by="model", n_boot=200))
    assert "these tasks re-rolled" in ax.get_legend().get_title().get_text()
    assert len(ax.collections) >= 4  # a band per model and metric


def band_edges(collection) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) edge of a fill_between band, ordered by k."""
    vertices = collection.get_paths()[0].vertices
    xs = np.unique(vertices[:, 0])
    lower = np.array([vertices[vertices[:, 0] == x, 1].min() for x in xs])
    upper = np.array([vertices[vertices[:, 0] == x, 1].max() for x in xs])
    return lower, upper


@pytest.mark.parametrize(("tasks", "lo", "hi"), [("abc", "fixed_lo", "fixed_hi"), ("abcdef", "lo", "hi")])
def test_curve_bands_are_the_bounds_of_the_curve_frame(tasks, lo, hi):
    # asymmetric bounds, unlike value ± z·se: the plot must draw the columns, not rebuild them
    df = records({("m", "p", t): "1101" for t in tasks})
    with pytest.warns(UserWarning) if len(tasks) < 5 else nullcontext():
        frame = curve(df, by="model", n_boot=200)
    frame = frame.assign(fixed_lo=frame["value"] * 0.5, fixed_hi=(frame["value"] + 0.01).clip(0, 1))
    ax = plot_curve(frame, metrics=["pass^k"])
    [band] = ax.collections
    line = frame[frame["metric"] == "pass^k"].sort_values("k")
    lower, upper = band_edges(band)
    np.testing.assert_allclose(lower, line[lo])
    np.testing.assert_allclose(upper, line[hi])


def test_curve_labels_prompts_by_name_and_hash():
    df = records(
        {("m", "aaaaaaaaaaaa", "t"): "11", ("m", "bbbbbbbbbbbb", "t"): "10"},
        prompt_names={"aaaaaaaaaaaa": "default", "bbbbbbbbbbbb": "strict"},
    )
    ax = plot_curve(curve(df, by=("model", "prompt_hash"), n_boot=0))
    assert {line.get_label() for line in data_lines(ax)} == {  # only what differs: the prompt
        f"{name} — {metric}"
        for name in ("default (aaaaaaa)", "strict (bbbbbbb)")
        for metric in ("pass@k", "pass^k")
    }


@pytest.mark.parametrize("groups", [3, 13])
def test_curve_gives_every_group_its_own_colour(groups):
    # a counts table of `groups` models: past the eight Okabe-Ito colours, no colour repeats
    table = pd.DataFrame(
        [(f"m{g:02d}", t, 4, (g + t) % 5) for g in range(groups) for t in range(6)],
        columns=["model", "task", "n", "c"],
    )
    ax = plot_curve(curve(table, by="model", n_boot=0), metrics=("pass^k",))
    colours = [to_hex(line.get_color()) for line in data_lines(ax)]
    assert len(colours) == groups and len(set(colours)) == groups
    if groups <= len(PALETTE):
        assert colours == [to_hex(c) for c in PALETTE[:groups]]


def test_curve_rejects_unknown_metrics():
    with pytest.raises(ValueError, match="metrics"):
        plot_curve(curve(TWO_MODELS), metrics=["accuracy"])


# ---- plot_tasks ---------------------------------------------------------------------------------


def test_tasks_heatmap_writes_counts_in_cells():
    ax = plot_tasks(counts(TWO_MODELS, by="model"))
    texts = [t.get_text() for t in ax.texts]
    assert sorted(texts) == sorted(["4/4", "4/4", "4/4", "3/4", "1/4", "0/4"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["big", "small"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    image = ax.get_images()[0]
    assert image.get_array().shape == (3, 2)
    assert image.get_array()[0, 1] == pytest.approx(0.75)  # task a, model small
    assert ax.get_title(loc="left")
    assert len(ax.figure.axes) == 2  # with a colour bar


def test_tasks_heatmap_with_k_shows_pass_hat_k_and_marks_missing_cells():
    df = pd.concat([TWO_MODELS, records({("solo", "p1", "a"): "11"})], ignore_index=True)
    ax = plot_tasks(counts(df, by="model"), at_k=3)
    texts = [t.get_text() for t in ax.texts]
    assert "3/4\n0.25" in texts  # pass^3 of 3/4 = C(3,3)/C(4,3)
    assert "2/2\nk > n" in texts
    assert texts.count("–") == 2  # tasks b and c never ran for model solo


@pytest.mark.parametrize("k", [None, 2])
def test_tasks_heatmap_colours_are_summarize_per_task(k):
    from passk_nb.stats.summary import summarize

    per_task = summarize(TWO_MODELS, k=k or 1, by=("model", "task"), n_boot=0)
    image = plot_tasks(counts(TWO_MODELS, by="model"), at_k=k).get_images()[0].get_array()
    expected = per_task.pivot(index="task", columns="model", values="pass^k").to_numpy()
    np.testing.assert_allclose(image.filled(np.nan), expected)


def test_tasks_heatmap_excludes_infra_errors_from_counts():
    df = records({("m", "p", "t"): "11i0"})
    ax = plot_tasks(counts(df, by="model"))
    assert [t.get_text() for t in ax.texts] == ["2/3"]


# ---- plot_flips ---------------------------------------------------------------------------------

FLIPPED = records(
    {
        **{("m", "p1", t): "11111" for t in ("flips", "steady", "drifts")},
        ("m", "p2", "flips"): "00000",
        ("m", "p2", "steady"): "11111",
        ("m", "p2", "drifts"): "11100",
    },
    prompt_names={"p1": "default", "p2": "strict"},
)


def test_flips_marks_significant_tasks_only():
    table = flips(FLIPPED, a="p1", b="p2")
    assert table["flip"].tolist() == [False, True, False]  # sorted by task: drifts, flips, steady
    ax = plot_flips(flips(FLIPPED, a="p1", b="p2"))
    stars = [c for c in ax.collections if c.get_gid() == "flips"]
    assert len(stars) == 1 and stars[0].get_offsets().shape[0] == 1
    star_y = stars[0].get_offsets()[0][1]
    labels = {tick.get_position()[1]: tick.get_text() for tick in ax.get_yticklabels()}
    assert labels[star_y] == "flips"
    bars = [line for line in ax.get_lines() if line.get_label() == "_bar"]
    assert len(bars) == 3
    thick = [bar for bar in bars if bar.get_linewidth() > 3]
    assert len(thick) == 1 and list(thick[0].get_xdata()) == [1.0, 0.0]
    notes = [t.get_text() for t in ax.texts]
    assert any(note.startswith("5/5 → 0/5") for note in notes)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["A: default (p1)", "B: strict (p2)", "flip: BH q < 0.05"]
    assert "default (p1) vs strict (p2)" in ax.get_title(loc="left")


def test_flips_title_says_when_no_task_can_reach_significance():
    few = FLIPPED[FLIPPED["trial"] < 3]
    with pytest.warns(UserWarning, match="can reach"):
        ax = plot_flips(flips(few, a="p1", b="p2"))
    assert "too few trials" in ax.get_title(loc="left")
    assert not [c for c in ax.collections if c.get_gid() == "flips"]


def test_flips_draws_a_flips_frame_and_takes_nothing_else():
    table = flips(FLIPPED, a="p1", b="p2")
    ax = plot_flips(table)
    assert len([line for line in ax.get_lines() if line.get_label() == "_bar"]) == 3
    assert any(t.get_text().endswith("q=–") for t in ax.texts)  # steady 5/5 -> 5/5: not in the family
    assert "A: default (p1)" in [t.get_text() for t in ax.get_legend().get_texts()]  # from .attrs
    with pytest.raises(TypeError, match=r"passk_nb.view.plot_flips\(passk_nb.flips\(df, a=..., b=...\)\)"):
        plot_flips(FLIPPED)


# ---- plot_outcomes ------------------------------------------------------------------------------


def test_outcomes_stacks_one_segment_per_group_and_outcome():
    ax = plot_outcomes(counts(TWO_MODELS, by="model"))
    present = ["pass", "wrong_state", "unrequested_change", "format_error"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == present
    bars = ax.patches
    assert len(bars) == 2 * len(present)
    assert {to_hex(bar.get_facecolor()).upper() for bar in bars} == {
        OUTCOME_COLORS[o].upper() for o in present
    }
    # each group's segments add up to the whole bar
    by_row: dict[float, float] = {}
    for bar in bars:
        by_row[bar.get_y()] = by_row.get(bar.get_y(), 0) + bar.get_width()
    assert all(total == pytest.approx(1.0) for total in by_row.values())
    assert [t.get_text() for t in ax.get_yticklabels()] == ["big (n=12)", "small (n=12)"]  # top first
    assert ax.get_yticks()[0] > ax.get_yticks()[1]
    assert "12" in [t.get_text() for t in ax.texts]  # big: 12 passes written in the bar
    assert ax.get_xlabel() == "share of trials"
    assert legend_outside(ax)


def test_outcomes_counts_and_hatched_infra():
    df = records({("m", "p", "t"): "110i"})
    ax = plot_outcomes(counts(df), normalize=False)
    widths = {bars.get_label(): bars.patches[0].get_width() for bars in ax.containers}
    assert widths == {"pass": 2, "wrong_state": 1, "infra_error": 1}
    infra = next(bars for bars in ax.containers if bars.get_label() == "infra_error")
    assert infra.patches[0].get_hatch() == "//"
    assert ax.get_xlabel() == "trials"


def bar_widths(ax) -> dict[str, list[float]]:
    return {bars.get_label(): [bar.get_width() for bar in bars.patches] for bars in ax.containers}


def test_outcomes_of_a_counts_table_equal_those_of_its_trials():
    df = records({("m", "p", "t"): "110i", ("m", "p", "u"): "x000", ("m", "q", "t"): "1111"})
    for by in (None, "prompt_hash", ("prompt_hash", "task")):
        trials, table = (
            plot_outcomes(counts(df, by=by), normalize=False),
            plot_outcomes(counts(counts(df), by=by), normalize=False),
        )
        assert bar_widths(table) == bar_widths(trials)
        assert [t.get_text() for t in table.get_yticklabels()] == [
            t.get_text() for t in trials.get_yticklabels()
        ]
    assert bar_widths(plot_outcomes(counts(counts(df), by="prompt_hash"), normalize=False)) == {
        "pass": [2, 4],  # p (top), q
        "wrong_state": [4, 0],
        "format_error": [1, 0],
        "infra_error": [1, 0],
    }


def test_outcomes_of_counts_from_elsewhere_show_the_failures_they_do_not_break_down():
    table = pd.DataFrame({"model": ["m", "m"], "task": ["a", "b"], "n": [4, 4], "c": [3, 0]})
    ax = plot_outcomes(counts(table, by="model"), normalize=False)
    assert bar_widths(ax) == {"pass": [3], "failed (outcome not counted)": [5]}
    with pytest.raises(ValueError, match="add up to more than its failures"):
        plot_outcomes(counts(table.assign(n_wrong_state=[2, 5]), by="model"))


# ---- plot_summary -------------------------------------------------------------------------------


def drawn_rows(ax):
    """Per row, top first: (tick label, value, interval, dashed?) as drawn."""
    ticks = dict(zip(ax.get_yticks(), [label.get_text() for label in ax.get_yticklabels()], strict=True))
    rows = {}
    for lines in ax.collections:
        if hasattr(lines, "get_segments"):
            dashed = lines.get_linestyle()[0][1] is not None
            for segment in lines.get_segments():
                if len(segment):  # no interval (n_boot=0): nothing drawn
                    (x0, y0), (x1, _) = segment
                    rows.setdefault(y0, {}).update(interval=(x0, x1), dashed=dashed)
        else:
            for x, y in lines.get_offsets():
                rows.setdefault(y, {})["value"] = x
    return [
        (ticks[y], row["value"], row.get("interval"), row.get("dashed"))
        for y, row in sorted(rows.items(), reverse=True)
    ]


def test_summary_draws_each_group_s_value_and_interval_from_stats_best_first():
    many = records(
        {
            (f"m{i}", "p", t): marks
            for i, marks in enumerate(["1100", "1111", "0000", "1110"])
            for t in "abcdef"
        }
    )
    report = report_frame(many, k=2, by=["model"], n_boot=100)
    ax = plot_summary(report)
    expected = report.sort_values("pass^k", ascending=False, kind="stable")
    assert drawn_rows(ax) == [
        (m, pytest.approx(v), (pytest.approx(lo), pytest.approx(hi)), False)
        for m, v, lo, hi in zip(
            expected["model"], expected["pass^k"], expected["pass^k_lo"], expected["pass^k_hi"], strict=True
        )
    ]
    assert [label for label, *_ in drawn_rows(ax)] == ["m1", "m3", "m0", "m2"]
    unsorted = plot_summary(summarize(many, k=2, by="model", n_boot=0), sort=False, metric="pass@k")
    assert [label for label, *_ in drawn_rows(unsorted)] == ["m0", "m1", "m2", "m3"]
    assert unsorted.get_xlabel().startswith("pass@2")


def test_summary_of_too_few_tasks_draws_the_fixed_task_interval_dashed():
    with pytest.warns(UserWarning, match="no interval for new tasks"):
        summary = summarize(TWO_MODELS, k=2, by="model", n_boot=100)
    assert (summary["ci_method"] == DECLINED).all()  # three tasks
    rows = drawn_rows(plot_summary(summary))
    best = summary.sort_values("pass^k", ascending=False)
    assert [(label, dashed) for label, *_, dashed in rows] == [("big", True), ("small", True)]
    assert [interval for *_, interval, _ in rows] == [
        (pytest.approx(lo), pytest.approx(hi))
        for lo, hi in zip(best["pass^k_fixed_lo"], best["pass^k_fixed_hi"], strict=True)
    ]
    legend = [t.get_text() for t in plot_summary(summary).get_legend().get_texts()]
    assert legend == ["95% interval, these tasks re-rolled\n(too few tasks for new tasks)", "pass^k"]
    fig, ax = plt.subplots()
    assert plot_summary(summary, ax=ax) is ax
    with pytest.raises(TypeError, match="plot_summary draws what summarize"):
        plot_summary(TWO_MODELS)


# ---- shared -------------------------------------------------------------------------------------


def test_group_labels_read_json_mode_and_missing_values():
    frame = pd.DataFrame({"model": ["m", None], "json_mode": ["schema", "off"]})
    assert group_labels(frame, ["model", "json_mode"]).tolist() == ["m · JSON: schema", "– · JSON: off"]
    assert group_labels(frame, []).tolist() == ["all trials", "all trials"]


@pytest.mark.parametrize(
    ("plot", "statistic"), [(plot_curve, curve), (plot_tasks, counts), (plot_outcomes, counts)]
)
def test_every_plot_takes_ax_and_returns_it(plot, statistic):
    fig, ax = plt.subplots()
    assert plot(statistic(TWO_MODELS), ax=ax) is ax
    assert plot(statistic(TWO_MODELS)).figure is not fig


def test_palette_is_okabe_ito():
    assert PALETTE[:3] == ("#0072B2", "#E69F00", "#009E73")
    assert len(set(PALETTE)) == 8
    assert np.all([len(c) == 7 for c in OUTCOME_COLORS.values()])


@pytest.mark.parametrize("name", ["plot_curve", "plot_tasks", "plot_outcomes", "plot_flips"])
def test_a_dollar_in_a_task_or_model_name_is_drawn_as_written(name: str) -> None:
    # "$$d" made matplotlib's mathtext raise; "$x$" came out italic, without its dollars
    import io

    import passk_nb.view

    marks = {"a$b": "1101", "$$d": "1111", "$x$": "0101", "e": "1111", "f": "1100"}
    df = records({(model, "p", t): m for t, m in marks.items() for model in ("m$1", "$$m")})
    result = {
        "plot_curve": lambda: curve(df),
        "plot_flips": lambda: flips(df, on="model", a="m$1", b="$$m"),
    }.get(name, lambda: counts(df))()
    options = {"plot_curve": {"at_k": 2}, "plot_tasks": {"at_k": 2}}.get(name, {})
    ax = getattr(passk_nb.view, name)(result, **options)
    ax.figure.savefig(io.BytesIO(), format="png")  # draws every text
    shown = [t.get_text() for t in ax.figure.findobj(matplotlib.text.Text) if "$" in t.get_text()]
    shown += [str(t.get_text()) for t in ax.get_yticklabels() + ax.get_xticklabels() if "$" in t.get_text()]
    assert shown, "the names with dollars are drawn somewhere"
    assert all(not matplotlib.cbook.is_math_text(text) for text in shown), shown
    plt.close("all")
