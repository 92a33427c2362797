"""Explorer, transcript viewer and browser: escaping, ordering, live updates, static fallback."""

import io
import json
import random
import warnings
from html.parser import HTMLParser
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import ipywidgets  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from IPython.display import HTML  # noqa: E402
from PIL import Image  # noqa: E402

import passk_nb  # noqa: E402
from passk_nb.data.records import frame_from_records  # noqa: E402
from passk_nb.data.store import load  # noqa: E402
from passk_nb.harness.providers.scripted import ScriptedProvider  # noqa: E402
from passk_nb.stats.summary import summarize  # noqa: E402
from passk_nb.view.labels import format_value  # noqa: E402
from passk_nb.view.widgets import (  # noqa: E402
    browse_transcripts,
    explore,
    failed_first,
    show_transcript,
    summary_table,
    transcript_html,
)
from tests.helpers.records import synthetic_trials  # noqa: E402

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
SCRIPT = "<script>alert('x')</script>"
IMG = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> pd.DataFrame:
    """Known-good trials plus a seeded agent that sometimes claims instead of acting, or breaks format."""
    out = tmp_path_factory.mktemp("runs")
    known_good, rng = ScriptedProvider(), random.Random(1)

    def sloppy(messages):
        # the known-good script, replayed as if the broken replies had not happened
        kept = [m for m in messages if not m["content"].startswith(("Sure!", "Format error"))]
        action = json.loads(known_good.chat(kept))
        roll = rng.random()
        if action.get("tool") == "cancel_order" and roll < 0.5:
            return json.dumps({"answer": f"Your order {action['args']['order_id']} has been cancelled."})
        if roll > 0.85:
            return f"Sure! {IMG} here you go"
        return json.dumps(action)

    passk_nb.run("scripted", trials=3, out=out, progress=False)
    passk_nb.run(sloppy, model="sloppy", trials=6, out=out, concurrency=1, progress=False)
    return passk_nb.load(out)


def hostile_record() -> pd.Series:
    transcript = [
        {"kind": "task", "role": "user", "content": f"customer says {SCRIPT}"},
        {"kind": "reply", "role": "assistant", "content": IMG, "format_error": f"not JSON {SCRIPT}"},
        {"kind": "format_feedback", "role": "user", "content": "Format error: <b>bold</b>"},
        {
            "kind": "reply",
            "role": "assistant",
            "content": '{"tool": "get_order"}',
            "action": {"tool": f"get_order{SCRIPT}", "args": {"order_id": IMG}},
        },
        {"kind": "tool_result", "role": "user", "content": f"Tool result: {IMG}", "tool": "x", "error": True},
        {"kind": "reply", "role": "assistant", "content": "{}", "action": {"answer": f"done {SCRIPT}"}},
        {"kind": "infra_error", "role": f"<i>{SCRIPT}</i>", "content": IMG},
    ]
    diff = [{"path": f"orders.{IMG}.status", "before": SCRIPT, "after": "cancelled"}]
    return frame_from_records(
        [
            {
                "run_id": "r",
                "suite": "orders",
                "task": f"task{SCRIPT}",
                "trial": 0,
                "passed": False,
                "outcome": "wrong_state",
                "provider": IMG,
                "model": SCRIPT,
                "prompt_name": IMG,
                "prompt_hash": "abcdef123456",
                "final_answer": f"Your order has been refunded {SCRIPT}",
                "error": f"error {IMG}",
                "state_diff": json.dumps(diff),
                "transcript": json.dumps(transcript),
            }
        ]
    ).iloc[0]


# ---- escaping -----------------------------------------------------------------------------------


def assert_escaped(text: str) -> None:
    assert "<script" not in text.lower()
    assert "<img" not in text.lower()
    assert "<b>bold</b>" not in text and "&lt;i&gt;" in text
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text


def test_transcript_html_escapes_every_piece_of_record_text():
    text = transcript_html(hostile_record())
    assert_escaped(text)
    assert "&lt;b&gt;bold&lt;/b&gt;" in text


def test_show_transcript_and_browser_escape_too():
    record = hostile_record()
    df = pd.DataFrame([record])
    assert_escaped(show_transcript(df).data)
    assert_escaped(show_transcript(record).data)
    bundle = browse_transcripts(df)._repr_mimebundle_()
    assert_escaped(bundle["text/html"])
    assert SCRIPT not in bundle["text/plain"]


