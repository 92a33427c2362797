"""Coverage of every interval passk-nb gives, by simulation at the sizes users have.

T = 5 and 20 tasks, n = 4 and 8 trials, k = 2 and 4; per-task p from Beta(2, 1), Beta(½, ½) and a
mixture (30 % always pass, 20 % never, 50 % Beta(4, 2)); 300 simulated suites per cell, fixed
seeds. Every interval that is given must cover its target in ≥ 90 % of suites (nominal 95 %):
the interval for new tasks (summarize's and compare's) the population value, the fixed-task
interval (``*_fixed_lo``/``*_fixed_hi``) these tasks' own mean. ``benchmarks/coverage.py`` prints the
full table the README quotes.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from scipy.special import betaln

from passk_nb.stats.paired import compare
from passk_nb.stats.summary import summarize

SUITES = 300
Z = float(sps.norm.ppf(0.975))


def beta_moment(a: float, b: float, k: int) -> float:
    return float(np.exp(betaln(a + k, b) - betaln(a, b)))


def draw(prior: str, rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    if prior == "beta(2,1)":
        return rng.beta(2, 1, size=shape)
    if prior == "beta(1/2,1/2)":
        return rng.beta(0.5, 0.5, size=shape)
    u = rng.random(shape)
    return np.where(u < 0.3, 1.0, np.where(u < 0.5, 0.0, rng.beta(4, 2, size=shape)))


def population(prior: str, k: int) -> tuple[float, float]:
    """(E[1 - (1 - p)^k], E[p^k])."""
    if prior == "beta(2,1)":
        return 1 - beta_moment(1, 2, k), beta_moment(2, 1, k)
    if prior == "beta(1/2,1/2)":
        return 1 - beta_moment(0.5, 0.5, k), beta_moment(0.5, 0.5, k)
    return 0.3 + 0.5 * (1 - beta_moment(2, 4, k)), 0.3 + 0.5 * beta_moment(4, 2, k)


def records(p: np.ndarray, n: int, rng: np.random.Generator, prompt: str = "p") -> pd.DataFrame:
    suites, tasks = p.shape
    passed = (rng.random((suites, tasks, n)) < p[:, :, None]).ravel()
    return pd.DataFrame(
        {
            "model": np.repeat(np.arange(suites), tasks * n),
            "prompt_hash": prompt,
            "task": np.tile(np.repeat(np.arange(tasks), n), suites),
            "passed": passed,
            "outcome": np.where(passed, "pass", "wrong_state"),
        }
    )


CELLS = list(itertools.product([5, 20], [4, 8], [2, 4], ["beta(2,1)", "beta(1/2,1/2)", "mixture"]))


@pytest.mark.slow
@pytest.mark.parametrize(("tasks", "n", "k", "prior"), CELLS)
def test_every_given_interval_covers_at_least_90_percent(tasks: int, n: int, k: int, prior: str) -> None:
    rng = np.random.default_rng([tasks, n, k, len(prior)])
    p = draw(prior, rng, (SUITES, tasks))
    out = summarize(records(p, n, rng), k=k, by="model").sort_values("model")
    truth = dict(zip(("pass@k", "pass^k"), population(prior, k), strict=True))
    fixed_truth = {"pass@k": 1 - ((1 - p) ** k).mean(axis=1), "pass^k": (p**k).mean(axis=1)}
    for metric in ("pass@k", "pass^k"):
        value, se = out[metric].to_numpy(), out[f"{metric}_se_fixed"].to_numpy()
        assert (se > 0).all()
        fixed = (value - Z * se <= fixed_truth[metric]) & (fixed_truth[metric] <= value + Z * se)
        assert fixed.mean() >= 0.90, (metric, "fixed", fixed.mean())
        assert (out["ci_method"] == "korn-graubard").all()  # given from five tasks up
        lo, hi = out[f"{metric}_lo"].to_numpy(), out[f"{metric}_hi"].to_numpy()
        new = (lo <= truth[metric]) & (truth[metric] <= hi)
        assert new.mean() >= 0.90, (metric, "new tasks", new.mean())
    # paired: arm b is arm a's task with probability 1/2, otherwise a Beta(2, 2) task
    p_b = np.where(rng.random(p.shape) < 0.5, p, rng.beta(2, 2, size=p.shape))
    both = pd.concat([records(p, n, rng, "a"), records(p_b, n, rng, "b")], ignore_index=True)
    diff = compare(both, a="a", b="b", k=k, by="model")
    b22 = (1 - beta_moment(2, 2, k), beta_moment(2, 2, k))
    for j, metric in enumerate(("pass@k", "pass^k")):
        rows = diff[diff["metric"] == metric]
        target = 0.5 * (b22[j] - population(prior, k)[j])
        covered = (rows["lo"] <= target) & (target <= rows["hi"])
        assert covered.mean() >= 0.90, (metric, "paired", covered.mean())


def test_population_interval_is_declined_below_five_tasks_and_given_from_five() -> None:
    rng = np.random.default_rng(0)
    for tasks, expected in ((4, "declined: too few tasks"), (5, "korn-graubard")):
        df = records(rng.beta(2, 1, size=(3, tasks)), 4, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = summarize(df, k=4, by="model")
        assert (out["ci_method"] == expected).all()
        assert out["pass^k_lo"].isna().all() == (tasks == 4)
