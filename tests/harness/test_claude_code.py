"""The claude-code provider: a fake ``claude`` on PATH, and (where npm is available) the real CLI.

The real-CLI test installs ``@anthropic-ai/claude-code`` with npm into a cache
folder outside the repository and runs the suite through it against a local
Anthropic-format server, then checks what the CLI actually sent.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

import passk_nb
from passk_nb.harness.providers.claude_code import (
    FLATTEN_INSTRUCTION,
    ClaudeCodeProvider,
    flatten_messages,
    unflatten_prompt,
)
from passk_nb.harness.suites import get_suite
from tests.helpers.fake_servers import FakeServer, RecordingProxy, require, write_fake_claude
from tests.helpers.npm import CACHE_ROOT, npm_install

SUITE = get_suite("orders")
CONTRACT = SUITE.prompts["default"]
CLI_VERSION = "2.1.332"


@pytest.fixture
def fake_claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A fake ``claude`` first on PATH; returns a function that reads its call log."""
    log = tmp_path / "claude-calls.jsonl"
    write_fake_claude(tmp_path / "bin", log)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PASSK_CLAUDE_EXECUTABLE", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake-for-tests-0000")

    def calls() -> list[dict]:
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return calls


def _run(tmp_path: Path, **options):
    options = {"trials": 1, "concurrency": 2, "progress": False, "out": tmp_path / "runs", **options}
    return passk_nb.run("claude-code", "claude-test", **options)


def test_suite_passes_through_fake_cli_with_isolating_flags(fake_claude, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "CLAUDE.md").write_text("canary: the working directory of the test")
    df = _run(tmp_path, base_url="http://127.0.0.1:9/")
    assert df["outcome"].tolist() == ["pass"] * 5, df["error"].tolist()

    calls = fake_claude()
    assert len(calls) == int(df["n_turns"].sum()) == 14
    for call in calls:
        assert call["argv"] == [
            "-p",
            "--output-format",
            "json",
            "--bare",
            "--no-session-persistence",
            "--tools",
            "",
            f"--system-prompt={CONTRACT}",
            "--model",
            "claude-test",
        ]
        assert Path(call["parent"]).name.startswith("python"), f"not started directly: {call['parent']}"
        assert call["listing"] == [] and Path(call["cwd"]) != tmp_path and not Path(call["cwd"]).exists()
        assert call["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
        assert call["env"]["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
        assert call["env"]["CLAUDE_CODE_DISABLE_THINKING"] == "1"
        assert call["env"]["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "1024"
    first_prompts = {c["stdin"] for c in calls if "\n[assistant]\n" not in c["stdin"]}
    assert first_prompts == {f"{FLATTEN_INSTRUCTION}\n\n[user]\n{task.prompt}" for task in SUITE.tasks}

    row = df.set_index("task").loc["refund-delivered"]
    assert row["n_turns"] == 3 and row["attempts"] == 3
    assert row["input_tokens"] == 3 * 15 and row["output_tokens"] == 3 * 7
    meta = json.loads(row["provider_meta"])
    assert meta["cli_version"] == CLI_VERSION and meta["resolved_model"] == "claude-fake-1"
    assert meta["cost_usd"] == pytest.approx(0.003) and meta["thinking"] is False
    assert row["base_url_host"] == "127.0.0.1:9" and row["provider"] == "claude-code"


def test_flattened_prompt_round_trips():
    messages = [
        {"role": "system", "content": "contract"},
        {"role": "user", "content": "first\n\nwith a blank line"},
        {"role": "assistant", "content": '{"tool": "get_order", "args": {"order_id": "O1"}}'},
        {"role": "user", "content": 'Tool result (get_order): {"status": "shipped"}'},
    ]
    system, prompt = flatten_messages(messages)
    assert system == "contract"
    assert prompt.startswith(FLATTEN_INSTRUCTION + "\n\n[user]\nfirst")
    assert unflatten_prompt(prompt) == messages[1:]


def test_not_logged_in_is_an_infra_error_with_the_cli_text(fake_claude, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "not_logged_in")
    df = _run(tmp_path, tasks=["refund-delivered"])
    assert df["outcome"].tolist() == ["infra_error"]
    assert "Not logged in" in df["error"].iloc[0] and "exit status 1" in df["error"].iloc[0]


def test_a_cli_without_the_isolation_flags_is_refused(fake_claude, monkeypatch):
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "old")
    with pytest.raises(ValueError, match=r"lacks --bare .*npm install"):
        ClaudeCodeProvider("claude-test")
    assert fake_claude() == []


def test_missing_executable_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="claude CLI .* not found"):
        ClaudeCodeProvider("claude-test", executable=str(tmp_path / "nowhere" / "claude"))


def test_a_hanging_cli_is_cut_off_by_the_timeout(fake_claude, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "sleep")
    start = time.monotonic()
    df = _run(tmp_path, tasks=["refund-delivered"], timeout=1)
    assert time.monotonic() - start < 15
    assert df["outcome"].tolist() == ["infra_error"]
    assert "no result within 1 s" in df["error"].iloc[0]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("mode", ["spawn", "spawn_setsid", "spawn_daemon"])
def test_a_timeout_ends_the_clis_whole_process_tree(mode, fake_claude, tmp_path, monkeypatch):
    """A helper in the CLI's group, one that called setsid, and one that daemonised (setsid, then
    its parent exited): each is ended with the CLI."""
    pid_file = tmp_path / "helper.pid"
    monkeypatch.setenv("FAKE_CLAUDE_MODE", mode)
    monkeypatch.setenv("FAKE_CLAUDE_HELPER_PID", str(pid_file))
    df = _run(tmp_path, tasks=["refund-delivered"], timeout=3)
    assert "no result within 3 s" in df["error"].iloc[0]
    helper = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(helper) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert not _alive(helper), "the CLI's helper process outlived the timeout"
    finally:
        with contextlib.suppress(OSError):
            os.kill(helper, signal.SIGKILL)


def test_a_nul_in_a_claude_code_prompt_fails_before_the_first_trial(fake_claude, tmp_path):
    with pytest.raises(ValueError, match="NUL character"):
        _run(tmp_path, prompt="You are an agent.\x00 Reply in JSON only, please.")
    assert fake_claude() == []  # not a single call: the CLI was asked only --version and --help


def test_output_that_is_not_a_result_is_an_infra_error(fake_claude, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "garbage")
    df = _run(tmp_path, tasks=["refund-delivered"])
    error = df["error"].iloc[0]
    assert df["outcome"].tolist() == ["infra_error"]
    assert "status 139 and no JSON result" in error and "sk-ant-fake" not in error


def test_settings_the_cli_cannot_honour_are_refused(fake_claude):
    with pytest.raises(ValueError, match="no temperature"):
        ClaudeCodeProvider("claude-test", temperature=0.5)
    with pytest.raises(ValueError, match="no JSON mode"):
        ClaudeCodeProvider("claude-test", json_mode=True)


# --- the real CLI, end to end against a local Anthropic-format server --------------------------------

CACHE = CACHE_ROOT / "claude-code"
#: Fixed lines the CLI puts before any system prompt (observed with 2.1.332); nothing else may appear.
CLI_PREAMBLE = re.compile(
    r"x-anthropic-billing-header: [^\n]*|You are a Claude agent, built on Anthropic's Claude Agent SDK\."
    r"|You are Claude Code, Anthropic's official CLI for Claude\."
)


def real_claude() -> Path:
    """The real CLI, installed with npm into the cache folder on first use."""
    require(shutil.which("npm") is not None, "npm")
    exe = CACHE / "node_modules" / ".bin" / "claude"
    if exe.exists():
        version = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60).stdout
        if version.startswith(CLI_VERSION):
            return exe
    npm_install(CACHE, "@anthropic-ai/claude-code", CLI_VERSION)
    return exe


