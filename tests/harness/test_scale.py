"""The runner at scale: one shared, sized connection pool; pacing to a rate limit; sharding by task.

Pacing is checked by counting (a fake clock, or request times on a local server
counted per window as an upper bound that a slow machine can only make easier).
"""

from __future__ import annotations

import threading

import httpx
import pytest

import passk_nb
from passk_nb.cli.main import main as cli_main
from passk_nb.data.store import load
from passk_nb.harness.pacing import FakeClock, Paced, RateLimit, RateLimiter
from passk_nb.harness.providers import make_provider
from passk_nb.harness.providers.base import Reply
from passk_nb.harness.providers.http import DEFAULT_POOL_SIZE, pool_limits, want_http2
from passk_nb.harness.shards import parse_shard, select_shard, shard_of
from tests.helpers.fake_servers import FakeServer, run_against

TASKS = passk_nb.get_suite("orders").task_ids
FAST = {"backoff_base": 0.01, "backoff_max": 0.05, "timeout": 20.0}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OLLAMA_HOST"):
        monkeypatch.delenv(name, raising=False)


# -- one shared connection pool per provider, sized to the concurrency ------------------------------


@pytest.mark.network_local
@pytest.mark.parametrize(("wire", "concurrency"), [("openai", 32), ("ollama", 32), ("openai", 80)])
def test_a_run_shares_one_pool_sized_to_its_concurrency(wire, concurrency, tmp_path):
    # Above httpx's default of 20 kept-alive connections an unsized pool would drop connections
    # and open new ones all run long; 80 is split into 3 stripes of ≤ 32, still 80 in all.
    with FakeServer(wire, keep_alive=True, latency=0.02) as server:
        df = run_against(
            wire,
            server,
            tmp_path,
            trials=16,
            concurrency=concurrency,
            out=tmp_path,
            **FAST,
        )
        requests = len(server.chat_requests())
        opened, most = server.connections_opened, server.max_connections_open
    assert df["outcome"].eq("pass").all() and requests == df["n_turns"].sum() > 200
    assert most <= concurrency, f"{most} connections open at once with {concurrency} trials in flight"
    # + 1: the preflight's TCP connect before the run (harness/preflight.py), closed at once
    assert opened <= concurrency + 1, f"{opened} connections opened for {requests} requests: not reused"


def test_a_striped_pool_always_has_a_connection_for_size_requests_in_flight():
    import contextlib

    from passk_nb.harness.providers.http import ConnectionPool

    for size in (1, 32, 33, 100, 256):
        pool = ConnectionPool(lambda n: httpx.Client(limits=pool_limits(n)), size)
        assert sum(pool.sizes) == size and max(pool.sizes) <= 32 and max(pool.sizes) - min(pool.sizes) <= 1
        with contextlib.ExitStack() as stack:
            held = [stack.enter_context(pool.client()) for _ in range(size)]
            counts = [sum(c is client for c in held) for client in pool.clients]
            assert counts == pool.sizes  # no stripe asked for more than its connections
        assert pool._busy == [0] * len(pool.sizes)
        pool.close()


@pytest.mark.network_local
def test_max_connections_caps_the_pool_below_the_concurrency(tmp_path):
    with FakeServer("openai", keep_alive=True, latency=0.02) as server:
        df = run_against(
            "openai",
            server,
            tmp_path,
            trials=4,
            concurrency=16,
            max_connections=3,
            out=tmp_path,
            **FAST,
        )
        opened, most = server.connections_opened, server.max_connections_open
    assert df["outcome"].eq("pass").all()
    assert most <= 3 and opened <= 3 + 1  # + the preflight's connect


def test_seeded_copies_share_the_client_and_the_pool_only_grows():
    provider = make_provider("openai", "m", base_url="http://127.0.0.1:9", api_key_env=None)
    assert provider.pool_size == DEFAULT_POOL_SIZE
    provider.size_pool(4)
    assert provider.pool_size == DEFAULT_POOL_SIZE
    provider.size_pool(256)
    assert provider.pool_size == 256 and provider.with_seed(3)._pool is provider._pool
    # HTTP/1.1: one aiohttp session on the transport loop, its connector holding 256 connections
    assert provider._pool.session.connector.limit == 256
    provider.close()
    assert provider._pool.session.closed
    # HTTP/2 (httpx): httpcore's pools, 8 stripes of 32: the limits really reached them
    provider = make_provider("openai", "m", base_url="https://127.0.0.1:9", api_key_env=None, http2=True)
    provider.size_pool(256)
    pools = [client._transport._pool for client in provider._pool.clients]
    assert [(p._max_connections, p._max_keepalive_connections) for p in pools] == [(32, 32)] * 8
    provider.close()
    with pytest.raises(ValueError, match="whole number of connections"):
        make_provider("openai", "m", base_url="http://127.0.0.1:9", max_connections=0)
    assert pool_limits(8) == httpx.Limits(max_connections=8, max_keepalive_connections=8, keepalive_expiry=30)


