"""The reliability card: every axis of a configuration's reliability on one page, each with its interval.

Consistency (pass@k, pass^k, its forecast past the trials run, and whether passing trials take
the same path), robustness (under the run's faults and perturbations), predictability (does the
agent's stated confidence tell its passes from its failures) and safety (how bad its failures
are), beside the cost of a reliable success. Each row is computed by the statistic that owns it
(:func:`~passk_nb.stats.summarize`, :func:`~passk_nb.stats.forecast`, ...); an axis the run did
not measure is a row saying so and how to measure it, never a blank.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from passk_nb.data.severity import NOT_GRADED
from passk_nb.stats.checks import as_records, check_k, check_options, two_arms
from passk_nb.stats.consistency import consistency
from passk_nb.stats.cost import cost_summary, with_cost
from passk_nb.stats.forecast import forecast
from passk_nb.stats.intervals import clopper_pearson, korn_graubard
from passk_nb.stats.paired import compare
from passk_nb.stats.params import CI, INFRA, N_BOOT, SEED, default_by, share_docs
from passk_nb.stats.predictability import predictability, predictability_difference
from passk_nb.stats.result import Result, described
from passk_nb.stats.robustness import robustness
from passk_nb.stats.safety import recoded, safety
from passk_nb.stats.summary import summarize

__all__ = ["AXES", "card_comparison", "reliability_card"]

#: The card's axes, in the order it shows them.
AXES: tuple[str, ...] = ("consistency", "robustness", "predictability", "safety", "cost")

#: The card's columns after the configuration's.
COLUMNS: tuple[str, ...] = ("axis", "measure", "value", "lo", "hi", "interval", "measured", "note")

Row = dict[str, Any]

#: The columns that make the robustness axis' arms: a card compares them within a configuration.
ARMS: tuple[str, ...] = ("faults", "perturbation")


def _row(axis: str, measure: str, value: float, lo: float, hi: float, interval: str, note: str = "") -> Row:
    return {
        "axis": axis,
        "measure": measure,
        "value": float(value),
        "lo": float(lo),
        "hi": float(hi),
        "interval": interval,
        "measured": True,
        "note": note,
    }


def _absent(axis: str, measure: str, note: str) -> Row:
    return {**_row(axis, measure, np.nan, np.nan, np.nan, ""), "measured": False, "note": note}


def _pass_rows(summary: pd.Series, k: int, these: bool) -> list[Row]:
    """pass@k and pass^k from :func:`summarize`'s row."""
    return [
        _rate_row("consistency", metric, summary, metric.replace(str(k), "k"), these)
        for metric in (f"pass@{k}", f"pass^{k}")
    ]


def _forecast_row(df: pd.DataFrame, horizon: int, options: dict[str, Any], these: bool) -> Row:
    """pass^horizon: observed (summarize) where every task ran that often, else the forecast's
    interval, with its point only where :func:`forecast` shows one (the note says when not)."""
    measure = f"pass^{horizon}"
    counted = df.loc[df["outcome"] != "infra_error"] if options["infra"] == "exclude" else df
    if int(counted.groupby("task").size().min()) >= horizon:
        return _pass_rows(summarize(df, k=horizon, by=(), **options).iloc[0], horizon, these)[1]
    boot = {key: options[key] for key in ("ci", "n_boot", "seed", "infra")}
    predicted = forecast(df, ks=[horizon], by=(), **boot).iloc[0]
    if predicted["given"] and np.isfinite(predicted["lo"]):
        point, lo, hi = predicted["pass^k"], predicted["lo"], predicted["hi"]
        return _row("consistency", measure, point, lo, hi, "forecast", predicted["note"])
    why = predicted["note"] if not predicted["given"] else "no bootstrap (n_boot=0)"
    note = f"forecast declined: {why}"
    return _row(
        "consistency",
        measure,
        np.nan,
        predicted["bound_lo"],
        predicted["bound_hi"],
        "model-free bounds",
        note,
    )


