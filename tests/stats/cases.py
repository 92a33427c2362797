"""Small record sets and the exact fixed-task variance that several stats test files check against."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as sps

from tests.helpers.records import records_from_marks as trials

TWO_TASKS = trials({("m", "p", "a"): "1111", ("m", "p", "b"): "1100"})

PROMPTS = trials(
    {
        **{("m", "p1", t): marks for t, marks in zip("abcd", ["1111", "1100", "1000", "0000"], strict=True)},
        **{("m", "p2", t): marks for t, marks in zip("abcd", ["1111", "1110", "1100", "1000"], strict=True)},
    }
)


def exact_var(n: int, c: int, k: int) -> float:
    """The largest Var(C(C, k)/C(n, k)) for C ~ Binomial(n, q), summing over the n + 1 outcomes, over
    q on a fine grid of the task's 80 % Jeffreys interval (from 0 at c = 0, to 1 at c = n)."""
    lo = 0.0 if c == 0 else sps.beta.ppf(0.1, c + 0.5, n - c + 0.5)
    hi = 1.0 if c == n else sps.beta.ppf(0.9, c + 0.5, n - c + 0.5)
    u = np.array([math.comb(j, k) / math.comb(n, k) for j in range(n + 1)])
    pmf = sps.binom.pmf(np.arange(n + 1)[None, :], n, np.linspace(lo, hi, 4001)[:, None])
    return float(np.max(pmf @ u**2 - (pmf @ u) ** 2))
