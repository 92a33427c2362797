"""``passk runs``: one line per run stored in a folder, to see what is there before reporting it.

passk runs runs
"""

from __future__ import annotations

import argparse

import pandas as pd

from passk_nb.cli.common import CliError, add_quiet
from passk_nb.cli.import_ import refuse_foreign
from passk_nb.data.store import load


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``runs`` subcommand to ``subparsers`` and return its parser."""
    p = subparsers.add_parser(
        "runs",
        help="list the runs stored in a folder: configuration, trials done, infra errors",
        description="One line per run under PATH: run id, provider/model, prompt, configuration, "
        "suite and its version, trials done / expected, infrastructure errors, when it started and "
        "the passk-nb version.",
        epilog="Then report one of them: passk report PATH --where run_id=RUN_ID",
    )
    p.add_argument("path", help="data folder (or one parquet file) written by `passk run`")
    p.add_argument("--skip-bad-files", action="store_true", help="skip unreadable files with a warning")
    add_quiet(p)
    p.set_defaults(func=_cmd_runs)
    return p


def runs_frame(df: pd.DataFrame) -> pd.DataFrame:
    """One row per ``run_id`` of trial records: what it measured and how far it got.

    ``done`` counts trials with a real outcome; ``expected`` is the run's tasks times its
    trials (the highest trial index seen + 1), so a run stopped early shows done < expected;
    ``infra`` counts infrastructure errors (a resumed run runs them again).

    >>> from passk_nb.data.records import frame_from_records
    >>> df = frame_from_records([{"run_id": "r1", "suite": "s", "task": t, "trial": i, "model": "m",
    ...     "provider": "p", "passed": True, "outcome": "infra_error" if (t, i) == ("b", 1) else "pass"}
    ...     for t in "ab" for i in range(3) if (t, i) != ("b", 2)])
    >>> runs_frame(df)[["run", "provider/model", "trials done/expected", "infra errors"]]
      run provider/model trials done/expected  infra errors
    0  r1            p/m                  4/6             1
    """
    rows = []
    for run_id, trials in df.groupby("run_id", sort=False):
        real = trials["outcome"] != "infra_error"
        expected = trials["task"].nunique() * (int(trials["trial"].max()) + 1)
        started = trials["started_at"].min()
        row = {
            "run": run_id,
            "provider/model": _values(trials["provider"].astype(str) + "/" + trials["model"].astype(str)),
            "prompt": _values(_bracketed(trials["prompt_name"], trials["prompt_hash"], "")),
        }
        if "config" in trials.columns:
            row["config"] = _values(trials["config"].astype(str))
        row.update(
            {
                "suite": _values(_bracketed(trials["suite"], trials["suite_hash"], "version ")),
                "trials done/expected": f"{int(real.sum())}/{expected}",
                "infra errors": int((~real).sum()),
                "started": "–" if pd.isna(started) else started.strftime("%Y-%m-%d %H:%M UTC"),
                "version": _values(trials["harness_version"].astype(str)),
            }
        )
        rows.append(row)
    return pd.DataFrame(rows).sort_values(["started", "run"], kind="stable").reset_index(drop=True)


def _bracketed(name: pd.Series, digest: pd.Series, prefix: str) -> pd.Series:
    """``name (<prefix>digest)`` per row; just the name where the digest is empty (unknown)."""
    digest = digest.fillna("").astype(str)
    return name.astype(str) + digest.map(lambda d: f" ({prefix}{d})" if d else "")


def _values(column: pd.Series) -> str:
    values = [v for v in pd.unique(column) if v not in ("", "nan", "None", "<NA>")]
    return ", ".join(map(str, values)) or "–"


def _cmd_runs(args: argparse.Namespace) -> int:
    from passk_nb.view.tables import render_table

    refuse_foreign(args.path)  # τ-bench / inspect_ai files: `passk import` first
    df = load(args.path, strict=not args.skip_bad_files)
    if df.empty:
        raise CliError(f"no trial records under {args.path}; run `passk run --out {args.path}` first")
    print(render_table(runs_frame(df)))
    if not args.quiet:
        runs = df["run_id"].nunique()
        print(
            f"{runs} run{'s' * (runs != 1)}, {len(df)} trials in {args.path}; "
            f"report one with: passk report {args.path} --where run_id=RUN"
        )
    return 0
