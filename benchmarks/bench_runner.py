"""The runner at scale: ``passk_nb.run`` against a local OpenAI-compatible server that takes 50 ms a request.

The server is the project's fake OpenAI-compatible server (``tests/helpers/fake_servers.py``,
HTTP/1.1 keep-alive, replaying the orders suite's known-good scripts) in a process of its
own, adding ``--latency`` (default 50 ms) before every reply. For each concurrency
(default 32, 128, 256) the benchmark runs ``--trials`` trials (default 2,000: the 5 orders
tasks × 400) into a fresh folder and reports:

- **ideal**: ``turns × latency / concurrency``: every one of the ``concurrency`` slots busy
  waiting on the server all the time, nothing else costing anything (turns = requests the
  run made; a trial's turns are sequential, a run has thousands of trials, so the tail is
  negligible);
- **bare client**: the same requests (the same number of trials, each its turns in sequence)
  sent by a plain ``ThreadPoolExecutor`` through the transport the runner uses (an aiohttp
  session on a background loop, :mod:`passk_nb.harness.providers.transport`), with no harness:
  what this machine, this server and the transport can do at all;
- **passk_nb.run**: wall time, its ratio to the ideal and to the bare client, and the
  harness's CPU per turn (this process's CPU time / turns; the server's CPU is reported
  apart, read from ``/proc``).

Target (issue 15): ≤ 1.25× ideal at 256 in flight. On a small machine the bare client
itself cannot reach the ideal (Python's HTTP stack costs CPU per request on both ends), so
the ratio to the bare client is what the harness adds.

    python benchmarks/bench_runner.py [--trials 2000] [--concurrency 32 128 256] [--latency 0.05] [--minimal]

``--minimal`` runs against the floor's minimal asyncio server instead (a fixed answer: every trial
ends after one turn), so that the fake server's own CPU is not the bottleneck at high rates.

``--floor`` measures instead what this machine allows at all: the bare clients (threads +
``httpx.Client``, threads + passk-nb's transport loop, and an ``httpx.AsyncClient`` sending the
same requests) against a minimal asyncio server that only waits ``--latency`` and writes one
fixed reply (a few microseconds of CPU per request), so that neither
the fake server's CPU nor the harness is in the figure.

``--adaptive`` runs instead adaptive against fixed concurrency on a server that serves 4
requests at once and answers 429 above (the figures for ``--adaptive`` in docs/guide/scaling.md).

``--callable`` runs instead the earlier benchmark (issue 2): a Python function agent sleeping
20 ms per turn, 500 trials at concurrency 32, no HTTP; target ≤ 1.25× ideal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

import passk_nb
from passk_nb.harness.providers.http import ConnectionPool, pool_limits
from passk_nb.harness.providers.transport import Limits, Session, on_loop, read_reply

ROOT = Path(__file__).resolve().parents[1]
SUITE = passk_nb.get_suite("orders")
SCRIPTS = {t.prompt: [json.dumps(step) for step in t.script] for t in SUITE.tasks}

_SERVER = """
import sys
sys.path.insert(0, {root!r})
from tests.helpers.fake_servers import FakeServer
with FakeServer("openai", keep_alive=True, latency={latency!r}) as server:
    print(server.url, flush=True)
    sys.stdin.read()  # until the benchmark closes our stdin
"""

#: The floor's server: asyncio, HTTP/1.1 keep-alive, one fixed chat completion ``latency`` after each
#: request (read up to the end of its body), no parsing beyond the headers' Content-Length.
_MINIMAL_SERVER = """
import asyncio, json, socket, sys
BODY = json.dumps({{"id": "bench", "object": "chat.completion", "created": 0, "model": "bench",
    "choices": [{{"index": 0, "finish_reason": "stop",
    "message": {{"role": "assistant", "content": '{{"answer": "done"}}'}}}}],
    "usage": {{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}}}).encode()
HEAD = b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\nContent-Length: %d\\r\\n\\r\\n"
REPLY = HEAD % len(BODY) + BODY

class Reply(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.buffer = transport, b""
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data):
        self.buffer += data
        while (end := self.buffer.find(b"\\r\\n\\r\\n")) >= 0:
            head = self.buffer[:end].lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15:].split(b"\\r\\n", 1)[0]) if at >= 0 else 0
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length:]
            asyncio.get_running_loop().call_later({latency!r}, self.transport.write, REPLY)

