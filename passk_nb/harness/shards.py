"""Splitting a run across machines by task: ``run(shard=(i, N))`` / ``passk run --shard i/N``.

Shard ``i`` of ``N`` (1-based: ``1/4`` ... ``4/4``) runs the tasks whose id hashes
(SHA-256, so the same on every machine and Python version, unlike ``hash()``) to
``i - 1`` modulo ``N``. Every task is in exactly one shard, and a task's shard
depends only on its id and ``N``, not on the other tasks. All trials of a task
run on one machine. The shard is not part of the run's identity: the shards of a
run write records of one run id, into one shared folder or each into its own,
and ``load`` on the folder (or on a folder holding the shards' folders) reads
them as one run, each trial once.

>>> tasks = [f"t{i}" for i in range(10)]
>>> parts = [select_shard(tasks, (i, 3)) for i in (1, 2, 3)]
>>> sorted(sum(parts, [])) == sorted(tasks)
True
>>> parse_shard("2/3")
(2, 3)
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

__all__ = ["parse_shard", "shard_of", "select_shard"]


def parse_shard(value: Any) -> tuple[int, int]:
    """``(i, N)`` from ``"i/N"`` or a pair, checked: whole numbers with ``1 ≤ i ≤ N``.

    >>> parse_shard((1, 1))
    (1, 1)
    >>> parse_shard("0/4")
    Traceback (most recent call last):
    ...
    ValueError: shard 0/4 is out of range: shards are numbered 1 to 4 (write i/N with 1 ≤ i ≤ N)
    """
    pair: Any = value
    if isinstance(value, str):
        parts = value.strip().split("/")
        try:
            pair = tuple(int(p) for p in parts)
        except ValueError:
            pair = None
    if (
        not isinstance(pair, tuple | list)
        or len(pair) != 2
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in pair)
    ):
        raise ValueError(f"shard must be i/N (e.g. '2/4', or the pair (2, 4)) with 1 ≤ i ≤ N, got {value!r}")
    i, n = pair
    if n < 1 or not 1 <= i <= n:
        raise ValueError(
            f"shard {i}/{n} is out of range: shards are numbered 1 to {max(n, 1)} (write i/N with 1 ≤ i ≤ N)"
        )
    return i, n


def shard_of(task_id: str, n: int) -> int:
    """The shard (1 to ``n``) that runs ``task_id``: a stable hash of the id, the same everywhere.

    >>> shard_of("refund_delivered", 1)
    1
    """
    digest = hashlib.sha256(task_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % n + 1


def select_shard(task_ids: Sequence[str], shard: Any) -> list[str]:
    """The tasks of ``task_ids`` in shard ``shard`` (``(i, N)`` or ``"i/N"``), in their order."""
    i, n = parse_shard(shard)
    return [t for t in task_ids if shard_of(t, n) == i]
