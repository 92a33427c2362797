"""Tables for people: summary frames with both intervals, rendered as text, markdown and more."""

from __future__ import annotations

import pandas as pd
from scipy import stats as sps

from passk_nb.stats.summary import summarize


def summary_table(summary: pd.DataFrame, *, ci: float = 0.95) -> pd.DataFrame:
    """A readable table from :func:`passk_nb.stats.summary.summarize`: values with both intervals.

    One row per group: the group columns, ``tasks`` (covered/all), ``trials``
    (successes/trials), then for each metric the value, its interval for *new tasks
    like these* (cluster bootstrap over tasks, or the exact per-task interval for
    per-task rows) and its interval for *these tasks, re-rolled* (value ± z·pass^k_se_fixed,
    clipped to [0, 1]; "n < 2k" when the trials are too few to estimate it).

    >>> import pandas as pd
    >>> from passk_nb.stats.summary import summarize
    >>> df = pd.DataFrame({"task": ["a"] * 4 + ["b"] * 4, "model": "m",
    ...                    "passed": [True] * 6 + [False] * 2})
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> summary_table(summarize(df, k=2, by="model", n_boot=200)).loc[0, "pass^k"]
    '0.583'
    """
    z = float(sps.norm.ppf(0.5 + ci / 2))
    group_cols = list(summary.columns[: list(summary.columns).index("k")])
    out = summary[group_cols].copy()
    out["k"] = summary["k"]
    out["tasks"] = [f"{c}/{n}" for c, n in zip(summary["n_tasks_covered"], summary["n_tasks"], strict=True)]
    out["trials"] = [f"{c}/{n}" for c, n in zip(summary["successes"], summary["trials"], strict=True)]
    for metric, se_col in (("pass@k", "pass@k_se_fixed"), ("pass^k", "pass^k_se_fixed")):
        value = summary[metric]
        out[metric] = value.map(lambda v: "NaN" if pd.isna(v) else f"{v:.3f}")
        out[f"{metric} {ci:.0%} CI, new tasks"] = [
            _interval(lo, hi) for lo, hi in zip(summary[f"{metric}_lo"], summary[f"{metric}_hi"], strict=True)
        ]
        se = summary[se_col]
        out[f"{metric} {ci:.0%} CI, these tasks"] = [
            "n < 2k" if pd.isna(s) and not pd.isna(v) else _interval(v - z * s, v + z * s)
            for v, s in zip(value, se, strict=True)
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
