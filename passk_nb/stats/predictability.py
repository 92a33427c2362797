"""Predictability: does the agent know when it is right?

An agent states with its answer its chance of being right (the record's ``confidence``; a
``+confidence`` prompt asks for it), or the harness derives one without asking
(:func:`agreement_confidence`: the pass rate of the task's *other* trials in the configuration).
Per configuration, :func:`predictability` scores that confidence against ``passed``:

- ``brier``: the mean of (confidence − passed)²; 0 is perfect, a constant 0.5 scores 0.25, and
  stating the pass rate p for every trial scores p(1 − p).
- ``ece``: the expected calibration error, Σ over bins of (share of trials) · |mean confidence −
  pass rate|, over ``bins`` equal-width bins of confidence ([0, 0.1), …, [0.9, 1] by default).
  Equal width rather than equal mass: stated confidences pile up on round numbers (0.8, 0.9,
  0.95) and agreement takes the few values k/(n − 1), so equal-mass edges would split equal
  confidences between bins and move with the data; fixed edges are the same for every
  configuration, so two cards compare bin by bin and the reliability diagram reads directly.
  Debiased: each bin's |gap| is √max(0, gap² − its variance over tasks), because the plain |gap|
  of a perfectly calibrated agent is its noise (about 0.08 at 30 tasks × 8 trials); Kumar, Liang
  & Ma (2019) debias the squared calibration error the same way.
- ``auroc``: the chance that a passing trial stated more confidence than a failing one (ties count
  half): 0.5 tells nothing, 1 separates them perfectly. It needs passing and failing trials.

Every interval comes from one bootstrap over tasks: the trials of a task are not independent, so
a resample draws tasks with replacement and keeps all their trials (the draw of
:func:`~passk_nb.stats.intervals.task_resamples`, each resample's per-task sums one matrix
product). Percentile intervals for the Brier score and AUROC; for the debiased ECE the basic
interval around the plug-in ECE of the sample (the value a resample's debiased ECE estimates),
starting at 0 wherever the basic interval of the squared calibration error (unbiased, so it
behaves at 0) reaches 0: a calibrated agent sits on the boundary, ECE 0, where the basic interval
alone covered 60–80 %. Coverage is tested by simulation (``tests/stats/test_predictability.py``;
``benchmarks/predictability_coverage.py``, ``docs/methods/predictability.md``). An interval is
declined (NaN, and ``ci_method`` says why and what to do) below ``min_tasks`` tasks, with one
outcome only (AUROC), or when no resample moves it: never a zero-width interval.

:func:`calibration` gives the reliability diagram on the same bins: per bin the mean confidence,
the pass rate with its interval, and the counts.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd

from passk_nb.data.records import OUTCOMES
from passk_nb.stats.checks import (
    ANALYSIS_COLUMNS,
    INFRA_OUTCOME,
    check_infra,
    check_options,
    refuse_repeated_trials,
    refuse_wrong_outcomes,
    require_columns,
    two_arms,
)
from passk_nb.stats.counts import is_counts_table
from passk_nb.stats.intervals import exact_binomial, task_resamples
from passk_nb.stats.params import CI, INFRA, N_BOOT, SEED, default_by, share_docs
from passk_nb.stats.result import Result, described

__all__ = [
    "predictability",
    "predictability_difference",
    "calibration",
    "agreement_confidence",
    "SOURCES",
    "BINS",
    "MIN_TASKS",
]

#: Where a trial's confidence comes from: the agent's own (``confidence`` column) or the agreement
#: of the task's other trials (:func:`agreement_confidence`).
SOURCES: tuple[str, ...] = ("stated", "agreement")
#: Default number of equal-width confidence bins of the ECE and the reliability diagram.
BINS = 10
#: Fewest tasks for an interval of :func:`predictability`. Simulated (calibrated, overconfident and
#: uninformative agents on U-shaped and mostly-easy suites, 5 trials a task, 200 suites each:
#: ``benchmarks/predictability_coverage.py``), the 95 % intervals covered 88–98 % at 15 tasks and
#: 91–100 % at 30, but 84–92 % at 10 and 72–88 % at 5: below 15, declined.
MIN_TASKS = 15
#: The metrics of :func:`predictability`, in order.
METRICS: tuple[str, ...] = ("brier", "ece", "auroc")
#: Largest number of cells (resamples × bins or confidence levels) in one bootstrap block.
_BLOCK = 1 << 21

_NO_CONFIDENCE = (
    "no trial of this configuration states a confidence: run it with a '+confidence' prompt "
    "(prompt='default+confidence'), or use confidence='agreement'"
)


def agreement_confidence(
    df: pd.DataFrame, *, by: str | Sequence[str] | None = None, infra: str = INFRA
) -> pd.Series:
    """Per trial, a confidence the harness has without asking: the pass rate of the *other* trials of
    its task in its configuration, (c − passed)/(n − 1) for a task with c passes in n usable trials.

    Leaving the trial out keeps its own outcome out of its confidence (else a task of one trial
    would be perfectly "predicted"); what is left says how well the agent's other attempts at the
    same task foretell this one (self-consistency). Its Brier score is the within-task variance
    p(1 − p)·n/(n − 1) averaged over tasks, and it can only be as sharp as the tasks differ.
    NaN for a task's only usable trial and for trials ``infra`` leaves out.

    df: trial records with ``task``, ``passed``, ``outcome`` and the ``by`` columns.
    by: the configuration's columns (default: every identity column the frame has).
    infra: as in :func:`predictability`.

    >>> df = pd.DataFrame({"task": ["a", "a", "a", "b"], "passed": [True, True, False, True],
    ...                    "outcome": ["pass", "pass", "wrong_state", "pass"]})
    >>> agreement_confidence(df, by=()).tolist()
    [0.5, 0.5, 1.0, nan]
    """
    check_infra(infra)
    require_columns(df, ANALYSIS_COLUMNS)
    keys = list(default_by(df, by))
    require_columns(df, keys)
    usable = df["outcome"] != INFRA_OUTCOME if infra == "exclude" else pd.Series(True, index=df.index)
    passed = df["passed"].astype(bool).astype(float).where(usable)
    grouped = passed.groupby([df[k] for k in [*keys, "task"]], dropna=False, sort=False)
    total, n = grouped.transform("sum"), grouped.transform("count")
    with np.errstate(invalid="ignore", divide="ignore"):
        loo = (total - passed) / (n - 1)
    return loo.where(n >= 2).rename("agreement_confidence")


def _scored(
    df: pd.DataFrame, confidence: str, by: str | Sequence[str] | None, infra: str, bins: int
) -> tuple[pd.DataFrame, list[str]]:
    """The usable trials with their confidence (``conf``, NaN: none) and outcome (``y``), and the keys."""
    if confidence not in SOURCES:
        raise ValueError(f"confidence must be one of {list(SOURCES)}; got confidence={confidence!r}")
    if isinstance(bins, bool) or not isinstance(bins, int | np.integer) or bins < 2:
        raise ValueError(f"bins must be a whole number ≥ 2; got bins={bins!r}")
    if not isinstance(df, pd.DataFrame) or is_counts_table(df):
        raise TypeError(
            "predictability needs trial records (a DataFrame, one row per trial, e.g. "
            "passk_nb.load(folder)): a confidence belongs to a trial, which counts no longer hold; "
            f"got {type(df).__name__}"
        )
    check_infra(infra)
    require_columns(df, ANALYSIS_COLUMNS)
    keys = list(default_by(df, by))
    require_columns(df, keys)
    refuse_repeated_trials(df, keys)
    outcome = df["outcome"]
    is_pass = (outcome == "pass").to_numpy()
    refuse_wrong_outcomes(
        df["passed"].astype(bool).to_numpy(), is_pass, outcome.isin(OUTCOMES).to_numpy(), outcome
    )
    if confidence == "stated":
        if "confidence" not in df.columns:
            raise ValueError(f"the frame has no 'confidence' column: {_NO_CONFIDENCE}")
        conf = pd.to_numeric(df["confidence"], errors="coerce").astype(float)
        outside = conf.notna() & ~conf.between(0.0, 1.0)
        if outside.any():
            raise ValueError(
                f"{int(outside.sum())} confidence values lie outside [0, 1] (first: "
                f"{conf[outside].iloc[0]!r}); give confidences as chances (0.8, not 80), or build the frame "
                "with passk_nb.data.records.frame_from_records, which notes such values and stores them as "
                "not stated"
            )
    else:
        conf = agreement_confidence(df, by=keys, infra=infra)
    usable = df["outcome"] != INFRA_OUTCOME if infra == "exclude" else pd.Series(True, index=df.index)
    frame = df.loc[usable, [*keys, "task"]].copy()
    frame["y"] = df.loc[usable, "passed"].astype(bool).astype(float)
    frame["conf"] = conf[usable]
    if frame["conf"].isna().all():
        raise ValueError(
            "no trial states a confidence (the 'confidence' column is empty): run with a '+confidence' "
            "prompt (prompt='default+confidence'), or use confidence='agreement'"
            if confidence == "stated"
            else "no task has two usable trials, and agreement scores each trial by its task's other "
            "trials: run trials=2 or more"
        )
    return frame, keys


def _groups(frame: pd.DataFrame, keys: list[str]) -> Iterator[tuple[dict[str, object], pd.DataFrame]]:
    if not keys:
        yield {}, frame
        return
    for key, part in frame.groupby(keys, sort=True, dropna=False, observed=True):
        values = key if isinstance(key, tuple) else (key,)
        yield dict(zip(keys, values, strict=True)), part


class _Sums:
    """One configuration's per-task sums: every metric of a resample is a product of the resample's
    task counts with these (T tasks, K bins, L distinct confidences)."""

    def __init__(self, task: np.ndarray, conf: np.ndarray, y: np.ndarray, n_tasks: int, bins: int):
        t, k = n_tasks, bins
        self.n_tasks, self.bins = t, k
        self.n = np.bincount(task, minlength=t).astype(float)
        self.squares = np.bincount(task, weights=(conf - y) ** 2, minlength=t)
        cell = task * k + np.minimum((conf * k).astype(int), k - 1)
        self.n_bin = np.bincount(cell, minlength=t * k).reshape(t, k).astype(float)
        self.gap_bin = np.bincount(cell, weights=conf - y, minlength=t * k).reshape(t, k)
        self.conf_bin = np.bincount(cell, weights=conf, minlength=t * k).reshape(t, k)
        self.pass_bin = np.bincount(cell, weights=y, minlength=t * k).reshape(t, k)
        levels, level = np.unique(conf, return_inverse=True)
        self.n_levels = levels.size
        at = task * levels.size + level
        self.pos = np.bincount(at, weights=y, minlength=t * levels.size).reshape(t, -1)
        self.neg = np.bincount(at, weights=1 - y, minlength=t * levels.size).reshape(t, -1)

    def metrics(self, w: np.ndarray) -> dict[str, np.ndarray]:
        """Brier, debiased and plug-in ECE, AUROC for each row of task counts ``w`` (R, T)."""
        total = w @ self.n
        out = {"brier": (w @ self.squares) / total}
        n_k, s_k = w @ self.n_bin, w @ self.gap_bin
        with np.errstate(invalid="ignore", divide="ignore"):
            gap = s_k / n_k
            # Σ_t w_t (s_tk − gap_k n_tk)²: the clustered spread of the bin's gap, linear in w
            spread = (
                w @ self.gap_bin**2
                - 2 * gap * (w @ (self.gap_bin * self.n_bin))
                + gap**2 * (w @ self.n_bin**2)
            )
            tasks = w @ (self.n_bin > 0)
            var = np.where(tasks >= 2, tasks / (tasks - 1) * np.maximum(spread, 0.0) / n_k**2, 0.0)
            plain = np.nan_to_num(np.abs(gap))
            debiased = np.sqrt(np.maximum(np.nan_to_num(gap**2 - var), 0.0))
            out["ece"] = (n_k * debiased).sum(axis=1) / total
            out["ece_plugin"] = (n_k * plain).sum(axis=1) / total
            # the squared error, unbiased where every gap is 0: the test of "calibrated"
            out["ece2"] = (n_k * np.nan_to_num(gap**2 - var)).sum(axis=1) / total
            out["ece2_plugin"] = (n_k * plain**2).sum(axis=1) / total
            pos, neg = w @ self.pos, w @ self.neg
            below = np.cumsum(neg, axis=1) - neg
            pairs = pos.sum(axis=1) * neg.sum(axis=1)
            out["auroc"] = np.where(pairs > 0, (pos * (below + 0.5 * neg)).sum(axis=1) / pairs, np.nan)
        return out

    def bootstrap(self, n_boot: int, seed: int) -> dict[str, np.ndarray]:
        """:meth:`metrics` of ``n_boot`` resamples of the tasks, in blocks of bounded memory."""
        draw = task_resamples(self.n_tasks, n_boot, seed).astype(float)
        step = max(1, _BLOCK // max(self.n_levels, self.bins, self.n_tasks))
        blocks = [self.metrics(draw[at : at + step]) for at in range(0, n_boot, step)]
        return {name: np.concatenate([b[name] for b in blocks]) for name in blocks[0]}


def _interval(
    metric: str, point: dict[str, float], boot: dict[str, np.ndarray], ci: float
) -> tuple[float, float, str]:
    """(lo, hi, ci_method) of one metric from the resamples (see the module)."""
    values = boot[metric]
    defined = values[~np.isnan(values)]
    if defined.size < 0.5 * values.size:
        return np.nan, np.nan, "declined: most resamples of the tasks hold one outcome only; run more tasks"
    q_lo, q_hi = np.quantile(defined, [(1 - ci) / 2, (1 + ci) / 2])
    if metric == "ece":  # basic interval around the plug-in ECE, which the resamples' ECE estimates
        lo, hi = point["ece"] - (q_hi - point["ece_plugin"]), point["ece"] - (q_lo - point["ece_plugin"])
        method = "basic bootstrap over tasks"
        # ECE is 0 exactly when the squared error is: where that one's (unbiased) lower bound
        # reaches 0, a calibrated agent is consistent with the data and the interval starts at 0
        high2 = np.quantile(boot["ece2"][~np.isnan(boot["ece2"])], (1 + ci) / 2)
        if point["ece2"] - (high2 - point["ece2_plugin"]) <= 0:
            lo = 0.0
    else:
        lo, hi, method = q_lo, q_hi, "percentile bootstrap over tasks"
    lo, hi = float(np.clip(lo, 0.0, 1.0)), float(np.clip(hi, 0.0, 1.0))
    if not hi - lo > 1e-12:
        return (
            np.nan,
            np.nan,
            (
                f"declined: every resample of the tasks gives {metric} = {float(np.median(defined)):.3g}, "
                "an interval without width; run more (and more varied) tasks"
            ),
        )
    return lo, hi, method


def _declined_rows(why: str) -> list[dict[str, object]]:
    return [{"metric": m, "value": np.nan, "lo": np.nan, "hi": np.nan, "ci_method": why} for m in METRICS]


def _group_rows(
    part: pd.DataFrame, *, bins: int, ci: float, n_boot: int, seed: int, min_tasks: int
) -> tuple[list[dict[str, object]], dict[str, object]]:
    """One configuration's metric rows and its counts."""
    scored = part[part["conf"].notna()]
    counts: dict[str, object] = {"n_tasks": 0, "n_trials": len(part), "n_scored": len(scored)}
    if scored.empty:
        return _declined_rows(f"declined: {_NO_CONFIDENCE}"), {**counts, "pass_rate": np.nan}
    sums, y = _arm_sums(scored, bins), scored["y"].to_numpy(float)
    counts.update(n_tasks=sums.n_tasks, pass_rate=float(y.mean()))
    point = {name: float(v[0]) for name, v in sums.metrics(np.ones((1, sums.n_tasks))).items()}
    few = sums.n_tasks < min_tasks
    boot = sums.bootstrap(n_boot, seed) if n_boot and not few else {}
    rows = []
    for metric in METRICS:
        lo, hi = np.nan, np.nan
        if metric == "auroc" and y.min() == y.max():
            outcome = "passed" if y[0] else "failed"
            method = (
                f"declined: every trial {outcome}, and AUROC needs passing and failing trials; "
                "run tasks the agent sometimes fails and sometimes passes"
            )
        elif metric == "auroc" and sums.n_levels == 1:
            method = "declined: every trial states the same confidence, which ranks no trial (AUROC 0.5)"
        elif few:
            method = (
                f"declined: {sums.n_tasks} tasks, fewer than min_tasks={min_tasks} (the trials of one task "
                "are not independent); run more tasks"
            )
        elif not n_boot:
            method = "none: n_boot=0"
        else:
            lo, hi, method = _interval(metric, point, boot, ci)
        value = np.nan if metric == "auroc" and y.min() == y.max() else point[metric]  # undefined
        rows.append({"metric": metric, "value": value, "lo": lo, "hi": hi, "ci_method": method})
    return rows, counts