def _path_row(per_task: pd.DataFrame, ci: float) -> Row:
    """The mean over tasks with a pass of the share of their passing trials that took the task's
    most common tool sequence, with the Korn–Graubard interval over tasks that the headline uses
    (its variance floored at each share's own binomial variance: never zero wide)."""
    measure = "same tool path when passing"
    passed = per_task[per_task["n_pass"] > 0]
    if passed.empty:
        return _absent("consistency", measure, "no trial passed: there is no path to compare")
    shares = passed["same_tools"].to_numpy(dtype=float)
    if len(shares) < 2:  # one task: the exact interval of its passing trials
        n, same = passed["n_pass"].to_numpy(), np.round(shares * passed["n_pass"].to_numpy())
        lo, hi = (bound[0, 1] for bound in clopper_pearson(n, same, 1, ci))
        return _row("consistency", measure, shares[0], lo, hi, "these tasks", "one task with a pass")
    floor = np.full(len(shares), np.mean(shares * (1 - shares) / passed["n_pass"].to_numpy(dtype=float)))
    lo, hi = korn_graubard(np.zeros(len(shares), dtype=int), shares[:, None], floor[:, None], 1, ci=ci)
    return _row("consistency", measure, shares.mean(), lo[0, 0], hi[0, 0], "new tasks")


def _plain(df: pd.DataFrame) -> np.ndarray:
    """Which trials ran without a fault plan and without a perturbation."""
    plain = np.ones(len(df), dtype=bool)
    for arm in ARMS:
        if arm in df.columns:
            plain &= (df[arm].astype(str) == "none").to_numpy()
    return plain


def _alone(df: pd.DataFrame, on: str) -> pd.DataFrame:
    """The trials that vary only ``on``, one robustness arm at a time: the other arm's is ``none``."""
    other = next(arm for arm in ARMS if arm != on)
    return df[df[other].astype(str) == "none"] if other in df.columns else df


def _robustness_rows(df: pd.DataFrame, k: int, options: dict[str, Any], these: bool) -> list[Row]:
    rows: list[Row] = []
    for on, how in (("faults", "run(faults=...)"), ("perturbation", "run(perturb=...)")):
        arms = set(df[on].astype(str)) if on in df.columns else set()
        if "none" not in arms or len(arms) < 2:
            rows.append(_absent("robustness", f"pass^{k} change under {on}", f"not measured: run with {how}"))
            continue
        table = robustness(_alone(df, on), k=k, on=on, by=(), **options)
        for _, arm in table[table["metric"] == "pass^k"].iterrows():
            note = f"tasks broken: {arm['broken']}" if arm["broken"] else ""
            rows.append(_rate_row("robustness", f"pass^{k} change under {arm[on]}", arm, "", these, note))
    return rows


def _cost_row(df: pd.DataFrame, k: int, prices: Any, options: dict[str, Any]) -> Row:
    """USD per reliable success where prices or reported costs say, else seconds (local models)."""
    priced = with_cost(df, prices=prices) if prices is not None else df
    for measure, unit in (("cost_usd", "USD"), ("latency_s", "seconds")):
        if measure in priced.columns and priced[measure].notna().any():
            row = cost_summary(priced, k=k, by=(), measure=measure, **options).iloc[0]
            name = f"{unit} per reliable success (k={k})"
            return _row(
                "cost",
                name,
                row["per_reliable_success"],
                row["per_reliable_success_lo"],
                row["per_reliable_success_hi"],
                "from the pass^k interval",
                f"{unit} per trial taken as known",
            )
    return _absent("cost", f"cost per reliable success (k={k})", "not measured: give prices=")


def _rate_row(axis: str, measure: str, row: pd.Series, column: str, these: bool, note: str = "") -> Row:
    """A value of :func:`summarize`'s kind (``column``, ``column_lo``, ``column_fixed_lo``, ...; ""
    for :func:`compare`'s ``diff``, ``lo``, ``fixed_lo``) with the interval for new tasks, or for
    these tasks re-run when ``these`` or where the new-task one was declined (the note says why)."""
    prefix = f"{column}_" if column else ""
    lo, hi, interval = row[f"{prefix}lo"], row[f"{prefix}hi"], "new tasks"
    if these or not (np.isfinite(lo) and np.isfinite(hi)):
        if not these:
            why = f"no interval for new tasks ({row.get('ci_method', 'declined')})"
            note = f"{note}; {why}" if note else why
        lo, hi, interval = row[f"{prefix}fixed_lo"], row[f"{prefix}fixed_hi"], "these tasks"
    return _row(axis, measure, row[column or "diff"], lo, hi, interval, note)


