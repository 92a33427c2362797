"""One transcript format: entries built, capped and parsed the same way everywhere.

A transcript is a JSON list of entries ``{"kind", "role", "content", ...}``; every
text is capped at :data:`MAX_STORED_CHARS` characters with its original length kept.
"""

from __future__ import annotations

import json
from typing import Any

#: Longest text kept for one message in a stored transcript (and for the final
#: answer and the error). Longer texts are cut and keep their original length.
MAX_STORED_CHARS = 20_000


def cap_text(text: str | None, limit: int = MAX_STORED_CHARS) -> str | None:
    """``text`` cut to ``limit`` characters with a marker saying how long it was.

    >>> cap_text("abcdef", limit=3)
    'abc…[truncated, 6 chars in all]'
    """
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}…[truncated, {len(text)} chars in all]"


def transcript_entry(kind: str, role: str, content: str, **extra: Any) -> dict[str, Any]:
    """One transcript entry, its text capped, with the original ``length`` when it was cut."""
    entry: dict[str, Any] = {"kind": kind, "role": role, "content": cap_text(content)}
    if len(content) > MAX_STORED_CHARS:
        entry["length"] = len(content)
    entry.update(extra)
    return entry


def parse_transcript(text: str | None) -> list[dict[str, Any]]:
    """The entries of a stored transcript; an empty list for a missing or unreadable one.

    >>> parse_transcript('[{"kind": "prompt", "role": "user", "content": "hi"}]')[0]["content"]
    'hi'
    >>> parse_transcript(None), parse_transcript("not json"), parse_transcript("[" * 10**5)
    ([], [], [])
    """
    if not text:
        return []
    try:
        entries = json.loads(text)
    except (TypeError, ValueError, RecursionError):  # RecursionError: nested too deep to parse
        return []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