def test_explore_escapes_record_text_in_its_table():
    df = frame_from_records(
        {
            "run_id": "r",
            "suite": "s",
            "task": f"t{i % 2}",
            "trial": i // 2,
            "model": SCRIPT,
            "prompt_hash": IMG,
            "passed": True,
            "outcome": "pass",
        }
        for i in range(4)
    )
    html = explore(df, static=True, n_boot=50)._repr_mimebundle_()["text/html"]
    assert "<script" not in html.lower()
    assert "&lt;script&gt;" in html
    assert "<img src=x" not in html  # the only <img is the figure, a data: URI
    assert html.count("<img") == 1 and "<img src='data:image/png;base64," in html


# ---- one transcript -----------------------------------------------------------------------------


def test_transcript_shows_turns_actions_format_errors_tool_results_diff_and_outcome(runs):
    failed = runs[(runs["model"] == "sloppy") & (runs["n_format_errors"] > 0)]
    assert len(failed), "the seeded agent should break format at least once"
    text = transcript_html(failed.iloc[0])
    assert "format error" in text and "&lt;img src=x" in text
    assert "customer" in text and "agent" in text and "tool" in text
    good = runs[(runs["model"] == "known-good") & (runs["task"] == "refund-delivered")].iloc[0]
    text = transcript_html(good)
    assert "<b>refund_order</b>" in text and "&quot;amount&quot;: 79.99" in text  # parsed action
    assert "Tool result (refund_order)" in text
    assert "orders.O1001.status" in text and "refunded" in text  # state diff
    assert ">pass</span>" in text
    assert "claimed but not done" not in text


def test_transcript_flags_a_claim_the_database_does_not_show(runs):
    claimed = runs[
        (runs["model"] == "sloppy") & (runs["task"] == "cancel-pending-lookup") & (runs["n_tool_calls"] == 1)
    ]
    assert len(claimed), "the seeded agent should claim a cancellation at least once"
    text = transcript_html(claimed.iloc[0])
    assert "claimed but not done" in text
    assert "final state</b>: no change" in text


def test_transcript_survives_broken_json():
    record = {
        "task": "t",
        "outcome": "pass",
        "passed": True,
        "transcript": "{not json",
        "state_diff": "[oops",
    }
    text = transcript_html(record)
    assert "unreadable transcript" in text and "unreadable state diff" in text


def test_failed_first_puts_claims_then_failures_then_passes(runs):
    ordered = failed_first(runs)
    passed = ordered["passed"].tolist()
    assert passed == sorted(passed)  # all False before all True
    first = ordered.iloc[0]
    assert not first["passed"] and "claimed but not done" in transcript_html(first)
    assert sorted(ordered.index) == sorted(runs.index)


def test_show_transcript_defaults_to_the_first_failure_and_takes_an_index_label(runs):
    shown = show_transcript(runs)
    assert isinstance(shown, HTML)
    assert shown.data == transcript_html(failed_first(runs).iloc[0])
    label = runs.index[runs["passed"]][0]
    assert show_transcript(runs, label).data == transcript_html(runs.loc[label])


# ---- browser ------------------------------------------------------------------------------------


def test_browser_lists_failures_first_and_filters_by_kind(runs):
    browser = browse_transcripts(runs)
    assert browser.kind.value == "failed"
    labels = [label for label, _ in browser.trial.options]
    assert labels and all(label.startswith("✗") for label in labels)
    assert browser.trial.value == browser.trial.options[0][1]
    assert browser.view.value == transcript_html(runs.loc[browser.trial.value])
    browser.kind.value = "claimed but not done"
    assert browser.trial.options and all("claimed-not-done" in label for label, _ in browser.trial.options)
    browser.kind.value = "pass"
    assert all(label.startswith("✓ pass") for label, _ in browser.trial.options)
    browser.kind.value = "all"
    assert len(browser.trial.options) == len(runs)
    browser.trial.value = browser.trial.options[-1][1]
    assert browser.view.value == transcript_html(runs.loc[browser.trial.options[-1][1]])