@share_docs
def predictability(
    df: pd.DataFrame,
    *,
    confidence: str = "stated",
    by: str | Sequence[str] | None = None,
    bins: int = BINS,
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    infra: str = INFRA,
    min_tasks: int = MIN_TASKS,
) -> Result:
    """Does the agent know when it is right? Per configuration, the Brier score, the (debiased)
    expected calibration error and the AUROC of its confidence against ``passed``, each with an
    interval from a bootstrap over tasks (see the module).

    df: trial records, one row per trial (a confidence belongs to a trial: counts do not hold it).
    confidence: ``"stated"`` (default: the record's ``confidence``, the agent's own) or
    ``"agreement"`` (:func:`agreement_confidence`, from the outcomes of the task's other trials).
    {by}
    bins: the number of equal-width confidence bins (default 10; see the module).
    {ci}
    {n_boot}
    {seed}
    {infra}
    min_tasks: fewest tasks for an interval (default :data:`MIN_TASKS`, 15: measured by simulation,
    see the module); fewer gives the value without an interval, and ``ci_method`` says so.

    One row per configuration and metric (``brier``, ``ece``, ``auroc``): the ``by`` columns,
    ``source`` (the ``confidence`` scored), ``metric``, ``value``, ``lo``/``hi`` (the interval,
    NaN where declined), ``ci_method`` (how it was computed, or why it was declined and what to
    do), ``n_tasks`` and ``n_scored`` (tasks and trials with a confidence), ``n_trials`` (usable
    trials) and ``pass_rate`` (of the scored trials: a Brier score reads against p(1 − p)). A trial
    that ended without an answer (a format error, ``max_turns``) stated no confidence and is not
    scored: ``n_trials − n_scored`` says how many were left out.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> p = np.repeat(rng.beta(0.5, 0.5, 40), 6)  # 40 tasks, 6 trials each, stating their own p
    >>> df = pd.DataFrame({"task": np.repeat(np.arange(40), 6).astype(str), "confidence": p,
    ...                    "passed": rng.random(p.size) < p})
    >>> df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
    >>> out = predictability(df, by=(), n_boot=500)
    >>> out[["metric", "value", "lo", "hi"]].round(2)
      metric  value    lo    hi
    0  brier   0.11  0.08  0.14
    1    ece   0.03  0.00  0.06
    2  auroc   0.92  0.87  0.96
    """
    check_options(ci=ci, n_boot=n_boot, seed=seed)
    if isinstance(min_tasks, bool) or not isinstance(min_tasks, int | np.integer) or min_tasks < 2:
        raise ValueError(f"min_tasks must be a whole number ≥ 2; got min_tasks={min_tasks!r}")
    frame, keys = _scored(df, confidence, by, infra, bins)
    rows: list[dict[str, object]] = []
    for group, part in _groups(frame, keys):
        metric_rows, counts = _group_rows(
            part, bins=bins, ci=ci, n_boot=n_boot, seed=seed, min_tasks=min_tasks
        )
        rows.extend({**group, "source": confidence, **row, **counts} for row in metric_rows)
    out = pd.DataFrame(rows)
    out = out[
        [
            *keys,
            "source",
            "metric",
            "value",
            "lo",
            "hi",
            "ci_method",
            "n_tasks",
            "n_scored",
            "n_trials",
            "pass_rate",
        ]
    ]
    declined = out["ci_method"].str.startswith("declined")
    if declined.any():
        first = out.loc[declined, "ci_method"].iloc[0].removeprefix("declined: ")
        warnings.warn(
            f"predictability declined {int(declined.sum())} of {len(out)} intervals (see ci_method); "
            f"first: {first}",
            stacklevel=2,
        )
    return described(
        out, "predictability", by=keys, ci=ci, infra=infra, records=df, source=confidence, bins=bins
    )


