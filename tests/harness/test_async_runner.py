"""The asyncio runner: trials of a network backend run as tasks on the transport loop, not a thread
each (OpenAI, Ollama, Anthropic), with the same records, timeouts, stops and pacing as the thread
pool; other backends keep it."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import passk_nb
from passk_nb.harness import batch
from passk_nb.harness.providers import make_provider
from passk_nb.harness.providers.transport import shared_loop
from tests.helpers.fake_servers import FakeServer, clean_backend_env


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch):
    clean_backend_env(monkeypatch)


def forbid(monkeypatch, name: str) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError(f"batch.{name} was used")

    monkeypatch.setattr(batch, name, refuse)


def trial_threads() -> int:
    return sum(t.name == "passk-trial" for t in threading.enumerate())


@pytest.mark.network_local
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.parametrize("protocol", ["json", "native"])
def test_http_trials_run_as_tasks_with_no_thread_each(monkeypatch, tmp_path, protocol, wire):
    forbid(monkeypatch, "_run_concurrently")
    most = []
    with FakeServer(wire, latency=0.05, keep_alive=True) as server:
        df = passk_nb.run(
            wire,
            "test-model",
            base_url=server.url,
            trials=12,
            concurrency=60,
            protocol=protocol,
            out=tmp_path / "runs",
            progress=False,
            on_record=lambda record: most.append(trial_threads()),
        )
        requests = len(server.chat_requests())
    assert len(df) == 60 and df["outcome"].eq("pass").all(), df["error"].unique()
    assert requests == df["n_turns"].sum() and max(most) == 0  # no thread per trial
    assert passk_nb.load(tmp_path / "runs")["trial"].nunique() == 12  # on disk, merged, once each


def test_a_function_agent_keeps_the_thread_pool(monkeypatch, tmp_path):
    forbid(monkeypatch, "_run_on_loop")
    assert not make_provider(lambda messages: '{"answer": "x"}').speaks_asyncio
    df = passk_nb.run(lambda messages: '{"answer": "no"}', trials=2, out=tmp_path, progress=False)
    assert len(df) == 10 and df["outcome"].ne("infra_error").all()


def test_http2_blocks_and_keeps_the_thread_pool():
    assert make_provider("openai", "m", base_url="http://127.0.0.1:9", http2=False).speaks_asyncio
    pytest.importorskip("h2")
    assert not make_provider("openai", "m", base_url="https://127.0.0.1:9", http2=True).speaks_asyncio


@pytest.mark.network_local
def test_a_trial_given_up_on_is_cancelled_not_waited_for(tmp_path):
    with FakeServer("openai", latency=30.0) as server:
        started = time.monotonic()
        df = passk_nb.run(
            "openai",
            "test-model",
            base_url=server.url,
            tasks=["refund-delivered", "cancel-pending-lookup"],
            trials=2,
            concurrency=4,
            trial_timeout=0.5,
            out=tmp_path / "runs",
            progress=False,
        )
        elapsed = time.monotonic() - started
    assert df["outcome"].eq("infra_error").all()
    assert df["error"].str.startswith("trial timed out after").all()
    assert elapsed < 15  # each reply takes 30 s: the requests were cancelled, not awaited


@pytest.mark.network_local
def test_an_early_stop_cancels_every_trial_in_flight(tmp_path):
    loop = shared_loop()
    before = len(asyncio.run_coroutine_threadsafe(_tasks(), loop).result())
    seen = []

    def stop_after_three(record):
        seen.append(record)
        if len(seen) == 3:
            raise RuntimeError("enough")

    with FakeServer("openai", latency=0.2) as server, pytest.raises(RuntimeError, match="enough"):
        passk_nb.run(
            "openai",
            "test-model",
            base_url=server.url,
            trials=20,
            concurrency=32,
            out=tmp_path / "runs",
            progress=False,
            on_record=stop_after_three,
        )
    deadline = time.monotonic() + 10
    while (
        len(asyncio.run_coroutine_threadsafe(_tasks(), loop).result()) > before
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert len(asyncio.run_coroutine_threadsafe(_tasks(), loop).result()) <= before
    stored = passk_nb.load(tmp_path / "runs")
    assert len(stored) >= 3 and stored["outcome"].eq("pass").all()  # what finished is kept, nothing else


async def _tasks() -> set[asyncio.Task]:
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}


def test_the_schedule_tells_the_trials_timeout_from_a_timeout_its_code_raises():
    async def slow(task, trial):
        await asyncio.sleep(30)
        return {"task": task, "trial": trial}

    async def raises(task, trial):
        raise TimeoutError("the trial's own")

    def timed_out(task, trial, elapsed):
        return {"task": task, "trial": trial, "timed_out": True}

    jobs = [("a", 0), ("a", 1), ("b", 0)]
    started = time.monotonic()
    records = list(batch._run_on_loop(slow, jobs, 3, timeout=0.2, on_timeout=timed_out))
    assert sorted((r["task"], r["trial"]) for r in records) == jobs and all(r["timed_out"] for r in records)
    assert time.monotonic() - started < 15  # cancelled at the timeout, not awaited for 30 s
    with pytest.raises(TimeoutError, match="the trial's own"):
        list(batch._run_on_loop(raises, jobs, 3, timeout=5.0, on_timeout=timed_out))


def test_the_trials_start_a_few_at_a_time_and_the_loop_polls_in_between():
    # Started all in one step of the loop, 1,024 trials sent nothing until the last had run its
    # first step: here a callback the first trial schedules runs before most trials have started.
    started: list[int] = []
    when_first_callback_ran: list[int] = []

    async def trial(task, i):
        started.append(i)
        if i == 0:
            asyncio.get_running_loop().call_soon(lambda: when_first_callback_ran.append(len(started)))
        await asyncio.sleep(0)
        return {"task": task, "trial": i}

    jobs = [("t", i) for i in range(16 * batch.RAMP_STEP)]
    records = list(batch._run_on_loop(trial, jobs, len(jobs)))
    assert sorted(r["trial"] for r in records) == list(range(len(jobs)))
    assert when_first_callback_ran[0] <= 2 * batch.RAMP_STEP < len(jobs)


def test_a_run_stopped_while_its_trials_start_cancels_every_one_started(monkeypatch):
    monkeypatch.setattr(batch, "RAMP_STEP", 1)
    loop = shared_loop()
    before = len(asyncio.run_coroutine_threadsafe(_tasks(), loop).result())

    async def trial(task, i):
        time.sleep(0.002)  # each start takes a moment: the run is stopped while they start
        await asyncio.sleep(30)
        return {"task": task, "trial": i}

    results = batch._run_on_loop(trial, [("t", i) for i in range(500)], 500, tick=0.01)
    assert next(results) is None  # a tick: trials are starting, none has ended
    results.close()
    deadline = time.monotonic() + 10
    while len(asyncio.run_coroutine_threadsafe(_tasks(), loop).result()) > before:
        assert time.monotonic() < deadline, "trials started before the stop are still running"
        time.sleep(0.02)


def test_a_trials_scaffolding_costs_no_generator_and_no_timer_without_a_deadline(monkeypatch):
    """Issue 50: every trial enters its cancel and delay scopes, and every request an attempt of the
    retrier and the transport's error mapping: ``@contextmanager`` generators cost several times
    the CPU of a plain context manager there, and ``asyncio.timeout(None)`` arms nothing for µs."""
    import contextlib

    from passk_nb.harness import loop_workers
    from passk_nb.harness.providers.base import cancel_scope, cancelled, delay_scope
    from passk_nb.harness.providers.retry import Retrier, RetryPolicy

    provider = make_provider("openai", "m", base_url="http://127.0.0.1:9", api_key_env=None)
    managers = [
        cancel_scope(threading.Event()),
        delay_scope(lambda active: None),
        Retrier(RetryPolicy())._attempt(1, None, None),
        provider._transport_errors("POST /x"),  # type: ignore[attr-defined]
    ]
    provider.close()
    assert not [m for m in managers if isinstance(m, contextlib._GeneratorContextManager)]

    def no_timer(delay):
        raise AssertionError(f"asyncio.timeout({delay}) armed for a trial without a deadline")

    monkeypatch.setattr(loop_workers.asyncio, "timeout", no_timer)

    async def trial(task, n):
        return {"task": task, "trial": n, "cancelled": cancelled()}

    record = asyncio.run(loop_workers.timed_trial(trial, ("t", 3), None, None))
    assert record == {"task": "t", "trial": 3, "cancelled": False}


def test_a_trial_on_the_loop_is_cancelled_by_a_flag_that_makes_no_lock_until_a_thread_waits():
    """Issue 50: a trial on the transport loop only sets its cancel flag and reads it; a
    ``threading.Event`` built a condition and a lock for it every trial (~3 µs)."""
    from passk_nb.harness import loop_workers
    from passk_nb.harness.providers.base import cancel_event

    flags = []

    async def trial(task, n):
        flags.append(cancel_event())
        return {"task": task, "trial": n}

    asyncio.run(loop_workers.timed_trial(trial, ("t", 1), None, None))
    (flag,) = flags
    assert flag.is_set() and flag._event is None  # set as the trial ended; no thread ever waited


def test_a_thread_a_trial_left_behind_wakes_as_its_deadline_passes():
    """The cancel flag of a trial given up on wakes what it runs in a worker thread (an injected
    delay, a subprocess's wait): set before or after the thread starts waiting."""
    from passk_nb.harness import loop_workers
    from passk_nb.harness.providers.base import CancelFlag, cancellable_sleep

    ended = []

    def sleeper():
        start = time.monotonic()
        cancellable_sleep(30)
        ended.append(time.monotonic() - start)

    async def trial(task, n):
        await asyncio.to_thread(sleeper)
        return {"task": task, "trial": n}

    def gave_up(task, n, elapsed):
        return {"task": task, "trial": n, "timed_out": elapsed}

    async def main():
        record = await loop_workers.timed_trial(trial, ("t", 2), 0.2, gave_up)
        deadline = time.monotonic() + 10
        while not ended and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return record

    record = asyncio.run(main())
    assert record["timed_out"] >= 0.2 and ended and ended[0] < 10
    flag = CancelFlag()
    flag.set()
    assert flag.wait(30) is True  # set before anyone waited: no wait at all


def test_a_request_awaited_on_the_transport_loop_takes_no_lock(monkeypatch):
    """Issue 50: each request of the asyncio runner is awaited where it runs, on the transport loop;
    finding that loop took the process's lock on every request."""
    from passk_nb.harness.providers import transport

    class Refused:
        def __enter__(self):
            raise AssertionError("the transport loop's lock was taken")

        def __exit__(self, *exc):
            return False

    async def request():
        return "sent"

    async def trial():
        return await transport.awaited_on_loop(request())

    loop = shared_loop()
    monkeypatch.setattr(transport, "_loop_lock", Refused())
    assert asyncio.run_coroutine_threadsafe(trial(), loop).result(timeout=30) == "sent"
