"""run(batch=True): model turns through the Anthropic and OpenAI batch APIs (fake servers on
127.0.0.1 speaking each API's documented wire format)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import passk_nb
from passk_nb.harness.providers.batches import JOURNAL_FILE
from tests.helpers.batch_servers import BatchServer
from tests.helpers.fake_servers import clean_backend_env

WIRES = ["anthropic", "openai"]


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_backend_env(monkeypatch)


def batch_run(wire: str, server: BatchServer, tmp_path: Path, **options):
    options = {
        "trials": 2,
        "progress": False,
        "out": tmp_path / "runs",
        "batch": True,
        "batch_poll": 0.02,
        "tasks": ["refund-delivered", "cancel-pending-lookup", "cancel-shipped-refusal"],
        **options,
    }
    return passk_nb.run(wire, "test-model", base_url=server.url, **options)


def batches_of(df) -> list[list[dict]]:
    """Each record's batches (round, batch id, custom id, result), from its provider_meta."""
    return [(json.loads(m) if isinstance(m, str) else m)["batches"] for m in df["provider_meta"]]


@pytest.mark.parametrize("protocol", ["json", "native"])
@pytest.mark.parametrize("wire", WIRES)
def test_every_turn_goes_in_a_batch_round(wire, protocol, tmp_path):
    with BatchServer(wire) as server:
        df = batch_run(wire, server, tmp_path, protocol=protocol)
    assert len(df) == 6 and df["passed"].all(), df[["task", "outcome", "error"]]
    assert server.chat_requests == 0  # nothing was sent one request at a time
    # each round holds the next turn of every trial still running: as many rounds as the longest trial
    assert len(server.batches) == df["n_turns"].max()
    assert len(server.batches[0]["custom_ids"]) == 6
    sizes = [len(b["custom_ids"]) for b in server.batches]
    assert sizes == sorted(sizes, reverse=True) and sum(sizes) == df["n_turns"].sum()
    for turns, seen in zip(df["n_turns"], batches_of(df), strict=True):
        assert [s["round"] for s in seen] == list(range(1, turns + 1))
        assert all(s["result"] == "succeeded" and s["batch_id"] for s in seen)
    journal = [
        json.loads(line)
        for line in (tmp_path / "runs" / df["run_id"].iloc[0] / JOURNAL_FILE).read_text().splitlines()
    ]
    assert [j["batch_id"] for j in journal] == [b["id"] for b in server.batches]


@pytest.mark.parametrize("wire", WIRES)
def test_a_batch_run_has_the_run_id_of_the_same_run_sent_one_by_one(wire, tmp_path):
    with BatchServer(wire) as server:
        batched = batch_run(wire, server, tmp_path, trials=1)
        single = passk_nb.run(
            wire,
            "test-model",
            base_url=server.url,
            trials=1,
            progress=False,
            out=tmp_path / "other",
            tasks=["refund-delivered", "cancel-pending-lookup", "cancel-shipped-refusal"],
        )
    assert set(batched["run_id"]) == set(single["run_id"])
    cols = ["task", "outcome", "n_turns", "final_answer"]
    assert batched[cols].reset_index(drop=True).equals(single[cols].reset_index(drop=True))


@pytest.mark.parametrize("wire", WIRES)
def test_an_expired_request_goes_into_the_next_round(wire, tmp_path):
    expired: set[str] = set()

    def fate(cid, body):
        if "cancel-pending-lookup" in json.dumps(body) or "O1001" not in json.dumps(body):
            pass
        if len(expired) == 0:
            expired.add(cid)
            return "expired"
        return None

    with BatchServer(wire, fate=fate) as server:
        df = batch_run(wire, server, tmp_path, trials=1)
    assert df["passed"].all(), df[["task", "outcome", "error"]]
    (cid,) = expired
    holding = [b["id"] for b in server.batches if cid in b["custom_ids"]]
    assert len(holding) == 2  # submitted again once, in a later batch
    seen = next(s for s in batches_of(df) if s[0]["custom_id"] == cid)
    assert [s["result"] for s in seen[:2]] == ["expired", "succeeded"]
    assert seen[1]["round"] > seen[0]["round"]