#: Why :func:`predictability_difference` gives no interval for the ECE.
_NO_ECE_DIFFERENCE = (
    "no paired interval for the ECE: a calibrated configuration's debiased ECE sits on its boundary "
    "at 0 (its own interval needs the squared error's test there), where a bootstrap of the "
    "difference has no guarantee; compare the two cards' ECE intervals"
)


def _arm_sums(scored: pd.DataFrame, bins: int) -> _Sums:
    """One configuration's :class:`_Sums` of its scored trials, over its tasks in sorted order (so
    one bootstrap draw pairs configurations on the same tasks)."""
    task, _ = pd.factorize(scored["task"], sort=True)
    return _Sums(task, scored["conf"].to_numpy(float), scored["y"].to_numpy(float), int(task.max()) + 1, bins)


def _difference_row(
    metric: str,
    sums: tuple[_Sums, _Sums],
    ys: tuple[np.ndarray, np.ndarray],
    boot: dict[str, np.ndarray],
    ci: float,
) -> tuple[float, float, float, float, str]:
    """(a, b, lo, hi, ci_method) of one metric's paired difference b − a (see
    :func:`predictability_difference`); ``boot`` holds each resample's b − a, empty when declined
    before resampling."""
    ones = np.ones((1, sums[0].n_tasks))
    value_a, value_b = (float(s.metrics(ones)[metric][0]) for s in sums)
    if metric == "auroc":
        for name, s, y in zip(("a", "b"), sums, ys, strict=True):
            if y.min() == y.max() or s.n_levels == 1:
                why = "holds one outcome only" if y.min() == y.max() else "states one confidence only"
                return value_a, value_b, np.nan, np.nan, f"declined: arm {name} {why} on the shared tasks"
    if metric == "ece":
        return value_a, value_b, np.nan, np.nan, _NO_ECE_DIFFERENCE
    if not boot:
        return value_a, value_b, np.nan, np.nan, ""
    values = boot[metric]
    defined = values[~np.isnan(values)]
    if defined.size < 0.5 * values.size:
        why = "declined: most resamples of the tasks hold one outcome only in an arm; run more tasks"
        return value_a, value_b, np.nan, np.nan, why
    lo, hi = (float(q) for q in np.quantile(defined, [(1 - ci) / 2, (1 + ci) / 2]))
    if not hi - lo > 1e-12:
        return (
            value_a,
            value_b,
            np.nan,
            np.nan,
            f"declined: every resample of the tasks gives b − a = {float(np.median(defined)):.3g} (the two "
            "arms score the same on every task: the same trials under two names?), an interval without width",
        )
    return value_a, value_b, lo, hi, "paired percentile bootstrap over tasks"


