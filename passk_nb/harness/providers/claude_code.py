"""The Claude Code CLI (``claude``, npm package ``@anthropic-ai/claude-code``) as a chat backend.

Isolation is the point: each call is ``claude -p --output-format json --bare
--no-session-persistence --tools "" --system-prompt=...`` (the only combination that sent nothing
but our contract and messages), without a shell, in an empty temporary directory, with a timeout;
the CLI's version goes into ``provider_meta``. Thinking is off and ``max_tokens`` capped through the
CLI's environment; ``temperature`` and ``json_mode`` are refused (the CLI has neither). The
conversation is flattened into one prompt (:func:`flatten_messages`), one ``[user]`` or
``[assistant]`` block per turn.

What the CLI still sends, authentication and retries: ``docs/guide/backends.md``.

>>> system, prompt = flatten_messages([
...     {"role": "system", "content": "Reply in JSON."},
...     {"role": "user", "content": "Refund O1001."},
...     {"role": "assistant", "content": '{"answer": "Done."}'},
...     {"role": "user", "content": "Thanks!"}])
>>> print(prompt)
The conversation so far is below, one turn per block. Each block starts with its speaker on its own \
line, [user] or [assistant]. Reply with the next [assistant] turn: its content only, without the label.
<BLANKLINE>
[user]
Refund O1001.
<BLANKLINE>
[assistant]
{"answer": "Done."}
<BLANKLINE>
[user]
Thanks!
>>> unflatten_prompt(prompt)[1]
{'role': 'assistant', 'content': '{"answer": "Done."}'}
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from typing import Any

from passk_nb.data.redact import Redactor, short
from passk_nb.harness.arguments import check_seconds
from passk_nb.harness.providers.base import BaseProvider, Message, ProviderError, Reply, cancelled
from passk_nb.harness.providers.retry import provider_error

__all__ = ["ClaudeCodeProvider", "flatten_messages", "unflatten_prompt", "REQUIRED_FLAGS", "QUIET_ENV"]

#: First line of every flattened prompt.
FLATTEN_INSTRUCTION = (
    "The conversation so far is below, one turn per block. Each block starts with its speaker on its own "
    "line, [user] or [assistant]. Reply with the next [assistant] turn: its content only, without the label."
)
_BLOCK = re.compile(r"(?:\A|\n\n)\[(user|assistant)\]\n")

#: Flags the isolation depends on; a CLI whose ``--help`` lacks one is refused.
REQUIRED_FLAGS: tuple[str, ...] = (
    "--print",
    "--output-format",
    "--bare",
    "--no-session-persistence",
    "--tools",
    "--system-prompt",
    "--model",
)

#: Environment that switches off the CLI's non-essential traffic (telemetry, error reports, updates).
QUIET_ENV: dict[str, str] = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
}


def flatten_messages(messages: list[Message]) -> tuple[str, str]:
    """``(system prompt, prompt for stdin)``: system messages joined, the other turns as labelled blocks."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    blocks = [f"[{m['role']}]\n{m['content']}" for m in messages if m["role"] != "system"]
    return system, "\n\n".join([FLATTEN_INSTRUCTION, *blocks])


def unflatten_prompt(prompt: str) -> list[Message]:
    """The turns of a prompt made by :func:`flatten_messages` (the test servers use it to replay scripts)."""
    parts = _BLOCK.split(prompt)
    turns = zip(parts[1::2], parts[2::2], strict=True)
    return [{"role": role, "content": content} for role, content in turns]


def _version(text: str) -> str:
    match = re.search(r"\d+\.\d+\.\d+\S*", text)
    return match.group(0) if match else short(text, 60)


#: The environment variable that marks every process of one CLI call (inherited by its helpers).
CALL_MARKER = "PASSK_CLAUDE_CALL"


def call_tree(root: int, marker: str) -> set[int]:
    """The processes of one CLI call: ``root``'s descendants (a walk of ``/proc`` by parent pid),
    and every process whose environment holds ``CALL_MARKER=marker`` — which finds a helper that
    called ``setsid`` or was re-parented after its parent exited. Empty where ``/proc`` is missing.

    >>> child = subprocess.Popen(["sleep", "5"])
    >>> child.pid in call_tree(os.getpid(), "any") or not os.path.isdir("/proc")
    True
    >>> child.kill(); child.wait()
    -9
    """
    tag = f"{CALL_MARKER}={marker}".encode()
    children: dict[int, list[int]] = {}
    found: set[int] = set()
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return found
    for name in entries:
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
        with contextlib.suppress(OSError), open(f"/proc/{name}/environ", "rb") as f:
            if tag in f.read().split(b"\0"):
                found.add(int(name))
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    found.discard(os.getpid())
    return found


