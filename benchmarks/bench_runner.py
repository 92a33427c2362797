"""The runner at the transport's limit: ``passk_nb.run`` against a bare asyncio + aiohttp client.

The baseline (issue 50) is what the machine, the server and the transport allow at all: a bare
asyncio + aiohttp client (:func:`bare_asyncio_client`) sending the run's own request bodies (the
openai provider's, a seed per trial) with the same concurrency, reading each reply's message,
and nothing else. Both clients post to the floor's minimal asyncio server (its own process, a
fixed chat completion ``latency`` after each request: every trial ends after one turn) and each
measurement runs in a fresh process, alternating bare / passk ``--reps`` times (medians). Cells:
32 and 256 in flight x 50 ms, 1,024 x 1 s, each on uvloop and on asyncio's own loop when uvloop
is installed. Reported: wall time and CPU per trial (the client process's CPU time, its
children's included) of both, and their ratios. Issue 50's targets: CPU <= 1.5x the bare
client's in every cell, wall <= 1.1x at 1,024 x 1 s.

    python benchmarks/bench_runner.py [--trials 3000] [--reps 3] [--quick] [--fake]
        [--concurrency 32 256 --latency 0.05]

``--quick`` (development): 300 trials, one rep. ``--fake``: against the fake OpenAI-compatible
server replaying the orders suite's known-good scripts (multi-turn trials) instead.
``--concurrency``/``--latency``: those cells instead of the three.

``--floor`` measures instead what this machine allows at all: the bare clients (threads +
``httpx.Client``, threads + passk-nb's transport loop, and an ``httpx.AsyncClient`` sending the
same requests) against a minimal asyncio server that only waits ``--latency`` and writes one
fixed reply (a few microseconds of CPU per request), so that neither
the fake server's CPU nor the harness is in the figure.

``--adaptive`` runs instead adaptive against fixed concurrency on a server that serves 4
requests at once and answers 429 above (the figures for ``--adaptive`` in docs/guide/scaling.md).

``--callable`` runs instead the earlier benchmark (issue 2): a Python function agent sleeping
20 ms per turn, 500 trials at concurrency 32, no HTTP; target ≤ 1.25× ideal.

``--workers N`` runs instead one-turn HTTP trials in one process against ``run(workers=N)`` (256 in
flight x 5 ms, CPU-bound), with the cores each used (CPU seconds over wall seconds) and the rates
their CPU per trial allows on two idle cores. On a machine with kernel autogroup scheduling
(``/proc/sys/kernel/sched_autogroup_enabled``) the CPU is shared between sessions first: a run and
its forked workers are one session, so under load they get one session's share whatever their
number, and the measured rate ratio is the ratio of the shares given, not what the workers can do.
``--own-session`` starts each measurement in a session of its own (``setsid``; its workers stay in
it).
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

#: The chat completion the minimal server answers every request with (``--harness``: the canned reply).
MINIMAL_REPLY = json.dumps(
    {
        "id": "bench",
        "object": "chat.completion",
        "created": 0,
        "model": "bench",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": '{"answer": "done"}'},
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
).encode()

#: The floor's server: asyncio, HTTP/1.1 keep-alive, one fixed chat completion ``latency`` after each
#: request (read up to the end of its body), no parsing beyond the headers' Content-Length.
_MINIMAL_SERVER = """
import asyncio, json, socket, sys
BODY = {body!r}
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
        code = (_MINIMAL_SERVER if minimal else _SERVER).format(
            root=str(ROOT), latency=latency, body=MINIMAL_REPLY
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            raise RuntimeError("the fake server did not start")

    def cpu(self) -> float:
        """CPU seconds the server process has used (user + system, from /proc)."""
        return stat_cpu(Path(f"/proc/{self.proc.pid}/stat"))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def timed_run(
    url: str, trials_per_task: int, concurrency: int, *, one_turn: bool = False, workers: int | None = None
) -> tuple[float, float, int]:
    """``(wall s, harness CPU s, turns)`` of one ``passk_nb.run`` into a fresh folder (``one_turn``:
    against the minimal server, whose one fixed answer ends every trial after one turn; ``workers``:
    ``run(workers=)``, whose processes' CPU the caller adds)."""
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
            workers=workers,
        )
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    assert len(df) == len(SUITE.tasks) * trials_per_task, len(df)
    if one_turn:  # "done" without doing anything: a failed check, never the backend's failure
        odd = df[df["n_turns"].ne(1) | df["outcome"].eq("infra_error")]
        assert odd.empty, (
            f"{len(odd)} trials not one turn or failed by the backend: {odd['error'].head().tolist()}"
        )
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