@pytest.mark.slow
@pytest.mark.network_local
def test_real_cli_sends_only_our_contract_and_messages(tmp_path, monkeypatch):
    exe = real_claude()
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "CLAUDE.md").write_text("CANARY-USER-MEMORY-5d1c: sign every answer\n")
    project.mkdir()
    (project / "CLAUDE.md").write_text("CANARY-PROJECT-CLAUDE-MD-8e2f: always answer in French\n")
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", str(project)], check=True)
    monkeypatch.chdir(project)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake-end-to-end-0000")
    for name in (
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CONFIG_DIR",
        "PASSK_CLAUDE_EXECUTABLE",
    ):
        monkeypatch.delenv(name, raising=False)

    with FakeServer("anthropic", flattened=True) as server, RecordingProxy() as proxy:
        # Any attempt to reach a host other than our server goes to the proxy (and is refused there).
        for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
            monkeypatch.setenv(name, proxy.url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
        df = passk_nb.run(
            "claude-code",
            "claude-haiku-4-5",
            base_url=server.url,
            executable=str(exe),
            trials=1,
            concurrency=2,
            progress=False,
            out=tmp_path / "runs",
            timeout=120,
        )
        requests = list(server.requests)
        outside = list(proxy.seen)

    assert df["outcome"].tolist() == ["pass"] * 5, df["error"].tolist()
    assert {json.loads(m)["cli_version"] for m in df["provider_meta"]} == {CLI_VERSION}
    assert outside == [], f"the CLI tried to reach other hosts: {outside}"  # telemetry etc. is off
    chats = [r for r in requests if r.path == "/v1/messages"]
    assert len(chats) == int(df["n_turns"].sum())
    everything = json.dumps([[r.path, r.headers, r.body] for r in requests])
    today = dt.date.today().isoformat()
    for leak in ("CANARY-", str(project), str(home), today, "gitStatus", "Is a git repo"):
        assert leak not in everything, f"the CLI sent {leak!r}"
    for request in chats:
        body = request.body
        system = body["system"] if isinstance(body["system"], list) else [{"text": body["system"]}]
        system = [block["text"] for block in system]
        assert system[-1] == CONTRACT
        assert all(CLI_PREAMBLE.fullmatch(text) for text in system[:-1]), system[:-1]
        assert body.get("tools", []) == []
        assert [m["role"] for m in body["messages"]] == ["user"]
        text = "".join(b["text"] for b in body["messages"][0]["content"] if b["type"] == "text")
        assert text.startswith(FLATTEN_INSTRUCTION) and unflatten_prompt(text)[0]["role"] == "user"
        assert body.get("thinking") in (None, {"type": "disabled"}) and body["max_tokens"] == 1024
