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
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
