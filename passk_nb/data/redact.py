"""Secret redaction: every text that leaves the process passes through a :class:`Redactor`.

It lives in the data layer because the record boundary uses it: every record is masked on its
way to disk (:func:`passk_nb.data.records.storable_record`), whichever backend or wire produced
its texts, and the exporters mask what they send (:func:`mask_frame`). The network backends use
the same object for their errors and logs.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import pandas as pd

REDACTED = "[REDACTED]"


#: Longest piece of a server's reply quoted in an error message.
BODY_EXCERPT_CHARS = 300


def _basic_credentials(match: re.Match[str]) -> str:
    """``Basic <base64 of user:password>`` masked; other words after "basic" kept."""
    try:
        decoded = base64.b64decode(match.group(2), validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return match.group(0)
    return match.group(1) + REDACTED if ":" in decoded else match.group(0)


class Redactor:
    """Replaces known secrets, and anything shaped like a credential, with ``[REDACTED]``.

    Known secrets are the exact strings given (an API key, a URL password).
    On top, the value of any ``Authorization`` header whatever its scheme
    (``Bearer``, ``Basic``, ``Token``, ...), bearer tokens, ``Basic`` credentials,
    ``x-api-key: ...``/``api_key=...`` pairs, ``sk-...`` keys and the user
    info of URLs (``http://user:pass@host``) are masked, so a server that
    echoes a header back cannot leak it through an error message. The repr
    never shows a secret.

    >>> redact = Redactor(["s3cr3t-value"])
    >>> redact("bad key s3cr3t-value; Authorization: Bearer abc.def")
    'bad key [REDACTED]; Authorization: Bearer [REDACTED]'
    >>> redact('{"authorization": "Basic dXNlcjpQQVNT"} from http://user:PASS@host:8080/v1')
    '{"authorization": "Basic [REDACTED]"} from http://[REDACTED]@host:8080/v1'
    >>> redact
    Redactor(1 secret)
    """

    _PATTERNS: ClassVar[tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...]] = (
        (
            re.compile(
                r"(?i)(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:[A-Za-z][\w.+-]*\s+)?+)"
                r"(?!\[REDACTED\])[^\s\"',;}\\]+"
            ),
            lambda m: m.group(1) + REDACTED,
        ),
        (
            re.compile(r"(?i)(\bbearer\s+)(?!\[REDACTED\])[A-Za-z0-9._~+/=-]+"),
            lambda m: m.group(1) + REDACTED,
        ),
        (re.compile(r"(?i)(\bbasic\s+)([A-Za-z0-9+/]{4,}={0,2})(?![\w+/=])"), _basic_credentials),
        (
            re.compile(
                r"(?i)(\b(?:x-api-key|api[_-]?key)[\"']?\s*[:=]\s*[\"']?)(?!bearer\s)(?!\[REDACTED\])[^\s\"',;}\\]+"
            ),
            lambda m: m.group(1) + REDACTED,
        ),
        (re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"), lambda m: REDACTED),
        (
            re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)(?!\[REDACTED\]@)[^/\s@\"'<>\\]+@"),
            lambda m: m.group(1) + REDACTED + "@",
        ),
    )

    def __init__(self, secrets: Iterable[str | None] = ()):
        # Longest first, so a secret that contains another is masked whole.
        self._secrets = tuple(sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True))

    #: Words (casefolded) one of which any pattern needs: a text with none is not scanned by them
    #: (the scan costs ~0.1 ms per KB of text; looking for these words, a tenth of that).
    _WORDS: ClassVar[tuple[str, ...]] = (
        "authorization",
        "bearer",
        "basic",
        "api-key",
        "api_key",
        "apikey",
        "sk-",
        "://",
    )

    def __call__(self, text: object) -> str:
        out = str(text)
        for secret in self._secrets:
            out = out.replace(secret, REDACTED)
        folded = out.casefold()
        if not any(word in folded for word in self._WORDS):
            return out
        for pattern, replace in self._PATTERNS:
            out = pattern.sub(replace, out)
        return out

    @property
    def knows_secrets(self) -> bool:
        """Whether it was given any secret (else :meth:`known` changes nothing)."""
        return bool(self._secrets)

    def known(self, value: Any) -> Any:
        """``value`` with the known secrets masked, in text and inside lists, dicts and dataclasses.

        For what a model wrote (reply text, tool calls): only the secrets the run knows
        are masked, so text that merely looks like a credential reaches the grader as written.

        >>> Redactor(["sk-live-1234"]).known({"text": ["key sk-live-1234", 3], "api_key=x": None})
        {'text': ['key [REDACTED]', 3], 'api_key=x': None}
        """
        if not self._secrets:
            return value
        if isinstance(value, str):
            for secret in self._secrets:
                value = value.replace(secret, REDACTED)
            return value
        if isinstance(value, list | tuple):
            return type(value)(self.known(v) for v in value)
        if isinstance(value, dict):
            return {self.known(k): self.known(v) for k, v in value.items()}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = {f.name: self.known(getattr(value, f.name)) for f in dataclasses.fields(value)}
            return dataclasses.replace(value, **fields)
        return value

    def __repr__(self) -> str:
        n = len(self._secrets)
        return f"Redactor({n} secret{'' if n == 1 else 's'})"


def mask_frame(df: pd.DataFrame, redact: Redactor | None = None) -> pd.DataFrame:
    """A copy of ``df`` with every text cell masked by ``redact`` (default: every credential shape,
    the secrets being unknown here), for records that leave the process (the exporters).

    >>> import pandas as pd
    >>> masked = mask_frame(pd.DataFrame({"error": ["HTTP 401: Bearer abc.def", None], "n": [1, 2]}))
    >>> masked.loc[0, "error"], masked["error"].isna().tolist(), masked["n"].tolist()
    ('HTTP 401: Bearer [REDACTED]', [False, True], [1, 2])
    """
    redact = redact or Redactor()
    out = df.copy()
    for column in out.columns:
        values = out[column]
        if values.dtype.kind == "O" or "str" in str(values.dtype):
            out[column] = values.map(lambda v: redact(v) if isinstance(v, str) else v).astype(values.dtype)
    return out


def short(text: str, limit: int = BODY_EXCERPT_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters.

    >>> short("a\\n b " * 3, limit=8)
    'a b a b…'
    """
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit].rstrip() + "…"
