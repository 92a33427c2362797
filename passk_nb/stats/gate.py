"""The gate decision: is pass^k high enough, and not significantly worse than a baseline?

:func:`gate` decides; ``passk gate`` (:mod:`passk_nb.cli.gate`) prints it and turns it into an exit
status. Every bound it reads is a column of :func:`~passk_nb.stats.summary.summarize` or
:func:`~passk_nb.stats.paired.compare`: ``interval="tasks"`` (default) reads ``pass^k_lo`` (new
tasks like these), ``interval="fixed"`` reads ``pass^k_fixed_lo`` (these tasks, re-rolled). With
``baseline=`` it fails when the whole paired interval of the difference is below 0; a task's
case fails below ``min`` or, with a baseline, when it got significantly worse
(:func:`~passk_nb.stats.paired.flips`).

Which interval to gate on, and why: ``docs/methods/intervals.md``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import pandas as pd

from passk_nb.stats.params import CI, CLUSTER, N_BOOT, SEED, default_by

#: What ``interval=`` accepts; the first is the default.
GATE_INTERVALS: tuple[str, ...] = ("tasks", "fixed")
#: Columns of :func:`summarize` that bound pass^k, per interval.
_BOUNDS = {"tasks": ("pass^k_lo", "pass^k_hi"), "fixed": ("pass^k_fixed_lo", "pass^k_fixed_hi")}


@dataclass(frozen=True)
class GateResult:
    """What :func:`gate` decided, the bounds it read and why.

    - ``holds``: the decision.
    - ``bounds``: one row per configuration (the ``by`` columns, ``n_tasks``,
      ``n_tasks_covered``, ``successes``, ``trials`` (infrastructure errors included),
      ``pass^k``, ``lo``, ``hi`` of the chosen interval, ``holds``); empty without ``min``.
    - ``comparison``: the pass^k row of :func:`compare` against the baseline and its ``holds``
      (None without a baseline); ``regressed``: the :func:`flips` rows of tasks that got
      significantly worse.
    - ``tasks``: one row per (configuration, task): ``pass^k``, ``successes``, ``trials``,
      ``failed``, ``reason`` ("" when it did not fail) and ``failing_trials`` (one line each).
    - ``reasons``: one sentence per condition that failed (empty when the gate holds).
    """

    holds: bool
    k: int
    ci: float
    interval: str
    minimum: float | None
    by: tuple[str, ...]
    bounds: pd.DataFrame
    comparison: pd.Series | None
    regressed: pd.DataFrame | None
    tasks: pd.DataFrame
    reasons: list[str]
    n_infra: int


def gate(
    df: pd.DataFrame,
    *,
    k: int,
    min: float | None = None,  # noqa: A002  (the threshold's name in the vocabulary of `passk gate --min`)
    baseline: pd.DataFrame | None = None,
    interval: str = GATE_INTERVALS[0],
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    cluster: str | None = CLUSTER,
) -> GateResult:
    """Decide a CI gate on trial records: pass^k's lower bound ≥ ``min``, and no paired regression.

    df: trial records of the run (one or more configurations; with ``baseline``, exactly one).
    k: k of pass^k; every task needs at least k usable trials (a gate that silently skipped a task
    would be no gate).
    min: threshold for the lower bound of pass^k's ``ci`` interval, in [0, 1].
    baseline: trial records of one baseline configuration to compare with, paired by task.
    interval: ``"tasks"`` (new tasks like these) or ``"fixed"`` (these tasks, re-rolled).
    ci, n_boot, seed: as in :func:`~passk_nb.stats.summary.summarize`.
    cluster: the column naming each task's family (as in summarize; use it when tasks come in
    families): the interval for new tasks and the baseline comparison resample families.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": [f"t{i}" for i in range(20) for _ in range(4)], "model": "m",
    ...                    "passed": True, "outcome": "pass", "trial": list(range(4)) * 20})
    >>> result = gate(df, k=4, min=0.8)
    >>> result.holds, round(float(result.bounds["lo"].iloc[0]), 2), result.reasons
    (True, 0.83, [])
    >>> gate(df, k=4, min=0.9).reasons
    ['model=m: the lower bound of pass^4, 0.832, is below 0.9 (95% interval for new tasks like these)']
    """
    from passk_nb.stats.summary import summarize

    if interval not in GATE_INTERVALS:
        raise ValueError(f"interval must be one of {list(GATE_INTERVALS)}; got interval={interval!r}")
    if min is None and baseline is None:
        raise ValueError("give a threshold (min=, `--min`), a baseline (baseline=, `--baseline`), or both")
    if min is not None and not 0 <= min <= 1:
        raise ValueError(f"min is a threshold for pass^k, between 0 and 1; got {min}")
    if df.empty:
        raise ValueError("no trial records to gate on: the folder is empty or the filters left nothing")
    if (df["outcome"] == "infra_error").all():
        raise ValueError(
            f"all {len(df)} trials ended in infrastructure errors; fix the backend and run again"
        )
    by = default_by(df, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = summarize(df, k=k, ci=ci, n_boot=n_boot, seed=seed, cluster=cluster)
        per_task = summarize(df, k=k, by=(*by, "task"), n_boot=0)
    short = per_task[per_task["trials"] < k]
    if len(short):
        names = ", ".join(f"{t} ({n})" for t, n in list(zip(short["task"], short["trials"], strict=True))[:5])
        raise ValueError(
            f"k={k} needs {k} usable trials of every task; these have fewer (infra errors excluded): "
            f"{names}. Run more trials (re-running the same `passk run` resumes) or lower k"
        )
    reasons: list[str] = []
    failed = pd.Series("", index=per_task.index)
    bounds = _bounds(
        summary, by, k=k, minimum=min, interval=interval, ci=ci, reasons=reasons, cluster=cluster
    )
    if min is not None:
        failed[per_task["pass^k"] < min] = f"pass^{k} below {min:g}"
    comparison = regressed = None
    if baseline is not None:
        comparison, regressed = _against_baseline(
            df, baseline, k=k, ci=ci, n_boot=n_boot, seed=seed, cluster=cluster
        )
        if not comparison["holds"]:
            reasons.append(
                f"pass^{k} is worse than the baseline's: the whole {ci:.0%} interval of the paired "
                f"difference, [{comparison['lo']:+.3f}, {comparison['hi']:+.3f}], is below 0"
            )
        worse = per_task["task"].astype(str).isin({str(t) for t in regressed["task"]})
        failed[worse & (failed == "")] = "significantly worse than the baseline (Fisher, BH)"
    tasks = per_task[[*by, "task", "pass^k", "successes", "trials"]].assign(
        failed=(failed != "").to_numpy(),
        reason=failed.to_numpy(),
        failing_trials=_failing_trials(df, per_task, by),
    )
    return GateResult(
        holds=not reasons,
        k=k,
        ci=ci,
        interval=interval,
        minimum=min,
        by=by,
        bounds=bounds,
        comparison=comparison,
        regressed=regressed,
        tasks=tasks.reset_index(drop=True),
        reasons=reasons,
        n_infra=int((df["outcome"] == "infra_error").sum()),
    )


def _bounds(
    summary: pd.DataFrame,
    by: tuple[str, ...],
    *,
    k: int,
    minimum: float | None,
    interval: str,
    ci: float,
    reasons: list[str],
    cluster: str | None = None,
) -> pd.DataFrame:
    """Per configuration: the chosen interval of pass^k and whether its lower bound holds."""
    columns = [*by, "n_tasks", "n_tasks_covered", "successes", "trials", "pass^k", "lo", "hi", "holds"]
    if minimum is None:
        return pd.DataFrame(columns=columns)
    lo_col, hi_col = _BOUNDS[interval]
    out = summary[[*by, "n_tasks", "n_tasks_covered", "successes", "pass^k"]].assign(
        trials=summary["trials"] + summary["n_infra_excluded"], lo=summary[lo_col], hi=summary[hi_col]
    )
    what = "for new tasks like these" if interval == "tasks" else "for these tasks, re-rolled"
    for row in out.to_dict("records"):
        name = ", ".join(f"{col}={row[col]}" for col in by) or "all trials"
        if math.isnan(row["lo"]):
            units = "tasks" if cluster is None else f"families (cluster={cluster!r})"
            why = (
                f'too few {units} for an interval over tasks (declined below five); use interval="fixed" '
                "(--interval fixed) or run more tasks"
                if interval == "tasks"
                else f"a task has fewer than k={k} usable trials; run more"
            )
            raise ValueError(f"no lower bound of pass^{k} for {name}: {why}")
        if row["lo"] < minimum - 1e-12:
            reasons.append(
                f"{name}: the lower bound of pass^{k}, {row['lo']:.3f}, is below {minimum:g} "
                f"({ci:.0%} interval {what})"
            )
    out["holds"] = out["lo"] >= minimum - 1e-12
    return out[columns].reset_index(drop=True)


def _against_baseline(
    df: pd.DataFrame,
    baseline: pd.DataFrame,
    *,
    k: int,
    ci: float,
    n_boot: int,
    seed: int,
    cluster: str | None = None,
) -> tuple[pd.Series, pd.DataFrame]:
    """compare()'s pass^k row against the baseline (with ``holds``) and the tasks that got worse."""
    from passk_nb.stats.paired import compare, flips

    for name, frame in (("the run", df), ("the baseline", baseline)):
        configs = frame.groupby(list(default_by(frame, None)), dropna=False).ngroups if len(frame) else 0
        if configs > 1:
            raise ValueError(
                f"{name} holds {configs} configurations; a baseline comparison needs one on each side: "
                "filter the records (`passk gate` has --provider, --model and --config)"
            )
    if baseline.empty:
        raise ValueError("the baseline has no trial records (empty folder, or the filters left nothing)")
    arms = pd.concat([baseline.assign(arm="baseline"), df.assign(arm="current")], ignore_index=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = compare(
                arms,
                on="arm",
                a="baseline",
                b="current",
                k=k,
                by=(),
                ci=ci,
                n_boot=n_boot,
                seed=seed,
                cluster=cluster,
            )
            per_task = flips(arms, on="arm", a="baseline", b="current", by=())
        except ValueError as exc:
            raise ValueError(f"cannot compare with the baseline: {exc}") from None
    row = result[result["metric"] == "pass^k"].iloc[0].copy()
    if math.isnan(row["hi"]):
        raise ValueError("the comparison has a single paired task: no interval over tasks; run more tasks")
    row["holds"] = bool(row["hi"] >= 0)
    return row, per_task[per_task["flip"] & (per_task["delta"] < 0)].reset_index(drop=True)


def _failing_trials(df: pd.DataFrame, per_task: pd.DataFrame, by: tuple[str, ...]) -> list[list[str]]:
    """Per row of ``per_task``: one line per failing trial (infrastructure errors left out)."""
    keys = [*by, "task"]
    bad = df[~df["passed"].astype(bool) & (df["outcome"] != "infra_error")]
    grouped = {_as_tuple(key): part for key, part in bad.groupby(keys, dropna=False, sort=False)}
    lines = []
    for row in per_task[keys].itertuples(index=False, name=None):
        trials = grouped.get(tuple(row), bad.iloc[:0])
        lines.append(
            [
                f"trial {int(t.trial)}"
                + (f" (run {t.run_id})" if "run_id" in trials.columns else "")
                + f": {t.outcome}"
                + (f" — {t.error}" if isinstance(getattr(t, "error", None), str) and t.error else "")
                for t in trials.sort_values("trial").itertuples()
            ]
        )
    return lines


def _as_tuple(key: object) -> tuple[object, ...]:
    return key if isinstance(key, tuple) else (key,)