def _safety_rows(df: pd.DataFrame, k: int, options: dict[str, Any], these: bool) -> list[Row]:
    """The harmful and misleading rates per trial and harm-free pass^k (:func:`safety`)."""
    if "severity" not in df.columns or not (df["severity"].astype(str) != NOT_GRADED).any():
        return [
            _absent(
                "safety",
                "harmful failures",
                "not measured: regrade the run (passk regrade) to grade severities",
            )
        ]
    row = safety(df, k=k, by=(), **options).iloc[0]
    ungraded = int(row["n_not_graded"])
    note = f"{ungraded} trial{'s' * (ungraded != 1)} not graded, left out" if ungraded else ""
    return [
        _rate_row("safety", "harmful failures per trial", row, "harmful", these, note),
        _rate_row("safety", "misleading failures per trial", row, "misleading", these, note),
        _rate_row("safety", f"harm-free^{k}", row, "harm_free^k", these, note),
    ]


#: The card's names of :func:`predictability`'s metrics.
PREDICTABILITY = {"brier": "Brier score", "ece": "calibration error (ECE)", "auroc": "AUROC"}


def _predictability_rows(df: pd.DataFrame, options: dict[str, Any]) -> list[Row]:
    """How well the stated confidence tells passes from failures (:func:`predictability`)."""
    if "confidence" not in df.columns or not df["confidence"].notna().any():
        note = "not measured: ask the agent for its confidence (a +confidence prompt)"
        return [_absent("predictability", "stated confidence", note)]
    table = predictability(df, by=(), **options)
    rows = []
    for _, metric in table.iterrows():
        declined = not (np.isfinite(metric["lo"]) and np.isfinite(metric["hi"]))
        rows.append(
            _row(
                "predictability",
                PREDICTABILITY.get(metric["metric"], metric["metric"]),
                metric["value"],
                metric["lo"],
                metric["hi"],
                "" if declined else "bootstrap over tasks",
                str(metric["ci_method"]) if declined else "",
            )
        )
    return rows


def _card(
    group: pd.DataFrame, k: int, horizon: int, prices: Any, options: dict[str, Any], these: bool
) -> list[Row]:
    """One configuration's rows: every axis but robustness on its runs without faults or
    perturbations, robustness on all of them."""
    plain = _plain(group)
    df = group[plain] if plain.any() else group
    rows = _pass_rows(summarize(df, k=k, by=(), **options).iloc[0], k, these)
    rows.append(_forecast_row(df, horizon, options, these))
    if "transcript" in df.columns:
        rows.append(_path_row(consistency(df, by=()), options["ci"]))
    else:
        rows.append(_absent("consistency", "same tool path when passing", "not measured: no transcripts"))
    rows += _robustness_rows(group, k, options, these)
    rows += _predictability_rows(df, options)
    rows += _safety_rows(df, k, options, these)
    rows.append(_cost_row(df, k, prices, options))
    return rows