@pytest.mark.parametrize("wire", WIRES)
def test_a_request_that_always_expires_ends_its_trial_as_infra_error(wire, tmp_path):
    def fate(cid, body):
        return "expired" if "C002" in json.dumps(body) else None

    with BatchServer(wire, fate=fate) as server:
        df = batch_run(
            wire,
            server,
            tmp_path,
            trials=1,
            tasks=["refund-delivered", "cancel-pending-lookup"],
            max_attempts=2,
        )
    by_task = df.set_index("task")
    assert by_task.loc["refund-delivered", "passed"]
    failed = by_task.loc["cancel-pending-lookup"]
    assert failed["outcome"] == "infra_error"
    assert "no batch answered the request after 2 rounds" in failed["error"] and "expired" in failed["error"]


@pytest.mark.parametrize("wire", WIRES)
def test_a_partial_result_fails_only_the_errored_trial_and_retries_an_overload(wire, tmp_path):
    overloaded: set[str] = set()

    def fate(cid, body):
        text = json.dumps(body)
        if "C002" in text:
            return "errored"
        if "C005" in text and cid not in overloaded:
            overloaded.add(cid)
            return "overloaded"
        return None

    with BatchServer(wire, fate=fate) as server:
        df = batch_run(wire, server, tmp_path, trials=1)
    by_task = df.set_index("task")
    assert by_task.loc["cancel-pending-lookup", "outcome"] == "infra_error"
    assert "request errored" in by_task.loc["cancel-pending-lookup", "error"]
    assert "injected errored" in by_task.loc["cancel-pending-lookup", "error"]
    assert by_task.loc["refund-delivered", "passed"] and by_task.loc["cancel-shipped-refusal", "passed"]
    assert overloaded  # each turn of that trial was overloaded once, went into a later round, and passed
    for cid in overloaded:
        assert len([b for b in server.batches if cid in b["custom_ids"]]) == 2


@pytest.mark.parametrize("wire", WIRES)
def test_a_run_killed_between_submit_and_poll_resumes_without_submitting_again(wire, tmp_path):
    with BatchServer(wire) as server:
        server.hold.set()  # no batch ends while the first run is alive
        out = tmp_path / "runs"
        code = textwrap.dedent(
            f"""
            import passk_nb
            passk_nb.run({wire!r}, "test-model", base_url={server.url!r}, trials=2, progress=False,
                         out={str(out)!r}, batch=True, batch_poll=0.02,
                         tasks=["refund-delivered", "cancel-pending-lookup", "cancel-shipped-refusal"])
            """
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "ANTHROPIC_API_KEY": "sk-ant-test-0000"}
        child = subprocess.Popen([sys.executable, "-c", code], env=env)
        try:
            deadline = time.monotonic() + 60
            while not list(out.glob(f"*/{JOURNAL_FILE}")) or server.polls < 3:
                assert child.poll() is None, "the run ended before it was killed"
                assert time.monotonic() < deadline, "no batch was submitted"
                time.sleep(0.05)
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=10)
        finally:
            if child.poll() is None:
                child.kill()
        assert len(server.batches) == 1
        first = set(server.batches[0]["custom_ids"])
        server.hold.clear()
        df = batch_run(wire, server, tmp_path)
    assert len(df) == 6 and df["passed"].all()
    assert server.chat_requests == 0
    every = [cid for b in server.batches for cid in b["custom_ids"]]
    assert len(every) == len(set(every))  # no request submitted twice: the first batch was polled again
    assert not first & {cid for b in server.batches[1:] for cid in b["custom_ids"]}
    assert all(seen[0]["batch_id"] == server.batches[0]["id"] for seen in batches_of(df))