@share_docs
def predictability_difference(
    df: pd.DataFrame,
    *,
    on: str,
    a: object,
    b: object,
    confidence: str = "stated",
    bins: int = BINS,
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    infra: str = INFRA,
    min_tasks: int = MIN_TASKS,
) -> Result:
    """The paired difference b − a of :func:`predictability`'s metrics between two configurations
    (``df[on] == a`` and ``== b``), over the tasks both scored, with its interval.

    One bootstrap over those tasks draws the same tasks for both arms (the task's trials of both
    stay together, so what the tasks share cancels) and takes each resample's b − a of each
    metric; the interval is its percentiles, as for each arm's Brier score and AUROC. The ECE's
    difference has no interval: its value is given and ``ci_method`` says why (a calibrated arm
    sits at the boundary 0, where a bootstrap of the difference has no guarantee). Coverage of the
    Brier and AUROC differences: ``benchmarks/predictability_coverage.py --paired``
    (``docs/methods/predictability.md``). Declined (NaN, and ``ci_method`` says why) below
    ``min_tasks`` shared tasks, for an AUROC either arm cannot rank, and when every resample gives
    the same difference (the same trials under two names): never a zero-width interval.

    df: trial records, one row per trial.
    on: the column whose values ``a`` and ``b`` name the two configurations.
    confidence: ``"stated"`` or ``"agreement"``, as in :func:`predictability`.
    bins: as in :func:`predictability`.
    {ci}
    {n_boot}
    {seed}
    {infra}
    min_tasks: fewest shared tasks for an interval (default :data:`MIN_TASKS`, as :func:`predictability`).

    One row per metric (``brier``, ``ece``, ``auroc``): ``source``, ``metric``, ``a`` and ``b``
    (each arm's value on the shared tasks), ``diff`` (b − a), ``lo``/``hi`` and ``ci_method``,
    ``n_tasks`` (shared tasks with scored trials in both arms).

    >>> rng = np.random.default_rng(0)
    >>> p = np.repeat(rng.beta(0.5, 0.5, 40), 6)  # 40 tasks, 6 trials each
    >>> df = pd.DataFrame({"task": np.repeat(np.arange(40), 6).astype(str), "passed": rng.random(p.size) < p})
    >>> df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
    >>> both = pd.concat([df.assign(agent="sure", confidence=0.9), df.assign(agent="fair", confidence=p)])
    >>> out = predictability_difference(both, on="agent", a="sure", b="fair", n_boot=500)
    >>> out.loc[out["metric"] == "brier", ["diff", "lo", "hi"]].round(2).values.tolist()
    [[-0.29, -0.4, -0.19]]
    """
    check_options(ci=ci, n_boot=n_boot, seed=seed)
    if isinstance(min_tasks, bool) or not isinstance(min_tasks, int | np.integer) or min_tasks < 2:
        raise ValueError(f"min_tasks must be a whole number ≥ 2; got min_tasks={min_tasks!r}")
    frame, _ = _scored(two_arms(df, on, a, b, "predictability_difference"), confidence, [on], infra, bins)
    scored = frame[frame["conf"].notna()]
    shared = set(scored.loc[scored[on] == a, "task"]) & set(scored.loc[scored[on] == b, "task"])
    arms = tuple(scored[(scored[on] == arm) & scored["task"].isin(shared)] for arm in (a, b))
    rows: list[dict[str, object]] = []
    if not shared:
        why = f"declined: no task has scored trials (a stated confidence) in both {on} = {a!r} and {b!r}"
        rows = [
            {
                "metric": m,
                "a": np.nan,
                "b": np.nan,
                "diff": np.nan,
                "lo": np.nan,
                "hi": np.nan,
                "ci_method": why,
            }
            for m in METRICS
        ]
    else:
        sums = (_arm_sums(arms[0], bins), _arm_sums(arms[1], bins))
        ys = (arms[0]["y"].to_numpy(float), arms[1]["y"].to_numpy(float))
        few = len(shared) < min_tasks
        boot: dict[str, np.ndarray] = {}
        if n_boot and not few:  # the same draw for both arms: it depends only on the tasks and the seed
            boot_a, boot_b = (s.bootstrap(n_boot, seed) for s in sums)
            boot = {m: boot_b[m] - boot_a[m] for m in METRICS}
        for metric in METRICS:
            value_a, value_b, lo, hi, method = _difference_row(metric, sums, ys, boot, ci)
            if not method:
                method = (
                    f"declined: {len(shared)} shared tasks, fewer than min_tasks={min_tasks} (the trials of "
                    "one task are not independent); run more tasks"
                    if few
                    else "none: n_boot=0"
                )
            rows.append(
                {
                    "metric": metric,
                    "a": value_a,
                    "b": value_b,
                    "diff": value_b - value_a,
                    "lo": lo,
                    "hi": hi,
                    "ci_method": method,
                }
            )
    out = pd.DataFrame(rows)
    out.insert(0, "source", confidence)
    out["n_tasks"] = len(shared)
    return described(
        out,
        "predictability_difference",
        by=(),
        ci=ci,
        infra=infra,
        records=df,
        source=confidence,
        bins=bins,
        on=on,
        a=a,
        b=b,
    )


