"""``passk report``: pass@k / pass^k from saved records."""

from __future__ import annotations

import argparse

from passk_nb.cli.common import positive_int
from passk_nb.data.store import load


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``report`` subcommand to ``subparsers`` and return its parser."""
    p = subparsers.add_parser(
        "report",
        help="print pass@k / pass^k from saved records",
        description="Summarise every run stored under PATH (a folder or a parquet file).",
    )
    p.add_argument("path", help="data folder (or one parquet file) written by `passk run`")
    p.add_argument("--k", type=positive_int, default=2, help="k for pass@k and pass^k (default: 2)")
    p.add_argument("--provider", help="only this provider")
    p.add_argument("--model", help="only this model")
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap draws for intervals, 0 for none")
    p.add_argument("--skip-bad-files", action="store_true", help="skip unreadable files with a warning")
    p.set_defaults(func=_cmd_report)
    return p


def _cmd_report(args: argparse.Namespace) -> int:
    from passk_nb.view.tables import report_table  # here: keeps `passk tasks` fast

    df = load(args.path, strict=not args.skip_bad_files)
    if args.provider:
        df = df[df["provider"] == args.provider]
    if args.model:
        df = df[df["model"] == args.model]
    print(report_table(df, args.k, n_boot=args.n_boot))
    print(f"{len(df)} trials from {args.path}")
    return 0
