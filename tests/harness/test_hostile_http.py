"""Hostile HTTP servers on 127.0.0.1: slow, endless, huge and gzip bodies, odd statuses, echoed secrets."""

from __future__ import annotations

import base64
import json
import logging

import pyarrow.parquet as pq
import pytest

import passk_nb
from tests.helpers.fake_servers import FakeServer, Fault

pytestmark = pytest.mark.network_local


def one_trial(server, tmp_path, **options):
    options = {"max_attempts": 1, "api_key_env": None, "base_url": server.url, **options}
    return passk_nb.run(
        "openai",
        "m",
        trials=1,
        tasks=["refund-delivered"],
        out=tmp_path,
        progress=False,
        **options,
    )


def test_a_server_trickling_one_byte_at_a_time_meets_the_request_deadline(tmp_path):
    with FakeServer("openai", faults=[Fault("trickle", seconds=0.3)]) as server:
        df = one_trial(server, tmp_path, timeout=1.5)
    assert df["outcome"].tolist() == ["infra_error"]
    assert "the reply was not complete within 1.5 s" in df["error"].iloc[0]
    assert server.body_bytes_sent < 30  # far from the 100 bytes a 30 s trickle would send


def test_an_abandoned_trials_endless_body_is_no_longer_read(tmp_path):
    with FakeServer("openai", faults=[Fault("endless", seconds=0.01)]) as server:
        df = one_trial(server, tmp_path, timeout=60, trial_timeout=1)
        assert df["outcome"].tolist() == ["infra_error"]
        assert "trial timed out" in df["error"].iloc[0]
        # the reader stopped: the server's writes fail once the client has closed the connection
        assert server.hostile_body_done.wait(15), "the endless body is still being read"


@pytest.mark.parametrize(
    ("fault", "options", "message"),
    [
        (Fault("big", size=3_000_000), {"max_body_bytes": 1_000_000}, "larger than max_body_bytes=1000000"),
        (
            Fault("gzip_bomb", size=50_000_000),
            {"max_decompressed_bytes": 1_000_000},
            "decompresses to more than max_decompressed_bytes=1000000",
        ),
        (Fault.http(302, "", Location="http://127.0.0.1:1/elsewhere"), {}, "HTTP 302 redirect from POST "),
        (Fault.http(204, ""), {}, "is empty (HTTP 204"),
    ],
)
def test_hostile_bodies_and_odd_statuses_say_what_the_server_answered(fault, options, message, tmp_path):
    with FakeServer("openai", faults=[fault]) as server:
        df = one_trial(server, tmp_path, **options)
    assert df["outcome"].tolist() == ["infra_error"]
    assert message in df["error"].iloc[0]
    if fault.status == 302:
        assert "to http://127.0.0.1:1/elsewhere, not followed" in df["error"].iloc[0]


def test_url_credentials_and_any_authorization_value_are_redacted_everywhere(tmp_path, caplog, capsys):
    password = "PASS-canary-5b1e"
    basic = base64.b64encode(f"user:{password}".encode()).decode()
    caplog.set_level(logging.DEBUG)

    def echo(body):
        return Fault("echo_headers", status=500)  # retried (and logged), then given up

    with FakeServer("openai", rule=echo) as server:
        url = server.url.replace("http://", f"http://user:{password}@")
        df = one_trial(server, tmp_path, base_url=url, max_attempts=2, backoff_base=0.01)
        seen = server.chat_requests()
    assert seen[0].headers["authorization"] == f"Basic {basic}"  # the credentials did reach the server
    assert df["outcome"].tolist() == ["infra_error"] and "Basic [REDACTED]" in df["error"].iloc[0]
    cells = json.dumps([pq.read_table(f).to_pylist() for f in tmp_path.rglob("*.parquet")], default=str)
    captured = capsys.readouterr()
    for where, text in {
        "records": cells,
        "log": caplog.text,
        "stderr": captured.err,
        "stdout": captured.out,
    }.items():
        for secret in (password, basic, basic[:12]):
            assert secret not in text, (where, secret)
