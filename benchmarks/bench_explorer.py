"""Benchmark: the explorer's k-slider change on 100,000 trial rows, against the previous full
re-render, same run.

5 models × 2 prompts × 1,000 tasks × 10 trials (``--tasks`` scales it), ``n_boot=200`` as in
tests/view/test_widgets.py. The explorer counts the trials once and draws the curve of a
selection once; a k change recomputes the summary from the cached counts, renders the table
and paints the k marker onto the drawn curve (a PNG encode). The previous path, replayed here
step by step: select the count rows again, summarize, ``DataFrame.to_html`` with a label per
cell, and draw the whole figure with the marker (``plot_curve(at_k=...)`` + ``savefig``).
Each route runs at k values it has not seen (no cache hit), interleaved, best of
``--repeats`` (wall and CPU time; CPU is steadier on a shared machine). Prints both, their
ratio, the new route's parts and the load average. Target (issue #15): ≤ 100 ms per k change.

``rows()`` gives ``benchmarks/table.py`` its explorer row: ``explore()`` of the same 100,000 trials
(counting them, the summary table, the curve drawn once, the widget model and its static copy; no
browser) against a limit of 2 s CPU, with ``counts`` + ``summarize`` + ``curve`` of the trials in the
same run beside it (the statistics it shows, without the widget and the drawing).

    python benchmarks/bench_explorer.py [--tasks 1000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from passk_nb.stats.summary import summarize  # noqa: E402
from passk_nb.view.labels import format_value, value_label  # noqa: E402
from passk_nb.view.plots import figure_png, plot_curve  # noqa: E402
from passk_nb.view.tables import render_table, summary_table  # noqa: E402
from passk_nb.view.widgets import Explorer, explore  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from tests.helpers.records import synthetic_trials  # noqa: E402

MODELS, PROMPTS, TRIALS, N_BOOT, TARGET_MS = 5, 2, 10, 200, 100.0


def trial_frame(tasks: int) -> pd.DataFrame:
    """models × prompts × tasks × trials rows, success probability per (arm, task) from Beta(2, 1)."""
    return synthetic_trials(MODELS, PROMPTS, tasks, TRIALS)


def previous_k_change(ex: Explorer, k: int) -> tuple[str, bytes]:
    """What a k change cost before: the steps of the previous Explorer._update, replayed."""
    mask = np.ones(len(ex.counts), dtype=bool)
    for column, control in ex.filters.items():
        mask &= ex.counts[column].isin(list(control.value)).to_numpy()
    summary = summarize(ex.counts[mask], k=k, by=ex.by, ci=ex.ci, n_boot=ex.n_boot, seed=ex.seed)
    shown = summary_table(summary, ci=ex.ci)
    for column in ex.by:
        shown[column] = [value_label(column, v, ex.names) for v in shown[column]]
    table = shown.to_html(index=False, escape=True, border=0)
    ax = plot_curve(ex.curve(), at_k=k, names=ex.names)
    figure = ax.get_figure(root=True)
    assert figure is not None
    png = figure_png(figure)
    plt.close(figure)
    return table, png


def table_html(summary: pd.DataFrame, ex: Explorer) -> str:
    """The explorer's table step, from public names: the summary table, its group values
    labelled, rendered as HTML."""
    shown = summary_table(summary, ci=ex.ci)
    for column in ex.by:
        if column in shown.columns:
            shown[column] = [format_value(column, v, ex.names) for v in shown[column]]
    return render_table(shown, "html")


def rows(repeats: int = 3) -> list[dict[str, object]]:
    """The table row: ``explore()`` of 100,000 trials against its limit, its statistics beside it."""
    from passk_nb.stats.counts import counts
    from passk_nb.stats.summary import curve

    warnings.simplefilter("ignore")
    df = trial_frame(1_000)

    def statistics() -> None:
        counted = counts(df, by=("model", "prompt_hash"))
        summarize(counted, k=2, by=("model", "prompt_hash"))
        curve(counted, by=("model", "prompt_hash"))

    def build() -> None:
        explore(df)
        plt.close("all")

    best = {"explore": (np.inf, np.inf), "statistics": (np.inf, np.inf)}
    build()  # warm-up: matplotlib's fonts, the first widget
    for _ in range(repeats):
        for name, fn in (("explore", build), ("statistics", statistics)):
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    (wall, cpu), (_, peer) = best["explore"], best["statistics"]
    return [
        {
            "route": f"explore(), {len(df):,} trials (widget and static copy, no browser)",
            "figure": f"{cpu:.2f} s CPU, {wall:.2f} s wall",
            "peer": f"limit 2 s CPU (counts + summarize + curve alone {peer:.2f} s CPU)",
            "ratio": f"{cpu / 2:.2f}× the limit",
            "target": "≤ 2 s",
        }
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1_000, help="tasks per arm (default 1000)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds (default 5)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")

    df = trial_frame(args.tasks)
    print(
        f"{len(df):,} trial rows: {MODELS} models × {PROMPTS} prompts × {args.tasks} tasks × {TRIALS} trials"
    )
    ex = explore(df, k=2, n_boot=N_BOOT, static=False)
    ks = [k for k in range(1, TRIALS + 1) if k != ex.k.value]

    new, old = {"wall": np.inf, "cpu": np.inf}, {"wall": np.inf, "cpu": np.inf}
    for round_ in range(args.repeats):
        k = ks[round_ % len(ks)]
        ex._pngs.clear()  # a k the explorer has not painted yet
        start, start_cpu = time.perf_counter(), time.process_time()
        ex.k.value = k  # the slider's observer runs the update
        new["wall"] = min(new["wall"], time.perf_counter() - start)
        new["cpu"] = min(new["cpu"], time.process_time() - start_cpu)
        start, start_cpu = time.perf_counter(), time.process_time()
        previous_k_change(ex, k)
        old["wall"] = min(old["wall"], time.perf_counter() - start)
        old["cpu"] = min(old["cpu"], time.process_time() - start_cpu)
    pd.testing.assert_frame_equal(
        ex.summary(), summarize(ex.selected_counts(), k=ex.k.value, by=ex.by, n_boot=N_BOOT)
    )

    parts = {}
    k = ex.k.value
    image, summary = ex.curve_image(), ex.summary()
    assert image is not None
    steps = {
        "summarize from the cached counts": ex.summary,
        "summary_table + HTML": lambda: table_html(summary, ex),
        "k marker painted + PNG encoded": lambda: image.png(k),
    }
    for name, step in steps.items():
        best = np.inf
        for _ in range(args.repeats):
            start_cpu = time.process_time()
            step()
            best = min(best, time.process_time() - start_cpu)
        parts[name] = best

    load = os.getloadavg()
    print(f"load average while measured: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (2 cores)")
    print(f"{'k-slider change':44s} {'wall':>10s} {'CPU':>10s}")
    for name, t in (
        ("explorer (curve drawn once, marker painted)", new),
        ("previous path (full re-render)", old),
    ):
        print(f"  {name:42s} {t['wall'] * 1000:7.1f} ms {t['cpu'] * 1000:7.1f} ms")
    print(f"  previous / explorer: wall {old['wall'] / new['wall']:.1f}×  CPU {old['cpu'] / new['cpu']:.1f}×")
    print("explorer's k change, CPU by part:")
    for name, seconds in parts.items():
        print(f"  {name:42s} {seconds * 1000:7.1f} ms")
    met = new["cpu"] * 1000 <= TARGET_MS
    print(f"target ≤ {TARGET_MS:.0f} ms CPU per k change: {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
