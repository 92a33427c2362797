"""Benchmark: per-task counts of a large parquet data folder, DuckDB route against pandas route.

Generates a data folder of ``--rows`` trial records (default 5,000,000: 10,000 tasks × 10
models × 5 prompts × 10 trials, 50 runs of 4 part files each) with every record column,
including a ~1 KB JSON transcript per trial, in a temporary folder that is deleted at the end
(``--keep`` keeps it). Then runs :func:`passk_nb.counts` of the folder
once per route, each in its own Python process, and reports wall time, CPU time and peak
resident memory (``resource.getrusage``; "after imports": resident memory just before counting).
Checks that both routes return the same table. ``--load-all`` adds today's route,
``counts(load(folder))``, which reads every column, transcripts included (needs several GB
of memory at 5M rows).

    python benchmarks/bench_parquet.py [--rows 5000000] [--load-all]

``rows()`` gives ``benchmarks/table.py`` its folder rows: :func:`passk_nb.load` of a run folder
of 10,000 parts and of a 1M-row folder, each against ``pyarrow.dataset`` and DuckDB reading the
same folder, and ``passk report`` of the 1M-row folder against its limit. These folders are
written by the project's own store (:func:`passk_nb.data.store.write_part`), so they have the
layout a run leaves: ``<folder>/<run_id>/part-*.parquet`` beside ``_written.log``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

MODELS, PROMPTS, TRIALS, PARTS = 10, 5, 10, 4
BY = ("model", "prompt_hash")
ROUTES = ("duckdb", "pandas", "load-all")


def write_dataset(folder: Path, rows: int, seed: int = 0) -> None:
    """Record files like ``passk run`` writes, one run per (model, prompt)."""
    from passk_nb.data.records import DEFAULTS, SCHEMA

    rng = np.random.default_rng(seed)
    tasks = rows // (MODELS * PROMPTS * TRIALS)
    per_part = tasks // PARTS
    words = np.array("the order refund cancel address customer lookup tool result pending shipped".split())
    pool = pa.array(  # transcripts: JSON text, each made different per trial below
        [
            json.dumps(
                [
                    {"role": "assistant", "content": " ".join(rng.choice(words, int(n)))}
                    for n in rng.integers(5, 40, 5)
                ]
            )
            for _ in range(500)
        ]
    )
    for m in range(MODELS):
        for p in range(PROMPTS):
            run_id = f"run-{m}-{p}"
            skill = rng.beta(2, 1, tasks)
            for part in range(PARTS):
                task_ids = np.arange(part * per_part, (part + 1) * per_part)
                size = task_ids.size * TRIALS
                passed = rng.random(size) < np.repeat(skill[task_ids], TRIALS)
                infra = rng.random(size) < 0.01
                outcome = np.where(infra, "infra_error", np.where(passed, "pass", "wrong_state"))
                # a random 64-letter tail per trial, so transcripts compress like real, distinct ones
                tail = rng.integers(97, 123, size=(size, 64), dtype=np.uint8).view("S64").ravel()
                tails = pa.array(tail.astype(str))
                columns = {
                    "run_id": pa.array([run_id] * size),
                    "suite": pa.array(["orders"] * size),
                    "task": pa.array(np.repeat([f"task-{t:05d}" for t in task_ids], TRIALS)),
                    "provider": pa.array(["openai"] * size),
                    "model": pa.array([f"model-{m}"] * size),
                    "prompt_hash": pa.array([f"{p:012x}"] * size),
                    "prompt_name": pa.array([f"prompt-{p}"] * size),
                    "system_prompt": pa.array([f"You are support agent number {p}. " * 20] * size),
                    "trial": pa.array(np.tile(np.arange(TRIALS), task_ids.size)),
                    "passed": pa.array(passed & ~infra),
                    "outcome": pa.array(outcome),
                    "transcript": pc.binary_join_element_wise(
                        pool.take(pa.array(rng.integers(0, len(pool), size))), tails, ""
                    ),
                }
                arrays = [
                    columns[f.name]
                    if f.name in columns
                    else pa.array([DEFAULTS.get(f.name)] * size, type=f.type)
                    for f in SCHEMA
                ]
                table = pa.Table.from_arrays(arrays, schema=SCHEMA)
                (folder / run_id).mkdir(parents=True, exist_ok=True)
                pq.write_table(table, folder / run_id / f"part-{part}.parquet", compression="zstd")


def store_table(run: int, tasks: np.ndarray, trials: int, rng: np.random.Generator) -> pa.Table:
    """The records of ``tasks`` × ``trials`` trials of run number ``run`` (one of 4 models × 5 prompts,
    cycled) as the runner stores them: every column, the identity columns filled as a run fills
    them, a short transcript per trial (~150 bytes, distinct), 1 % infra errors."""
    from passk_nb.data.records import DEFAULTS, SCHEMA

    size = tasks.size * trials
    model, prompt = run % 4, run // 4 % 5
    passed = rng.random(size) < np.repeat(rng.beta(2, 1, tasks.size), trials)
    infra = rng.random(size) < 0.01
    outcome = np.where(infra, "infra_error", np.where(passed, "pass", "wrong_state"))
    turns = rng.integers(1, 9, size)
    columns = {
        "run_id": pa.array([f"{run:012x}"] * size),
        "suite": pa.array(["orders"] * size),
        "suite_hash": pa.array(["5d1e0c7a9b42"] * size),
        "task": pa.array(np.repeat([f"task-{t:04d}" for t in tasks], trials)),
        "provider": pa.array(["openai"] * size),
        "model": pa.array([f"model-{model}"] * size),
        "base_url_host": pa.array(["127.0.0.1:8000"] * size),
        "prompt_hash": pa.array([f"{prompt:012x}"] * size),
        "prompt_name": pa.array([f"prompt-{prompt}"] * size),
        "system_prompt": pa.array([f"You are support agent number {prompt}. " * 8] * size),
        "config": pa.array([f"model=model-{model} prompt=prompt-{prompt}"] * size),
        "seed": pa.array(rng.integers(0, 2**31, size)),
        "trial": pa.array(np.tile(np.arange(trials), tasks.size)),
        "passed": pa.array(passed & ~infra),
        "outcome": pa.array(outcome),
        "state_ok": pa.array(passed & ~infra),
        "n_turns": pa.array(turns),
        "n_tool_calls": pa.array(turns - 1),
        "attempts": pa.array(turns),
        "input_tokens": pa.array(turns * 900),
        "output_tokens": pa.array(turns * 60),
        "latency_s": pa.array(rng.gamma(2, 1.5, size)),
        "started_at": pa.array(
            (1_780_000_000_000_000 + rng.integers(0, 10**9, size)).astype("datetime64[us]"),
            type=pa.timestamp("us", tz="UTC"),
        ),
        "final_answer": pa.array(np.where(passed, "Your refund is on its way.", "I could not find it.")),
        "state_diff": pa.array(["[]"] * size),
        "false_claims": pa.array(["[]"] * size),
        "transcript": pa.array(
            [
                f'[{{"role":"assistant","content":"lookup {t} refund {i}"}},{{"role":"tool","content":"ok"}}]'
                for t, i in zip(np.repeat(tasks, trials), rng.integers(0, 10**9, size), strict=True)
            ]
        ),
        "harness_version": pa.array(["0.9.0"] * size),
    }
    arrays = [
        columns[f.name] if f.name in columns else pa.array([DEFAULTS.get(f.name)] * size, type=f.type)
        for f in SCHEMA
    ]
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


@contextmanager
def _no_fsync() -> object:
    """The store writes each part as it always does, without waiting for the disk's flush (10,000
    fsyncs would take a minute and measure the disk, not the layout)."""
    with mock.patch.object(os, "fsync", lambda fd: None):
        yield


def write_store_folder(folder: Path, runs: int, parts: int, tasks: int, trials: int, seed: int = 0) -> None:
    """``runs`` runs of ``tasks`` tasks × ``trials`` trials, each run stored as ``parts`` part files
    of consecutive tasks by :func:`passk_nb.data.store.write_part` (the runner's own write)."""
    from passk_nb.data.store import write_part

    rng = np.random.default_rng(seed)
    with _no_fsync():
        for run in range(runs):
            table = store_table(run, np.arange(tasks), trials, rng)
            for chunk in np.array_split(np.arange(tasks), parts):
                write_part(table.slice(chunk[0] * trials, chunk.size * trials), folder, f"{run:012x}")


def _best(
    routes: dict[str, Callable[[], object]], repeats: int, warm: bool = True
) -> dict[str, tuple[float, float]]:
    """Best (wall, CPU) seconds of each route, interleaved, after one warm-up call each (``warm``)."""
    for fn in routes.values() if warm else ():
        fn()
    best = {name: (float("inf"), float("inf")) for name in routes}
    for _ in range(repeats):
        for name, fn in routes.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    return best


def load_routes(folder: Path, pandas: bool = False) -> dict[str, Callable[[], object]]:
    """``load(folder)`` and its peers reading every row and column of the same folder: pyarrow's
    dataset (a table) and DuckDB's ``read_parquet`` of the folder's glob (an Arrow table); with
    ``pandas``, also pyarrow's table made a pandas frame, as ``load`` returns."""
    import duckdb
    import pyarrow.dataset as ds

    from passk_nb.data.store import load

    con = duckdb.connect()
    glob = str(folder / "**" / "*.parquet")
    return {
        "load": lambda: load(folder),
        "pyarrow.dataset": lambda: ds.dataset(folder, format="parquet").to_table(),
        "DuckDB": lambda: con.sql(f"select * from read_parquet('{glob}')").to_arrow_table(),
    } | ({"to pandas": lambda: ds.dataset(folder, format="parquet").to_table().to_pandas()} if pandas else {})


def _load_row(label: str, t: dict[str, tuple[float, float]], target: str) -> dict[str, object]:
    """A load row: the faster peer by wall time first, the ratio (CPU) against each peer."""
    peer = min(("pyarrow.dataset", "DuckDB"), key=lambda name: t[name][0])
    other = "DuckDB" if peer == "pyarrow.dataset" else "pyarrow.dataset"
    return {
        "route": f"load(), {label}",
        "figure": f"{t['load'][1]:.2f} s CPU, {t['load'][0]:.2f} s wall",
        "peer": f"{peer} {t[peer][1]:.2f} s CPU, {t[peer][0]:.2f} s wall "
        f"({other} {t[other][1]:.2f} s CPU, {t[other][0]:.2f} s wall"
        + (f"; pyarrow.dataset to pandas {t['to pandas'][1]:.2f} s CPU" if "to pandas" in t else "")
        + ")",
        "ratio": f"{t['load'][1] / t[peer][1]:.2f}× CPU, {t['load'][0] / t[peer][0]:.2f}× wall "
        f"({other} {t['load'][1] / t[other][1]:.2f}× CPU)",
        "target": target,
    }


def _passk_report(folder: Path) -> tuple[float, float]:
    """``passk report FOLDER`` as a user runs it: a fresh process (imports included), its wall and
    CPU seconds (the child's user + system time)."""
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "passk_nb", "report", str(folder)],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def rows(repeats: int = 3) -> list[dict[str, object]]:
    """The table rows: load() of 10,000 parts and of 1M rows against pyarrow.dataset and DuckDB,
    ``passk report`` of the 1M rows against its limit (load + summarize in this process, + 1 s)."""
    import warnings

    from passk_nb.data.store import load
    from passk_nb.stats.summary import summarize

    warnings.simplefilter("ignore")
    work = Path(tempfile.mkdtemp(prefix="passk-bench-folder-"))
    try:
        parts = work / "parts"  # one run of 10,000 tasks × 10 trials, a part per task, not merged yet
        write_store_folder(parts, runs=1, parts=10_000, tasks=10_000, trials=10)
        t = _best(load_routes(parts), 1, warm=False)  # 10,000 files read: once each, just written
        # the reader load() shares with pyarrow.dataset costs ~2.5 ms a part, DuckDB's ~1 ms
        target = "≤ 1.2× pyarrow.dataset; ≤ 2× DuckDB not met (its own parquet reader)"
        table = [_load_row("one run folder of 10,000 parts (100,000 rows)", t, target)]
        big = work / "big"  # 20 configurations × 1,000 tasks × 50 trials, each run merged into one part
        write_store_folder(big, runs=20, parts=1, tasks=1_000, trials=50)
        t = _best(load_routes(big, pandas=True), repeats)
        table.append(_load_row("1M rows (20 merged runs)", t, "≤ 2×"))
        one = load(big)
        summary = _best({"summarize": lambda: summarize(one, k=2)}, repeats)["summarize"]
        report = min((_passk_report(big) for _ in range(repeats)), key=lambda wc: wc[1])
        limit = t["load"][1] + summary[1] + 1.0
        table.append(
            {
                "route": "passk report, 1M rows (fresh process)",
                "figure": f"{report[1]:.2f} s CPU, {report[0]:.2f} s wall",
                "peer": f"limit: load {t['load'][1]:.2f} + summarize(k=2) {summary[1]:.2f} + 1 s CPU",
                "ratio": f"{report[1] / limit:.2f}× the limit",
                "target": "≤ 1×",
            }
        )
        return table
    finally:
        shutil.rmtree(work, ignore_errors=True)


