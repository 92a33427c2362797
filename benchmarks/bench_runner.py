"""Harness overhead of ``passk_nb.run``.

Target (issue 2): with a provider that sleeps 20 ms per turn, 500 trials at
concurrency 32 finish within 1.25x of the ideal time (total sleep / concurrency),
and the harness spends under 0.5 ms of CPU per turn.

Baselines measured in the same run, on the same machine:
- ideal: total provider sleep / concurrency;
- bare pool: the same sleeps through a plain ThreadPoolExecutor with no harness.

Run: ``python benchmarks/bench_runner.py`` (exits 1 if a target is missed).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import passk_nb

SLEEP_S = 0.020
TRIALS_PER_TASK = 100  # 5 tasks x 100 = 500 trials
CONCURRENCY = 32
SUITE = passk_nb.get_suite("orders")
SCRIPTS = {t.prompt: [json.dumps(step) for step in t.script] for t in SUITE.tasks}
TURNS = TRIALS_PER_TASK * sum(len(t.script) for t in SUITE.tasks)


def make_agent(sleep_s: float):
    def agent(messages):
        if sleep_s:
            time.sleep(sleep_s)
        return SCRIPTS[messages[1]["content"]][sum(m["role"] == "assistant" for m in messages)]

    return agent


def timed_run(sleep_s: float) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as out:
        wall0, cpu0 = time.perf_counter(), time.process_time()
        df = passk_nb.run(
            make_agent(sleep_s), trials=TRIALS_PER_TASK, concurrency=CONCURRENCY, out=out, progress=False
        )
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    assert len(df) == 5 * TRIALS_PER_TASK and df["passed"].all()
    return wall, cpu


def bare_pool() -> float:
    per_trial = [len(t.script) for t in SUITE.tasks] * TRIALS_PER_TASK

    def trial(turns: int) -> None:
        for _ in range(turns):
            time.sleep(SLEEP_S)

    start = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(trial, per_trial))
    return time.perf_counter() - start


def main() -> int:
    timed_run(0.0)  # warm-up: imports, first parquet write
    ideal = TURNS * SLEEP_S / CONCURRENCY
    bare = bare_pool()
    wall, _ = timed_run(SLEEP_S)
    _, cpu = timed_run(0.0)
    cpu_per_turn_ms = 1000 * cpu / TURNS
    ratio = wall / ideal
    print(
        f"{5 * TRIALS_PER_TASK} trials, {TURNS} turns, {SLEEP_S * 1000:.0f} ms per turn, "
        f"concurrency {CONCURRENCY}"
    )
    print(
        f"ideal {ideal:.3f} s | bare thread pool {bare:.3f} s ({bare / ideal:.3f}x) | "
        f"passk_nb.run {wall:.3f} s ({ratio:.3f}x ideal, {wall / bare:.3f}x bare pool)"
    )
    print(f"harness CPU per turn (provider does no work): {cpu_per_turn_ms:.3f} ms")
    ok = ratio <= 1.25 and cpu_per_turn_ms < 0.5
    print("PASS" if ok else "FAIL: targets are <= 1.25x ideal and < 0.5 ms CPU per turn")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
