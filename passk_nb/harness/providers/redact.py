"""Secret redaction: every text that leaves the process passes through a :class:`Redactor`."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import ClassVar

REDACTED = "[REDACTED]"


#: Longest piece of a server's reply quoted in an error message.
BODY_EXCERPT_CHARS = 300


class Redactor:
    """Replaces known secrets, and anything shaped like a credential, with ``[REDACTED]``.

    Known secrets are the exact strings given (an API key, a URL password).
    On top, bearer tokens, ``x-api-key: ...``/``api_key=...`` pairs and
    ``sk-...`` keys are masked, so a server that echoes a header back cannot
    leak it through an error message. The repr never shows a secret.

    >>> redact = Redactor(["s3cr3t-value"])
    >>> redact("bad key s3cr3t-value; Authorization: Bearer abc.def")
    'bad key [REDACTED]; Authorization: Bearer [REDACTED]'
    >>> redact
    Redactor(1 secret)
    """

    _PATTERNS: ClassVar[tuple[re.Pattern[str], ...]] = (
        re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]+"),
        re.compile(
            r"(?i)(\b(?:x-api-key|api[_-]?key|authorization)[\"']?\s*[:=]\s*[\"']?)(?!bearer\s)[^\s\"',;}]+"
        ),
        re.compile(r"()\bsk-[A-Za-z0-9_-]{8,}"),
    )

    def __init__(self, secrets: Iterable[str | None] = ()):
        # Longest first, so a secret that contains another is masked whole.
        self._secrets = tuple(sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True))

    def __call__(self, text: object) -> str:
        out = str(text)
        for secret in self._secrets:
            out = out.replace(secret, REDACTED)
        for pattern in self._PATTERNS:
            out = pattern.sub(lambda m: m.group(1) + REDACTED, out)
        return out

    def __repr__(self) -> str:
        n = len(self._secrets)
        return f"Redactor({n} secret{'' if n == 1 else 's'})"


def short(text: str, limit: int = BODY_EXCERPT_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters.

    >>> short("a\\n b " * 3, limit=8)
    'a b a b…'
    """
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit].rstrip() + "…"
