"""Tables for people: summary frames with both intervals, rendered as text, markdown and more."""

from __future__ import annotations

import pandas as pd
from scipy import stats as sps

from passk_nb.stats.params import CI
from passk_nb.stats.summary import DECLINED, summarize


def summary_table(summary: pd.DataFrame, *, ci: float = CI) -> pd.DataFrame:
    """A readable table from :func:`passk_nb.stats.summary.summarize`: values with both intervals.

    summary: the frame ``summarize`` returned.
    ci: the level it was computed at (default 0.95); it also sets z of the fixed-task interval.

    One row per group: the group columns, ``tasks`` (covered/all), ``trials``
    (successes/trials), then for each metric the value, its interval for *new tasks like these*
    (the summary's ``ci_method``: Korn–Graubard by default, the exact per-task interval for
    per-task rows; "too few tasks" where it was declined) and its interval for *these tasks,
    re-rolled* (value ± z·se_fixed, clipped to [0, 1]).

    >>> import pandas as pd
    >>> from passk_nb.stats.summary import summarize
    >>> df = pd.DataFrame({"task": [t for t in "abcde" for _ in range(4)], "model": "m",
    ...                    "passed": [True] * 14 + [False] * 6})
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> row = summary_table(summarize(df, k=2, by="model")).iloc[0]
    >>> row["pass^k"], row["pass^k 95% CI, new tasks"], row["pass^k 95% CI, these tasks"]
    ('0.633', '[0.056, 0.993]', '[0.419, 0.847]')
    """
    z = float(sps.norm.ppf(0.5 + ci / 2))
    group_cols = list(summary.columns[: list(summary.columns).index("k")])
    out = summary[group_cols].copy()
    out["k"] = summary["k"]
    out["tasks"] = [f"{c}/{n}" for c, n in zip(summary["n_tasks_covered"], summary["n_tasks"], strict=True)]
    out["trials"] = [f"{c}/{n}" for c, n in zip(summary["successes"], summary["trials"], strict=True)]
    declined = summary["ci_method"] == DECLINED if "ci_method" in summary else pd.Series(False, summary.index)
    for metric, se_col in (("pass@k", "pass@k_se_fixed"), ("pass^k", "pass^k_se_fixed")):
        value = summary[metric]
        out[metric] = value.map(lambda v: "NaN" if pd.isna(v) else f"{v:.3f}")
        out[f"{metric} {ci:.0%} CI, new tasks"] = [
            "too few tasks" if no else _interval(lo, hi)
            for lo, hi, no in zip(summary[f"{metric}_lo"], summary[f"{metric}_hi"], declined, strict=True)
        ]
        se = summary[se_col]
        out[f"{metric} {ci:.0%} CI, these tasks"] = [
            _interval(v - z * s, v + z * s) for v, s in zip(value, se, strict=True)
        ]
    if "n_infra_excluded" in summary.columns and summary["n_infra_excluded"].any():
        out["infra excluded"] = summary["n_infra_excluded"]
    return out


def _interval(lo: float, hi: float) -> str:
    if pd.isna(lo) or pd.isna(hi):
        return "–"
    return f"[{max(lo, 0.0):.3f}, {min(hi, 1.0):.3f}]"


def report_table(df: pd.DataFrame, k: int, n_boot: int = 2000) -> str:
    """The CLI's table: one line per provider/model/prompt with pass@k, pass^k and trial counts."""
    if df.empty:
        raise ValueError("no trial records to report")
    infra = df["outcome"] == "infra_error"
    if infra.all():
        raise ValueError(
            f"all {len(df)} trials ended in infrastructure errors, so there is nothing to estimate "
            f"(first: {df.loc[infra, 'error'].iloc[0]}). Check the backend (is it running? --base-url? "
            "the API key?), then run the same command again: trials that ended in infra errors are "
            "run again"
        )
    if k > int(df.groupby(["run_id", "task"]).size().max()):
        raise ValueError(
            f"--k {k} is larger than the number of trials per task; use --k ≤ trials or run more"
        )
    table = summarize(df, k=k, by=("provider", "model", "prompt_name", "prompt_hash"), n_boot=n_boot)
    lines = []
    for row in table.to_dict("records"):
        passed = int(row["successes"])
        total = int(row["trials"]) + int(row["n_infra_excluded"])
        infra = f", {int(row['n_infra_excluded'])} infra errors excluded" if row["n_infra_excluded"] else ""
        if row["n_tasks_covered"] < row["n_tasks"]:
            infra += f"; k={k} covers {int(row['n_tasks_covered'])}/{int(row['n_tasks'])} tasks"
        se = row["pass^k_se_fixed"]
        lines.append(
            {
                "provider/model": f"{row['provider']}/{row['model']}",
                "prompt": f"{row['prompt_name']} ({row['prompt_hash']})",
                f"pass@{k}": _with_ci(row, "pass@k"),
                f"pass^{k}": _with_ci(row, "pass^k"),
                "± fixed tasks": "n/a (n < 2k)" if pd.isna(se) else f"± {1.96 * se:.3f}",
                "trials": f"{passed}/{total} pass{infra}",
            }
        )
    frame = pd.DataFrame(lines)
    widths = [max(len(c), *(len(str(v)) for v in frame[c])) for c in frame.columns]
    rows = [list(frame.columns), *frame.astype(str).values.tolist()]
    out = [" | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    out.insert(1, "-+-".join("-" * w for w in widths))
    notes = [f"pass@{k} / pass^{k}: mean over tasks of unbiased per-task estimates."]
    if n_boot:
        notes.append(
            "[95% interval]: bootstrap over tasks, for new tasks like these (coarse with few tasks)."
        )
    notes.append(f"± fixed tasks: 95% half-width of pass^{k} for these same tasks re-run (needs n ≥ 2k).")
    return "\n".join(out + notes)


def _with_ci(row: dict, metric: str) -> str:
    value = row[metric]
    text = "n/a" if pd.isna(value) else f"{value:.3f}"
    lo, hi = row.get(f"{metric}_lo"), row.get(f"{metric}_hi")
    if lo is not None and not pd.isna(lo):
        text += f" [{lo:.3f}, {hi:.3f}]"
    return text
