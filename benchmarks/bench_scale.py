"""Benchmark: every analysis at leaderboard scale, beside its peer in the same run (issue #47 §3).

1,000 tasks × 20 configurations (4 models × 5 prompts) × n trials, string keys (the dtypes
``passk_nb.load()`` returns), 1 % infra errors; ``--rows`` sets n (1M rows: 50 trials, 10M: 500).

- ``summarize(k=2, n_boot=0)`` point estimates (counts, pass@k/pass^k per task, their means per
  configuration, the fixed-task errors) against polars and DuckDB doing the same group-by (n and c
  per configuration and task, the two estimators at k = 2 on tasks with n ≥ k, their means per
  configuration), each engine given its own native frame built before the clock starts. Target:
  ≤ 1.0× the faster of the two.
- ``curve(ks=1..10)`` against one ``summarize(k=2)``, both with their default intervals. Target ≤ 1.5×.
- ``flips(a=prompt 0, b=prompt 1)`` (Fisher per task, Tarone's screen) against one
  ``summarize(k=2)``. Target ≤ 2×.

Routes interleaved, best of ``--repeats`` (CPU time: steadier on a shared machine; polars and
DuckDB use every core, so their CPU time counts all threads, and their wall time is shown too).
Prints the load average. ``rows()`` gives the table rows for ``benchmarks/table.py``.

    python benchmarks/bench_scale.py [--rows 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_counts import best_of  # noqa: E402

from passk_nb.stats.paired import flips  # noqa: E402
from passk_nb.stats.summary import curve, summarize  # noqa: E402

TASKS, MODELS, PROMPTS, K = 1_000, 4, 5, 2
BY = ("model", "prompt_hash")


def scale_frame(rows: int = 1_000_000, seed: int = 0) -> pd.DataFrame:
    """``rows`` trial rows: 1,000 tasks × 4 models × 5 prompts × rows / 20,000 trials, 1 % infra errors."""
    configs = MODELS * PROMPTS
    trials = max(1, rows // (TASKS * configs))
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 1, size=(configs, TASKS))
    passed = (rng.random((configs, TASKS, trials)) < p[:, :, None]).ravel()
    infra = rng.random(passed.size) < 0.01
    return pd.DataFrame(
        {
            "model": np.repeat([f"model-{m}" for m in range(MODELS)], PROMPTS * TASKS * trials),
            "prompt_hash": np.tile(np.repeat([f"{q:012x}" for q in range(PROMPTS)], TASKS * trials), MODELS),
            "task": np.tile(np.repeat([f"task-{t:04d}" for t in range(TASKS)], trials), configs),
            "run_id": np.repeat([f"{r:012x}" for r in range(configs)], TASKS * trials),
            "trial": np.tile(np.arange(trials), configs * TASKS),
            "passed": passed & ~infra,
            "outcome": np.where(infra, "infra_error", np.where(passed, "pass", "wrong_state")),
        }
    ).astype({"model": "str", "prompt_hash": "str", "run_id": "str", "task": "str", "outcome": "str"})


def polars_route(frame: object) -> pd.DataFrame:
    """n, c per configuration and task, pass@2 and pass^2 on tasks with n ≥ 2, means per configuration."""
    import polars as pl

    usable = pl.col("outcome") != "infra_error"
    per_task = frame.group_by([*BY, "task"]).agg(  # type: ignore[attr-defined]
        usable.sum().alias("n"), (pl.col("passed") & usable).sum().alias("c")
    )
    n, c = pl.col("n").cast(pl.Float64), pl.col("c").cast(pl.Float64)
    return (
        per_task.filter(pl.col("n") >= K)
        .with_columns(
            (1 - (n - c) * (n - c - 1) / (n * (n - 1))).alias("pass@k"),
            (c * (c - 1) / (n * (n - 1))).alias("pass^k"),
        )
        .group_by(BY)
        .agg(pl.col("pass@k").mean(), pl.col("pass^k").mean())
        .sort(BY)
        .to_pandas()
    )


DUCKDB_SQL = f"""
with per_task as (
    select model, prompt_hash, task,
           count(*) filter (where outcome <> 'infra_error') as n,
           count(*) filter (where passed and outcome <> 'infra_error') as c
    from frame group by all
)
select model, prompt_hash,
       avg(1 - (n - c) * (n - c - 1) / (n * (n - 1.0))) as "pass@k",
       avg(c * (c - 1) / (n * (n - 1.0))) as "pass^k"
