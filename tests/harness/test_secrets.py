"""A recognisable fake API key must reach the backend and nothing else: no parquet cell, no log, no error.

The fake servers echo the request headers back in their error bodies, so an
unredacted error message would carry the key into the records.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import passk_nb
from passk_nb.data.redact import Redactor
from passk_nb.harness.providers import make_provider
from passk_nb.harness.providers.batches import JOURNAL_FILE
from tests.helpers.batch_servers import BatchServer
from tests.helpers.fake_servers import FakeServer, Fault, clean_backend_env, mentions, write_fake_claude

KEY = "sk-passk-CANARY-7d41c9e0b2a84f6e"


def every_cell(folder: Path) -> str:
    """Every value of every parquet file under ``folder``, as one string."""
    files = sorted(folder.rglob("*.parquet"))
    assert files, f"no parquet files under {folder}"
    return json.dumps([pq.read_table(f).to_pylist() for f in files], default=str)


def echo_faults(body):
    if mentions(body, "Alice Moreno"):
        return Fault("echo_headers", status=401)  # not retried
    if mentions(body, "Ben Carter"):
        return Fault("echo_headers", status=500)  # retried (and logged), then given up
    return None


@pytest.mark.network_local
@pytest.mark.parametrize(
    ("wire", "variable"), [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")]
)
def test_the_api_key_is_in_no_record_log_or_error(wire, variable, tmp_path, monkeypatch, caplog, capsys):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, KEY)
    caplog.set_level(logging.DEBUG)
    out = tmp_path / "runs"
    with FakeServer(wire, rule=echo_faults) as server:
        df = passk_nb.run(
            wire,
            "m",
            base_url=server.url,
            trials=1,
            out=out,
            progress=True,
            max_attempts=2,
            backoff_base=0.01,
        )
        sent = [r.headers for r in server.chat_requests()]
        provider = make_provider(wire, "m", base_url=server.url)

    # The key was really sent, and really echoed back into the error bodies.
    assert sent and all(KEY in h.get("authorization", "") + h.get("x-api-key", "") for h in sent)
    errors = df.set_index("task")["error"]
    assert "HTTP 401 (not retried)" in errors["refund-delivered"] and REDACTED_IN(errors["refund-delivered"])
    assert "HTTP 500 after 2 attempts" in errors["cancel-pending-lookup"]
    assert REDACTED_IN(errors["cancel-pending-lookup"])
    assert df["outcome"].value_counts().to_dict() == {"pass": 3, "infra_error": 2}

    assert KEY not in every_cell(out)
    assert caplog.records and KEY not in caplog.text
    assert "retrying" in caplog.text  # the 500s were logged, redacted
    printed = capsys.readouterr()
    assert KEY not in printed.out + printed.err
    assert KEY not in repr(provider) + json.dumps(provider.describe()) + repr(provider.redact)


def REDACTED_IN(text: str) -> bool:  # noqa: N802 - reads as an assertion
    return "[REDACTED]" in text and KEY not in text


@pytest.mark.parametrize("mode", ["echo_key", "garbage"])
def test_the_key_given_to_the_claude_cli_stays_out_of_its_errors(mode, tmp_path, monkeypatch):
    write_fake_claude(tmp_path / "bin", tmp_path / "calls.jsonl")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("FAKE_CLAUDE_MODE", mode)
    df = passk_nb.run(
        "claude-code", "m", tasks=["refund-delivered"], trials=1, progress=False, out=tmp_path / "runs"
    )
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert calls and calls[0]["env"]["ANTHROPIC_API_KEY"] == KEY  # the CLI did get the key
    assert df["outcome"].tolist() == ["infra_error"] and KEY not in every_cell(tmp_path / "runs")


def test_the_key_quoted_in_a_claude_cli_answer_is_masked(tmp_path, monkeypatch):
    write_fake_claude(tmp_path / "bin", tmp_path / "calls.jsonl")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "quote_key")
    df = passk_nb.run(
        "claude-code", "m", tasks=["refund-delivered"], trials=1, progress=False, out=tmp_path / "runs"
    )
    assert df["final_answer"].tolist() == ["your key: [REDACTED]"]  # the model's answer, masked
    assert KEY not in every_cell(tmp_path / "runs")


def test_redactor_masks_credentials_it_was_not_told_about():
    redact = Redactor()
    text = redact(
        '{"authorization": "Bearer abc123", "x-api-key": "k-999", "note": "sk-ant-api03-XYZxyz1234"}'
    )
    assert "abc123" not in text and "k-999" not in text and "XYZxyz1234" not in text
    assert text.count("[REDACTED]") == 3


def every_byte(folder: Path) -> str:
    """Every record of ``folder``'s parquet files and the raw text of every other file under it."""
    others = [f for f in sorted(folder.rglob("*")) if f.is_file() and f.suffix != ".parquet"]
    return every_cell(folder) + "".join(f.read_bytes().decode("utf-8", "replace") for f in others)