@share_docs
def calibration(
    df: pd.DataFrame,
    *,
    confidence: str = "stated",
    by: str | Sequence[str] | None = None,
    bins: int = BINS,
    ci: float = CI,
    infra: str = INFRA,
) -> Result:
    """The reliability diagram's data: per configuration and confidence bin (the bins of
    :func:`predictability`'s ECE), the mean confidence and the pass rate with its interval.

    df: trial records, one row per trial.
    confidence: ``"stated"`` (default: the record's ``confidence``, the agent's own) or
    ``"agreement"`` (:func:`agreement_confidence`, from the outcomes of the task's other trials).
    {by}
    bins: the number of equal-width confidence bins (default 10; see the module).
    {ci}
    {infra}

    One row per configuration and bin holding a scored trial: the ``by`` columns, ``source``,
    ``bin`` (0 ..), ``bin_lo``/``bin_hi`` (its edges), ``n_trials`` and ``n_tasks`` in it,
    ``mean_confidence``, ``pass_rate``, ``lo``/``hi`` and ``ci_method``. The interval is
    Clopper–Pearson on an effective number of trials (the bin's trials divided by their design
    effect over tasks, as Korn–Graubard do for a suite's mean): trials of one task that agree say
    less than independent ones. Declined (NaN) for a bin holding one task's trials only.
    A calibrated agent's points lie on the diagonal.

    >>> df = pd.DataFrame({"task": list("aabbccdd"), "confidence": [0.9, 0.8, 0.2, 0.3, 0.95, 0.85, 0.1, 0.9],
    ...                    "passed": [True, True, False, True, True, False, False, True]})
    >>> df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
    >>> columns = ["bin", "n_trials", "n_tasks", "mean_confidence", "pass_rate", "lo", "hi"]
    >>> calibration(df, by=())[columns].round(3)
       bin  n_trials  n_tasks  mean_confidence  pass_rate     lo   hi
    0    1         1        1            0.100        0.0    NaN  NaN
    1    2         1        1            0.200        0.0    NaN  NaN
    2    3         1        1            0.300        1.0    NaN  NaN
    3    8         2        2            0.825        0.5  0.000  1.0
    4    9         3        3            0.917        1.0  0.292  1.0
    """
    check_options(ci=ci, n_boot=0, seed=0)
    frame, keys = _scored(df, confidence, by, infra, bins)
    rows = []
    for group, part in _groups(frame, keys):
        scored = part[part["conf"].notna()]
        if scored.empty:
            continue
        for row in _bin_rows(_arm_sums(scored, bins), ci):
            rows.append({**group, "source": confidence, **row})
    columns = [*keys, "source", "bin", "bin_lo", "bin_hi", "n_trials", "n_tasks", "mean_confidence"]
    out = pd.DataFrame(rows, columns=[*columns, "pass_rate", "lo", "hi", "ci_method"])
    return described(
        out, "calibration", by=keys, ci=ci, infra=infra, records=df, source=confidence, bins=bins
    )


