"""Regenerate the one table of ``benchmarks/README.md``: route, figure, peer measured in the same
run, ratio, target — from each benchmark's quick mode, written between the table's markers.

Quick modes only (1M rows, 13 × 80 × 5, one configuration of 80 tasks, 1,000-task looks and
pilot, folders of 10,000 parts and of 1M rows, 100,000 trials in the explorer, an HTML report of 40
configurations); the 10M-row figures come from ``python benchmarks/bench_scale.py --rows 10000000`` run by
hand (minutes, gigabytes) and are kept below the table. The load average is written with the
table: the machine is shared, so CPU seconds are the figure and wall seconds are context.

    python benchmarks/table.py [--print]    # --print: show the table, leave the README alone
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

README = HERE / "README.md"
BEGIN, END = "<!-- table: begin (python benchmarks/table.py) -->", "<!-- table: end -->"
COLUMNS = ("route", "figure", "peer", "ratio", "target")


def _cpu(fn: Callable[[], object], repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def _import_rows() -> list[dict[str, object]]:
    """``import passk_nb`` in a fresh interpreter against ``import pandas`` (what it used to pull in)."""

    def wall(code: str) -> float:
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, "-c", code], check=True, env=os.environ | {"PYTHONPATH": str(HERE.parent)}
            )
            best = min(best, time.perf_counter() - start)
        return best

    bare, ours, pandas = wall("pass"), wall("import passk_nb"), wall("import pandas")
    return [
        {
            "route": "import passk_nb (fresh process, beyond a bare interpreter)",
            "figure": f"{ours - bare:.2f} s wall",
            "peer": f"import pandas {pandas - bare:.2f} s wall",
            "ratio": f"{(ours - bare) / (pandas - bare):.2f}×",
            "target": "≤ 0.3 s",
        }
    ]


def _rank_rows() -> list[dict[str, object]]:
    from bench_rank import ladder, quiet_compare

    from passk_nb.stats.rank import rank

    df = ladder(13, 80, 5)
    rank(df, k=1)
    ours, one = _cpu(lambda: rank(df, k=1)), _cpu(lambda: quiet_compare(df, "m00", "m12"))
    return [
        {
            "route": "rank, 13 arms × 80 tasks × 5 trials",
            "figure": f"{ours:.2f} s CPU",
            "peer": f"one compare {one:.3f} s CPU",
            "ratio": f"{ours / one:.1f}× one compare",
            "target": "≤ 1 s",
        }
    ]


def _forecast_rows() -> list[dict[str, object]]:
    import numpy as np
    from bench_forecast import suite

    from passk_nb.stats.forecast import forecast
    from passk_nb.stats.summary import summarize

    warnings.simplefilter("ignore")
    rng = np.random.default_rng(47)
    df = suite(np.full(80, 5), 1, rng)
    ours, peer = _cpu(lambda: forecast(df, by="g"), 1), _cpu(lambda: summarize(df, k=5, by="g"))
    mixed = suite(rng.integers(8, 97, 80), 1, rng)  # bench_forecast's second shape
    mixed_cpu, mixed_peer = (
        _cpu(lambda: forecast(mixed, by="g"), 1),
        _cpu(lambda: summarize(mixed, k=8, by="g")),
    )
    large = suite(np.full(1_000, 5), 4, rng)  # 4 of the 20 configurations: the cost is per group
    large_cpu, large_peer = (
        _cpu(lambda: forecast(large, by="g"), 1),
        _cpu(lambda: summarize(large, k=5, by="g")),
    )
    return [
        {
            "route": "forecast, one configuration of 80 tasks × 5 trials",
            "figure": f"{ours:.2f} s CPU",
            "peer": f"summarize(k=5) {peer:.3f} s CPU",
            "ratio": f"{ours / peer:.0f}× summarize",
            "target": "≤ 1 s",
        },
        {
            "route": "forecast, one configuration of 80 tasks × 8–96 trials",
            "figure": f"{mixed_cpu:.2f} s CPU",
            "peer": f"summarize(k=8) {mixed_peer:.3f} s CPU",
            "ratio": f"{mixed_cpu / mixed_peer:.0f}× summarize",
            "target": "≤ 5 s",
        },
        {
            "route": "forecast, 20 configurations × 1,000 tasks × 5 trials (4 run, × 5)",
            "figure": f"{5 * large_cpu:.1f} s CPU",
            "peer": f"summarize(k=5) {5 * large_peer:.3f} s CPU",
            "ratio": f"{large_cpu / large_peer:.0f}× summarize",
            "target": "≤ 20 s",
        },
    ]


def _report_html_rows() -> list[dict[str, object]]:
    """``report_html`` (what ``passk report --format html`` writes) of 40 configurations × 20 tasks ×
    10 trials against a limit, beside the report's numbers alone (``report_frame``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from bench_explorer import synthetic_trials

    from passk_nb.stats.report import report_frame
    from passk_nb.view.report_html import report_html

    warnings.simplefilter("ignore")
    df = synthetic_trials(8, 5, 20, 10).assign(suite="orders")
    by = ("model", "prompt_hash")

    def page() -> None:
        report_html(df, k=2, by=by)
        plt.close("all")

    ours, numbers = _cpu(page, 2), _cpu(lambda: report_frame(df, k=2, by=by))
    return [
        {
            "route": "HTML report, 40 configurations × 20 tasks × 10 trials",
            "figure": f"{ours:.1f} s CPU",
            "peer": f"limit 10 s CPU (its numbers, report_frame, {numbers:.2f} s CPU)",
            "ratio": f"{ours / 10:.2f}× the limit",
            "target": "≤ 10 s",
        }
    ]


def table() -> tuple[list[dict[str, object]], tuple[float, ...], tuple[float, ...]]:
    import bench_design
    import bench_explorer
    import bench_parquet
    import bench_scale

    before = os.getloadavg()
    rows = _import_rows() + bench_scale.rows(quick=True) + _rank_rows() + _forecast_rows()
    rows += bench_design.rows(quick=True)
    rows += bench_parquet.rows() + bench_explorer.rows() + _report_html_rows()
    return rows, before, os.getloadavg()


def markdown(rows: list[dict[str, object]], before: tuple[float, ...], after: tuple[float, ...]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(str(row[col]) for col in COLUMNS) + " |" for row in rows]
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = f"{before[0]:.1f} before, {after[0]:.1f} after"
    lines += ["", f"Measured {stamp} on {os.cpu_count()} cores, load average (1 min) {load}."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--print", action="store_true", help="print the table, leave the README alone")
    args = parser.parse_args()
    text = markdown(*table())
    if args.print:
        print(text)
        return
    readme = README.read_text()
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")
    print(text)


if __name__ == "__main__":
    main()