def test_http2_is_offered_on_https_when_h2_is_installed(monkeypatch):
    import importlib.util

    has_h2 = importlib.util.find_spec("h2") is not None
    assert want_http2(None, "https://api.example.com") is has_h2
    assert want_http2(None, "http://127.0.0.1:8080") is False  # plain http: always HTTP/1.1
    assert want_http2(False, "https://api.example.com") is False
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match="needs the h2 package"):
        want_http2(True, "https://api.example.com")
    with pytest.raises(ValueError, match="http2 must be"):
        want_http2("yes", "https://x")  # type: ignore[arg-type]


def test_pool_settings_are_not_part_of_the_run_identity(tmp_path):
    with FakeServer("openai", keep_alive=True) as server:
        common = {"base_url": server.url, "trials": 1, "out": tmp_path, "progress": False, **FAST}
        a = passk_nb.run("openai", "m", concurrency=2, **common)
        b = passk_nb.run(
            "openai",
            "m",
            concurrency=8,
            max_connections=2,
            http2=False,
            trials=2,
            **{k: v for k, v in common.items() if k != "trials"},
        )
    assert set(a["run_id"]) == set(b["run_id"]) and len(b) == 10


# -- rate limit -------------------------------------------------------------------------------------


def test_rate_limit_parsing_and_its_errors():
    assert RateLimit.parse("600rpm") == RateLimit(600.0, None)
    assert RateLimit.parse(" 90000TPM ") == RateLimit(None, 90000.0)
    assert RateLimit.parse("2rps,100tps") == RateLimit(120.0, 6000.0)
    assert str(RateLimit.parse("600rpm,90000tpm")) == "600rpm,90000tpm"
    for bad, message in [
        ("600", "not understood"),
        ("fast", "not understood"),
        ("1rpm,2rpm", "twice"),
        ("0rpm", "must be a number > 0"),
        ("", "rate_limit must be text"),
    ]:
        with pytest.raises(ValueError, match=message):
            RateLimit.parse(bad)


def windows_max(times: list[float], width: float) -> int:
    """The most events in any window [t, t + width) starting at an event."""
    times = sorted(times)
    return max((sum(1 for u in times if t <= u < t + width - 1e-9) for t in times), default=0)


