"""Hostile HTTP servers on 127.0.0.1 against EVERY network backend and both protocols: slow, endless,
huge and gzip bodies, odd statuses, echoed secrets.

The backends are :data:`passk_nb.harness.providers.NETWORK_PROVIDERS`, and
``test_the_battery_covers_every_network_backend`` checks that tuple names every registered
backend that talks HTTP: a new backend cannot skip these tests.
"""

from __future__ import annotations

import base64
import json
import logging

import pyarrow.parquet as pq
import pytest

import passk_nb
from passk_nb.harness.providers import NETWORK_PROVIDERS, PROVIDERS, _load
from passk_nb.harness.providers.http import RemoteProvider
from tests.helpers.fake_servers import CHAT_PATHS, FakeServer, Fault, clean_backend_env

pytestmark = pytest.mark.network_local

BACKENDS = [pytest.param(b, p, id=f"{b}-{p}") for b in NETWORK_PROVIDERS for p in ("json", "native")]


@pytest.fixture(autouse=True)
def _no_backend_env(monkeypatch):
    clean_backend_env(monkeypatch)


def test_the_battery_covers_every_network_backend():
    network = {name for name in PROVIDERS if issubclass(_load(name), RemoteProvider)}
    assert set(NETWORK_PROVIDERS) == network, "add the new network backend to NETWORK_PROVIDERS"
    assert network <= set(CHAT_PATHS), "teach tests/helpers/fake_servers.FakeServer the new backend's wire"


def one_trial(backend, protocol, server, tmp_path, **options):
    options = {"max_attempts": 1, "base_url": server.url, **options}
    return passk_nb.run(
        backend,
        "m",
        trials=1,
        tasks=["refund-delivered"],
        out=tmp_path,
        progress=False,
        protocol=protocol,
        **options,
    )


@pytest.mark.parametrize(("backend", "protocol"), BACKENDS)
def test_a_server_trickling_one_byte_at_a_time_meets_the_request_deadline(backend, protocol, tmp_path):
    with FakeServer(backend, faults=[Fault("trickle", seconds=0.3)]) as server:
        df = one_trial(backend, protocol, server, tmp_path, timeout=1.5)
    assert df["outcome"].tolist() == ["infra_error"]
    assert "the reply was not complete within 1.5 s" in df["error"].iloc[0]
    assert server.body_bytes_sent < 30  # far from the 100 bytes a 30 s trickle would send


@pytest.mark.parametrize(("backend", "protocol"), BACKENDS)
def test_an_abandoned_trials_endless_body_is_no_longer_read(backend, protocol, tmp_path):
    with FakeServer(backend, faults=[Fault("endless", seconds=0.01)]) as server:
        df = one_trial(backend, protocol, server, tmp_path, timeout=60, trial_timeout=1)
        assert df["outcome"].tolist() == ["infra_error"]
        assert "trial timed out" in df["error"].iloc[0]
        # the reader stopped: the server's writes fail once the client has closed the connection
        assert server.hostile_body_done.wait(15), "the endless body is still being read"


@pytest.mark.parametrize(("backend", "protocol"), BACKENDS)
@pytest.mark.parametrize(
    ("fault", "options", "message"),
    [
        (Fault("big", size=3_000_000), {"max_body_bytes": 1_000_000}, "larger than max_body_bytes=1000000"),
        (
            Fault("gzip_bomb", size=50_000_000),
            {"max_decompressed_bytes": 1_000_000},
            "decompresses to more than max_decompressed_bytes=1000000",
        ),
        (Fault("endless"), {"max_body_bytes": 1_000_000}, "larger than max_body_bytes=1000000"),
        (Fault.http(302, "", Location="http://127.0.0.1:1/elsewhere"), {}, "HTTP 302 redirect from POST "),
        (Fault.http(204, ""), {}, "is empty (HTTP 204"),
    ],
    ids=["big", "gzip_bomb", "endless", "redirect", "empty"],
)
def test_hostile_bodies_and_odd_statuses_say_what_the_server_answered(
    backend, protocol, fault, options, message, tmp_path
):
    with FakeServer(backend, faults=[fault]) as server:
        df = one_trial(backend, protocol, server, tmp_path, **options)
    assert df["outcome"].tolist() == ["infra_error"]
    assert message in df["error"].iloc[0]
    if fault.status == 302:
        assert "to http://127.0.0.1:1/elsewhere, not followed" in df["error"].iloc[0]
    assert server.body_bytes_sent < 20_000_000  # the endless body was not read for long


