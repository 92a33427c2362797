"""What every command shares: the usage error and argument types."""

from __future__ import annotations

import argparse
from pathlib import Path


class CliError(Exception):
    """A usage problem: printed as one line, exit status 2."""


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be ≥ 1, got {value}")
    return value


def prompt_arg(text: str) -> tuple[str, str | None]:
    """A prompt name, or a file holding the prompt text: (prompt, name)."""
    path = Path(text)
    if path.suffix or "/" in text or path.is_file():
        if not path.is_file():
            raise CliError(f"prompt file {text!r} does not exist; give a prompt name or an existing file")
        return path.read_text(encoding="utf-8"), path.stem
    return text, None