def test_batch_needs_a_backend_with_a_batch_api_and_no_pacing(tmp_path):
    with pytest.raises(ValueError, match="has none: run it without batch"):
        passk_nb.run("scripted", trials=1, progress=False, out=tmp_path, batch=True)
    with pytest.raises(ValueError, match="rate_limit= steer requests sent one by one"):
        passk_nb.run(
            "openai",
            "m",
            base_url="http://127.0.0.1:9",
            trials=1,
            out=tmp_path,
            batch=True,
            rate_limit="60rpm",
        )
    with pytest.raises(ValueError, match="batch_poll"):
        passk_nb.run(
            "openai", "m", base_url="http://127.0.0.1:9", trials=1, out=tmp_path, batch=True, batch_poll=-1
        )


def test_a_damaged_journal_is_refused_with_what_to_do(tmp_path):
    with BatchServer("openai") as server:
        df = batch_run("openai", server, tmp_path, trials=1, tasks=["cancel-pending-lookup"])
        journal = tmp_path / "runs" / df["run_id"].iloc[0] / JOURNAL_FILE
        journal.write_text("not json\n" + journal.read_text())
        with pytest.raises(ValueError, match="line 1, is not a batch entry.*delete it"):
            batch_run("openai", server, tmp_path, trials=2, tasks=["cancel-pending-lookup"])


def test_passk_run_batch_prints_the_report(tmp_path, capsys):
    from passk_nb.cli.main import main

    with BatchServer("anthropic") as server:
        code = main(
            [
                "run",
                "--provider",
                "anthropic",
                "--model",
                "m",
                "--base-url",
                server.url,
                "--trials",
                "2",
                "--tasks",
                "refund-delivered",
                "--batch",
                "--batch-poll",
                "0.02",
                "--k",
                "2",
                "--out",
                str(tmp_path),
                "--n-boot",
                "0",
                "--no-progress",
            ]
        )
    assert code == 0
    assert len(server.batches) >= 1 and server.chat_requests == 0
    assert "2/2 pass" in capsys.readouterr().out


# -- polls are reads: retried until the batch's window ends (issue 43, item 7) --------------------


def test_an_idempotent_read_is_retried_past_max_attempts_until_its_deadline():
    from passk_nb.harness.providers.base import ProviderError
    from passk_nb.harness.providers.retry import Retrier, RetryPolicy, Transient

    def busy_for(n: int):
        failures = iter(range(n))

        def read():
            if next(failures, None) is not None:
                raise Transient("HTTP 429", "slow down")
            return "status"

        return read

    retrier = Retrier(RetryPolicy(max_attempts=2, backoff_base=0.0))
    assert retrier.call(busy_for(6), until=time.monotonic() + 60) == ("status", 7)
    with pytest.raises(ProviderError, match="HTTP 429 after 2 attempts"):
        retrier.call(busy_for(6))  # not a read: max_attempts as ever
    with pytest.raises(ProviderError, match="HTTP 429 after 2 attempts"):
        retrier.call(busy_for(6), until=time.monotonic() - 1)  # past the deadline: max_attempts still


@pytest.mark.parametrize("wire", WIRES)
def test_rate_limited_status_polls_wait_and_poll_again(wire, tmp_path):
    with BatchServer(wire, rate_limited_polls=4) as server:
        df = batch_run(wire, server, tmp_path, trials=1, tasks=["cancel-pending-lookup"])
    assert df["passed"].all(), df[["task", "outcome", "error"]]
    assert server.rate_limited_polls == 0  # all four 429s were answered, then polled again
    every = [cid for b in server.batches for cid in b["custom_ids"]]
    assert len(every) == len(set(every))  # nothing submitted again


# -- a batch that ended badly sends its requests into a new round (item 6) ------------------------