def request_bodies(url: str, trials_per_task: int, one_turn: bool = False) -> list[list[dict[str, Any]]]:
    """The request bodies of the run's trials as ``passk_nb.run`` sends them (the openai provider's
    ``request_body``, a seed per trial), each trial's turns in order."""
    from passk_nb.harness.providers import make_provider

    provider = make_provider("openai", "bench", base_url=url, api_key_env=None)
    out = []
    for trial, turns in enumerate(conversations(trials_per_task, one_turn)):
        seeded: Any = provider.with_seed(trial)
        out.append([seeded.request_body(m) for m in turns])
    provider.close()
    return out


async def _bare_asyncio(url: str, jobs: list[list[dict[str, Any]]], concurrency: int) -> int:
    """``concurrency`` asyncio tasks taking the trials in turn, each POSTing its bodies (encoded as
    it sends them, as any client builds its request) through one aiohttp session (``concurrency``
    kept-alive connections) and reading each reply's message."""
    import aiohttp

    endpoint = f"{url}/v1/chat/completions"
    todo = iter(jobs)
    headers = {"Content-Type": "application/json"}

    async def worker(session: aiohttp.ClientSession) -> int:
        n = 0
        for turns in todo:
            for body in turns:
                data = json.dumps(body, ensure_ascii=False).encode()
                async with session.post(endpoint, data=data, headers=headers) as reply:
                    raw = await reply.read()
                assert reply.status == 200, reply.status
                json.loads(raw)["choices"][0]["message"]["content"]
                n += 1
        return n

    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        return sum(await asyncio.gather(*(worker(session) for _ in range(min(concurrency, len(jobs))))))


def bare_asyncio_client(
    url: str, trials_per_task: int, concurrency: int, one_turn: bool = False
) -> tuple[float, float, int]:
    """THE baseline: the run's request bodies sent by a bare asyncio + aiohttp client, ``concurrency``
    at a time (on uvloop when it imports): ``(wall s, CPU s, turns)``."""
    jobs = request_bodies(url, trials_per_task, one_turn)
    start, cpu0 = time.perf_counter(), time.process_time()
    with asyncio.Runner(loop_factory=_loop_factory(uvloop_installed())) as runner:
        n = runner.run(_bare_asyncio(url, jobs, concurrency))
    return time.perf_counter() - start, time.process_time() - cpu0, n


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def canned_replies(latency: float) -> None:
    """Replace the openai provider's HTTP exchange by :data:`MINIMAL_REPLY`, ``latency`` seconds
    after the request (an ``asyncio.sleep``, no socket): what the harness alone costs (``--harness``).
    Everything else of ``passk_nb.run`` (the preflight against the server included) is unchanged."""
    from multidict import CIMultiDict

    from passk_nb.harness.providers import http
    from passk_nb.harness.providers.transport import Received

    headers = CIMultiDict({"Content-Type": "application/json"})

    async def canned(session: Session, url: str, payload: bytes, limits: Limits) -> tuple[Received, bytes]:
        if latency:
            await asyncio.sleep(latency)
        return Received(200, headers, None), MINIMAL_REPLY

    http.read_reply = canned  # type: ignore[assignment]


def stat_cpu(stat: Path) -> float:
    """CPU seconds (user + system) of the process or thread whose ``/proc/…/stat`` is ``stat``."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each thread of this process so far, by name (``passk-http``: the transport
    loop's), from ``/proc/self/task``."""
    import threading

    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            used = stat_cpu(Path(f"/proc/self/task/{tid}/stat"))
        except OSError:  # the thread ended meanwhile
            continue
        name = names.get(int(tid), "other")
        out[name] = out.get(name, 0.0) + used
    return out