def _secrets_nowhere(tmp_path, caplog, capsys, secrets):
    cells = json.dumps([pq.read_table(f).to_pylist() for f in tmp_path.rglob("*.parquet")], default=str)
    captured = capsys.readouterr()
    for where, text in {
        "records": cells,
        "log": caplog.text,
        "stderr": captured.err,
        "stdout": captured.out,
    }.items():
        for secret in secrets:
            assert secret not in text, (where, secret)


@pytest.mark.parametrize(("backend", "protocol"), BACKENDS)
@pytest.mark.parametrize("fault", ["echo_headers", "quote_headers"])
def test_credentials_echoed_by_the_server_or_quoted_by_the_model_are_masked_everywhere(
    backend, protocol, fault, tmp_path, caplog, capsys, monkeypatch
):
    """An error quoting the credentials (retried, logged, given up) or a model reply quoting them
    (the model's text, kept as its answer): neither leaves a secret in a record, log or output.
    URL credentials where the backend takes them (no key), else the backend's key."""
    caplog.set_level(logging.DEBUG)
    with FakeServer(backend, rule=lambda body: Fault(fault, status=500)) as server:
        if backend == "anthropic":  # needs a key, so URL credentials are refused (see below)
            key = "sk-ant-canary-0123456789"
            monkeypatch.setenv("ANTHROPIC_API_KEY", key)
            url, sent, secrets = server.url, f"Bearer {key}", [key]
        else:
            password = "PASS-canary-5b1e"
            basic = base64.b64encode(f"user:{password}".encode()).decode()
            url = server.url.replace("http://", f"http://user:{password}@")
            sent, secrets = f"Basic {basic}", [password, basic, basic[:12]]
        df = one_trial(backend, protocol, server, tmp_path, base_url=url, max_attempts=2, backoff_base=0.01)
        seen = server.chat_requests()
    assert seen[0].headers["authorization"] == sent  # the credentials did reach the server
    if fault == "echo_headers":
        assert df["outcome"].tolist() == ["infra_error"] and "[REDACTED]" in df["error"].iloc[0]
    else:  # the model's reply, kept as the model's, with the secret masked
        assert df["outcome"].iloc[0] != "infra_error"
        assert "[REDACTED]" in df["transcript"].iloc[0]
    _secrets_nowhere(tmp_path, caplog, capsys, secrets)


@pytest.mark.parametrize("protocol", ["json", "native"])
def test_a_bearer_key_quoted_back_by_the_model_is_masked(protocol, tmp_path, caplog, capsys, monkeypatch):
    key = "sk-canary-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with FakeServer("openai", rule=lambda body: Fault("quote_headers")) as server:
        df = one_trial("openai", protocol, server, tmp_path)
        assert server.chat_requests()[0].headers["authorization"] == f"Bearer {key}"
    assert df["outcome"].iloc[0] != "infra_error"
    assert key not in str(df["final_answer"].iloc[0]) + df["transcript"].iloc[0]
    _secrets_nowhere(tmp_path, caplog, capsys, [key])


@pytest.mark.parametrize(
    ("backend", "env"), [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")]
)
def test_url_credentials_and_a_key_together_are_refused(backend, env, monkeypatch):
    monkeypatch.setenv(env, "sk-canary-0123456789abcdef")
    with pytest.raises(ValueError, match=rf"credentials .*\${env} is set.*only one can be sent"):
        passk_nb.run(backend, "m", base_url="http://user:pw@127.0.0.1:9/v1", trials=1, progress=False)