def test_browser_bundle_carries_widget_and_static_fallback(runs):
    browser = browse_transcripts(runs, limit=2)
    bundle = browser._repr_mimebundle_()
    assert WIDGET_MIME in bundle and "text/html" in bundle
    assert bundle["text/html"].count("class='passk-transcript'") == 2
    assert "failures first" in bundle["text/html"]
    assert isinstance(browser.widget, ipywidgets.VBox)
    assert WIDGET_MIME not in browse_transcripts(runs, static=True)._repr_mimebundle_()
    assert "text/html" not in browse_transcripts(runs, static=False)._repr_mimebundle_()


# ---- explore ------------------------------------------------------------------------------------


def test_explore_filters_and_slider_update_table_and_figure(runs):
    ex = explore(runs, k=2, n_boot=100)
    assert set(ex.filters) == {"provider", "model", "task"}  # one prompt, one JSON mode: no filter for them
    assert ex.k.value == 2 and ex.k.max == 6
    assert "known-good" in ex.table.value and "sloppy" in ex.table.value
    first_png = ex.image.value
    assert first_png[:4] == b"\x89PNG"
    ex.filters["model"].value = ("sloppy",)
    assert "known-good" not in ex.table.value
    assert ex.summary()["model"].tolist() == ["sloppy"]
    assert ex.image.value != first_png
    ex.filters["task"].value = ("refund-delivered", "cancel-pending-lookup")
    assert int(ex.summary()["n_tasks"].iloc[0]) == 2
    ex.k.value = 5
    assert int(ex.summary()["k"].iloc[0]) == 5
    assert "pass^k" in ex.table.value
    ex.filters["model"].value = ()
    assert "No trials" in ex.note.value


def test_explore_shows_warnings_as_notes_when_k_exceeds_some_tasks(runs):
    ex = explore(runs, by="model", k=4, n_boot=50)  # known-good has 3 trials per task
    assert "⚠" in ex.note.value


def test_explore_bundle_static_and_live(runs):
    bundle = explore(runs, n_boot=50)._repr_mimebundle_()
    assert {WIDGET_MIME, "text/html", "image/png", "text/plain"} <= set(bundle)
    assert "<table" in bundle["text/html"]
    static = explore(runs, n_boot=50, static=True)._repr_mimebundle_()
    assert WIDGET_MIME not in static and "image/png" in static
    live = explore(runs, n_boot=50, static=False)._repr_mimebundle_()
    assert WIDGET_MIME in live and "text/html" not in live


def test_explore_offers_prompt_and_json_mode_filters_when_they_vary():
    df = frame_from_records(
        {
            "run_id": f"r{p}{j}",
            "suite": "s",
            "task": "t",
            "trial": i,
            "model": "m",
            "prompt_hash": p,
            "prompt_name": {"aaaaaaaaaaaa": "default", "bbbbbbbbbbbb": "strict"}[p],
            "json_mode": j,
            "passed": True,
            "outcome": "pass",
        }
        for p in ("aaaaaaaaaaaa", "bbbbbbbbbbbb")
        for j in ("off", "json")
        for i in range(2)
    )
    ex = explore(df, by=["prompt_hash", "json_mode"], n_boot=0)
    assert {"prompt_hash", "json_mode"} <= set(ex.filters)
    assert [label for label, _ in ex.filters["prompt_hash"].options] == [
        "default (aaaaaaa)",
        "strict (bbbbbbb)",
    ]
    assert "default (aaaaaaa)" in ex.table.value and "JSON: json" in ex.table.value


def test_summary_table_shows_both_intervals():
    df = frame_from_records(
        {
            "run_id": "r",
            "suite": "s",
            "task": t,
            "trial": i,
            "model": "m",
            "passed": i < c,
            "outcome": "pass" if i < c else "wrong_state",
        }
        for t, c in (("a", 4), ("b", 2), ("c", 3), ("d", 4), ("e", 0))
        for i in range(4)
    )
    table = summary_table(summarize(df, k=2, by="model", n_boot=200))
    assert table.loc[0, "trials"] == "13/20 pass" and table.loc[0, "tasks"] == "5/5"
    assert table.loc[0, "pass^k 95% CI, new tasks"].startswith("[")
    assert table.loc[0, "pass^k 95% CI, these tasks"].startswith("[")
    wide = summary_table(summarize(df, k=3, by="model", n_boot=200))
    assert wide.loc[0, "pass^k 95% CI, these tasks"].startswith("[")  # n >= k is enough (no n >= 2k)
    with pytest.warns(UserWarning, match="no interval for new tasks"):
        few = summary_table(summarize(df[df["task"] < "d"], k=2, by="model"))
    assert few.loc[0, "pass^k 95% CI, new tasks"] == "too few tasks"