def current_rss_kb() -> int:
    """The process's resident memory now (Linux), in KB."""
    status = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))


def measure(route: str, folder: str, out: str) -> None:
    """Child process: count ``folder`` by ``route``; print a JSON line of the measurements."""
    from passk_nb.data.store import load
    from passk_nb.stats.counts import counts

    import_rss = current_rss_kb()
    start, start_cpu = time.perf_counter(), time.process_time()
    if route == "load-all":
        table = counts(load(folder), by=BY)
    else:
        table = counts(folder, by=BY, engine=route)
    wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    table.to_pickle(out)
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "peak_mb": peak / 1024, "import_mb": import_rss / 1024}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--load-all", action="store_true", help="also time counts(load(folder))")
    parser.add_argument("--keep", action="store_true", help="keep the generated folder")
    parser.add_argument("--route", choices=(*ROUTES, "generate"), help=argparse.SUPPRESS)  # child process
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.route == "generate":
        write_dataset(Path(args.folder), args.rows)
        return
    if args.route:
        measure(args.route, args.folder, args.out)
        return

    import pandas as pd

    work = Path(tempfile.mkdtemp(prefix="passk-bench-"))
    folder = work / "runs"
    try:
        start = time.perf_counter()
        # in a child process, so this one stays small (a child starts with its parent's peak RSS)
        generate = [sys.executable, __file__, "--route", "generate", "--folder", str(folder)]
        subprocess.run([*generate, "--rows", str(args.rows)], check=True)
        files = list(folder.rglob("*.parquet"))
        size = sum(f.stat().st_size for f in files)
        rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
        print(
            f"{rows:,} trial rows in {len(files)} parquet files, {size / 1e6:,.0f} MB on disk "
            f"(transcripts included), generated in {time.perf_counter() - start:.0f} s"
        )
        routes = [r for r in ROUTES if r != "load-all" or args.load_all]
        results, tables = {}, {}
        for route in routes:
            out = work / f"{route}.pkl"
            command = [sys.executable, __file__, "--route", route, "--folder", str(folder), "--out", str(out)]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            results[route] = json.loads(done.stdout.strip().splitlines()[-1])
            tables[route] = pd.read_pickle(out)
        for route in routes[1:]:
            pd.testing.assert_frame_equal(tables[route], tables[routes[0]], obj=route)
        print(f"same counts table from every route: {len(tables[routes[0]]):,} (model, prompt, task) rows")
        print(f"  {'route':10s} {'wall':>9s} {'CPU':>9s} {'peak RSS':>10s} {'after imports':>14s}")
        for route, r in results.items():
            print(
                f"  {route:10s} {r['wall_s']:7.2f} s {r['cpu_s']:7.2f} s "
                f"{r['peak_mb']:7.0f} MB {r['import_mb']:11.0f} MB"
            )
        duck, pand = results["duckdb"], results["pandas"]
        print(
            f"  duckdb vs pandas: {pand['wall_s'] / duck['wall_s']:.1f}× wall time, "
            f"{(pand['peak_mb'] - pand['import_mb']) / max(duck['peak_mb'] - duck['import_mb'], 1):.1f}× "
            "memory above the imports"
        )
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