def _end_group(proc: subprocess.Popen[str], marker: str = "") -> None:
    """End the CLI call's whole process tree and reap the CLI: its process group, then every
    process :func:`call_tree` finds (stopped first, so none can start another meanwhile; walked
    twice, for a helper started during the first walk)."""
    for _ in range(2):
        tree = call_tree(proc.pid, marker) if marker else set()
        for pid in tree:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGSTOP)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        for pid in tree:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL not delivered
        pass
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


class ClaudeCodeProvider(BaseProvider):
    """Chat through the ``claude`` CLI, isolated from its coding-agent context.

    Options: ``executable`` (default ``$PASSK_CLAUDE_EXECUTABLE``, else
    ``claude`` on ``PATH``), ``timeout`` (seconds per call, default 300),
    ``max_tokens`` (longest reply, default 1024; None: the CLI's own),
    ``thinking`` (default False: extended thinking off), ``api_key_env``
    (the variable whose value the CLI gets as ``ANTHROPIC_API_KEY``; default
    ``ANTHROPIC_API_KEY``), ``env`` (more environment variables for the CLI).
    ``base_url`` sets ``ANTHROPIC_BASE_URL``. Without ``model`` the CLI's
    default model is used.

    Usage (needs a running backend, so not run as a doctest)::

        from passk_nb.harness.runner import run
        run("claude-code", "haiku", trials=3)
    """

    name = "claude-code"
    reports_cost = True

    def __init__(
        self,
        model: str | None = None,
        *,
        temperature: float | None = None,
        seed: int | None = None,
        base_url: str | None = None,
        json_mode: bool = False,
        executable: str | None = None,
        timeout: float = 300.0,
        max_tokens: int | None = 1024,
        thinking: bool = False,
        api_key_env: str = "ANTHROPIC_API_KEY",
        env: dict[str, str] | None = None,
    ):
        if temperature is not None:
            raise ValueError(
                "the claude CLI has no temperature setting; leave temperature unset for claude-code"
            )
        if json_mode:
            raise ValueError("the claude CLI has no JSON mode; run claude-code with json_mode=False")
        check_seconds("timeout", timeout, allow_none=False)
        super().__init__(model, seed=seed, base_url=base_url.rstrip("/") if base_url else None)
        wanted = executable or os.environ.get("PASSK_CLAUDE_EXECUTABLE") or "claude"
        found = shutil.which(wanted)
        if found is None:
            raise FileNotFoundError(
                f"claude CLI {wanted!r} not found; install it with "
                "`npm install -g @anthropic-ai/claude-code` or pass executable=PATH"
            )
        self.executable = found
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
        ):
            raise ValueError(f"max_tokens must be a whole number ≥ 1 or None, got {max_tokens!r}")
        self.timeout = float(timeout)
        self.max_tokens, self.thinking = max_tokens, bool(thinking)
        self.api_key_env = api_key_env
        self.extra_env = dict(env or {})
        self.redact = Redactor(
            [os.environ.get(api_key_env), os.environ.get("ANTHROPIC_API_KEY"), *self.extra_env.values()]
        )
        self.cli_version = _version(self._run_plain("--version"))
        self._check_flags(self._run_plain("--help"))
        self._cost_usd = 0.0

    def _run_plain(self, flag: str) -> str:
        try:
            done = subprocess.run(
                [self.executable, flag],
                capture_output=True,
                text=True,
                timeout=60,
                env=self._env(),
                shell=False,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ValueError(f"`{self.executable} {flag}` failed: {type(exc).__name__}: {exc}") from None
        return done.stdout + done.stderr

    def _check_flags(self, help_text: str) -> None:
        def offered(flag: str) -> bool:
            return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text) is not None

        missing = [flag for flag in REQUIRED_FLAGS if not offered(flag)]
        if missing:
            raise ValueError(
                f"claude CLI {self.cli_version} at {self.executable} lacks {', '.join(missing)} (see `claude "
                "--help`); the claude-code provider needs them to keep the CLI's own context out of the "
                "conversation. Install a newer CLI: npm install -g @anthropic-ai/claude-code"
            )

    def _env(self) -> dict[str, str]:
        env = {**os.environ, **QUIET_ENV}
        if self.max_tokens is not None:
            env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(self.max_tokens)
        if not self.thinking:
            env["CLAUDE_CODE_DISABLE_THINKING"] = "1"
        env.update(self.extra_env)
        if self.base_url:
            env["ANTHROPIC_BASE_URL"] = self.base_url
        key = os.environ.get(self.api_key_env)
        if key:
            env["ANTHROPIC_API_KEY"] = key
        return env

    def command(self, system_prompt: str) -> list[str]:
        """The argument list of one call (the prompt itself goes to stdin)."""
        cmd = [
            self.executable,
            "-p",
            "--output-format",
            "json",
            "--bare",
            "--no-session-persistence",
            "--tools",
            "",
            f"--system-prompt={system_prompt}",
        ]
        if self.model:
            cmd += ["--model", self.model]
        return cmd

    def check_prompt(self, system_prompt: str) -> None:
        """A NUL character cannot go into a command-line argument: refuse it before any trial."""
        for what, text in (("system prompt", system_prompt), ("model name", self.model)):
            if "\x00" in text:
                raise ValueError(
                    f"the {what} contains a NUL character (\\x00), which the claude CLI cannot take as an "
                    "argument; remove it"
                )

    def with_seed(self, seed: int | None) -> ClaudeCodeProvider:
        """A copy for one trial; its ``cost_usd`` in ``provider_meta`` sums that trial's calls."""
        clone = super().with_seed(seed)
        assert isinstance(clone, ClaudeCodeProvider)
        clone._cost_usd = 0.0
        return clone

    def chat(self, messages: list[Message]) -> Reply:
        system, prompt = flatten_messages(messages)
        with tempfile.TemporaryDirectory(prefix="passk-claude-") as workdir:
            done = self._call(self.command(system), prompt, workdir)
        data = self._result(done.stdout)
        if data is None:
            raise provider_error(
                f"claude CLI exited with status {done.returncode} and no JSON result; "
                f"stderr: {short(self.redact(done.stderr)) or '(empty)'}",
                1,
            )
        if data.get("is_error") or done.returncode != 0:
            reason = data.get("result") or data.get("errors") or data.get("subtype") or "no reason given"
            raise provider_error(
                f"claude CLI error (exit status {done.returncode}): {short(self.redact(reason))}", 1
            )
        text = data.get("result")
        if not isinstance(text, str):
            raise ProviderError("claude CLI result has no `result` text")
        raw_usage = data.get("usage")
        usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        inputs = [
            usage[k]
            for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
            if isinstance(usage.get(k), int)
        ]
        output = usage.get("output_tokens")
        cost = data.get("total_cost_usd")
        if isinstance(cost, int | float):
            self._cost_usd += float(cost)
        models = data.get("modelUsage")
        meta: dict[str, Any] = {"cli_version": self.cli_version, "cost_usd": round(self._cost_usd, 6)}
        if isinstance(models, dict) and models:
            meta["resolved_model"] = ",".join(models)
        return Reply(
            self.redact.known(text),  # the CLI's key, should the model quote it
            input_tokens=sum(inputs) if inputs else None,
            output_tokens=output if isinstance(output, int) else None,
            attempts=1,
            meta=meta,
        )

    def _call(self, cmd: list[str], prompt: str, workdir: str) -> subprocess.CompletedProcess[str]:
        """Run one CLI call in its own process group; on timeout or cancellation end its whole tree.

        The CLI starts helpers of its own: ending only the CLI would leave them
        running. Each call's processes carry a marker in their environment, so
        helpers that left the group (``setsid``) are found too (:func:`call_tree`).
        The call is given up when ``timeout`` passes or the trial is given up on
        (``trial_timeout``), whichever comes first.
        """
        marker = uuid.uuid4().hex
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=workdir,
                env={**self._env(), CALL_MARKER: marker},
                shell=False,
                start_new_session=True,  # its own process group, ended as a whole below
            )
        except (OSError, ValueError) as exc:
            raise provider_error(f"claude CLI could not run: {type(exc).__name__}: {exc}", 1) from None
        deadline = time.monotonic() + self.timeout
        pending: str | None = prompt
        while True:
            try:
                out, err = proc.communicate(pending, timeout=max(0.0, min(0.2, deadline - time.monotonic())))
                return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
            except subprocess.TimeoutExpired:
                pending = None  # already sent; communicate() keeps what it read so far
                if cancelled():
                    _end_group(proc, marker)
                    raise provider_error(
                        "the trial was given up on (trial_timeout); claude CLI ended", 1
                    ) from None
                if time.monotonic() >= deadline:
                    _end_group(proc, marker)
                    raise provider_error(f"claude CLI gave no result within {self.timeout:g} s", 1) from None

    @staticmethod
    def _result(stdout: str) -> dict[str, Any] | None:
        """The JSON result object on stdout (the whole output, else its last JSON line)."""
        candidates = [stdout.strip(), *reversed(stdout.strip().splitlines())]
        for text in candidates:
            try:
                data = json.loads(text)
            except ValueError:
                continue
            if isinstance(data, dict):
                return data
        return None

    def meta(self) -> dict[str, Any]:
        return {
            "cli_version": self.cli_version,
            "timeout_s": self.timeout,
            "max_tokens": self.max_tokens,
            "thinking": self.thinking,
        }
