"""Per-trial claims of a run: two processes (or two runs of one spec) never run the same trial.

A writer claims ``(task, trial)`` before running it and releases the claim once its record is
on disk (:mod:`passk_nb.harness.batch`). The claims are byte-range locks on
``<folder>/<run_id>/_claims.lock``, so the system drops every claim of a process that dies.
Not to be confused with :mod:`passk_nb.data.claims`, which checks what an agent's answer claims.
"""

from __future__ import annotations

import errno
import hashlib
import os
import struct
import threading
from collections.abc import Iterable
from pathlib import Path

__all__ = ["TrialClaims"]


class TrialClaims:
    """Per-trial claims on ``<folder>/<run_id>/_claims.lock``: two processes never run the same trial.

    A claim is a byte-range lock on the lock file at an offset derived from
    ``(task, trial)`` (an open-file-description lock on Linux, so it also
    excludes another run of the same spec in the same process). The system
    releases every claim of a process that dies, even by ``kill -9``, so a
    killed run never blocks its resume. A writer holds a trial's claim from
    before the trial starts until its record is on disk.

    >>> import tempfile
    >>> claims = TrialClaims(tempfile.mkdtemp(), "r1")
    >>> claims.try_claim(("t", 0)), TrialClaims(claims.run_dir.parent, "r1").try_claim(("t", 0))
    (True, False)
    >>> claims.release([("t", 0)]); claims.close()
    """

    def __init__(self, folder: str | os.PathLike[str], run_id: str):
        self.run_dir = Path(folder) / run_id
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.run_dir / "_claims.lock", "a+b")  # noqa: SIM115 - held until close()
        self._lock = threading.Lock()

    @staticmethod
    def _offset(key: tuple[str, int]) -> int:
        digest = hashlib.sha256(f"{key[0]}\0{key[1]}".encode("utf-8", "surrogatepass")).digest()
        return int.from_bytes(digest[:6], "big")

    def _fcntl(self, kind: int, offset: int, wait: bool) -> bool:
        try:
            import fcntl
        except ImportError:
            return True  # Windows: claims are not available; concurrent runs may repeat trials
        ofd = getattr(fcntl, "F_OFD_SETLKW" if wait else "F_OFD_SETLK", None)
        try:
            if ofd is not None:
                lock = struct.pack("hhqqi4x", kind, os.SEEK_SET, offset, 1, 0)
                fcntl.fcntl(self._fh.fileno(), ofd, lock)
            else:
                flags = {fcntl.F_WRLCK: fcntl.LOCK_EX, fcntl.F_UNLCK: fcntl.LOCK_UN}[kind]
                fcntl.lockf(self._fh.fileno(), flags | (0 if wait else fcntl.LOCK_NB), 1, offset)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise
        return True

    def try_claim(self, key: tuple[str, int]) -> bool:
        """Claim ``key`` if no other process (or run) holds it; True when it is now ours."""
        import fcntl

        with self._lock:
            return self._fcntl(fcntl.F_WRLCK, self._offset(key), wait=False)

    def release(self, keys: Iterable[tuple[str, int]]) -> None:
        """Give up the claims of ``keys`` (their records are on disk, or they were not run)."""
        try:
            import fcntl
        except ImportError:
            return
        with self._lock:
            for key in keys:
                self._fcntl(fcntl.F_UNLCK, self._offset(key), wait=False)

    def close(self) -> None:
        """Release every claim."""
        self._fh.close()
