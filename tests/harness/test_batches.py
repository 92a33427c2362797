"""run(batch=True): model turns through the Anthropic and OpenAI batch APIs (fake servers on
127.0.0.1 speaking each API's documented wire format)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
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
