"""What a run is: its spec (the run identity), prompt resolution and argument checks."""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from passk_nb.data.ids import spec_hash
from passk_nb.data.store import read_specs
from passk_nb.harness.suites.base import Suite


def resolve_prompt(suite: Suite, prompt: str, prompt_name: str | None = None) -> tuple[str, str]:
    """``(name, text)`` for a prompt given by name (see ``suite.prompts``) or as full text.

    >>> from passk_nb.harness.suites import get_suite
    >>> resolve_prompt(get_suite("orders"), "strict")[0]
    'strict'
    """
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"prompt must be a prompt name {sorted(suite.prompts)} or the full prompt text")
    if prompt in suite.prompts:
        return prompt_name or prompt, suite.prompts[prompt]
    if prompt_name is None and len(prompt.split()) < 3:
        raise ValueError(
            f"unknown prompt name {prompt!r}; choose from {sorted(suite.prompts)}, "
            "or pass the full system prompt text (with prompt_name= to label it)"
        )
    return prompt_name or "custom", prompt


#: provider_meta keys that say how hard the backend was tried, not what was measured:
#: changing them resumes the same run.
NOT_IDENTITY = frozenset({"timeout_s", "max_attempts"})


@dataclass(frozen=True)
class RunSpec:
    """Everything that identifies a run: trials of the same spec resume into each other.

    ``settings`` holds the backend's settings that change what is measured
    (``max_tokens``, ``json_schema``, a CLI version, ...): the provider's
    ``provider_meta`` without retry and timeout settings.
    """

    suite: str
    provider: str
    model: str
    base_url_host: str | None
    prompt_hash: str
    temperature: float | None
    seed: int | None
    json_mode: bool
    max_turns: int
    max_format_errors: int
    settings: dict[str, Any]

    @property
    def run_id(self) -> str:
        return spec_hash(asdict(self))


def check_positive(name: str, value: Any) -> int:
    """``value`` if it is a whole number ≥ 1, else a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number ≥ 1, got {value!r}")
    return value


def note_prompt_changes(out: Path, spec: RunSpec) -> None:
    """Say so when the folder holds runs of the same spec under another prompt text."""
    mine = asdict(spec)
    others = sorted(
        other["prompt_hash"]
        for other in read_specs(out).values()
        if other.get("prompt_hash") != spec.prompt_hash
        and all(other.get(k) == v for k, v in mine.items() if k != "prompt_hash")
    )
    if others:
        warnings.warn(
            f"{out} holds runs of this provider/model/settings under other prompt texts "
            f"(prompt hashes {', '.join(others)}); the prompt changed (now {spec.prompt_hash}), so this is "
            "a new run and does not resume them",
            UserWarning,
            stacklevel=3,
        )
