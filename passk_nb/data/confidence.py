"""A stated confidence: the agent's chance, in [0, 1], that its final answer is right.

The one check every source goes through (the JSON protocol's parser, and the record boundary
:func:`~passk_nb.data.records.storable_record` for any other producer), kept free of heavy
imports so that the protocol stays light.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

__all__ = ["stated_confidence"]


def stated_confidence(value: Any) -> tuple[float | None, str | None]:
    """A stated confidence as the record stores it, and a note when it cannot be: a number in
    [0, 1] is kept as a float; None or NaN is "not stated" (no note); anything else (a string, a
    bool, a percentage, infinity) is stored as not stated, with a note saying what was stated,
    so a bad confidence never costs the trial.

    >>> stated_confidence(0.8), stated_confidence(None)
    ((0.8, None), (None, None))
    >>> stated_confidence(80)
    (None, 'confidence=80 is not a number in [0, 1], stored as not stated')
    >>> stated_confidence("high")[1]
    "confidence='high' is not a number in [0, 1], stored as not stated"
    """
    if isinstance(value, Real) and not isinstance(value, bool):  # numpy's numbers too, not its bool_
        number = float(value)
        if math.isnan(number):
            return None, None
        if 0.0 <= number <= 1.0:
            return number, None
    elif value is None:
        return None, None
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
    return None, f"confidence={shown} is not a number in [0, 1], stored as not stated"