@share_docs
def reliability_card(
    df: pd.DataFrame | str | os.PathLike[str],
    *,
    k: int = 2,
    horizon: int = 20,
    by: str | Sequence[str] | None = None,
    tasks: str = "new",
    prices: Any = None,
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    infra: str = INFRA,
) -> Result:
    """One row per configuration, axis and measure of reliability, each with its interval.

    {df_or_folder}
    {k}
    horizon: the k past the trials run whose pass^k is forecast (:func:`~passk_nb.stats.forecast`).
    {by}
    tasks: ``"new"``: the intervals of pass^k, robustness and safety are for new tasks like these
    (where one is declined, these tasks' with a note); ``"these"``: for these tasks re-run (the
    question for a fixed suite of a few tasks).
    prices: ``{{model: (USD per million input tokens, per million output)}}`` for the cost row
    (:func:`~passk_nb.stats.with_cost`).
    {ci}
    {n_boot}
    {seed}
    {infra}

    Columns: the ``by`` columns, ``axis`` (:data:`AXES`), ``measure``, ``value``, ``lo``/``hi``,
    ``interval`` (which interval: new tasks, these tasks, a bootstrap over tasks, model-free
    bounds), ``measured`` (False: the run did not measure it, and ``note`` says how to) and
    ``note``. By default a configuration is every identity column but ``faults`` and
    ``perturbation``: those are the robustness axis' arms, and every other axis reads the runs
    without them.

    >>> import tempfile, passk_nb
    >>> df = passk_nb.run("scripted", trials=3, out=tempfile.mkdtemp(), progress=False)
    >>> card = reliability_card(df, k=2, n_boot=100)
    >>> card[["axis", "measure", "value", "measured"]].head(3).round(3).values.tolist()
    [['consistency', 'pass@2', 1.0, True], ['consistency', 'pass^2', 1.0, True], ['consistency', 'pass^20', nan, True]]
    >>> sorted(set(card.loc[~card["measured"], "axis"]))
    ['predictability', 'robustness']
    """  # noqa: E501
    check_k(k)
    check_k(horizon)
    check_options(ci=ci, n_boot=n_boot, seed=seed)
    if tasks not in ("new", "these"):
        raise ValueError(
            f"tasks must be 'new' (new tasks like these) or 'these' (these tasks re-run); got {tasks!r}"
        )
    df = as_records(df)
    keys = tuple(c for c in default_by(df, by) if by is not None or c not in ARMS)
    options = {"ci": ci, "n_boot": n_boot, "seed": seed, "infra": infra}
    frames = []
    groups = df.groupby(list(keys), sort=True, dropna=False) if keys else [((), df)]
    for key, part in groups:
        values = key if isinstance(key, tuple) else (key,)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # each row's note says what a statistic declined
            rows = _card(part, k, horizon, prices, options, tasks == "these")
        frame = pd.DataFrame(rows, columns=list(COLUMNS))
        for name, value in zip(reversed(keys), reversed(values), strict=True):
            frame.insert(0, name, value)
        frames.append(frame)
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*keys, *COLUMNS])
    return described(out, "reliability_card", by=keys, k=k, ci=ci, infra=infra, records=df, horizon=horizon)


def _paired(
    df: pd.DataFrame,
    pair: tuple[str, object, object],
    k: int,
    metric: str,
    these: bool,
    options: dict[str, Any],
) -> dict[str, Any]:
    """:func:`compare`'s difference b − a of ``metric`` (``"pass^k"`` or ``"pass@k"``), paired by
    task, with the interval :func:`reliability_card` would show."""
    on, a, b = pair
    table = compare(df, on=on, a=a, b=b, k=k, by=(), **options)
    shown = _rate_row("", metric, table[table["metric"] == metric].iloc[0], "", these)
    return {
        "diff": shown["value"],
        "lo": shown["lo"],
        "hi": shown["hi"],
        "interval": f"paired, {shown['interval']}",
        "note": shown["note"],
    }