def test_a_batch_that_failed_as_a_whole_goes_into_the_next_round(tmp_path):
    with BatchServer("openai", failed_batches=1) as server:
        df = batch_run("openai", server, tmp_path, trials=1)
    assert df["passed"].all(), df[["task", "outcome", "error"]]
    first = set(server.batches[0]["custom_ids"])
    assert first <= set(server.batches[1]["custom_ids"])  # each went into round 2, once
    for seen in batches_of(df):
        assert [s["result"] for s in seen[:2]] == ["failed", "succeeded"]


def test_a_batch_that_always_fails_ends_its_trials_with_the_apis_reason(tmp_path):
    with BatchServer("openai", failed_batches=10**6) as server:
        df = batch_run("openai", server, tmp_path, trials=1, tasks=["cancel-pending-lookup"], max_attempts=2)
    (error,) = df["error"]
    assert df["outcome"].eq("infra_error").all() and len(server.batches) == 2
    assert "no batch answered the request after 2 rounds" in error and "token_limit_exceeded" in error


@pytest.mark.parametrize("wire", WIRES)
def test_a_batch_the_api_no_longer_knows_is_submitted_again_on_resume(wire, tmp_path):
    with BatchServer(wire) as server:
        server.hold.set()  # the first run gives up on its trials while their batch runs
        first = batch_run(wire, server, tmp_path, trial_timeout=2.0)
        assert first["outcome"].eq("infra_error").all() and len(server.batches) == 1
        server.forgotten.add(server.batches[0]["id"])  # then the API forgets the batch (404)
        server.hold.clear()
        df = batch_run(wire, server, tmp_path)
    assert len(df) == 6 and df["passed"].all(), df[["task", "outcome", "error"]]
    lost = set(server.batches[0]["custom_ids"])
    assert lost <= set(server.batches[1]["custom_ids"])  # resubmitted once, in the resume's first round
    every = [cid for b in server.batches[1:] for cid in b["custom_ids"]]
    assert len(every) == len(set(every))
    assert all(seen[0]["result"] == "gone" for seen in batches_of(df))