def test_explore_reports_a_k_above_the_selection_instead_of_raising(runs):
    ex = explore(runs, k=5, n_boot=50)  # sloppy has 6 trials per task, known-good 3
    ex.filters["model"].value = ("known-good",)
    assert "larger than n=3" in ex.table.value
    ex.k.value = 2
    assert "known-good" in ex.table.value and "larger than" not in ex.table.value


# ---- explore on cached counts -------------------------------------------------------------------


def big_frame(rows_per_arm: int = 10_000) -> pd.DataFrame:
    """100,000 trials: 5 models × 2 prompts × 1,000 tasks × 10 trials."""
    return synthetic_trials(5, 2, rows_per_arm // 10, 10)


def test_explore_counts_once_and_a_k_change_recomputes_from_the_counts(monkeypatch, record_property):
    """The trials are counted when the explorer is built; filter and k changes use the cached counts.
    A k change neither recomputes the curve nor draws a figure: it recomputes the summary and
    paints the k marker onto the curve drawn for the selection. The update's time is reported,
    not asserted."""
    import time

    from matplotlib.figure import Figure

    from passk_nb.stats import _grouping
    from passk_nb.view import widgets as widgets_module

    df = big_frame()
    assert len(df) == 100_000
    counted, curves, renders, draws = [], [], [], []
    count_trials, curve, render = (
        _grouping.count_trials,
        widgets_module.curve,
        widgets_module.render_curve,
    )
    monkeypatch.setattr(
        _grouping, "count_trials", lambda *a, **kw: counted.append(a[1]) or count_trials(*a, **kw)
    )
    monkeypatch.setattr(widgets_module, "curve", lambda *a, **kw: curves.append(kw) or curve(*a, **kw))
    monkeypatch.setattr(
        widgets_module, "render_curve", lambda *a, **kw: renders.append(kw) or render(*a, **kw)
    )
    draw = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: draws.append(self) or draw(self, renderer))
    ex = explore(df, k=2, n_boot=200, static=False)
    assert len(counted) == 1 and len(curves) == 1 and len(renders) == 1 and len(draws) == 1
    before = ex.image.value
    start, start_cpu = time.perf_counter(), time.process_time()
    ex.k.value = 5  # the observer runs the explorer's update
    seconds, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    record_property("explore_k_change_100k_rows_seconds", round(seconds, 4))
    print(
        f"\nexplore: k-slider change on {len(df):,} rows took {seconds * 1000:.0f} ms "
        f"({cpu * 1000:.0f} ms CPU)"
    )
    assert len(counted) == 1 and len(curves) == 1  # neither the trials nor the curve recomputed
    assert len(renders) == 1 and len(draws) == 1  # no figure drawn
    assert ex.image.value != before  # the k marker moved
    assert int(ex.summary()["k"].iloc[0]) == 5
    ex.filters["model"].value = ("model-1", "model-3")
    assert len(counted) == 1 and len(curves) == 2  # a new selection: a new curve, from the counts
    assert len(renders) == 2 and len(draws) == 2  # ... drawn once
    ex.k.value = 3
    ex.k.value = 5
    assert len(counted) == 1 and len(curves) == 2 and len(renders) == 2 and len(draws) == 2
    options = {"k": 5, "n_boot": 200}  # the explorer groups as summarize does
    pd.testing.assert_frame_equal(ex.summary(), summarize(ex.selection(), **options))
    assert ex.summary()["model"].tolist() == ["model-1", "model-1", "model-3", "model-3"]
    ex.filters["model"].value = tuple(f"model-{m}" for m in range(5))  # back to a selection seen before
    assert len(curves) == 2 and len(renders) == 2  # its curve and drawing were kept


