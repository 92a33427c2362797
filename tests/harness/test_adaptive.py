"""Adaptive concurrency (AIMD): a run against a server that admits only N requests at once finds N,
loses and doubles no trial; the limit's own rules hold under many threads."""

from __future__ import annotations

import threading
import time

import pytest

import passk_nb
from passk_nb.data.store import load
from passk_nb.harness.providers import make_provider
from passk_nb.harness.providers.adaptive import START, AdaptiveLimit
from passk_nb.harness.providers.base import ProviderError, cancel_scope
from tests.helpers.fake_servers import FakeServer, clean_backend_env


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch):
    clean_backend_env(monkeypatch)


def run_admitting(admit: int, tmp_path, *, adaptive: bool, trials: int = 16, **options):
    """The orders suite over the OpenAI wire, 32 trials in flight, against a server serving ``admit``."""
    with FakeServer("openai", admit=admit, latency=0.03) as server:
        df = passk_nb.run(
            "openai",
            "test-model",
            base_url=server.url,
            trials=trials,
            concurrency=32,
            adaptive=adaptive,
            out=tmp_path / "runs",
            progress=False,
            backoff_base=0.02,
            backoff_max=0.2,
            **options,
        )
    return df, server


def test_a_run_finds_what_the_server_admits_and_loses_no_trial(tmp_path):
    admit = 4
    df, server = run_admitting(admit, tmp_path, adaptive=True)
    tasks = df["task"].nunique()
    assert len(df) == tasks * 16 and not df.duplicated(["task", "trial"]).any()
    assert df["outcome"].eq("pass").all(), df["outcome"].value_counts()
    stored = load(tmp_path / "runs")
    assert len(stored) == len(df) and not stored.duplicated(["task", "trial"]).any()
    served = len(server.admitted)
    # Near N: the server is kept busy (most requests arrive with others in flight) ...
    later = server.admitted[served // 2 :]
    assert sum(later) / len(later) >= 0.5 * admit, later[:40]
    # ... and probed above N rarely: a few 429s per halving, not one per request over the limit.
    assert server.rejected <= 0.25 * served, (server.rejected, served)


def test_without_it_a_fixed_pool_is_refused_again_and_again(tmp_path):
    """The same run at a fixed 32 in flight: the server refuses most requests (the contrast)."""
    df, server = run_admitting(4, tmp_path, adaptive=False, trials=4)
    assert server.rejected > 0.5 * len(server.admitted)


def test_adaptive_needs_a_network_backend(tmp_path):
    with pytest.raises(ValueError, match="network backend"):
        passk_nb.run("scripted", trials=1, adaptive=True, out=tmp_path, progress=False)
    with pytest.raises(TypeError, match="adaptive"):
        passk_nb.run("scripted", trials=1, adaptive="yes", out=tmp_path, progress=False)


def test_the_progress_bar_shows_requests_in_flight(tmp_path, capsys):
    with FakeServer("openai") as server:
        passk_nb.run(
            "openai",
            "test-model",
            base_url=server.url,
            trials=2,
            concurrency=4,
            adaptive=True,
            out=tmp_path / "runs",
            progress=True,
        )
    assert "in flight 0/4" in capsys.readouterr().err  # all done, limit at the ceiling of 4


def test_a_seeded_copy_shares_its_provider_s_limit():
    provider = make_provider("openai", "m", base_url="http://127.0.0.1:9")
    limit = provider.adapt_concurrency(64)
    assert provider.with_seed(3).retrier.adaptive is limit
    assert provider.adapt_concurrency(16) is limit and limit.ceiling == 16 and limit.limit == START


def test_slow_start_then_additive_increase_and_one_cut_per_round_trip():
    clock = [0.0]
    limit = AdaptiveLimit(ceiling=100, start=2, clock=lambda: clock[0])
    for _ in range(10):
        limit.release(limit.acquire(), "ok")
    assert limit.limit == 12 and limit.slow_start
    sent_before = [limit.acquire() for _ in range(3)]  # three requests out at t = 0
    clock[0] = 1.0
    for started in sent_before:  # all three come back 429: one cut, not three
        limit.release(started, "overload")
    assert limit.limit == 6 and limit.cuts == 1 and not limit.slow_start
    clock[0] = 2.0
    limit.release(limit.acquire(), "overload")  # sent after the cut: news
    assert limit.limit == 3 and limit.cuts == 2
    limit.release(limit.acquire(), "ok")
    assert limit.limit == pytest.approx(3 + 1 / 3)
    limit.release(limit.acquire(), "other")  # a timeout says nothing about capacity
    assert limit.limit == pytest.approx(3 + 1 / 3)
    for _ in range(20):
        limit.release(limit.acquire(), "overload")
        clock[0] += 1
    assert limit.limit == 1.0  # never below one
    capped = AdaptiveLimit(ceiling=5, start=50)
    assert capped.limit == 5
    for _ in range(50):
        capped.release(capped.acquire(), "ok")
    assert capped.limit == 5  # never above the ceiling


def test_never_more_in_flight_than_the_limit_from_many_threads():
    limit = AdaptiveLimit(ceiling=6, start=6)
    inside, most, lock = [0], [0], threading.Lock()

    def request() -> None:
        for _ in range(20):
            started = limit.acquire()
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.001)
            with lock:
                inside[0] -= 1
            limit.release(started, "ok")

    threads = [threading.Thread(target=request) for _ in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 6 and limit.most_in_flight == 6 and limit.in_flight == 0


def test_a_trial_given_up_on_stops_waiting_for_a_slot():
    limit = AdaptiveLimit(ceiling=1, start=1)
    held = limit.acquire()
    event = threading.Event()
    event.set()
    with cancel_scope(event), pytest.raises(ProviderError, match="given up"):
        limit.acquire()
    limit.release(held, "ok")
    assert limit.in_flight == 0
    with pytest.raises(ValueError, match="outcome"):
        limit.release(0.0, "fine")