@pytest.mark.parametrize("wire", WIRES)
def test_one_malformed_result_line_fails_only_its_own_request(wire, tmp_path):
    damaged: list[str] = []

    def mangle(batch, lines):
        if batch["id"].endswith("0000"):
            damaged.append(json.loads(lines[1])["custom_id"])
            lines = [lines[0], lines[1][: len(lines[1]) // 2], *lines[2:]]  # a line cut short
        return lines

    with BatchServer(wire, mangle=mangle) as server:
        df = batch_run(wire, server, tmp_path, trials=1)
    assert df["passed"].all(), df[["task", "outcome", "error"]]
    (cid,) = set(damaged)
    submitted = [c for b in server.batches for c in b["custom_ids"]]
    assert submitted.count(cid) == 2  # only the request of the bad line went into a new round
    assert len(submitted) == len(set(submitted)) + 1
    seen = next(s for s in batches_of(df) if s[0]["custom_id"] == cid)
    assert [s["result"] for s in seen[:2]] == ["unreadable", "succeeded"]


@pytest.mark.parametrize("wire", WIRES)
def test_a_request_given_two_different_results_is_not_answered_by_the_last(wire, tmp_path, caplog):
    twice: list[str] = []

    def mangle(batch, lines):
        if batch["id"].endswith("0000"):
            first, second = json.loads(lines[0]), json.loads(lines[1])
            twice.append(first["custom_id"])
            # the first request again, with the second's result; the second line repeated as it is
            lines = [*lines, json.dumps({**second, "custom_id": first["custom_id"]}), lines[1]]
        return lines

    with BatchServer(wire, mangle=mangle) as server:
        df = batch_run(wire, server, tmp_path, trials=1)
    assert df["passed"].all(), df[["task", "outcome", "error"]]
    (cid,) = twice
    submitted = [c for b in server.batches for c in b["custom_ids"]]
    assert submitted.count(cid) == 2 and len(submitted) == len(set(submitted)) + 1
    seen = next(s for s in batches_of(df) if s[0]["custom_id"] == cid)
    assert [s["result"] for s in seen[:2]] == ["unreadable", "succeeded"]
    text = caplog.text
    assert "1 requests have two different results" in text and "result lines repeat" in text


# -- two processes writing one batch folder (item 5) ----------------------------------------------


def test_two_processes_in_one_folder_never_pay_for_a_request_twice(tmp_path):
    """B runs 3 of 6 trials; A, started after B read the journal, runs the other 3 and is killed
    once its batch is submitted; B then takes A's trials over and polls A's batch."""
    out = tmp_path / "runs"
    tasks = ["refund-delivered", "cancel-pending-lookup", "cancel-shipped-refusal"]
    with BatchServer("openai") as server:
        server.hold.set()
        frames: list = []
        b = threading.Thread(
            target=lambda: frames.append(
                batch_run("openai", server, tmp_path, concurrency=3, batch_poll=0.05)
            )
        )
        b.start()
        code = textwrap.dedent(
            f"""
            import passk_nb
            passk_nb.run("openai", "test-model", base_url={server.url!r}, trials=2, progress=False,
                         out={str(out)!r}, batch=True, batch_poll=0.05, concurrency=3, tasks={tasks!r})
            """
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        child = None
        try:
            deadline = time.monotonic() + 60
            while len(server.batches) < 1:
                assert time.monotonic() < deadline, "B submitted nothing"
                time.sleep(0.05)
            child = subprocess.Popen([sys.executable, "-c", code], env=env)

            def journaled() -> int:
                return sum(len(p.read_text().splitlines()) for p in out.rglob(JOURNAL_FILE))

            # A is killed once its batch is in the journal: a kill between the API's reply and the
            # journal's line is the one window the README leaves open (and load can widen it)
            while len(server.batches) < 2 or journaled() < 2:
                assert child.poll() is None, "A ended before it was killed"
                assert time.monotonic() < deadline + 60, "A submitted nothing"
                time.sleep(0.05)
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=10)
        finally:
            if child is not None and child.poll() is None:
                child.kill()
            server.hold.clear()
            b.join(timeout=120)
        assert not b.is_alive()
    (df,) = frames
    assert len(df) == 6 and df["passed"].all(), df[["task", "outcome", "error"]]
    assert [len(batch["custom_ids"]) for batch in server.batches[:2]] == [3, 3]
    every = [cid for batch in server.batches for cid in batch["custom_ids"]]
    assert len(every) == len(set(every))  # B polled A's batch instead of submitting its requests again
    a_batch = server.batches[1]["id"]
    assert sum(seen[0]["batch_id"] == a_batch for seen in batches_of(df)) == 3


def test_a_journal_line_a_killed_writer_left_half_is_cut_not_fatal(tmp_path):
    from passk_nb.harness.providers.batches import Batcher

    journal = tmp_path / JOURNAL_FILE
    whole = {"round": 1, "batch_id": "b1", "custom_ids": ["p1"], "at": time.time()}
    journal.write_text(json.dumps(whole) + "\n" + '{"round": 2, "batch_id": "b2", "cust')
    from types import SimpleNamespace

    from passk_nb.data.redact import Redactor

    wire = SimpleNamespace(provider=SimpleNamespace(redact=Redactor(["sk-canary-0123456789"])))
    batcher = Batcher(wire=wire, journal=journal)  # type: ignore[arg-type]
    assert batcher._known == {"p1": (1, "b1")}
    batcher._write_journal({"round": 3, "batch_id": "b3", "custom_ids": ["p3"], "at": time.time()})
    lines = journal.read_text().splitlines()
    assert [json.loads(line)["batch_id"] for line in lines] == ["b1", "b3"]
    batcher._read_journal()
    assert batcher._known["p3"] == (3, "b3") and batcher.rounds == 3


# -- results read line by line; a run that gave up leaves nothing behind (items 10, streaming) ----


@pytest.mark.slow
def test_a_huge_results_file_is_read_line_by_line_in_bounded_memory():
    import tracemalloc

    from passk_nb.harness.providers import make_provider
    from passk_nb.harness.providers.batches import batch_wire

    strangers = [json.dumps({"custom_id": f"x{n}", "error": None}) for n in range(200_000)]

    def mangle(batch, lines):
        return [*strangers[:100_000], *lines, *strangers[100_000:]]

    expire = lambda cid, body: "expired"  # noqa: E731 - the one request's result: a small line
    with BatchServer("openai", mangle=mangle, polls_before_end=0, fate=expire) as server:
        provider = make_provider("openai", "test-model", base_url=server.url)
        wire = batch_wire(provider)
        try:
            body = {"model": "test-model", "messages": [{"role": "user", "content": "hi"}]}
            batch = wire.submit([("p-one", body)], 1)
            batch = wire.poll(batch.batch_id, time.monotonic() + 60)
            assert batch.ended
            size = len(server.files[batch.info["error_file_id"]])
            assert size > 6_000_000
            tracemalloc.start()
            outcomes = wire.results(batch, frozenset({"p-one"}), time.monotonic() + 60)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        finally:
            wire.close()
            provider.close()
    assert outcomes["p-one"].kind == "expired"
    assert peak < size / 4, (peak, size)


@pytest.mark.parametrize("wire", WIRES)
def test_a_run_that_gave_up_on_batch_trials_leaves_no_task_behind(wire, tmp_path, caplog, capfd):
    import gc

    with BatchServer(wire) as server:
        server.hold.set()
        df = batch_run(wire, server, tmp_path, trials=1, tasks=["refund-delivered"], trial_timeout=1.0)
        time.sleep(0.2)  # a poll in flight when the client closed has reached the server
        polls = server.polls
        time.sleep(0.5)  # a watch left running would poll (and fail on the closed client) meanwhile
        gc.collect()
        assert server.polls == polls  # nothing polls once run() returned
    assert df["outcome"].eq("infra_error").all()
    text = caplog.text + capfd.readouterr().err
    assert "never retrieved" not in text and "client has been closed" not in text


def test_load_while_a_batch_run_writes_the_folder_reads_whole_trials(tmp_path):
    seen: list[int] = []
    with BatchServer("anthropic", polls_before_end=3) as server:
        frames: list = []
        runner = threading.Thread(
            target=lambda: frames.append(batch_run("anthropic", server, tmp_path, trials=3))
        )
        runner.start()
        while runner.is_alive():
            df = passk_nb.load(tmp_path / "runs") if (tmp_path / "runs").exists() else None
            if df is not None and len(df):
                assert not df.duplicated(["run_id", "task", "trial"]).any()
                seen.append(len(df))
            time.sleep(0.02)
        runner.join()
    assert len(frames[0]) == 9 and frames[0]["passed"].all()
    assert seen == sorted(seen) and len(passk_nb.load(tmp_path / "runs")) == 9


@pytest.mark.parametrize("wire", WIRES)
def test_a_base_url_with_a_path_reaches_every_batch_endpoint_below_it(wire, tmp_path):
    """Behind a proxy's path (``http://host/seg``) every batch request, the results that a status
    names by full URL included, goes below that path once (never ``/seg/seg/...``)."""
    with BatchServer(wire, prefix="/seg") as server:
        df = passk_nb.run(
            wire,
            "test-model",
            base_url=server.url + "/seg",
            trials=1,
            tasks=["refund-delivered"],
            out=tmp_path / "runs",
            progress=False,
            batch=True,
            batch_poll=0.02,
        )
    assert df["passed"].all(), df[["task", "outcome", "error"]]
    assert server.batches and server.chat_requests == 0
