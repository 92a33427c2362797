"""Every network backend starts without importing an SDK it does not use.

``import anthropic`` costs seconds of CPU; the asyncio and batch paths of the ``anthropic``
backend post through the shared transport and need none of it. Asserted on what a fresh process
imported, not on seconds: the machine is noisy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from passk_nb.harness.providers import NETWORK_PROVIDERS, make_provider
from tests.helpers.batch_servers import BatchServer
from tests.helpers.fake_servers import FakeServer, clean_backend_env

#: SDKs a backend could import at start-up; the HTTP paths need none.
SDKS = ("anthropic", "openai")


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_backend_env(monkeypatch)


def run_in_a_fresh_process(backend: str, url: str, out: str, **options: object) -> dict:
    """One trial of ``backend`` against ``url`` in a new interpreter: outcomes, and the SDKs imported."""
    code = textwrap.dedent(
        f"""
        import json, sys
        import passk_nb
        df = passk_nb.run({backend!r}, "m", base_url={url!r}, trials=1, tasks=["refund-delivered"],
                          out={out!r}, progress=False, max_attempts=1, **{options!r})
        sdks = sorted(m for m in {SDKS!r} if m in sys.modules)
        print(json.dumps({{"outcomes": df["outcome"].tolist(), "sdks": sdks}}))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.network_local
@pytest.mark.parametrize("backend", NETWORK_PROVIDERS)
def test_a_network_backend_runs_a_trial_without_importing_an_sdk(backend, tmp_path):
    with FakeServer(backend) as server:
        seen = run_in_a_fresh_process(backend, server.url, str(tmp_path))
    assert seen == {"outcomes": ["pass"], "sdks": []}


@pytest.mark.network_local
@pytest.mark.parametrize("wire", ["anthropic", "openai"])
def test_a_batch_run_imports_no_sdk_either(wire, tmp_path):
    with BatchServer(wire) as server:
        seen = run_in_a_fresh_process(wire, server.url, str(tmp_path), batch=True, batch_poll=0.02)
    assert seen == {"outcomes": ["pass"], "sdks": []}


def test_the_anthropic_headers_and_versions_are_the_sdks_own():
    """The asyncio and batch paths send, from a table, what the SDK's own client sends."""
    import anthropic

    provider = make_provider("anthropic", "m", base_url="http://127.0.0.1:9")
    try:
        sdk = {k.lower(): v for k, v in provider._client.default_headers.items()}
        ours = {k.lower(): v for k, v in provider.sdk_headers().items()}
        assert ours.items() <= sdk.items()
        assert {"anthropic-version", "authorization", "user-agent"} <= set(ours)
        meta = provider.meta()
        assert (meta["sdk_version"], meta["api_version"]) == (anthropic.__version__, sdk["anthropic-version"])
    finally:
        provider.close()
