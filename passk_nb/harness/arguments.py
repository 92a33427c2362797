"""Up-front checks of run arguments: a bad argument fails before the first trial, in one line.

Every check raises ``ValueError`` (``TypeError`` for a value of the wrong kind) naming the
argument, what it got and what it takes, so ``run(model=123)`` never spends a single agent
call before failing.

>>> check_seed(0, trials=3)
0
>>> check_seed(1.5, trials=3)
Traceback (most recent call last):
...
ValueError: backend_seed must be a whole number (or None), got 1.5
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

#: Most trials per task one call may ask for: far beyond any reliability estimate, and a
#: job list that still fits in memory.
MAX_TRIALS = 100_000

_INT64_MAX = 2**63 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_positive(name: str, value: Any) -> int:
    """``value`` if it is a whole number ≥ 1, else a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number ≥ 1, got {value!r}")
    return value


def check_trials(trials: Any) -> int:
    """``trials`` if it is a whole number in 1..:data:`MAX_TRIALS`.

    >>> check_trials(10**12)
    Traceback (most recent call last):
    ...
    ValueError: trials=1000000000000 is more than 100,000 per task, the most one run takes; run fewer trials (a later run with a larger trials= extends this one)
    """  # noqa: E501
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials must be a whole number ≥ 1, got {trials!r}")
    if trials > MAX_TRIALS:
        raise ValueError(
            f"trials={trials} is more than {MAX_TRIALS:,} per task, the most one run takes; run fewer "
            "trials (a later run with a larger trials= extends this one)"
        )
    return trials


def check_seed(seed: Any, trials: int, name: str = "backend_seed") -> int | None:
    """``seed`` if it is None or a whole number such that every trial's seed ``seed + i`` fits in 64 bits."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"{name} must be a whole number (or None), got {seed!r}")
    if not -_INT64_MAX - 1 <= seed <= _INT64_MAX - trials:
        raise ValueError(
            f"{name}={seed} is out of range: trial seeds {name}+0 .. {name}+{trials - 1} must fit in a "
            "signed 64-bit integer; pick a smaller one"
        )
    return seed


def check_seconds(name: str, value: Any, *, allow_none: bool = True, allow_zero: bool = False) -> Any:
    """``value`` if it is a finite number of seconds > 0 (≥ 0 with ``allow_zero``), or None when allowed.

    >>> check_seconds("timeout", float("nan"))
    Traceback (most recent call last):
    ...
    ValueError: timeout must be a finite number of seconds > 0, got nan
    """
    if value is None and allow_none:
        return None
    ok = (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and (value >= 0 if allow_zero else value > 0)
    )
    if not ok:
        bound = "≥ 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number of seconds {bound}, got {value!r}")
    return value


def check_text(name: str, value: Any, *, allow_none: bool = True, allow_empty: bool = True) -> str | None:
    """``value`` if it is a string that can be stored (valid Unicode), or None when allowed.

    >>> check_text("model", 123)
    Traceback (most recent call last):
    ...
    TypeError: model must be a string, got int 123
    """
    if value is None and allow_none:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {type(value).__name__} {value!r}"[:300])
    if not allow_empty and not value.strip():
        raise ValueError(f"{name} must not be empty")
    if _SURROGATE.search(value):
        raise ValueError(
            f"{name} is not valid Unicode (it holds a lone surrogate such as \\ud83d); fix the text"
        )
    return value


def check_bool(name: str, value: Any) -> bool:
    """``value`` if it is True or False.

    >>> check_bool("json_mode", "no")
    Traceback (most recent call last):
    ...
    TypeError: json_mode must be True or False, got 'no'
    """
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def check_unique(name: str, values: Sequence[str]) -> None:
    """Raise naming the repeated entries of ``values``.

    >>> check_unique("tasks", ["a", "a"])
    Traceback (most recent call last):
    ...
    ValueError: tasks lists ['a'] more than once; name each task once
    """
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise ValueError(f"{name} lists {repeated} more than once; name each task once")
