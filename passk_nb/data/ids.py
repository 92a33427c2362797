"""Identities: short content hashes for prompts, run specs and imported files."""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: Columns that say what was measured: every analysis groups by each one a frame has unless
#: ``by=`` says otherwise, so two configurations (or two versions of a suite) are never pooled.
IDENTITY_COLUMNS: tuple[str, ...] = (
    "suite",
    "suite_hash",
    "provider",
    "model",
    "prompt_name",
    "prompt_hash",
    "faults",
    "perturbation",
    "config",
)


def prompt_hash(text: str) -> str:
    """First 12 hex characters of the sha256 of the exact prompt text.

    >>> prompt_hash("You are a helpful agent.")
    'fb825410b084'
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def spec_hash(spec: dict[str, Any]) -> str:
    """The run id of a spec: first 12 hex chars of the sha256 of its sorted JSON."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]


def content_id(data: Any) -> str:
    """A run id for imported data: the same whenever the content is (12 hex chars).

    >>> content_id(["imported", "gpt-4o"]) == content_id(["imported", "gpt-4o"])
    True
    """
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:12]