async def main():
    server = await asyncio.get_running_loop().create_server(Reply, "127.0.0.1", 0, backlog=1024)
    print(f"http://127.0.0.1:{{server.sockets[0].getsockname()[1]}}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""


class Server:
    """The fake OpenAI-compatible server in its own process (so its CPU is not the harness's);
    ``minimal``: the floor's asyncio server instead."""

    def __init__(self, latency: float, minimal: bool = False):
        code = (_MINIMAL_SERVER if minimal else _SERVER).format(root=str(ROOT), latency=latency)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            raise RuntimeError("the fake server did not start")

    def cpu(self) -> float:
        """CPU seconds the server process has used (user + system, from /proc)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def timed_run(
    url: str, trials_per_task: int, concurrency: int, *, one_turn: bool = False
) -> tuple[float, float, int]:
    """``(wall s, harness CPU s, turns)`` of one ``passk_nb.run`` into a fresh folder (``one_turn``:
    against the minimal server, whose one fixed answer ends every trial after one turn)."""
    with tempfile.TemporaryDirectory() as out:
        wall0, cpu0 = time.perf_counter(), time.process_time()
        df = passk_nb.run(
            "openai",
            "bench",
            base_url=url,
            api_key_env=None,
            trials=trials_per_task,
            concurrency=concurrency,
            out=out,
            progress=False,
        )
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    assert len(df) == len(SUITE.tasks) * trials_per_task, len(df)
    if one_turn:  # "done" without doing anything: a failed check, never the backend's failure
        assert df["n_turns"].eq(1).all() and not df["outcome"].eq("infra_error").any(), df["error"].head()
    else:
        assert df["outcome"].eq("pass").all(), df["error"].dropna().head().tolist()
    return wall, cpu, int(df["n_turns"].sum())


def conversations(trials_per_task: int, one_turn: bool = False) -> list[list[list[dict[str, str]]]]:
    """The requests of the run's trials, each trial's turns in order (the messages sent at each;
    ``one_turn``: the first only)."""
    prompt = SUITE.prompts["default"]
    trials = []
    for task in SUITE.tasks:
        messages = [{"role": "system", "content": prompt}, {"role": "user", "content": task.prompt}]
        turns = []
        for step in SCRIPTS[task.prompt]:
            turns.append(list(messages))
            messages = [*messages, {"role": "assistant", "content": step}, {"role": "user", "content": "ok"}]
        trials.append(turns[:1] if one_turn else turns)
    return trials * trials_per_task


def threaded(trial: Any, jobs: list[Any], concurrency: int) -> tuple[float, float, int]:
    """``trial(job)`` for every job on ``concurrency`` threads: ``(wall s, CPU s, turns)``."""
    start, cpu0 = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(concurrency) as threads:
        n = sum(threads.map(trial, jobs))
    return time.perf_counter() - start, time.process_time() - cpu0, n


def bare_client(
    url: str, trials_per_task: int, concurrency: int, one_turn: bool = False
) -> tuple[float, float, int]:
    """The same conversations through a plain thread pool and a shared httpx pool: ``(wall, CPU, turns)``."""
    jobs = conversations(trials_per_task, one_turn)
    connections = ConnectionPool(
        lambda n: httpx.Client(base_url=url, limits=pool_limits(n), timeout=60), concurrency
    )

    def trial(turns: list[list[dict[str, str]]]) -> int:
        for messages in turns:
            with connections.client() as client:
                reply = client.post("/v1/chat/completions", json={"model": "bench", "messages": messages})
            reply.raise_for_status()
            reply.json()["choices"][0]["message"]["content"]
        return len(turns)

    try:
        return threaded(trial, jobs, concurrency)
    finally:
        connections.close()


def loop_client(
    url: str, trials_per_task: int, concurrency: int, one_turn: bool = False
) -> tuple[float, float, int]:
    """The same conversations through a plain thread pool and passk-nb's transport (an aiohttp
    session on the background loop, :mod:`passk_nb.harness.providers.transport`), no harness."""
    jobs = conversations(trials_per_task, one_turn)
    session = Session(concurrency, timeout=60.0)
    limits = Limits(60.0, 2**25, 2**27, RuntimeError, RuntimeError, lambda *a: RuntimeError(a))
    endpoint = f"{url}/v1/chat/completions"

    def trial(turns: list[list[dict[str, str]]]) -> int:
        for messages in turns:
            payload = json.dumps({"model": "bench", "messages": messages}).encode()
            received, raw = on_loop(read_reply(session, endpoint, payload, limits))
            assert received.status_code == 200
            json.loads(raw)["choices"][0]["message"]["content"]
        return len(turns)

    try:
        return threaded(trial, jobs, concurrency)
    finally:
        session.close()


def async_client(
    url: str, trials_per_task: int, concurrency: int, one_turn: bool = False
) -> tuple[float, float, int]:
    """The same conversations through one ``httpx.AsyncClient`` and asyncio tasks, ``concurrency``
    trials at a time: ``(wall, CPU, turns)``."""
    jobs = conversations(trials_per_task, one_turn)

    async def main() -> int:
        async with httpx.AsyncClient(base_url=url, limits=pool_limits(concurrency), timeout=60) as client:
            slots = asyncio.Semaphore(concurrency)

            async def trial(turns: list[list[dict[str, str]]]) -> int:
                async with slots:
                    for messages in turns:
                        reply = await client.post(
                            "/v1/chat/completions", json={"model": "bench", "messages": messages}
                        )
                        reply.raise_for_status()
                        reply.json()["choices"][0]["message"]["content"]
                return len(turns)

            return sum(await asyncio.gather(*(trial(turns) for turns in jobs)))

    start, cpu0 = time.perf_counter(), time.process_time()
    n = asyncio.run(main())
    return time.perf_counter() - start, time.process_time() - cpu0, n


def floor_benchmark(args: argparse.Namespace) -> None:
    """The bare clients against the minimal server: what this machine and httpx allow at all."""
    trials_per_task = max(1, args.trials // len(SUITE.tasks))
    server = Server(args.latency, minimal=True)
    try:
        bare_client(server.url, 2, 8)  # warm-up
        print(
            f"\nfloor: the bare clients against a minimal asyncio server (a fixed reply "
            f"{args.latency * 1000:.0f} ms after each request), {trials_per_task * len(SUITE.tasks)} trials"
        )
        header = (
            f"{'in flight':>9} | {'client':<27} | {'wall':>7} | {'x ideal':>7} | {'CPU/turn':>9} | "
            "server CPU/turn"
        )
        print(header)
        print("-" * len(header))
        for concurrency in args.concurrency:
            for name, client in (
                ("threads + httpx.Client", bare_client),
                ("threads + transport loop", loop_client),
                ("asyncio + httpx.AsyncClient", async_client),
            ):
                server_cpu0 = server.cpu()
                wall, cpu, turns = client(server.url, trials_per_task, concurrency)
                server_cpu = server.cpu() - server_cpu0
                ideal = turns * args.latency / concurrency
                print(
                    f"{concurrency:>9} | {name:<27} | {wall:>6.2f}s | {wall / ideal:>6.2f}x | "
                    f"{1000 * cpu / turns:>6.3f} ms | {1000 * server_cpu / turns:.3f} ms",
                    flush=True,
                )
    finally:
        server.close()


def http_benchmark(args: argparse.Namespace) -> bool:
    trials_per_task = max(1, args.trials // len(SUITE.tasks))
    n_trials = trials_per_task * len(SUITE.tasks)
    one_turn = args.minimal
    server = Server(args.latency, minimal=one_turn)
    ok = True
    try:
        timed_run(server.url, 2, 8, one_turn=one_turn)  # warm-up: imports, first parquet write
        load = os.getloadavg()
        what = (
            "the minimal asyncio server (one fixed answer: one-turn trials)"
            if one_turn
            else "local OpenAI-compatible fake server"
        )
        print(
            f"{n_trials} trials (orders suite), {what} adding "
            f"{args.latency * 1000:.0f} ms per request; {os.cpu_count()} cores, load average "
            f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the start"
        )
        header = (
            f"{'in flight':>9} | {'turns':>6} | {'ideal':>6} | {'bare client':>19} | {'passk_nb.run':>19} | "
            f"{'x bare':>6} | {'CPU/turn run':>12} | {'CPU/turn bare':>13} | {'server CPU/turn':>15}"
        )
        print(header)
        print("-" * len(header))
        for concurrency in args.concurrency:
            bare, bare_cpu, bare_turns = loop_client(server.url, trials_per_task, concurrency, one_turn)
            server_cpu0 = server.cpu()
            wall, cpu, turns = timed_run(server.url, trials_per_task, concurrency, one_turn=one_turn)
            server_cpu = server.cpu() - server_cpu0
            ideal = turns * args.latency / concurrency
            bare_ideal = bare_turns * args.latency / concurrency
            ratio = wall / ideal
            print(
                f"{concurrency:>9} | {turns:>6} | {ideal:>5.2f}s | "
                f"{bare:>6.2f}s ({bare / bare_ideal:5.2f}x ideal) | {wall:>6.2f}s ({ratio:5.2f}x ideal) | "
                f"{wall / bare * bare_turns / turns:>5.2f}x | {1000 * cpu / turns:>9.3f} ms | "
                f"{1000 * bare_cpu / bare_turns:>10.3f} ms | {1000 * server_cpu / turns:>12.3f} ms",
                flush=True,
            )
            if concurrency == 256 and ratio > 1.25:
                ok = False
    finally:
        server.close()
    print(
        "ideal = turns x latency / in flight; bare client = a thread pool sending the same requests "
        "through passk-nb's transport with no harness; x bare = passk_nb.run's wall time per turn against "
        "the bare client's; CPU/turn = this process's CPU (harness + transport, or transport alone) "
        "per request"
    )
    return ok


# -- the earlier in-process benchmark (issue 2) ------------------------------------------------------


def make_agent(sleep_s: float):
    def agent(messages):
        if sleep_s:
            time.sleep(sleep_s)
        return SCRIPTS[messages[1]["content"]][sum(m["role"] == "assistant" for m in messages)]

    return agent


def callable_benchmark() -> bool:
    sleep_s, trials, concurrency = 0.020, 100, 32
    turns = trials * sum(len(t.script) for t in SUITE.tasks)

    def timed(s: float) -> tuple[float, float]:
        with tempfile.TemporaryDirectory() as out:
            wall0, cpu0 = time.perf_counter(), time.process_time()
            passk_nb.run(make_agent(s), trials=trials, concurrency=concurrency, out=out, progress=False)
            return time.perf_counter() - wall0, time.process_time() - cpu0

    timed(0.0)
    ideal = turns * sleep_s / concurrency
    wall, _ = timed(sleep_s)
    _, cpu = timed(0.0)
    print(
        f"function agent, {5 * trials} trials, {turns} turns, {sleep_s * 1000:.0f} ms per turn, "
        f"{concurrency} in flight: {wall:.2f} s = {wall / ideal:.2f}x ideal; "
        f"harness CPU per turn {1000 * cpu / turns:.3f} ms"
    )
    return wall / ideal <= 1.25


def adaptive_benchmark(repeats: int = 5, admit: int = 4) -> None:
    """A server that serves ``admit`` requests at once and answers 429 above; 32 trials in flight,
    with and without adaptive concurrency: trials lost, requests refused, requests held."""
    import logging

    sys.path.insert(0, str(ROOT))
    from tests.helpers.fake_servers import FakeServer

    logging.disable(logging.WARNING)  # the fixed pool's retry warnings
    for adaptive in (True, False):
        for _ in range(repeats if adaptive else 1):
            server = FakeServer("openai", admit=admit, latency=0.03)
            with tempfile.TemporaryDirectory() as out, server:
                df = passk_nb.run(
                    "openai",
                    "m",
                    base_url=server.url,
                    trials=16,
                    concurrency=32,
                    adaptive=adaptive,
                    out=out,
                    progress=False,
                    backoff_base=0.02,
                    backoff_max=0.2,
                )
            later = server.admitted[len(server.admitted) // 2 :]
            print(
                f"{'adaptive' if adaptive else 'fixed 32'}: {len(df)} trials, "
                f"{int((df['outcome'] == 'infra_error').sum())} lost to infra errors; "
                f"{server.rejected} of {len(server.admitted) + server.rejected} requests refused; "
                f"the server held {sum(later) / len(later):.2f} on average (second half, of {admit})"
            )


def make_busy_agent(cpu_s: float):
    """The known-good script, computing ``cpu_s`` seconds of pure Python per turn (holding the GIL)."""

    def agent(messages):
        end = time.thread_time() + cpu_s  # this thread's own CPU, as a worker process would count it
        while time.thread_time() < end:
            sum(range(200))
        return SCRIPTS[messages[1]["content"]][sum(m["role"] == "assistant" for m in messages)]

    return agent


def workers_benchmark(workers: int = 2, cpu_s: float = 0.01, trials: int = 20) -> None:
    """A CPU-bound function agent: threads against ``workers`` processes, same run, same agent."""
    agent = make_busy_agent(cpu_s)
    turns = trials * sum(len(t.script) for t in SUITE.tasks)

    def timed(**options: object) -> float:
        with tempfile.TemporaryDirectory() as out:
            wall0 = time.perf_counter()
            passk_nb.run(agent, trials=trials, out=out, progress=False, version="bench", **options)
            return time.perf_counter() - wall0

    threads = timed(concurrency=workers * 2)
    pool = timed(workers=workers, concurrency=workers * 2)
    print(
        f"CPU-bound function agent ({cpu_s * 1000:.0f} ms of CPU per turn, {turns} turns, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}): threads {threads:.2f} s, "
        f"workers={workers} {pool:.2f} s: {threads / pool:.2f}x faster (one core's work: "
        f"{turns * cpu_s:.2f} s)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=2000, help="trials per concurrency (default 2000)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[32, 128, 256])
    parser.add_argument("--latency", type=float, default=0.05, help="server seconds per request (0.05)")
    parser.add_argument(
        "--minimal",
        action="store_true",
        help="run against the minimal asyncio server (one-turn trials) instead of the fake server",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--callable",
        action="store_true",
        help="only the in-process function-agent run (target ≤ 1.25x ideal, issue 2)",
    )
    mode.add_argument(
        "--adaptive",
        action="store_true",
        help="only adaptive vs fixed concurrency, a server admitting 4 at once (docs/guide/scaling.md)",
    )
    mode.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="only a CPU-bound function agent on threads against N worker processes (run(workers=N))",
    )
    mode.add_argument(
        "--floor",
        action="store_true",
        help="only the bare clients against a minimal asyncio server (no target)",
    )
    args = parser.parse_args()
    if args.floor:
        floor_benchmark(args)
        return 0
    if args.workers:
        workers_benchmark(args.workers)
        return 0
    if args.adaptive:
        adaptive_benchmark()
        return 0
    if args.callable:
        ok = callable_benchmark()
        print("PASS" if ok else "target missed: ≤ 1.25x ideal for the function agent")
        return 0 if ok else 1
    ok = http_benchmark(args)
    print("PASS" if ok else "target missed: ≤ 1.25x ideal at 256 in flight (see the bare client's figure)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