def measure_one(args: argparse.Namespace) -> None:
    """One measurement in this (fresh) process, printed as one JSON line: what ``--measure`` runs."""
    if args.no_uvloop:
        sys.modules["uvloop"] = None  # type: ignore[assignment]  # `import uvloop` now fails everywhere
    trials_per_task = max(1, args.trials // len(SUITE.tasks))
    one_turn = not args.fake
    if args.measure == "harness":
        canned_replies(args.latency)
    child0 = _children_cpu()
    threads: dict[str, float] = {}
    if args.measure == "bare":
        bare_asyncio_client(args.url, 1, 8, one_turn)  # warm-up: imports, first connections
        wall, cpu, turns = bare_asyncio_client(args.url, trials_per_task, args.concurrency[0], one_turn)
    else:
        timed_run(args.url, 1, 8, one_turn=one_turn)  # warm-up: imports, first parquet write
        before = thread_cpu()
        wall, cpu, turns = timed_run(
            args.url, trials_per_task, args.concurrency[0], one_turn=one_turn, workers=args.run_workers
        )
        threads = {name: used - before.get(name, 0.0) for name, used in thread_cpu().items()}
    children = _children_cpu() - child0
    print(
        json.dumps(
            {"wall": wall, "cpu": cpu + children, "children": children, "turns": turns, "threads": threads}
        ),
        flush=True,
    )


def measured(
    client: str,
    url: str,
    args: argparse.Namespace,
    concurrency: int,
    uvloop: bool,
    workers: int | None = None,
) -> dict[str, float]:
    """:func:`measure_one` in a fresh process (neither client inherits the other's state): wall and
    CPU (the process's and its children's) of the client side alone."""
    command = [
        sys.executable, __file__, "--measure", client, "--url", url, "--trials", str(args.trials),
        "--concurrency", str(concurrency), "--latency", str(args.latency),
    ]  # fmt: skip
    command += ([] if uvloop else ["--no-uvloop"]) + (["--fake"] if args.fake else [])
    command += [] if workers is None else ["--run-workers", str(workers)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, env=env, start_new_session=args.own_session
    )
    if done.returncode:
        raise RuntimeError(f"{client} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


#: The cells of the default benchmark (issue 50): (in flight, server latency s).
CELLS = ((32, 0.05), (256, 0.05), (1024, 1.0))


def uvloop_installed() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def baseline_benchmark(args: argparse.Namespace) -> None:
    """``passk_nb.run`` against the bare asyncio + aiohttp client, same server, same bodies, same
    concurrency, alternating, ``--reps`` times each, each in a fresh process: medians of wall time
    and of CPU per trial, and their ratios."""
    import statistics

    cells = [(c, args.latency) for c in args.concurrency] if args.concurrency_given else list(CELLS)
    loops = [True, False] if uvloop_installed() else [False]
    load = os.getloadavg()
    what = "the fake server (multi-turn)" if args.fake else "the minimal asyncio server (one-turn trials)"
    print(
        f"{args.trials} trials per client and cell, {what} in its own process; {args.reps} reps, "
        f"medians; {os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in load)} at the start"
    )
    header = (
        f"{'cell':>12} | {'loop':>7} | {'bare wall':>9} | {'run wall':>9} | {'x wall':>6} | "
        f"{'bare CPU/turn':>13} | {'run CPU/turn':>12} | {'x CPU':>6}"
    )
    print(header)
    print("-" * len(header))
    servers: dict[float, Server] = {}
    try:
        for concurrency, latency in cells:
            if latency not in servers:
                servers[latency] = Server(latency, minimal=not args.fake)
            sub = argparse.Namespace(**{**vars(args), "latency": latency})
            for uv in loops:
                runs: dict[str, list[dict[str, float]]] = {"bare": [], "passk": []}
                for _ in range(args.reps):
                    for client in ("bare", "passk"):
                        runs[client].append(measured(client, servers[latency].url, sub, concurrency, uv))
                b, p = (
                    {
                        "wall": statistics.median(r["wall"] for r in runs[c]),
                        "cpu": statistics.median(r["cpu"] / r["turns"] for r in runs[c]),
                    }
                    for c in ("bare", "passk")
                )
                print(
                    f"{concurrency:>5} x {latency * 1000:>4.0f}ms | {'uvloop' if uv else 'asyncio':>7} | "
                    f"{b['wall']:>8.2f}s | {p['wall']:>8.2f}s | {p['wall'] / b['wall']:>5.2f}x | "
                    f"{b['cpu'] * 1000:>10.3f} ms | {p['cpu'] * 1000:>9.3f} ms | "
                    f"{p['cpu'] / b['cpu']:>5.2f}x",
                    flush=True,
                )
    finally:
        for server in servers.values():
            server.close()
    load = os.getloadavg()
    print(
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end. bare = asyncio + aiohttp "
        "posting the run's request bodies with the same concurrency; CPU/turn = the client process's "
        "CPU (its children's included) per request; x = passk_nb.run / bare (issue 50's targets: CPU "
        "<= 1.5x, wall at 1,024 x 1 s <= 1.1x)"
    )


#: The cells of ``--harness``: (in flight, seconds before the canned reply).
HARNESS_CELLS = ((256, 0.0), (32, 0.05), (256, 0.05))


async def _sleeps(concurrency: int, latency: float, n: int) -> None:
    left = [n]

    async def worker() -> None:
        while left[0] > 0:
            left[0] -= 1
            await asyncio.sleep(latency)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def harness_benchmark(args: argparse.Namespace) -> None:
    """``passk_nb.run`` with the HTTP exchange replaced by a canned reply (:func:`canned_replies`),
    each measurement in a fresh process, ``--reps`` times (medians): the harness's own CPU per
    one-turn trial, split between the transport loop's thread (the trials) and the main thread
    (records, parts, the merge), back to back and in bursts; beside it, what ``concurrency`` tasks
    that only sleep ``latency`` per trial cost on the same loop (the timers and wake-ups alone)."""
    import statistics

    loops = [True, False] if uvloop_installed() else [False]
    print(
        f"{args.trials} one-turn trials, the reply canned; {args.reps} reps, medians; {os.cpu_count()} "
        f"cores, load average {os.getloadavg()[0]:.2f} at the start"
    )
    header = (
        f"{'cell':>12} | {'loop':>7} | {'CPU/trial':>9} | {'trials':>8} | {'records':>8} | "
        f"{'sleeps alone':>12}"
    )
    print(header + "\n" + "-" * len(header))
    server = Server(0.0, minimal=True)  # the preflight's; no trial reaches it
    back_to_back: float | None = None
    try:
        for concurrency, latency in HARNESS_CELLS:
            sub = argparse.Namespace(**{**vars(args), "latency": latency})
            for uv in loops:
                runs = [measured("harness", server.url, sub, concurrency, uv) for _ in range(args.reps)]
                per = {
                    what: statistics.median(r["threads"].get(name, 0.0) / r["turns"] for r in runs)
                    for what, name in (("trials", "passk-http"), ("records", "MainThread"))
                }
                with asyncio.Runner(loop_factory=_loop_factory(uv)) as runner:
                    cpu0 = time.process_time()
                    runner.run(_sleeps(concurrency, latency, args.trials))
                    sleeps = (time.process_time() - cpu0) / args.trials
                if latency == 0 and back_to_back is None:
                    back_to_back = statistics.median(r["cpu"] / r["turns"] for r in runs)
                print(
                    f"{concurrency:>5} x {latency * 1000:>4.0f}ms | {'uvloop' if uv else 'asyncio':>7} | "
                    f"{statistics.median(r['cpu'] / r['turns'] for r in runs) * 1000:>6.3f} ms | "
                    f"{per['trials'] * 1000:>5.3f} ms | {per['records'] * 1000:>5.3f} ms | "
                    f"{sleeps * 1000:>9.4f} ms",
                    flush=True,
                )
        pieces = harness_pieces(server.url)
    finally:
        server.close()
    print("\nthe pieces that can be timed alone, per one-turn trial (best of 3):")
    for name, seconds in pieces:
        print(f"{seconds * 1e6:>7.1f} µs  {name}")
    total = sum(seconds for _, seconds in pieces)
    print(f"{total * 1e6:>7.1f} µs  together", end="")
    if back_to_back is not None:
        rest = back_to_back - total
        print(
            f", of {back_to_back * 1e6:.0f} µs back to back ({HARNESS_CELLS[0][0]} x 0 ms, the first loop); "
            f"the other {rest * 1e6:.0f} µs: the provider layers, the trial's scaffolding, the episode's own "
            "steps, the event loop"
        )
    print(
        f"load average {os.getloadavg()[0]:.2f} at the end. CPU/trial: the run's process per trial; "
        "trials: its transport loop's thread (the trials themselves); records: its main thread (the "
        "records, their parts and the merge); sleeps alone: tasks that only sleep, same loop and cell"
    )


def _per_call(fn: Any, n: int) -> float:
    """Seconds of CPU per call of ``fn()``, the best of three rounds of ``n`` calls."""
    best = float("inf")
    for _ in range(3):
        cpu0 = time.process_time()
        for _ in range(n):
            fn()
        best = min(best, (time.process_time() - cpu0) / n)
    return best


def harness_pieces(url: str, part_records: int = 600, run_records: int = 6000) -> list[tuple[str, float]]:
    """CPU per one-turn trial of the pieces of the harness that can be timed alone, each called on
    what a canned run (:func:`canned_replies`) gives it, best of three rounds: ``(piece, seconds)``.
    The records' pieces are per record, at ``part_records`` a part (a second's records at 32 x 50 ms)
    and a run of ``run_records``."""
    import random

    import pyarrow.parquet as pq

    from passk_nb.data.records import frame_from_table, storable_record, table_from_records
    from passk_nb.data.store import write_part
    from passk_nb.harness.grading import judge
    from passk_nb.harness.providers import make_provider

    with tempfile.TemporaryDirectory() as out:
        passk_nb.run("openai", "bench", base_url=url, api_key_env=None, trials=1, out=out, progress=False)
        parts = sorted(Path(out).rglob("*.parquet"))
        records = pq.read_table(parts[0]).to_pylist()
    task = SUITE.tasks[0]
    provider: Any = make_provider("openai", "bench", base_url=url, api_key_env=None)
    messages = conversations(1, one_turn=True)[0][0]  # a trial's first (and only) turn, as sent
    state = SUITE.make_env().final_state()
    record = records[0]
    rng = random.Random(0)
    run = [{**records[i % len(records)], "trial": i} for i in range(run_records)]
    rng.shuffle(run)
    part = run[:part_records]
    table = table_from_records(run, storable=True)
    with tempfile.TemporaryDirectory() as out:
        pieces = [
            ("the trial's environment (make_env: the initial state copied)", _per_call(SUITE.make_env, 2000)),
            (
                "the request body and its JSON (the bare client's JSON too)",
                _per_call(
                    lambda: json.dumps(provider.request_body(messages), ensure_ascii=False).encode(), 2000
                ),
            ),
            (
                "the reply's JSON and its fields",
                _per_call(lambda: provider.read_reply(json.loads(MINIMAL_REPLY)), 2000),
            ),
            (
                "the judge and the claims check",
                _per_call(
                    lambda: judge(SUITE, task, state, state, final_answer='{"answer": "done"}', seen=[]), 2000
                ),
            ),
            ("the record's boundary (storable_record)", _per_call(lambda: storable_record(record), 2000)),
            (
                "the Arrow table of a part",
                _per_call(lambda: table_from_records(part, storable=True), 20) / part_records,
            ),
            (
                "the part's parquet file, on disk",
                _per_call(lambda: write_part(table.slice(0, part_records), out, "p"), 20) / part_records,
            ),
            ("the merge: the run's parts sorted and written once", _merge_cost(table, part_records, out)),
            ("the returned DataFrame", _per_call(lambda: frame_from_table(table), 3) / run_records),
        ]
    provider.close()
    return pieces


def _merge_cost(table: Any, part_records: int, out: str) -> float:
    """CPU per record of merging ``table`` (records out of key order) from parts of ``part_records``
    this process wrote (``merge_known``, as a run's end does), best of three rounds. The first merge
    of a process costs several times more: its memory is touched for the first time."""
    from passk_nb.data.store import merge_known, write_part

    best = float("inf")
    for round_ in range(3):
        run_id = f"merge{round_}"
        known = {}
        for at in range(0, table.num_rows, part_records):
            part = table.slice(at, part_records)
            known[write_part(part, out, run_id)] = part
        cpu0 = time.process_time()
        merge_known(out, run_id, known)
        best = min(best, (time.process_time() - cpu0) / table.num_rows)
    return best


def _loop_factory(uv: bool) -> Any:
    if not uv:
        return asyncio.new_event_loop
    import uvloop

    return uvloop.new_event_loop


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
                ("asyncio + aiohttp", bare_asyncio_client),
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


#: The CPU-bound cell of the HTTP workers benchmark: many in flight, a short server latency.
WORKERS_CELL = (256, 0.005)


def http_workers_benchmark(args: argparse.Namespace) -> None:
    """One-turn HTTP trials in one process against ``run(workers=N)``, same server, same run,
    alternating, ``--reps`` times each in a fresh process: medians of the trial rate and of the
    CPU per trial of the client side (the run's process and its workers), and the load average."""
    import statistics

    concurrency, latency = (args.concurrency[0], args.latency) if args.concurrency_given else WORKERS_CELL
    sub = argparse.Namespace(**{**vars(args), "latency": latency})
    load0 = os.getloadavg()
    server = Server(latency, minimal=True)
    runs: dict[int | None, list[dict[str, float]]] = {None: [], args.workers: []}
    server_cpu: dict[int | None, list[float]] = {None: [], args.workers: []}
    try:
        for _ in range(args.reps):
            for workers in runs:
                cpu0 = server.cpu()
                runs[workers].append(
                    measured("passk", server.url, sub, concurrency, uvloop_installed(), workers)
                )
                server_cpu[workers].append((server.cpu() - cpu0) / runs[workers][-1]["turns"])
    finally:
        server.close()
    load1 = os.getloadavg()
    rate = {w: statistics.median(r["turns"] / r["wall"] for r in rs) for w, rs in runs.items()}
    cpu = {w: statistics.median(r["cpu"] / r["turns"] for r in rs) for w, rs in runs.items()}
    child = {w: statistics.median(r["children"] / r["turns"] for r in rs) for w, rs in runs.items()}
    loads = " ".join(f"{x:.2f}" for x in load0), " ".join(f"{x:.2f}" for x in load1)
    loop = "uvloop" if uvloop_installed() else "asyncio"
    print(
        f"HTTP one-turn trials, {args.trials} per run, {concurrency} in flight x {latency * 1000:.0f} ms "
        f"(minimal asyncio server, own process), {loop}; {args.reps} reps, medians; {os.cpu_count()} "
        f"cores; load average {loads[0]} at the start, {loads[1]} at the end"
    )
    for workers in runs:
        name = "one process" if workers is None else f"workers={workers}"
        reps = ", ".join(f"{r['turns'] / r['wall']:.0f}" for r in runs[workers])
        served = statistics.median(server_cpu[workers]) * 1000
        own = cpu[workers] - child[workers]
        print(
            f"{name:>12}: {rate[workers]:8.0f} trials/s (reps: {reps}), client CPU "
            f"{cpu[workers] * 1000:.3f} ms/trial (the run's process {own * 1000:.3f}"
            f" + its workers {child[workers] * 1000:.3f}), server CPU "
            f"{served:.3f} ms/trial"
        )
    ratio = rate[args.workers] / rate[None]
    print(f"workers={args.workers} / one process: {ratio:.2f}x the trial rate (target >= 1.8x)")
    print_cores_used(runs, cpu, statistics.median(server_cpu[None]), args.workers)


def print_cores_used(
    runs: dict[int | None, list[dict[str, float]]], cpu: dict[int | None, float], server: float, workers: int
) -> None:
    """What the rates above can say on this machine: the cores each variant used (its CPU seconds
    over its wall seconds) and, from the CPU per trial, the rates two idle cores would allow.

    With the kernel's autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``) the CPU is
    shared between sessions first: a run and its forked workers are one session, so on a loaded
    machine they get one session's share however many processes they are, and the rate ratio is the
    ratio of the shares they were given, not of what the workers can do."""
    import statistics

    used = {w: statistics.median(r["cpu"] / r["wall"] for r in rs) for w, rs in runs.items()}
    try:
        autogroup = Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        autogroup = False
    print(
        f"cores used (client CPU s / wall s): one process {used[None]:.2f}, workers={workers} "
        f"{used[workers]:.2f}; kernel autogroup scheduling {'on' if autogroup else 'off'}"
    )
    one = (
        1 / (cpu[None] + 0.0) if cpu[None] else float("nan")
    )  # one loop on one core (the server on the other)
    many = 2 / (cpu[workers] + server) if cpu[workers] else float("nan")  # the run, its workers, the server
    print(
        f"on two idle cores the CPU per trial allows: one process {one:.0f} trials/s, workers={workers} "
        f"{many:.0f} trials/s: {many / one:.2f}x (an estimate from CPU seconds, not a measured rate)"
    )


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
    parser.add_argument(
        "--trials",
        type=int,
        help="trials per client and cell (default 3000; --workers: 30000, a run long enough that its start "
        "and its merge at the end, one process's work, do not decide the rate)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        help="in flight (default: the cells 32 / 256 x 50 ms, 1,024 x 1 s)",
    )
    parser.add_argument("--latency", type=float, default=0.05, help="server seconds per request (0.05)")
    parser.add_argument("--reps", type=int, default=3, help="measurements per client and cell (median; 3)")
    parser.add_argument("--quick", action="store_true", help="development: 300 trials, one rep")
    parser.add_argument(
        "--fake",
        action="store_true",
        help="against the fake server replaying the orders scripts (multi-turn trials) instead",
    )
    parser.add_argument("--measure", choices=["bare", "passk", "harness"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--no-uvloop", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--run-workers", type=int, help=argparse.SUPPRESS)
    parser.add_argument(
        "--own-session",
        action="store_true",
        help="run each measurement in a session of its own (setsid: its own autogroup, see --workers)",
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
        help="only run(workers=N) against one process: HTTP one-turn trials (256 x 5 ms, CPU-bound) and "
        "a CPU-bound function agent on threads",
    )
    mode.add_argument(
        "--harness",
        action="store_true",
        help="only passk_nb.run with the HTTP exchange replaced by a canned reply: the harness's own CPU "
        "per trial, back to back (256 x 0 ms) and in bursts (32 / 256 x 50 ms)",
    )
    mode.add_argument(
        "--floor",
        action="store_true",
        help="only the bare clients against a minimal asyncio server (no target)",
    )
    args = parser.parse_args()
    args.concurrency_given = args.concurrency is not None
    args.concurrency = args.concurrency or [32, 256]
    if args.trials is None:
        args.trials = 30000 if args.workers else 3000
    if args.quick:
        args.trials, args.reps = 300, 1
    if args.measure:
        measure_one(args)
        return 0
    if args.harness:
        harness_benchmark(args)
        return 0
    if args.floor:
        floor_benchmark(args)
        return 0
    if args.workers:
        http_workers_benchmark(args)
        workers_benchmark(args.workers)
        return 0
    if args.adaptive:
        adaptive_benchmark()
        return 0
    if args.callable:
        ok = callable_benchmark()
        print("PASS" if ok else "target missed: ≤ 1.25x ideal for the function agent")
        return 0 if ok else 1
    baseline_benchmark(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