def _bin_rows(sums: _Sums, ci: float) -> list[dict[str, object]]:
    """The reliability diagram's rows of one configuration (see :func:`calibration`)."""
    n_k = sums.n_bin.sum(axis=0)
    passes = sums.pass_bin.sum(axis=0)
    tasks = (sums.n_bin > 0).sum(axis=0)
    rows = []
    for k in np.flatnonzero(n_k):
        n, rate = float(n_k[k]), float(passes[k] / n_k[k])
        spread = float(((sums.pass_bin[:, k] - rate * sums.n_bin[:, k]) ** 2).sum())
        lo = hi = np.nan
        if tasks[k] < 2:
            method = "declined: the bin holds one task's trials, which tell nothing of other tasks"
        else:
            clustered = tasks[k] / (tasks[k] - 1) * spread / n**2
            independent = rate * (1 - rate) / n
            effective = n if clustered <= 0 else min(n, n * independent / clustered)
            effective = max(effective, 1.0)
            bounds = exact_binomial(np.array(rate * effective), np.array(effective), (1 - ci) / 2)
            lo, hi = float(bounds[0]), float(bounds[1])
            method = "Clopper–Pearson on the effective number of trials"
        rows.append(
            {
                "bin": int(k),
                "bin_lo": k / sums.bins,
                "bin_hi": (k + 1) / sums.bins,
                "n_trials": int(n),
                "n_tasks": int(tasks[k]),
                "mean_confidence": float(sums.conf_bin[:, k].sum() / n),
                "pass_rate": rate,
                "lo": lo,
                "hi": hi,
                "ci_method": method,
            }
        )
    return rows
