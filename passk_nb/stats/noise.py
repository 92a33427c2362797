"""The noise floor of a suite: how different must two runs be to mean anything?

:func:`noise_floor` gives, per group, ``icc`` (the intra-class correlation of success within
tasks), ``flip_rate`` (the share of tasks whose all-``k``-pass outcome flips between two re-runs,
exact from c and n) and ``min_difference`` (the smallest gap between two single runs that exceeds
run-to-run noise at 95 %; never zero). :func:`g_pass_at_k` is graded reliability G-pass@k_τ
(Liu et al. 2024), estimated without bias from c of n.

``min_difference`` holds for the tasks of the pilot in hand (an upper bound on their re-run
variance, not an average over pilots). How, and the share of re-run pairs beyond the floor
measured by simulation: ``docs/methods/comparisons.md``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats as sps
from scipy.special import betaln

from passk_nb.stats import _grouping
from passk_nb.stats.checks import check_k
from passk_nb.stats.counts import Counts, as_counts
from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.intervals import fixed_task_variance
from passk_nb.stats.params import INFRA, share_docs
from passk_nb.stats.result import described


def g_pass_at_k(n: npt.ArrayLike, c: npt.ArrayLike, k: npt.ArrayLike, tau: float) -> float | np.ndarray:
    """Unbiased G-pass@k_τ: the chance that at least ⌈τ·k⌉ of k trials, drawn without
    replacement from the n observed ones, succeeded (Liu et al. 2024).

    τ = 1 is pass^k; τ ≤ 1/k is pass@k. Arguments broadcast; k > n gives NaN.

    >>> g_pass_at_k(4, 3, 4, 1.0)  # pass^4 of 3/4
    0.0
    >>> round(g_pass_at_k(4, 3, 2, 0.5), 12)  # at least 1 of 2: pass@2 = 1
    1.0
    >>> round(g_pass_at_k(5, 3, 3, 0.6), 6)  # at least 2 of 3: (C(3,2)C(2,1) + C(3,3)) / C(5,3)
    0.7
    """
    if not 0 < tau <= 1:
        raise ValueError(f"tau is the share of the k trials that must succeed, in (0, 1]; got tau={tau}")
    n_, c_, k_ = (np.asarray(v) for v in (n, c, k))
    for name, value in (("n", n_), ("c", c_), ("k", k_)):
        if value.dtype.kind not in "iu" or (value < 0).any():
            raise ValueError(f"{name} must hold whole numbers ≥ 0; got {name}={value.tolist()}")
    if (c_ > n_).any():
        raise ValueError("c must be ≤ n (successes cannot exceed trials)")
    if (k_ < 1).any():
        raise ValueError(f"k must be ≥ 1; got k={k_.tolist()}")
    need = np.ceil(tau * k_ - 1e-9).astype(np.int64)
    with np.errstate(invalid="ignore"):
        out = np.where(k_ <= n_, sps.hypergeom.sf(need - 1, n_, c_, np.minimum(k_, n_)), np.nan)
    return float(out) if out.ndim == 0 else out


def run_variance(n: np.ndarray, c: np.ndarray, k: int, trials: int) -> np.ndarray:
    """Unbiased per-task variance of pass^k estimated from ``trials`` new trials, from c of n.

    E[X²] is a polynomial of degree ``trials`` in p, estimated by the hypergeometric law of a
    sub-sample of ``trials`` of the n trials; p^2k by pass^2k (needs n ≥ max(trials, 2k)).
    """
    x = np.asarray(pass_hat_k(trials, np.arange(trials + 1), k), dtype=float)
    weights = sps.hypergeom.pmf(np.arange(trials + 1)[None, :], n[:, None], c[:, None], trials)
    return weights @ x**2 - np.asarray(pass_hat_k(n, c, 2 * k), dtype=float)


def jeffreys_run_variance(n: np.ndarray, c: np.ndarray, k: int, trials: int) -> np.ndarray:
    """Per task, the Jeffreys posterior mean of the variance of pass^k from ``trials`` new trials.

    Under p ~ Beta(c + ½, n − c + ½): E[X²] averages over the beta-binomial law of the new
    successes, E[p^2k] is a ratio of beta functions. Positive whenever 0 < k ≤ trials.
    """
    a, b = np.asarray(c, float) + 0.5, np.asarray(n - c, float) + 0.5
    x = np.asarray(pass_hat_k(trials, np.arange(trials + 1), k), dtype=float)
    weights = sps.betabinom.pmf(np.arange(trials + 1)[None, :], trials, a[:, None], b[:, None])
    return weights @ x**2 - _posterior_moment(a, b, 2 * k)


def jeffreys_flip(n: np.ndarray, c: np.ndarray, k: int) -> np.ndarray:
    """Per task, the Jeffreys posterior mean of 2(p^k − p^2k): the chance that two re-runs of k
    trials disagree on "all k pass"."""
    a, b = np.asarray(c, float) + 0.5, np.asarray(n - c, float) + 0.5
    return 2 * (_posterior_moment(a, b, k) - _posterior_moment(a, b, 2 * k))


def _posterior_moment(a: np.ndarray, b: np.ndarray, m: int) -> np.ndarray:
    """E[p^m] under Beta(a, b)."""
    return np.exp(betaln(a + m, b) - betaln(a, b))


def icc(n: np.ndarray, c: np.ndarray) -> float:
    """One-way ANOVA intra-class correlation of binary outcomes in tasks of n trials, c passes.

    >>> round(icc(np.array([4, 4, 4, 4]), np.array([4, 4, 0, 0])), 6)  # trials agree within tasks
    1.0
    """
    n, c = np.asarray(n, float), np.asarray(c, float)
    tasks, total = n.size, n.sum()
    if tasks < 2 or total - tasks < 1:
        return np.nan
    mean = c.sum() / total
    msb = np.sum(n * (c / n - mean) ** 2) / (tasks - 1)
    msw = np.sum(c * (n - c) / n) / (total - tasks)
    n0 = (total - np.sum(n**2) / total) / (tasks - 1)
    denominator = msb + (n0 - 1) * msw
    return float((msb - msw) / denominator) if denominator > 0 else np.nan


@share_docs
def noise_floor(
    df: Counts | pd.DataFrame | str | os.PathLike[str],
    *,
    k: int = 1,
    trials: int | None = None,
    by: str | Sequence[str] | None = None,
    infra: str = INFRA,
) -> pd.DataFrame:
    """How different must two runs of the suite be to mean anything? One row per group.

    Columns: ``n_tasks``; ``icc`` (intra-class correlation of success within tasks);
    ``flip_rate`` (the expected share of tasks whose outcome — all of k trials pass — differs
    between two independent re-runs); ``sd_run`` (the standard deviation of one run's suite
    pass^k with ``trials`` trials per task, over re-runs of these tasks); ``min_difference``
    (1.96 · √2 · sd_run: a difference between two such runs smaller than this is within
    run-to-run noise at 95 %); ``note`` (why a value is NaN: it needs n ≥ 2k trials per task,
    and n ≥ ``trials``). Per task, the flip rate is the larger of the unbiased estimate and the
    Jeffreys posterior mean (never 0 from finite trials). The variance behind ``min_difference`` is
    also at least the largest re-run variance over the task's 80 % Jeffreys interval for p (as the
    fixed-task interval's, :func:`~passk_nb.stats.intervals.fixed_task_variance`), so that the
    promise holds for the one pilot a user has: two re-runs of these tasks differ by more than
    ``min_difference`` at most 5 % of the time for ≥ 98 % of pilots (measured: 0–2 % of pilots
    above 5 % on six truths, ``benchmarks/exact_and_noise.py``; also Uniform(0.7, 1) and Beta(2, 1)).
    A posterior mean held only on average over pilots: 8–31 % of pilots exceeded 5 %, some 23 %.
    The price: ``min_difference`` 12–38 % larger on average.

    {df_or_folder}
    {k}
    trials: trials per task in each of the two runs compared (default k).
    {by}
    {infra}

    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": list("aaaabbbbcccc"), "passed": [1, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0]})
    >>> df = df.astype({"passed": bool})
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> out = noise_floor(df, by=())
    >>> round(float(out["flip_rate"].iloc[0]), 4)  # b: 2·2·2/(4·3) = 2/3; a, c: 2·(E p − E p²) = 0.15
    0.3222
    """
    check_k(k)
    trials = k if trials is None else trials
    check_k(trials)
    if trials < k:
        raise ValueError(f"trials per run must be ≥ k; got trials={trials}, k={k}")
    counted = as_counts(df, by=by, infra=infra)
    by_ = counted.by
    table = counted.table[counted.table["n"] > 0].reset_index(drop=True)
    gid, keys = _grouping.group_ids(table, by_)
    keys = counted.restore(keys)
    rows = []
    for g in range(len(keys)):
        sub = table[gid == g]
        n, c = sub["n"].to_numpy(), sub["c"].to_numpy()
        row: dict[str, object] = {col: keys.iloc[g][col] for col in by_}
        row.update(n_tasks=n.size, k=k, trials=trials, icc=icc(n, c))
        need = max(2 * k, trials)
        if n.min() < need:
            row.update(flip_rate=np.nan, sd_run=np.nan, min_difference=np.nan)
            row["note"] = (
                f"needs at least {need} trials per task (2k = {2 * k}, trials = {trials}); "
                f"the fewest here is {n.min()}"
            )
        else:
            flip = 2 * (np.asarray(pass_hat_k(n, c, k)) - np.asarray(pass_hat_k(n, c, 2 * k)))
            flip = np.maximum(flip, jeffreys_flip(n, c, k))
            variance = np.maximum(run_variance(n, c, k, trials), jeffreys_run_variance(n, c, k, trials))
            # an upper bound for the pilot in hand: the largest variance over each task's 80 % interval
            variance = np.maximum(variance, fixed_task_variance(n, c, k, trials=trials))
            sd = np.sqrt(float(variance.sum())) / n.size
            row.update(
                flip_rate=float(np.mean(flip)),
                sd_run=sd,
                min_difference=float(sps.norm.ppf(0.975) * np.sqrt(2) * sd),
                note="",
            )
        rows.append(row)
    columns = [*by_, "n_tasks", "k", "trials", "icc", "flip_rate", "sd_run", "min_difference", "note"]
    return described(pd.DataFrame(rows, columns=columns), "noise_floor", by=by_, k=k, infra=infra)
