"""A cold first summarize imports no more than it needs (issue 47 §3): scipy.stats takes seconds
to import and the default path needs only scipy.special. Asserts on imports, never on seconds."""

import subprocess
import sys

import numpy as np
from scipy import special, stats

from passk_nb.stats import intervals

COLD_SUMMARIZE = """
import sys
import pandas as pd
import passk_nb
df = pd.DataFrame({"task": [f"t{i}" for i in range(8) for _ in range(4)], "model": "m",
                   "passed": [(i * j) % 3 != 1 for i in range(8) for j in range(4)]})
df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
passk_nb.summarize(df, k=2, n_boot=0)
out = passk_nb.summarize(df, k=2)  # the default method: Korn-Graubard intervals
assert out["pass^k_lo"].notna().all() and out["pass@k_hi"].notna().all(), out  # intervals drawn
print("scipy.stats" in sys.modules)
"""


def test_a_cold_summarize_does_not_import_scipy_stats():
    done = subprocess.run(
        [sys.executable, "-c", COLD_SUMMARIZE], capture_output=True, text=True, timeout=300, check=True
    )
    assert done.stdout.strip() == "False", done.stderr


def test_the_special_function_forms_equal_scipy_stats_bit_for_bit():
    rng = np.random.default_rng(0)
    a = np.concatenate([np.arange(200.0), np.arange(200.0) + 0.5, rng.uniform(0, 300, 2000)])
    b = np.concatenate([np.arange(200.0)[::-1] + 1, np.arange(200.0)[::-1] + 0.5, rng.uniform(0, 300, 2000)])
    df = np.concatenate([np.arange(300.0), rng.uniform(0, 100, 2100)])
    x = rng.normal(0, 5, df.size)
    with np.errstate(all="ignore"):
        for q in (0.005, 0.025, 0.1, 0.9, 0.975, 0.995):
            np.testing.assert_array_equal(special.betaincinv(a, b, q), stats.beta.ppf(q, a, b))
            np.testing.assert_array_equal(special.stdtrit(df, q), stats.t.ppf(q, df))
            assert special.ndtri(q) == stats.norm.ppf(q)
        np.testing.assert_array_equal(special.stdtr(df, -np.abs(x)), stats.t.sf(np.abs(x), df))


def test_intervals_keep_their_values():
    n, c = np.array([4, 6, 10, 10]), np.array([0, 3, 9, 10])
    lo, hi = intervals.clopper_pearson(n, c, 2, 0.95)
    tail = (1 - 0.95) / 2
    with np.errstate(invalid="ignore"):
        p_lo = np.where(c > 0, stats.beta.ppf(tail, c, n - c + 1), 0.0)
        p_hi = np.where(c < n, stats.beta.ppf(1 - tail, c + 1, n - c), 1.0)
    np.testing.assert_array_equal(lo[:, 1], p_lo**2)
    np.testing.assert_array_equal(hi[:, 1], p_hi**2)
