"""passk-nb beside inspect_ai, in one run, against the same server with the same connection limit.

Both send one-turn conversations to the minimal asyncio OpenAI-compatible server of
``bench_runner.py`` (its own process; one fixed answer ``latency`` seconds after each request):
passk-nb through ``passk_nb.run`` (the orders suite, every trial one turn: the fixed answer ends it),
inspect_ai through ``eval`` of a task of as many one-message samples with ``generate()`` and its
``openai-api`` provider pointed at the same URL, ``max_connections`` equal to passk-nb's
``concurrency``; beside them the baseline of ``bench_runner.py``, a bare asyncio + aiohttp client
posting the same request bodies with the same concurrency. Reported: wall time against the ideal
(requests × latency / in flight) and the client process's CPU per request (harness and HTTP client
together; all run in this process, one after the other). Needs the ``bench`` extra (inspect-ai and openai)::

    python benchmarks/bench_peer.py [--requests 2000] [--concurrency 32 256] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_runner import SUITE, Server, bare_asyncio_client, timed_run  # noqa: E402


def passk_run(url: str, requests: int, concurrency: int) -> tuple[float, float, int]:
    """(wall s, CPU s, requests) of ``passk_nb.run`` with one-turn trials (bench_runner's run)."""
    return timed_run(url, max(1, requests // len(SUITE.tasks)), concurrency, one_turn=True)


def bare_run(url: str, requests: int, concurrency: int) -> tuple[float, float, int]:
    """(wall s, CPU s, requests) of the bare asyncio + aiohttp client (bench_runner's baseline)."""
    return bare_asyncio_client(url, max(1, requests // len(SUITE.tasks)), concurrency, one_turn=True)


def inspect_run(url: str, requests: int, concurrency: int) -> tuple[float, float, int]:
    """(wall s, CPU s, requests) of inspect_ai's ``eval`` of ``requests`` one-message samples."""
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.solver import generate

    os.environ["BENCH_API_KEY"] = "unused"
    os.environ["BENCH_BASE_URL"] = url
    task = Task(dataset=[Sample(input=f"request {i}") for i in range(requests)], solver=generate())
    with tempfile.TemporaryDirectory() as logs:
        wall0, cpu0 = time.perf_counter(), time.process_time()
        (log,) = eval(
            task,
            model="openai-api/bench/bench",
            max_connections=concurrency,
            max_samples=concurrency,
            log_dir=logs,
            display="none",
            score=False,
        )
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        assert log.status == "success", log.error and log.error.message[:300]
        done = sum(1 for s in log.samples or [] if s.output and s.output.completion)
    assert done == requests, f"{done} of {requests} samples answered"
    return wall, cpu, requests


def main() -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--requests", type=int, default=2000, help="requests per client (default 2000)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[32, 256])
    parser.add_argument("--latency", type=float, default=0.05, help="server seconds per request (0.05)")
    args = parser.parse_args()
    logging.getLogger("passk_nb").setLevel(logging.ERROR)
    server = Server(args.latency, minimal=True)
    print(
        f"{args.requests} one-turn requests per client, the minimal asyncio server adding "
        f"{args.latency * 1000:.0f} ms; 2 cores, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    print(f"{'in flight':>9} | {'client':>10} | {'wall':>8} | {'x ideal':>7} | {'CPU/request':>11}")
    print("-" * 58)
    try:
        for concurrency in args.concurrency:
            for name, client in (("bare", bare_run), ("passk-nb", passk_run), ("inspect_ai", inspect_run)):
                wall, cpu, requests = client(server.url, args.requests, concurrency)
                ideal = requests * args.latency / concurrency
                print(
                    f"{concurrency:>9} | {name:>10} | {wall:7.2f}s | {wall / ideal:6.2f}x | "
                    f"{cpu / requests * 1000:8.3f} ms"
                )
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
