"""``passk regrade``: judge stored trials again under the suite's current checks, as a new run.

    passk regrade runs
    passk regrade runs --suite mychecks:SUITE --out runs-regraded

No model is called: each trial's transcript is replayed against the suite's seeded initial
state (:func:`passk_nb.regrade`). The originals stay untouched; the re-graded records are
written as new run folders, one per original run, under ``--out`` (default: the same data
folder). A re-graded record names the checks it was graded with in ``provider_meta``
(``{"grader": {"suite", "checks", "passk_nb", "regraded_from"}}``, ``checks`` the suite's
fingerprint, :func:`~passk_nb.harness.fingerprint.suite_fingerprint`, the one a run's identity
holds, and its ``suite_hash``), gets its
own ``run_id``, and its ``config`` label gains ``checks=<fingerprint>`` so that no analysis
pools two gradings of the same trials.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from passk_nb.cli.common import CliError
from passk_nb.data.store import load

#: Changed verdicts listed on screen (all of them are in the records).
SHOW_CHANGED = 10


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``regrade`` subcommand to ``subparsers`` and return its parser."""
    p = subparsers.add_parser(
        "regrade",
        help="judge stored trials again under the current checks, without calling a model",
        description="Replay the stored transcripts of every trial under PATH against the suite's "
        "current checks and write the re-graded records as new run folders (originals untouched).",
    )
    p.add_argument("path", help="data folder written by `passk run`")
    p.add_argument(
        "--suite",
        metavar="MODULE:NAME",
        help="the suite to grade with: a built-in name, module:NAME or path/to/suite.py:NAME (default: "
        "each record's built-in suite; a module the records name is never imported)",
    )
    p.add_argument("--out", type=Path, help="data folder for the re-graded runs (default: PATH itself)")
    p.set_defaults(func=_cmd_regrade)
    return p


def _cmd_regrade(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from passk_nb._version import __version__
    from passk_nb.data.records import SCHEMA
    from passk_nb.data.store import write_part
    from passk_nb.harness.fingerprint import suite_fingerprint
    from passk_nb.harness.regrade import RegradeError, provider_meta, regrade, regraded_records
    from passk_nb.harness.suites.registry import SUITES, get_suite

    if not Path(args.path).is_dir():
        raise CliError(f"{args.path} is not a folder; give the data folder `passk run --out` wrote")
    df = load(args.path)
    is_regrade = df["provider_meta"].map(lambda m: "grader" in provider_meta(m)).astype(bool)
    skipped = int(is_regrade.sum())
    df = df[~is_regrade].reset_index(drop=True)
    if df.empty:
        raise CliError(f"no original trial records under {args.path} to re-grade")
    suite = get_suite(args.suite) if args.suite else None
    out_dir = Path(args.out) if args.out else Path(args.path)
    written: list[str] = []
    changed_rows: list[pd.DataFrame] = []
    for suite_name, part in df.groupby("suite", sort=True):
        if suite is None and str(suite_name) not in SUITES:
            raise CliError(
                f"the records under {args.path} name suite {str(suite_name)!r}, which is not built in; "
                "records are data, so regrade never imports code they name: pass --suite module:NAME "
                "(or path/to/suite.py:NAME) to grade with it"
            )
        grading = suite if suite is not None else SUITES[str(suite_name)]
        grader = {"suite": grading.name, "checks": suite_fingerprint(grading), "passk_nb": __version__}
        try:
            again = regrade(part.reset_index(drop=True), suite=grading)
        except RegradeError as exc:
            raise CliError(f"cannot re-grade: {exc}") from None
        records = regraded_records(part.reset_index(drop=True), again, grader)
        for run_id, rows in records.groupby("run_id", sort=True):
            if (out_dir / str(run_id)).exists():
                raise CliError(
                    f"{out_dir / str(run_id)} exists: these trials were re-graded with checks "
                    f"{grader['checks']} already; delete that folder to write them again"
                )
            table = pa.Table.from_pandas(rows, schema=SCHEMA, preserve_index=False)
            write_part(table, out_dir, str(run_id))
            source = provider_meta(rows["provider_meta"].iloc[0])["grader"]["regraded_from"]
            written.append(f"{out_dir / str(run_id)} (re-graded run {source})")
        changed_rows.append(again[again["regrade_changed"]])
    changed = pd.concat(changed_rows, ignore_index=True)
    print(f"re-graded {len(df)} trials without calling a model; {len(changed)} changed verdict")
    for row in changed.head(SHOW_CHANGED).itertuples():
        print(f"  {row.task} trial {row.trial} (run {row.run_id}): {row.outcome_before} -> {row.outcome}")
    if len(changed) > SHOW_CHANGED:
        print(f"  ... and {len(changed) - SHOW_CHANGED} more")
    if skipped:
        print(f"skipped {skipped} records that are re-gradings themselves (left out)")
    for line in written:
        print(f"records: {line}")
    return 0