@pytest.mark.parametrize("rpm", [60, 600, 6000])
def test_requests_are_spaced_to_the_rate_with_a_one_second_burst(rpm):
    clock = FakeClock()
    limiter = RateLimiter(f"{rpm}rpm", clock=clock, sleep=clock.sleep)
    starts = []
    for _ in range(3 * rpm // 60 + 5):
        limiter.acquire()
        starts.append(clock())
    per_s = rpm / 60
    burst = max(1, int(per_s))
    assert starts[:burst] == pytest.approx([0.0] * burst, abs=1e-9)  # one second's budget at once
    # After the burst, one request per 1/rate seconds: every 1 s window holds at most burst + rate.
    assert windows_max(starts, 1.0) <= burst + per_s
    assert starts[-1] == pytest.approx((len(starts) - burst) / per_s)


def test_tokens_are_paced_by_the_reply_counts():
    clock = FakeClock()
    limiter = RateLimiter("6000tpm", burst_s=0, clock=clock, sleep=clock.sleep)  # 100 tokens/s

    class Model:
        def chat(self, messages):
            return Reply("x", input_tokens=150, output_tokens=50)  # 200 tokens a request

    paced = Paced(Model(), limiter)
    starts = []
    for _ in range(6):
        paced.chat([{"role": "user", "content": "y" * 40}])  # estimated 11 tokens before
        starts.append(clock())
    # Each request really costs 200 tokens = 2 s of budget, settled after its reply.
    assert starts == pytest.approx([0.0, 2.0, 4.0, 6.0, 8.0, 10.0])


def test_the_limiter_is_shared_by_threads():
    limiter = RateLimiter("600rpm")  # 10 per second, burst 10
    starts: list[float] = []
    lock = threading.Lock()

    def worker():
        for _ in range(3):
            limiter.acquire()
            with lock:
                starts.append(__import__("time").monotonic())

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert limiter.started == 24
    # 24 requests: 10 at once, then one per 0.1 s. A late thread only spreads them further.
    assert windows_max(starts, 0.5) <= 10 + 5 + 1


@pytest.mark.network_local
def test_run_with_a_rate_limit_paces_the_requests_the_server_sees(tmp_path):
    with FakeServer("openai", keep_alive=True) as server:
        df = run_against(
            "openai",
            server,
            tmp_path,
            trials=8,
            concurrency=16,
            rate_limit="2400rpm",  # 40 per second, 40 at once,
            out=tmp_path,
            **FAST,
        )
        times = [r.t for r in server.chat_requests()]
    assert df["outcome"].eq("pass").all() and len(times) == df["n_turns"].sum() > 100
    # An unpaced run sends them all within a fraction of a second; paced, any 1 s holds ≤ 40 + 40
    # (+1 for the window edge). A slow machine only spreads the requests out further.
    assert windows_max(times, 1.0) <= 81
    assert max(times) - min(times) >= (len(times) - 40) / 40 * 0.95


def test_rate_limit_and_shard_are_not_part_of_the_run_identity(tmp_path):
    plain = passk_nb.run("scripted", trials=1, out=tmp_path / "a", progress=False)
    paced = passk_nb.run("scripted", trials=1, out=tmp_path / "b", progress=False, rate_limit="6000rpm")
    sharded = passk_nb.run("scripted", trials=1, out=tmp_path / "c", progress=False, shard=(1, 2))
    assert set(plain["run_id"]) == set(paced["run_id"]) == set(sharded["run_id"])
    with pytest.raises(ValueError, match="not understood"):
        passk_nb.run("scripted", out=tmp_path, progress=False, rate_limit="lots")


# -- shards -----------------------------------------------------------------------------------------


def test_shards_partition_the_tasks_whatever_n():
    ids = [f"task-{i:04d}" for i in range(1000)]
    for n in (1, 2, 3, 7, 16):
        parts = [select_shard(ids, (i, n)) for i in range(1, n + 1)]
        assert sorted(t for part in parts for t in part) == ids  # union = all, no overlap
        assert all(len(part) > 1000 / n / 2 for part in parts)  # roughly even
    # A task's shard depends on its id only: the same in another list, process or Python version.
    assert select_shard(["task-0007"], (shard_of("task-0007", 5), 5)) == ["task-0007"]
    assert [shard_of(t, 4) for t in TASKS] == [shard_of(t, 4) for t in reversed(TASKS)][::-1]
    assert (
        shard_of("refund_delivered", 4)
        == 1 + int.from_bytes(__import__("hashlib").sha256(b"refund_delivered").digest()[:8], "big") % 4
    )


@pytest.mark.parametrize("bad", ["0/3", "4/3", "1/0", "a/b", "1-3", (1,), (True, 2), "1/2/3"])
def test_a_bad_shard_is_refused(bad):
    with pytest.raises(ValueError, match="shard"):
        parse_shard(bad)


def test_two_shards_into_one_folder_load_as_one_run(tmp_path):
    out = tmp_path / "shared"
    first = passk_nb.run("scripted", trials=2, out=out, progress=False, shard="1/2")
    second = passk_nb.run("scripted", trials=2, out=out, progress=False, shard="2/2")
    assert set(first["task"]).isdisjoint(second["task"])
    assert set(first["task"]) | set(second["task"]) == set(TASKS)
    df = load(out)
    assert len(df) == 10 and df["run_id"].nunique() == 1 and not df.duplicated(["task", "trial"]).any()
    whole = passk_nb.run("scripted", trials=2, out=out, progress=False)  # the unsharded run: complete
    assert len(whole) == 10 and set(whole["run_id"]) == set(df["run_id"])


def test_shards_in_their_own_folders_load_together_without_duplicates(tmp_path):
    for i in (1, 2, 3):
        passk_nb.run(
            "scripted", trials=2, out=tmp_path / "runs" / f"machine{i}", progress=False, shard=(i, 3)
        )
    # A copy of one shard's folder (synced twice) adds no rows.
    import shutil

    shutil.copytree(tmp_path / "runs" / "machine1", tmp_path / "runs" / "machine1-copy")
    df = load(tmp_path / "runs")
    assert len(df) == 10 and df["run_id"].nunique() == 1
    assert sorted(set(df["task"])) == sorted(TASKS) and not df.duplicated(["task", "trial"]).any()


def test_passk_run_takes_shard_and_rate_limit(tmp_path, capsys):
    out = tmp_path / "runs"
    for i in (1, 2):
        code = cli_main(
            ["run", "--trials", "2", "--out", str(out), "--shard", f"{i}/2", "--rate-limit", "6000rpm", "-q"]
        )
        assert code == 0
    df = load(out)
    assert len(df) == 10 and df["run_id"].nunique() == 1
    capsys.readouterr()
    assert cli_main(["run", "--shard", "3/2"]) == 2
    assert "numbered 1 to 2" in capsys.readouterr().err
    assert cli_main(["run", "--rate-limit", "600"]) == 2
    assert "rpm" in capsys.readouterr().err


def test_anthropic_pool_grows_past_the_sdks_kept_alive_connections(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000")
    provider = make_provider("anthropic", "claude-x", base_url="http://127.0.0.1:9")
    before = provider._client
    provider.size_pool(64)  # the SDK's pool keeps 100: enough
    assert provider._client is before
    provider.size_pool(256)
    pool = provider._client._client._transport._pool
    assert (pool._max_connections, pool._max_keepalive_connections) == (256, 256)
    assert provider.with_seed(1)._client is provider._client and provider._client.max_retries == 0
    provider.close()


def test_a_shard_with_no_task_runs_nothing_and_says_so(tmp_path, capsys):
    n = 16  # 5 tasks into 16 shards: most shards are empty
    empty = next(i for i in range(1, n + 1) if not select_shard(TASKS, (i, n)))
    df = passk_nb.run("scripted", trials=2, out=tmp_path, progress=False, shard=(empty, n))
    assert df.empty
    assert cli_main(["run", "--trials", "2", "--out", str(tmp_path), "--shard", f"{empty}/{n}"]) == 0
    assert f"shard {empty}/{n} holds none of the 5 tasks" in capsys.readouterr().out


def test_the_parts_a_run_writes_are_never_read_back_while_it_runs(tmp_path, monkeypatch):
    from passk_nb.data import store

    reads_while_running = []
    real_refresh_read = store._read

    def counting_read(path, columns=None):
        if columns == ["task", "trial", "outcome"]:  # what StoredTrials reads to learn a part's keys
            reads_while_running.append(path)
        return real_refresh_read(path, columns)

    monkeypatch.setattr(store, "_read", counting_read)
    from passk_nb.harness import batch

    monkeypatch.setattr(batch._Writer.__init__, "__defaults__", (1.0, 10))  # a part every 10 records
    df = passk_nb.run("scripted", trials=40, concurrency=8, out=tmp_path, progress=False)
    assert len(df) == 200
    assert reads_while_running == []  # every part was this run's own: its keys were noted, not read


def test_a_part_holds_a_seconds_records_up_to_two_thousand(tmp_path):
    """Issue 50: writing a part costs mostly per column chunk (200 records ~10 µs of CPU each,
    2,000 ~2 µs), so the writer writes a part each second or each 2,000 records, not each 200."""
    from passk_nb.harness import batch

    writer = batch._Writer(tmp_path, "r1", every_s=3600.0)
    row = {"run_id": "r1", "suite": "s", "task": "t", "passed": True, "outcome": "pass"}
    for trial in range(2500):
        writer.add({**row, "trial": trial})
    assert len(writer.parts) == 1 and writer.written == 2000  # the first 2,000, in one part
    writer.flush()
    assert len(writer.parts) == 2 and len(load(tmp_path)) == 2500


def test_a_trials_seeded_copy_copies_the_providers_dict_unless_its_class_copies_itself(monkeypatch):
    """Issue 50: ``with_seed`` runs once per trial; ``copy.copy`` cost three times a copy of the
    instance's ``__dict__``. A class with slots or its own copying keeps ``copy.copy``."""
    import copy as copy_module

    from passk_nb.harness.providers import base

    provider = make_provider("openai", "m", base_url="http://127.0.0.1:9", api_key_env=None)
    with monkeypatch.context() as patched:
        patched.setattr(base.copy, "copy", lambda value: pytest.fail("copy.copy was used"))
        clone = provider.with_seed(7)
    assert (clone.seed, provider.seed) == (7, None) and type(clone) is type(provider)
    assert clone._pool is provider._pool and clone.__dict__.keys() == provider.__dict__.keys()
    provider.close()

    class Slotted(base.BaseProvider):
        __slots__ = ("extra",)

    class OwnCopy(base.BaseProvider):
        def __copy__(self):
            clone = copy_module.deepcopy(self)
            clone.copied_by = "OwnCopy"
            return clone

    slotted = Slotted("m")
    slotted.extra = "kept"
    assert slotted.with_seed(1).extra == "kept" and slotted.with_seed(1).seed == 1
    assert OwnCopy("m").with_seed(2).copied_by == "OwnCopy"
