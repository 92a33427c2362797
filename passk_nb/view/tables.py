"""Tables for people: summary frames with both intervals, rendered as text, markdown and more."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence

import numpy as np
import pandas as pd

from passk_nb.data.records import NOTHING_APPLIED
from passk_nb.stats.cost import Prices, price_table, with_cost, with_cost_columns
from passk_nb.stats.params import CI, METHOD
from passk_nb.stats.result import carry, result_by
from passk_nb.stats.summary import DECLINED, estimate_text, interval_text
from passk_nb.view.labels import config_differences, config_shared


def summary_table(summary: pd.DataFrame, *, ci: float = CI) -> pd.DataFrame:
    """A readable table from :func:`passk_nb.stats.summary.summarize`: values with both intervals.

    summary: the frame ``summarize`` returned.
    ci: the level it was computed at (default 0.95), for the column names.

    One row per group: the group columns, ``tasks`` (covered/all), ``trials``
    ("successes/trials pass"), then for each metric the value, its interval for *new tasks like these*
    (the summary's ``ci_method``: Korn–Graubard by default, the exact per-task interval for
    per-task rows; "too few tasks" where it was declined) and its interval for *these tasks,
    re-rolled* (the summary's ``pass@k_fixed_lo``/``_hi`` and ``pass^k_fixed_lo``/``_hi``).

    >>> import pandas as pd
    >>> from passk_nb.stats.summary import summarize
    >>> df = pd.DataFrame({"task": [t for t in "abcde" for _ in range(4)], "model": "m",
    ...                    "passed": [True] * 14 + [False] * 6})
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> row = summary_table(summarize(df, k=2, by="model")).iloc[0]
    >>> row["pass^k"], row["pass^k 95% CI, new tasks"], row["pass^k 95% CI, these tasks"]
    ('0.633', '[0.166, 0.959]', '[0.365, 0.900]')
    """
    group_cols = list(result_by(summary, "summarize()"))
    out = summary[group_cols].copy()
    out["k"] = summary["k"]
    out["tasks"] = [f"{c}/{n}" for c, n in zip(summary["n_tasks_covered"], summary["n_tasks"], strict=True)]
    out["trials"] = [f"{c}/{n} pass" for c, n in zip(summary["successes"], summary["trials"], strict=True)]
    declined = summary["ci_method"] == DECLINED if "ci_method" in summary else pd.Series(False, summary.index)
    for metric in ("pass@k", "pass^k"):
        value = summary[metric]
        out[metric] = value.map(lambda v: "NaN" if pd.isna(v) else f"{v:.3f}")
        out[f"{metric} {ci:.0%} CI, new tasks"] = [
            "too few tasks" if no else interval_text(lo, hi)
            for lo, hi, no in zip(summary[f"{metric}_lo"], summary[f"{metric}_hi"], declined, strict=True)
        ]
        out[f"{metric} {ci:.0%} CI, these tasks"] = [
            interval_text(lo, hi)
            for lo, hi in zip(summary[f"{metric}_fixed_lo"], summary[f"{metric}_fixed_hi"], strict=True)
        ]
    if "n_infra_excluded" in summary.columns and summary["n_infra_excluded"].any():
        out["infra excluded"] = summary["n_infra_excluded"]
    return out


# --- The one renderer the CLI uses: text, markdown and HTML tables; CSV and JSON frames. ---

#: What ``passk report --format`` accepts (``html`` is the whole-page report of :mod:`report_html`).
FORMATS: tuple[str, ...] = ("table", "markdown", "csv", "json")


def render_table(frame: pd.DataFrame, fmt: str = "table", *, rule_before_last: int = 0) -> str:
    """``frame`` as an aligned text table (``"table"``), a markdown table or an HTML table.

    Every cell is shown with ``str``; ``rule_before_last`` draws a rule above the last rows
    (a total line). HTML escapes every cell.

    >>> frame = pd.DataFrame({"case": ["a", "mean"], "pass^2": ["0.500", "0.500"]})
    >>> print(render_table(frame, rule_before_last=1))
    case | pass^2
    -----+-------
    a    | 0.500
    -----+-------
    mean | 0.500
    >>> print(render_table(frame, "markdown"))
    | case | pass^2 |
    |---|---|
    | a | 0.500 |
    | mean | 0.500 |
    """
    header = [str(c) for c in frame.columns]
    rows = [[str(v) for v in row] for row in frame.itertuples(index=False, name=None)]
    if fmt == "markdown":

        def md(cells: list[str]) -> str:
            return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

        return "\n".join([md(header), "|" + "---|" * len(header), *map(md, rows)])
    if fmt == "html":
        head = "".join(f"<th>{html.escape(c)}</th>" for c in header)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
        return f"<table class='passk-table'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    if fmt != "table":
        raise ValueError(f"unknown table format {fmt!r}; choose from table, markdown, html")
    widths = [max(len(c) for c in column) for column in zip(header, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    rule = "-+-".join("-" * w for w in widths)
    body_lines = [line(r) for r in rows]
    if 0 < rule_before_last < len(body_lines):
        body_lines.insert(len(body_lines) - rule_before_last, rule)
    return "\n".join([line(header), rule, *body_lines])


def report_costs(
    report: pd.DataFrame,
    df: pd.DataFrame,
    *,
    k: int,
    by: Sequence[str],
    price_in: float | None = None,
    price_out: float | None = None,
    prices: Prices = None,
) -> pd.DataFrame:
    """A report frame (:func:`~passk_nb.stats.report.report_frame`) with what its trials cost at the
    given prices (USD per million tokens).

    ``price_in``/``price_out`` price every trial alike; ``prices`` per model (see
    :func:`~passk_nb.stats.cost.with_cost`), and then the ``price_in``/``price_out`` columns
    show each row's model's prices (NaN for a row that mixes models with different prices).

    Adds ``price_in``, ``price_out``, ``n_priced`` (trials with token counts),
    ``n_without_tokens``, ``cost_usd_total``, ``cost_usd_per_trial`` (mean over the priced
    trials, infrastructure errors included: they were paid for) and
    ``cost_usd_per_reliable_success`` (k × per trial / pass^k) with ``_lo``/``_hi`` from the
    pass^k interval. A trial without token counts is never priced at 0: it is counted in
    ``n_without_tokens``, and a row without any has NaN costs.

    >>> from passk_nb.data.records import frame_from_records
    >>> from passk_nb.stats.report import report_frame
    >>> df = frame_from_records([{"run_id": "r", "suite": "s", "task": "t", "trial": i, "model": "m",
    ...     "passed": True, "outcome": "pass", "input_tokens": 1000 if i else None, "output_tokens": 100}
    ...     for i in range(3)])
    >>> report = report_frame(df, k=2, by=["model"], n_boot=0)
    >>> costs = report_costs(report, df, k=2, by=["model"], price_in=3, price_out=15)
    >>> costs[["n_priced", "n_without_tokens", "cost_usd_per_trial"]].values.tolist()
    [[2.0, 1.0, 0.0045]]
    >>> float(costs["cost_usd_per_reliable_success"].iloc[0])
    0.009
    """
    for column in ("input_tokens", "output_tokens"):
        if column not in df.columns:
            df = df.assign(**{column: np.nan})
    priced = with_cost(df, price_in=price_in, price_out=price_out, prices=prices)
    by = list(by)
    out = with_cost_columns(report, priced, k=k, by=by)
    sizes = (
        priced.groupby(by, dropna=False, sort=False).size().rename("_rows").reset_index()
        if by
        else pd.DataFrame({"_rows": [len(priced)]})
    )
    out = carry(out.merge(sizes, on=by, how="left"), report) if by else out.assign(_rows=len(priced))
    out = out.rename(
        columns={
            "n_measured": "n_priced",
            "per_trial": "cost_usd_per_trial",
            "total": "cost_usd_total",
            "per_reliable_success": "cost_usd_per_reliable_success",
            "per_reliable_success_lo": "cost_usd_per_reliable_success_lo",
            "per_reliable_success_hi": "cost_usd_per_reliable_success_hi",
        }
    )
    out["n_without_tokens"] = (out["_rows"] - out["n_priced"]).astype(int)
    out = out.drop(columns="_rows")
    if prices is None:
        out["price_in"], out["price_out"] = float(price_in), float(price_out)  # type: ignore[arg-type]
        return out
    table = price_table(prices)
    each = pd.DataFrame(
        {
            "price_in": df["model"].map(table["price_in"]).astype(float),
            "price_out": df["model"].map(table["price_out"]).astype(float),
        }
    )
    if not by:
        single = each.nunique(dropna=False) == 1
        return out.assign(**{c: each[c].iloc[0] if single[c] else np.nan for c in each.columns})
    keys = df[by].reset_index(drop=True)
    per_row = pd.concat([keys, each.reset_index(drop=True)], axis=1).groupby(by, dropna=False, sort=False)
    shown = per_row.agg(lambda v: v.iloc[0] if v.nunique(dropna=False) == 1 else np.nan).reset_index()
    return carry(out.merge(shown, on=by, how="left"), report)


#: Identity columns shown joined, as one field: provider/model, prompt name (hash), suite (version);
#: the part in brackets is left out where it is empty (a prompt or suite of unknown hash).
_JOINED: tuple[tuple[str, tuple[str, str], str], ...] = (
    ("provider/model", ("provider", "model"), "{}/{}"),
    ("prompt", ("prompt_name", "prompt_hash"), "{} ({})"),
    ("suite", ("suite", "suite_hash"), "{} (version {})"),
)


def row_fields(frame: pd.DataFrame, by: Sequence[str]) -> dict[str, pd.Series]:
    """``{field: label per row}`` for the grouping columns ``by`` of ``frame``.

    Provider and model read ``provider/model``; prompt name and hash read ``name (hash)``, a suite
    and its version ``suite (version hash)`` (an empty hash left out);
    a ``config`` that differs keeps only its differing fields (the rest is ``config, every row``).

    >>> frame = pd.DataFrame({"provider": ["p", "p"], "model": ["a", "b"], "config": ["x", "x"]})
    >>> {name: values.tolist() for name, values in row_fields(frame, ["provider", "model", "config"]).items()}
    {'provider/model': ['p/a', 'p/b'], 'config': ['x', 'x']}
    """
    fields: dict[str, pd.Series] = {}
    joined = {col: spec for spec in _JOINED for col in spec[1] if set(spec[1]) <= set(by)}
    for col in by:
        if col in NOTHING_APPLIED and (frame[col] == NOTHING_APPLIED[col]).all():
            continue  # runs without faults or perturbations: nothing to say
        if col in joined:
            name, (first, second), pattern = joined[col]
            if name not in fields:
                fields[name] = pd.Series(
                    [_joined(pattern, a, b) for a, b in zip(frame[first], frame[second], strict=True)],
                    index=frame.index,
                )
        else:
            fields[col] = frame[col].map(_cell)
    if "config" in fields and fields["config"].nunique() > 1:  # say only what differs
        configs = frame["config"].astype(str)
        differences = config_differences(configs, frame["model"] if "model" in frame else None)
        del fields["config"]
        if differences.nunique() > 1:
            fields["config"] = differences
        if shared := config_shared(configs):
            fields["config, every row"] = pd.Series(shared, index=frame.index)
    return fields


def _joined(pattern: str, first: object, second: object) -> str:
    """Two identity values as one field; a bracketed second part only when it is known.

    >>> _joined("{} ({})", "default", ""), _joined("{} (version {})", "orders", "3f2a9c1e0b7d")
    ('default', 'orders (version 3f2a9c1e0b7d)')
    """
    if "(" in pattern and _cell(second) in ("–", ""):
        return _cell(first)
    return pattern.format(_cell(first), _cell(second))


def _cell(value: object) -> str:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "–"
    return str(value)


def split_fields(fields: dict[str, pd.Series]) -> tuple[dict[str, pd.Series], dict[str, str]]:
    """The fields that differ among the rows (to label them), and the constant ones (to say once).

    >>> varying, constant = split_fields({"model": pd.Series(["a", "b"]), "suite": pd.Series(["s", "s"])})
    >>> list(varying), constant
    (['model'], {'suite': 's'})
    """
    varying = {name: values for name, values in fields.items() if values.nunique(dropna=False) > 1}
    constant = {name: str(values.iloc[0]) for name, values in fields.items() if name not in varying}
    return varying, constant


def report_table(
    report: pd.DataFrame, fmt: str = "table", *, by: Sequence[str], ci: float = CI, notes: bool = True
) -> str:
    """A report frame (:func:`~passk_nb.stats.report.report_frame`) as ``fmt``: ``"table"`` (text),
    ``"markdown"``, ``"csv"`` or ``"json"``.

    Text and markdown label each row with only the fields that differ among the rows; the
    fields every row shares come once, above the table. The interval level comes
    from ``ci``. ``notes`` adds lines that say what each column means. CSV and JSON hold the
    report frame itself, at full precision (JSON: ``{"k", "ci", "by", "rows"}``, NaN as null).

    >>> from passk_nb.data.records import frame_from_records
    >>> from passk_nb.stats.report import report_frame
    >>> df = frame_from_records([{"run_id": "r", "suite": "s", "task": t, "trial": i, "model": "m",
    ...     "passed": i < c, "outcome": "pass" if i < c else "wrong_state"}
    ...     for t, c in [("a", 4), ("b", 2)] for i in range(4)])
    >>> print(report_table(report_frame(df, k=2, by=["model"], n_boot=0), by=["model"], notes=False))
    model: m
    pass@2 | pass^2 | these tasks    | trials   | infra excl. | claimed not done | agent errors
    -------+--------+----------------+----------+-------------+------------------+-------------
    0.917  | 0.583  | [0.120, 1.000] | 6/8 pass | 0           | 0                | 0
    """
    by = list(by)
    if fmt == "csv":
        return report.to_csv(index=False)
    if fmt == "json":
        rows = json.loads(report.to_json(orient="records", double_precision=15))
        k = int(report["k"].iloc[0]) if len(report) else None
        return json.dumps({"k": k, "ci": ci, "by": by, "rows": rows}, indent=1)
    display, caption = report_display(report, by=by, ci=ci)
    lines = [caption] if caption else []
    if fmt == "markdown" and lines:
        lines.append("")
    lines.append(render_table(display, fmt))
    if notes:
        lines.extend([""] if fmt == "markdown" else [])
        lines.extend(report_notes(report, ci=ci))
    return "\n".join(lines)


def report_display(report: pd.DataFrame, *, by: Sequence[str], ci: float = CI) -> tuple[pd.DataFrame, str]:
    """The text cells of a report (one row per group) and the caption of what every row shares:
    the fields, and, in a table of several rows, the counts (infra excl., claimed not done, agent
    errors) that are the same in each.

    >>> from passk_nb.data.records import frame_from_records
    >>> from passk_nb.stats.report import report_frame
    >>> df = frame_from_records([{"run_id": m, "suite": "s", "task": t, "trial": i, "model": m,
    ...     "passed": i < 1, "outcome": "pass" if i < 1 else "wrong_state"}
    ...     for m in ("a", "b") for t in "xy" for i in range(2)])
    >>> display, caption = report_display(report_frame(df, k=1, n_boot=0), by=["suite", "model"])
    >>> caption
    'suite: s, infra excl.: 0, claimed not done: 0, agent errors: 0'
    >>> list(display.columns)
    ['model', 'pass@1', 'pass^1', 'these tasks', 'trials']
    """
    k = int(report["k"].iloc[0])
    varying, constant = split_fields(row_fields(report, by))
    caption = ", ".join(f"{name}: {value}" for name, value in constant.items())
    if not by:
        caption = "all trials pooled (--by none)"
    out = pd.DataFrame({name: values.to_numpy() for name, values in varying.items()}, index=report.index)
    out[f"pass@{k}"] = [_with_interval(row, "pass@k") for row in report.to_dict("records")]
    out[f"pass^{k}"] = [_with_interval(row, "pass^k") for row in report.to_dict("records")]
    out["these tasks"] = [
        "n/a (n < k)" if pd.isna(lo) else interval_text(lo, hi)
        for lo, hi in zip(report["pass^k_fixed_lo"], report["pass^k_fixed_hi"], strict=True)
    ]
    trials = []
    for row in report.to_dict("records"):
        text = f"{int(row['successes'])}/{int(row['trials'])} pass"
        if row["n_tasks_covered"] < row["n_tasks"]:
            text += f"; k={k} covers {int(row['n_tasks_covered'])}/{int(row['n_tasks'])} tasks"
        trials.append(text)
    out["trials"] = trials
    out["infra excl."] = [
        f"{int(row['n_infra_excluded'])} (pass^{k} {row['pass^k_infra_fail']:.3f} if failures)"
        if row["n_infra_excluded"] and not pd.isna(row.get("pass^k_infra_fail"))
        else str(int(row["n_infra_excluded"]))
        for row in report.to_dict("records")
    ]
    out["claimed not done"] = [  # imported trials have no claim check: unknown, not 0
        str(int(n)) if checked else "n/a"
        for n, checked in zip(report["n_claimed_unperformed"], report["n_claims_checked"], strict=True)
    ]
    out["agent errors"] = report["n_agent_errors"].astype(int).astype(str)
    if "cost_usd_per_trial" in report.columns:
        rows = report.to_dict("records")
        out["cost/trial (USD)"] = [_cost_cell(row, "cost_usd_per_trial") for row in rows]
        out["cost/reliable success (USD)"] = [_reliable_cost_cell(row) for row in rows]
    if len(out) > 1:  # a count the same in every row is said once, with the fields every row shares
        same = [col for col in _COUNTS if out[col].nunique() == 1]
        caption = ", ".join([caption] * bool(caption) + [f"{col}: {out[col].iloc[0]}" for col in same])
        out = out.drop(columns=same)
    return out.reset_index(drop=True), caption


#: Count columns of :func:`report_display` that leave the table when every row has the same one.
_COUNTS: tuple[str, ...] = ("infra excl.", "claimed not done", "agent errors")


def _cost_cell(row: dict, column: str) -> str:
    """A cost, or why there is none; trials without token counts are said, never priced at 0."""
    unpriced = int(row["n_without_tokens"])
    if not row["n_priced"]:
        return "no token counts"
    text = f"{row[column]:.4g}"
    return text + (f" ({unpriced} trials without token counts)" if unpriced else "")


def _reliable_cost_cell(row: dict) -> str:
    if not row["n_priced"]:
        return "no token counts"
    value = row["cost_usd_per_reliable_success"]
    if pd.isna(value):
        return "n/a"
    if not np.isfinite(value):
        return f"∞ (pass^{int(row['k'])} = 0)"
    lo, hi = row.get("cost_usd_per_reliable_success_lo"), row.get("cost_usd_per_reliable_success_hi")
    if lo is None or pd.isna(lo):
        return f"{value:.4g}"
    upper = "∞" if hi is None or not np.isfinite(float(hi)) else f"{hi:.4g}"
    return f"{value:.4g} [{lo:.4g}, {upper}]"


def report_notes(report: pd.DataFrame, *, ci: float = CI) -> list[str]:
    """One line per column kind: what the numbers of :func:`report_display` mean."""
    k = int(report["k"].iloc[0])
    methods = set(report["ci_method"])
    per_task = "task" in result_by(report, "report_frame()")
    what = (
        "unbiased estimates for each task" if per_task else "mean over tasks of unbiased per-task estimates"
    )
    notes = [f"pass@{k} / pass^{k}: {what}."]
    interval_notes = {
        METHOD: "Korn-Graubard interval over tasks, for new tasks like these (its coverage "
        "was measured from five tasks up: benchmarks/coverage.py)",
        "t": "Student-t interval over tasks, for new tasks like these",
        "bootstrap": "bootstrap over tasks, for new tasks like these (under-covers with few tasks)",
        "cluster-bootstrap": "bootstrap over tasks, for new tasks like these (under-covers with few tasks)",
        "clopper-pearson": "exact (Clopper-Pearson) interval for the task's true value",
    }
    for method in sorted(methods & set(interval_notes)):
        notes.append(f"[{ci:.0%} interval]: {interval_notes[method]}.")
    if DECLINED in methods:
        notes.append(
            f"[no interval]: {DECLINED}; an interval for new tasks would be nearly [0, 1]: "
            "read the these tasks column."
        )
    notes.append(f"these tasks: {ci:.0%} interval of pass^{k} for these same tasks re-run (never zero wide).")
    notes.append(
        "infra excl.: infrastructure errors, left out of n on the assumption that they are unrelated "
        f"to task difficulty; in brackets, pass^{k} had they counted as failures."
    )
    unchecked = "n_claims_checked" in report.columns and (report["n_claims_checked"] == 0).any()
    notes.append(
        "claimed not done: final answers claiming an action the final state does not show"
        + (" (n/a: imported trials, whose final state is not recorded)" if unchecked else "")
        + "; agent errors: exceptions raised by the agent's own code."
    )
    if "cost_usd_per_trial" in report.columns:
        p_in, p_out = report["price_in"].iloc[0], report["price_out"].iloc[0]
        notes.append(
            f"cost: each trial's reported tokens at {p_in:g} USD per million input and {p_out:g} per million "
            "output tokens, computed now (never stored); trials without token counts are left out of the "
            f"mean, not priced at 0. cost/reliable success: {k} × cost per trial / pass^{k}, the expected "
            f"spend until a task succeeds {k} times in a row, with the pass^{k} interval turned into cost."
        )
    return notes


def _with_interval(row: dict, metric: str) -> str:
    return estimate_text(row[metric], row.get(f"{metric}_lo"), row.get(f"{metric}_hi"))