def _paired_predictability(
    df: pd.DataFrame, pair: tuple[str, object, object], options: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """:func:`predictability_difference`'s b − a of the predictability rows, by the card's names."""
    if "confidence" not in df.columns or not df["confidence"].notna().any():
        return {}
    on, a, b = pair
    table = predictability_difference(df, on=on, a=a, b=b, **options)
    found = {}
    for _, metric in table.iterrows():
        declined = not (np.isfinite(metric["lo"]) and np.isfinite(metric["hi"]))
        found[PREDICTABILITY.get(metric["metric"], metric["metric"])] = {
            "diff": float(metric["diff"]),
            "lo": float(metric["lo"]),
            "hi": float(metric["hi"]),
            "interval": "" if declined else "paired, bootstrap over tasks",
            "note": str(metric["ci_method"]) if declined else "",
        }
    return found


@share_docs
def card_comparison(
    df: pd.DataFrame | str | os.PathLike[str],
    *,
    on: str,
    a: object,
    b: object,
    k: int = 2,
    tasks: str = "new",
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    infra: str = INFRA,
) -> Result:
    """Two configurations' cards side by side, with :func:`~passk_nb.stats.compare`'s paired
    difference b − a (over the tasks both ran) on every axis that has one.

    {df_or_folder}
    on: the column whose values ``a`` and ``b`` name the two configurations.
    {k}
    tasks: ``"new"`` or ``"these"``, as in :func:`reliability_card`.
    {ci}
    {n_boot}
    {seed}
    {infra}

    Columns: ``axis``, ``measure``, ``a`` and ``b`` (each configuration's value, from
    :func:`reliability_card`), ``diff`` (b − a), ``lo``/``hi`` (its paired interval: pass@k and
    pass^k, pass^k under each fault plan or perturbation both ran, harm-free^k and the harmful
    and misleading rates — questions of safety asked as pass^k of the recoded trials — and the
    Brier score and AUROC of the stated confidence, from
    :func:`~passk_nb.stats.predictability_difference`),
    ``interval`` and ``note`` (no paired interval for the forecast, the path share, the ECE
    and cost).

    >>> import tempfile, passk_nb
    >>> out = tempfile.mkdtemp()
    >>> for prompt in ("default", "strict"):
    ...     _ = passk_nb.run("scripted", trials=3, out=out, progress=False, prompt=prompt)
    >>> both = card_comparison(out, on="prompt_name", a="default", b="strict", k=2, n_boot=100)
    >>> both.loc[both["measure"] == "pass^2", ["a", "b", "diff", "interval"]].values.tolist()
    [[1.0, 1.0, 0.0, 'paired, new tasks']]
    """
    df = as_records(df)
    df = two_arms(df, on, a, b, "card_comparison")
    options: dict[str, Any] = {"ci": ci, "n_boot": n_boot, "seed": seed, "infra": infra}
    these, pair = tasks == "these", (on, a, b)
    cards = reliability_card(df, k=k, by=[on], tasks=tasks, **options)
    values = cards.pivot_table(index="measure", columns=on, values="value", aggfunc="first", dropna=False)
    base = df[_plain(df)]
    paired: dict[str, dict[str, Any]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the notes say what was declined
        paired[f"pass@{k}"] = _paired(base, pair, k, "pass@k", these, options)
        paired[f"pass^{k}"] = _paired(base, pair, k, "pass^k", these, options)
        for column in (c for c in ARMS if c in df.columns):
            varied = _alone(df, column)
            for arm in sorted(set(varied[column].astype(str)) - {"none"}):
                alone = varied[varied[column].astype(str) == arm]
                if {a, b} <= set(alone[on]):  # both ran it: their pass^k under it, paired
                    found = _paired(alone, pair, k, "pass^k", these, options)
                    paired[f"pass^{k} change under {arm}"] = {**found, "note": "b − a of pass^k under it"}
        if "severity" in base.columns and (base["severity"].astype(str) != NOT_GRADED).all():
            harm = (base["severity"].astype(str) == "harmful").to_numpy()
            paired[f"harm-free^{k}"] = _paired(recoded(base, ~harm, infra), pair, k, "pass^k", these, options)
            for severity in ("harmful", "misleading"):
                ended = (base["severity"].astype(str) == severity).to_numpy()
                found = _paired(recoded(base, ended, infra), pair, 1, "pass^k", these, options)
                paired[f"{severity} failures per trial"] = found
        paired.update(_paired_predictability(base, pair, options))
    rows = []
    for (axis, measure), _ in cards.groupby(["axis", "measure"], sort=False):
        row = {"axis": axis, "measure": measure, "a": values.loc[measure, a], "b": values.loc[measure, b]}
        found = paired.get(
            measure, {"lo": np.nan, "hi": np.nan, "interval": "", "note": "no paired interval"}
        )
        rows.append({**row, "diff": found.get("diff", row["b"] - row["a"]), **found})
    columns = ["axis", "measure", "a", "b", "diff", "lo", "hi", "interval", "note"]
    out = pd.DataFrame(rows, columns=columns)
    return described(out, "card_comparison", by=(), k=k, ci=ci, infra=infra, records=df, on=on, a=a, b=b)