from per_task where n >= {K} group by all order by all
"""


def duckdb_route(con: object) -> pd.DataFrame:
    return con.execute(DUCKDB_SQL).df()  # type: ignore[attr-defined]


def measure(rows: int, repeats: int) -> dict[str, tuple[float, float]]:
    """Best (wall, CPU) of each route on one frame of ``rows`` rows; checks the values agree."""
    import duckdb
    import polars as pl

    df = scale_frame(rows)
    native = pl.from_pandas(df)
    con = duckdb.connect()
    con.register("frame", native.to_arrow())
    warnings.simplefilter("ignore")  # infra errors leave some tasks below k = 10: partial curves
    # warm-up (imports, caches), then the values of every engine agree
    ours = summarize(df, k=K, by=BY, n_boot=0).sort_values(["model", "prompt_hash"])
    for peer in (polars_route(native), duckdb_route(con)):
        for metric in ("pass@k", "pass^k"):
            got = ours[ours["metric"] == metric]["value"].to_numpy() if "metric" in ours else ours[metric]
            np.testing.assert_allclose(np.asarray(got, dtype=float), peer[metric].to_numpy(), rtol=1e-9)
    curve(df.iloc[:: max(1, len(df) // 20_000)], ks=range(1, 11), by=BY)
    flips(df.iloc[:: max(1, len(df) // 20_000)], a="000000000000", b="000000000001")
    routes = {
        "summarize": lambda: summarize(df, k=K, by=BY, n_boot=0),
        "polars": lambda: polars_route(native),
        "duckdb": lambda: duckdb_route(con),
        "summarize (intervals)": lambda: summarize(df, k=K, by=BY),
        "curve": lambda: curve(df, ks=range(1, 11), by=BY),
        "flips": lambda: flips(df, a="000000000000", b="000000000001"),
    }
    return best_of(routes, repeats)


def rows(quick: bool = True, repeats: int = 3, size: int | None = None) -> list[dict[str, object]]:
    """The table rows (route, figure, peer, ratio, target) of one run at 1M rows (quick) or 10M."""
    size = size or (1_000_000 if quick else 10_000_000)
    t = measure(size, repeats)
    label = f"{size / 1e6:g}M rows"
    cpu = {name: value[1] for name, value in t.items()}
    peer = min(("polars", "duckdb"), key=lambda name: t[name][0])  # the faster by wall time
    return [
        {
            "route": f"summarize point estimates, {label}",
            "figure": f"{cpu['summarize']:.2f} s CPU, {t['summarize'][0]:.2f} s wall",
            "peer": f"{peer} {cpu[peer]:.2f} s CPU, {t[peer][0]:.2f} s wall (polars {t['polars'][0]:.2f}, "
            f"DuckDB {t['duckdb'][0]:.2f} s wall)",
            "ratio": f"{cpu['summarize'] / cpu[peer]:.2f}× CPU, {t['summarize'][0] / t[peer][0]:.2f}× wall",
            "target": "≤ 1.0×",
        },
        {
            "route": f"curve(ks=1..10), {label}",
            "figure": f"{cpu['curve']:.2f} s CPU",
            "peer": f"summarize(k=2) {cpu['summarize (intervals)']:.2f} s CPU",
            "ratio": f"{cpu['curve'] / cpu['summarize (intervals)']:.2f}×",
            "target": "≤ 1.5×",
        },
        {
            "route": f"flips (Fisher, Tarone), {label}",
            "figure": f"{cpu['flips']:.2f} s CPU",
            "peer": f"summarize(k=2, n_boot=0) {cpu['summarize']:.2f} s CPU",
            "ratio": f"{cpu['flips'] / cpu['summarize']:.2f}×",
            "target": "≤ 2×",
        },
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="trial rows (default 1,000,000)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (default 3)")
    args = parser.parse_args()
    print(f"{args.rows:,} rows: {TASKS} tasks × {MODELS * PROMPTS} configurations; load {os.getloadavg()}")
    for name, (wall, cpu) in measure(args.rows, args.repeats).items():
        print(f"  {name:24s} wall {wall:7.3f} s  CPU {cpu:7.3f} s")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
