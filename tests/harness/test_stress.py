"""A seeded kill/resume stress test: kill -9 and SIGTERM at random moments, and in the middle of merges.

Whatever the kills, the same command run to the end leaves exactly one row per trial on disk, as
pandas, DuckDB and Polars read the folder directly (no passk code in between).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import passk_nb

#: Trials per task of round r: each round extends the run, so there is always work left to kill.
ROUND_TRIALS = 30
FINAL_TRIALS = 8 * ROUND_TRIALS

CHILD = textwrap.dedent(
    """
    import json, os, random, sys, time
    import passk_nb
    from passk_nb.data import store
    from passk_nb.harness.providers.base import BaseProvider

    out, marker, trials = sys.argv[1], sys.argv[2], int(sys.argv[3])
    script = {t.prompt: t.script for t in passk_nb.get_suite("orders").tasks}

    class FlakyBackend(BaseProvider):  # a backend, not user code: its errors are infra errors
        name = "flaky-backend"

        def chat(self, messages):
            turn = sum(m["role"] == "assistant" for m in messages)
            rng = random.Random(f"{messages[1]['content']}|{turn}|{time.time_ns()}")
            if os.environ.get("FLAKY"):  # the rounds that are killed: slow enough to be caught mid-run
                time.sleep(rng.uniform(0.05, 0.1))
            if os.environ.get("FLAKY") and rng.random() < 0.05:
                raise ConnectionError("flaky backend")  # infra errors that a resume retries
            return json.dumps(script[messages[1]["content"]][turn])

    agent = FlakyBackend("known-good")

    if os.environ.get("MERGE_MARKER"):
        real_delete = store._delete_parts

        def slow_delete(files):
            files[0].unlink()  # the merged part is complete, one input gone, the others not yet
            open(os.environ["MERGE_MARKER"], "w").close()
            time.sleep(30)
            real_delete(files)

        store._delete_parts = slow_delete

    def started(record):
        if not os.path.exists(marker):
            open(marker, "w").close()

    passk_nb.run(agent, trials=trials, concurrency=8, out=out, progress=False, on_record=started)
    """
)


def start(script, out, marker, trials, **env):
    marker.unlink(missing_ok=True)
    return subprocess.Popen(
        [sys.executable, str(script), str(out), str(marker), str(trials)], env={**os.environ, **env}
    )


def wait_for(marker, child, seconds=60.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not marker.exists() and child.poll() is None:
        time.sleep(0.01)
    return marker.exists() and child.poll() is None


@pytest.mark.slow
def test_random_kills_and_resumes_end_with_one_row_per_trial_for_every_reader(tmp_path):
    import duckdb
    import pandas as pd
    import polars as pl

    rng = random.Random(20261201)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    out = tmp_path / "runs"
    kills = {"SIGKILL": 0, "SIGTERM": 0, "in_merge": 0}
    for round_ in range(8):
        trials = ROUND_TRIALS * (round_ + 1)
        # three processes of the same spec at once (extending the run), each killed at a random moment
        pair = [
            (start(script, out, tmp_path / f"m{i}", trials, FLAKY="1"), tmp_path / f"m{i}") for i in range(3)
        ]
        # and, every other round, one that is killed in the middle of its final merge
        merging = None
        if round_ % 2 == 1:
            merge_marker = tmp_path / "merging"
            merge_marker.unlink(missing_ok=True)
            merging = start(
                script, out, tmp_path / "m2", trials - ROUND_TRIALS, MERGE_MARKER=str(merge_marker)
            )
        for child, marker in pair:
            wait_for(marker, child)
        time.sleep(rng.uniform(0.0, 0.3))
        for child, _ in pair:
            sig = rng.choice([signal.SIGKILL, signal.SIGTERM])
            if child.poll() is None:
                child.send_signal(sig)
                kills[sig.name] += 1
        for child, _ in pair:
            child.wait(timeout=30)
        if merging is not None:
            if wait_for(merge_marker, merging):
                merging.kill()
                kills["in_merge"] += 1
            merging.wait(timeout=30)
    assert kills["SIGKILL"] + kills["SIGTERM"] >= 20 and kills["SIGTERM"] >= 5 and kills["in_merge"] >= 3, (
        kills
    )

    last = start(script, out, tmp_path / "last", FINAL_TRIALS)
    assert last.wait(timeout=120) == 0
    expected = 5 * FINAL_TRIALS
    glob = f"{out}/**/*.parquet"
    readers = {
        "pandas": pd.read_parquet(out),
        "duckdb": duckdb.sql(f"SELECT * FROM read_parquet('{glob}')").df(),
        "polars": pl.read_parquet(glob).to_pandas(),
    }
    for name, frame in readers.items():
        assert len(frame) == expected, name
        assert not frame.duplicated(["run_id", "task", "trial"]).any(), name
        assert frame["run_id"].nunique() == 1, name
    df = passk_nb.load(out)
    assert len(df) == expected and set(df["outcome"]) == {"pass"}
