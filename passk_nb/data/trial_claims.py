"""Per-trial claims of a run: two processes (or two runs of one spec) never run the same trial.

A writer claims ``(task, trial)`` before running it and releases the claim once its record is
on disk (:mod:`passk_nb.harness.batch`). The claims are byte-range locks on
``<folder>/<run_id>/_claims.lock``, so the system drops every claim of a process that dies.
Not to be confused with :mod:`passk_nb.data.claims`, which checks what an agent's answer claims.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import struct
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["TrialClaims"]

#: Bytes of the lock file per task: trials 0..2**24-1 each have their own, side by side.
_TRIALS_PER_TASK = 2**24
#: Where the bytes of larger trial numbers start (hashed, past every task's block).
_FAR = 2**62


@functools.lru_cache(maxsize=4096)
def _task_block(task: str) -> int:
    """The first byte of ``task``'s block (its name hashed to 38 bits): hashed once per task, not
    at each claim and release of each of its trials."""
    digest = hashlib.sha256(task.encode("utf-8", "surrogatepass")).digest()
    return (int.from_bytes(digest[:5], "big") >> 2) * _TRIALS_PER_TASK


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
        """The byte of ``key``: a task's trials sit side by side (``task`` hashed to 38 bits, then
        ``trial``), so that consecutive trials are claimed and released as one range
        (:meth:`try_claim_many`) and the kernel holds them as one lock, not one each."""
        task, trial = key
        if 0 <= trial < _TRIALS_PER_TASK:
            return _task_block(task) + trial
        digest = hashlib.sha256(f"{task}\0{trial}".encode("utf-8", "surrogatepass")).digest()
        return _FAR | (int.from_bytes(digest[:8], "big") >> 2)  # beyond every task's block

    @classmethod
    def _runs(cls, keys: Iterable[tuple[str, int]]) -> list[tuple[int, int]]:
        """``(first byte, length)`` of each run of consecutive bytes of ``keys`` (sorted)."""
        runs: list[tuple[int, int]] = []
        for offset in sorted(set(map(cls._offset, keys))):
            if runs and runs[-1][0] + runs[-1][1] == offset:
                runs[-1] = (runs[-1][0], runs[-1][1] + 1)
            else:
                runs.append((offset, 1))
        return runs

    def _fcntl(self, kind: int, offset: int, wait: bool, length: int = 1) -> bool:
        try:
            import fcntl
        except ImportError:
            return True  # Windows: claims are not available; concurrent runs may repeat trials
        ofd = getattr(fcntl, "F_OFD_SETLKW" if wait else "F_OFD_SETLK", None)
        try:
            if ofd is not None:
                lock = struct.pack("hhqqi4x", kind, os.SEEK_SET, offset, length, 0)
                fcntl.fcntl(self._fh.fileno(), ofd, lock)
            else:
                flags = {fcntl.F_WRLCK: fcntl.LOCK_EX, fcntl.F_UNLCK: fcntl.LOCK_UN}[kind]
                fcntl.lockf(self._fh.fileno(), flags | (0 if wait else fcntl.LOCK_NB), length, offset)
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

    def try_claim_many(self, keys: Sequence[tuple[str, int]]) -> list[bool]:
        """:meth:`try_claim` of each of ``keys`` (distinct), one lock call per run of consecutive
        trials of a task while nobody else holds any of them; which of ``keys`` are now ours."""
        import fcntl

        mine: set[int] = set()
        with self._lock:
            for offset, length in self._runs(keys):
                if self._fcntl(fcntl.F_WRLCK, offset, wait=False, length=length):
                    mine.update(range(offset, offset + length))
                elif length > 1:  # someone holds part of the run: claim what is free, one by one
                    mine.update(
                        o for o in range(offset, offset + length) if self._fcntl(fcntl.F_WRLCK, o, False)
                    )
        return [self._offset(key) in mine for key in keys]

    def release(self, keys: Iterable[tuple[str, int]]) -> None:
        """Give up the claims of ``keys`` (their records are on disk, or they were not run), one
        unlock call per run of consecutive trials."""
        try:
            import fcntl
        except ImportError:
            return
        with self._lock:
            for offset, length in self._runs(keys):
                self._fcntl(fcntl.F_UNLCK, offset, wait=False, length=length)

    def close(self) -> None:
        """Release every claim."""
        self._fh.close()