def independent_drawing(ex) -> tuple[np.ndarray, object]:
    """The explorer's curve drawn here, as the explorer should (Agg, 100 dpi, no k marker)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from passk_nb.view.plots import plot_curve

    ax = plot_curve(ex.curve(), names=ex.names)
    figure = ax.get_figure(root=True)
    plt.close(figure)
    figure.set_dpi(100)
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba()).copy(), ax


def changed_pixels(png: bytes, base: np.ndarray) -> np.ndarray:
    shown = np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))
    assert shown.shape == base.shape
    return (shown != base).any(axis=2)


def test_explore_k_marker_sits_at_k_on_the_axes(runs):
    """The image is the curve drawn once plus a dotted line in the pixel column the axes'
    data-to-pixel transform gives for k, across the axes' height, and nowhere else."""
    ex = explore(runs, k=2, n_boot=100)
    base, ax = independent_drawing(ex)
    height = base.shape[0]
    top, bottom = height - ax.bbox.y1, height - ax.bbox.y0
    columns = {}
    for k in (2, 4, 6):
        ex.k.value = k
        changed = changed_pixels(ex.image.value, base)
        x = ax.transData.transform([(k, 0.5)])[0, 0]
        columns[k] = np.flatnonzero(changed.any(axis=0)).tolist()
        assert columns[k] == [int(np.floor(x))], (k, x)
        rows = np.flatnonzero(changed.any(axis=1))
        assert rows.min() >= top - 1 and rows.max() <= bottom + 1
        assert rows.max() - rows.min() >= 0.9 * (bottom - top)  # spans the axes: a dotted line
    assert columns[2] < columns[4] < columns[6]
    ex.filters["model"].value = ("sloppy",)  # a new selection: drawn anew, marker at the same k
    base, ax = independent_drawing(ex)
    x = ax.transData.transform([(6, 0.5)])[0, 0]
    assert np.flatnonzero(changed_pixels(ex.image.value, base).any(axis=0)).tolist() == [int(np.floor(x))]
    plt.close("all")


class _Cells(HTMLParser):
    """The header and cell texts of the first HTML table in a page."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._tables = 0

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._tables += 1
        elif tag == "tr" and self._tables == 1:
            self.rows.append([])
        elif tag in ("td", "th") and self._tables == 1:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def table_cells(page: str) -> list[list[str]]:
    parser = _Cells()
    parser.feed(page)
    return parser.rows


def test_explore_table_shows_what_summarize_gives_at_the_slider_k(runs):
    ex = explore(runs, k=2, n_boot=100)
    for k in (3, 5, 1):
        ex.k.value = k
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # k above known-good's 3 trials: a coverage warning
            expected = summary_table(summarize(runs, k=k, n_boot=100))
        rows = table_cells(ex.table.value)
        assert rows[0] == list(expected.columns) and "prompt_hash" in ex.by
        assert len(rows) == 1 + len(expected)
        for row, (_, want) in zip(rows[1:], expected.iterrows(), strict=True):
            assert row[list(expected.columns).index("k")] == str(k)
            shown = [format_value(c, v, ex.names) if c in ex.by else str(v) for c, v in want.items()]
            assert row == shown  # the prompt as name (hash)


def test_explore_never_pools_configurations():
    """smollm2-suite: one model, three prompts × JSON mode × temperature: twelve rows, not three."""
    df = load(Path(__file__).resolve().parents[2] / "data" / "smollm2-suite")
    summary = explore(df, k=2, n_boot=0, static=False).summary()
    assert len(summary) == 12 and summary["trials"].eq(60).all()
    assert summary.groupby(["prompt_hash", "config"]).ngroups == 12


def test_explore_keeps_suite_versions_apart_and_filters_by_them():
    """Two versions of one suite (a loosened check): two rows and a suite-version filter, never one."""
    loose = "bbbbbbbbbbbb"  # the loosened check passes every trial; the strict one the first
    df = frame_from_records(
        {"run_id": v, "suite": "s", "suite_hash": v, "task": t, "trial": i, "model": "m",
         "passed": v == loose or i == 0, "outcome": "pass" if v == loose or i == 0 else "wrong_state"}
        for v in ("aaaaaaaaaaaa", loose) for t in ("t1", "t2") for i in range(2)
    )  # fmt: skip
    ex = explore(df, k=1, n_boot=0, static=False)
    assert sorted(ex.summary()["successes"]) == [2, 4]
    assert [label for label, _ in ex.filters["suite_hash"].options] == [
        "suite version aaaaaaa",
        "suite version bbbbbbb",
    ]
    assert "suite version bbbbbbb" in ex.table.value
    ex.filters["suite_hash"].value = ("bbbbbbbbbbbb",)
    assert ex.summary()["successes"].tolist() == [4]