@pytest.mark.network_local
@pytest.mark.parametrize("wire", ["anthropic", "openai"])
def test_a_key_echoed_by_a_batch_api_is_in_no_byte_of_the_run_folder(wire, tmp_path, monkeypatch):
    """A batch API that quotes the Authorization header in a request's error, and names its batches
    with the key: the run's records, journal and every other file hold the key nowhere."""
    clean_backend_env(monkeypatch)
    monkeypatch.setenv("ANTHROPIC_API_KEY" if wire == "anthropic" else "OPENAI_API_KEY", KEY)

    def fate(cid, body):
        if "C002" in json.dumps(body):
            return "errored", f"invalid header Authorization: Bearer {KEY} (key {KEY})"
        return None

    out = tmp_path / "runs"
    with BatchServer(wire, fate=fate, batch_id=lambda n: f"batch_{KEY}_{n:04d}") as server:
        df = passk_nb.run(
            wire,
            "m",
            base_url=server.url,
            trials=1,
            tasks=["refund-delivered", "cancel-pending-lookup"],
            out=out,
            progress=False,
            batch=True,
            batch_poll=0.02,
        )
    assert all(KEY in b["id"] for b in server.batches)  # the key really came back, as the batch ids
    by_task = df.set_index("task")
    assert by_task.loc["refund-delivered", "passed"]
    error = by_task.loc["cancel-pending-lookup", "error"]
    assert by_task.loc["cancel-pending-lookup", "outcome"] == "infra_error"
    assert "request errored" in error and "invalid header" in error and REDACTED_IN(error)
    assert list(out.rglob(JOURNAL_FILE))  # the journal was written, masked
    assert KEY not in every_byte(out)


def test_the_record_boundary_masks_every_text_whatever_produced_it(tmp_path):
    """Records reach disk through one boundary: the run's secrets are masked in every column, and
    every credential shape in what a server or the harness wrote (error, provider metadata), while
    the model's text keeps what merely looks like a credential; the JSON stays JSON."""
    from passk_nb.harness.batch import execute_trials

    meta = {"batch_id": f"b_{KEY}", "echo": 'Authorization: Token abc123"tail'}
    record = {
        "run_id": "r",
        "suite": "orders",
        "task": "t",
        "passed": False,
        "outcome": "infra_error",
        "final_answer": f"use Bearer looks-like-one, not {KEY}",
        "transcript": json.dumps([{"kind": "reply", "text": f"key {KEY}"}]),
        "provider_meta": json.dumps(meta),
        "error": f"HTTP 401: x-api-key: other-key-42; batch b_{KEY}",
    }
    records = execute_trials(
        lambda task, trial: {**record, "trial": trial},
        [("t", 0)],
        concurrency=1,
        out=tmp_path,
        run_id="r",
        progress=False,
        redact=Redactor([KEY]),
    )
    stored = passk_nb.load(tmp_path).iloc[0]
    assert KEY not in every_cell(tmp_path) and KEY not in json.dumps(records)
    assert stored["final_answer"] == "use Bearer looks-like-one, not [REDACTED]"  # the model's, as written
    assert stored["error"] == "HTTP 401: x-api-key: [REDACTED]; batch b_[REDACTED]"
    assert json.loads(stored["provider_meta"]) == {
        "batch_id": "b_[REDACTED]",
        "echo": 'Authorization: Token [REDACTED]"tail',
    }
    assert json.loads(stored["transcript"]) == [{"kind": "reply", "text": "key [REDACTED]"}]
