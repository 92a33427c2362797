"""What ``passk`` prints is text, never terminal control: control characters are shown escaped.

Records hold what models, agents and servers sent (a task id, a model name, an error), and a
terminal obeys escape sequences in them (an OSC sequence retitles the window, ``ESC[2J`` clears the
screen). Every stream the command writes to is wrapped, so no print can forget it.

>>> escape_controls("model\\x1b]0;pwned\\x07 ok\\tdone\\n")
'model\\\\x1b]0;pwned\\\\x07 ok\\tdone\\n'
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from typing import Any, TextIO

#: C0 controls but tab and newline, DEL, and C1 controls (U+0080–U+009F: 8-bit CSI, OSC, ...).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: The same without carriage return, which a progress bar on a terminal needs.
_CONTROLS_BUT_CR = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def escape_controls(text: str, *, keep_cr: bool = False) -> str:
    """``text`` with each control character written as ``\\xNN`` (tab and newline kept)."""
    pattern = _CONTROLS_BUT_CR if keep_cr else _CONTROLS
    return pattern.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class _Escaping:
    """A text stream that escapes control characters on their way to ``stream``.

    ``progress_stream`` is the same stream for the progress bar, which redraws its line with a
    carriage return: only the bar's writes keep theirs (a ``\r`` in a record printed on a terminal
    would hide what came before it on the line)."""

    def __init__(self, stream: TextIO, *, keep_cr: bool = False):
        self._stream, self._keep_cr = stream, keep_cr

    @property
    def progress_stream(self) -> _Escaping:
        return _Escaping(self._stream, keep_cr=True)

    def write(self, text: str) -> int:
        self._stream.write(escape_controls(text, keep_cr=self._keep_cr))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def escaped_streams() -> Iterator[None]:
    """Wrap ``sys.stdout`` and ``sys.stderr`` in :class:`_Escaping` while the block runs."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Escaping(out), _Escaping(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
