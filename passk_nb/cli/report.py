"""``passk report``: pass@k / pass^k from saved records, filtered, grouped, as text or a file.

passk report runs
passk report runs --where model=llama3.1:8b --by model,prompt_name --format markdown
passk report runs --format html --out report.html
passk report runs --price-in 0.15 --price-out 0.6
passk report runs --all-versions
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from passk_nb.cli.common import (
    CliError,
    add_cluster,
    add_quiet,
    level,
    non_negative_int,
    positive_int,
    status,
)
from passk_nb.cli.import_ import refuse_foreign
from passk_nb.data.ids import IDENTITY_COLUMNS
from passk_nb.data.store import load

#: Columns ``--where`` filters on: the run, every identity column (the one schema's list, so a new
#: one is filterable at once) and the task.
WHERE_COLUMNS: tuple[str, ...] = ("run_id", *IDENTITY_COLUMNS, "task")
FORMATS: tuple[str, ...] = ("table", "markdown", "csv", "json", "html")

_EPILOG = """examples:
  passk report runs
  passk report runs --k 4 --where model=llama3.1:8b --where prompt_name=strict
  passk report runs --by model --format markdown
  passk report runs --format csv --out summary.csv
  passk report runs --format html --out report.html      (one file: table, figures, failures)
  passk report runs --sort 'pass^k'                      (best configuration first)
  passk report runs --price-in 3 --price-out 15          (cost columns, USD per million tokens)
  passk report runs --prices prices.csv                  (per model: model,price_in,price_out)
--where COLUMN=VALUE keeps the trials whose COLUMN is VALUE; repeat it to filter more: values
of one column are alternatives (either model), different columns must all match.
By default one row per configuration (suite version, provider, model, prompt, config):
configurations are never pooled; --by chooses the columns yourself (--by none pools every trial).
A suite edited between runs (a task, check, tool or prompt) is a new suite version: only the
newest version of each suite is reported, saying which were left out; --all-versions reports
every version, each in its own rows."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``report`` subcommand to ``subparsers`` and return its parser."""
    p = subparsers.add_parser(
        "report",
        help="print pass@k / pass^k from saved records (table, markdown, csv, json or an HTML page)",
        description="Summarise the trials stored under PATH (a folder or a parquet file): pass@k and "
        "pass^k with intervals, one row per configuration.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", help="data folder (or one parquet file) written by `passk run`")
    p.add_argument(
        "--k", type=positive_int, help="k for pass@k and pass^k (default: 2, or 1 when tasks have 1 trial)"
    )
    p.add_argument(
        "--by",
        help="comma-separated columns, one row per combination, e.g. model,prompt_name or task "
        "(default: every identity column the records have; 'none' pools all trials)",
    )
    p.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="COLUMN=VALUE",
        help=f"keep only matching trials (repeatable); columns: {', '.join(WHERE_COLUMNS)}",
    )
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    p.add_argument(
        "--sort",
        choices=("pass^k", "pass@k"),  # passk_nb.stats.summary.SORTS, not imported here: it loads scipy
        help="order the rows from the highest pass^k (or pass@k) to the lowest "
        "(default: by configuration); the HTML page's keys A, B, … follow this order",
    )
    p.add_argument("--out", help="write the report to this file instead of printing it")
    p.add_argument("--ci", type=level, default=0.95, help="interval level (default: 0.95)")
    p.add_argument(
        "--n-boot", type=non_negative_int, default=2000, help="bootstrap draws for intervals, 0 for none"
    )
    p.add_argument(
        "--seed", type=int, default=0, help="bootstrap seed: same seed, same intervals (default: 0)"
    )
    p.add_argument(
        "--price-in",
        type=_price,
        metavar="USD",
        help="price of input tokens, USD per million: adds cost columns (with --price-out)",
    )
    p.add_argument(
        "--price-out",
        type=_price,
        metavar="USD",
        help="price of output tokens, USD per million (with --price-in)",
    )
    p.add_argument(
        "--prices",
        type=Path,
        metavar="CSV",
        help="per-model prices instead: a CSV file with columns model,price_in,price_out "
        "(USD per million tokens), one row per model in the records",
    )
    p.add_argument(
        "--all-versions",
        action="store_true",
        help="report every version of each suite (default: only the newest; an edited task, check, "
        "tool or prompt makes a new version), each in its own rows",
    )
    p.add_argument(
        "--card",
        action="store_true",
        help="the reliability card instead: consistency, robustness, predictability, safety and cost "
        "per configuration, each with its interval or how to measure it (--format html: one page)",
    )
    p.add_argument(
        "--on",
        metavar="COLUMN",
        help="with --card and --a/--b: two configurations' cards side by side (the values of COLUMN "
        "that --a and --b name), with the paired difference b - a on every axis that has one",
    )
    p.add_argument("--a", metavar="VALUE", help="with --card --on: configuration A, the baseline")
    p.add_argument("--b", metavar="VALUE", help="with --card --on: configuration B, compared against A")
    p.add_argument("--skip-bad-files", action="store_true", help="skip unreadable files with a warning")
    add_cluster(p)
    add_quiet(p)
    p.set_defaults(func=_cmd_report)
    return p


def _price(text: str) -> float:
    """A price in USD per million tokens: a finite number ≥ 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number; give USD per million tokens, e.g. 3"
        ) from None
    if not (value >= 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"{text!r}: a price is a finite number ≥ 0 (USD per million tokens)")
    return value


def read_prices(path: Path, df: pd.DataFrame | None) -> pd.DataFrame:
    """The ``--prices`` CSV (``model,price_in,price_out``), checked (against the records' models
    when ``df`` is given: ``passk run`` checks its one model once the backend names it)."""
    fix = "write a CSV with the header model,price_in,price_out, one row per model (USD per million tokens)"
    try:
        prices = pd.read_csv(path, dtype={"model": str})
    except FileNotFoundError:
        raise CliError(f"--prices {path}: no such file; {fix}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise CliError(f"--prices {path}: not a readable CSV ({exc}); {fix}") from None
    missing = [c for c in ("model", "price_in", "price_out") if c not in prices.columns]
    if missing:
        raise CliError(f"--prices {path}: no column {', '.join(missing)}; {fix}")
    for column in ("price_in", "price_out"):
        values = pd.to_numeric(prices[column], errors="coerce")
        bad = prices.loc[~(values >= 0) | np.isinf(values), "model"].tolist()
        if bad:
            raise CliError(
                f"--prices {path}: {column} of {', '.join(map(str, bad[:5]))} is not a finite number ≥ 0"
            )
        prices[column] = values.astype(float)
    if prices["model"].duplicated().any():
        twice = sorted(set(prices.loc[prices["model"].duplicated(), "model"]))
        raise CliError(f"--prices {path}: {', '.join(twice)} listed twice; give one row per model")
    unpriced = [] if df is None else sorted(set(df["model"].astype(str)) - set(prices["model"]))
    if unpriced:
        raise CliError(
            f"--prices {path} has no price for {', '.join(unpriced)}; add a row per model "
            "(or filter with --where model=...)"
        )
    return prices[["model", "price_in", "price_out"]]


def parse_where(items: list[str], df: pd.DataFrame) -> dict[str, list[str]]:
    """``["model=a", "model=b", "task=t"]`` -> ``{"model": ["a", "b"], "task": ["t"]}``, checked."""
    filters: dict[str, list[str]] = {}
    for item in items:
        column, sep, value = item.partition("=")
        column = column.strip()
        if not sep or not column:
            raise CliError(f"--where {item!r}: write COLUMN=VALUE, e.g. --where model=llama3.1:8b")
        if column not in WHERE_COLUMNS:
            raise CliError(
                f"--where {item!r}: unknown column {column!r}; choose from {', '.join(WHERE_COLUMNS)}"
            )
        if column not in df.columns:
            raise CliError(f"--where {item!r}: these records have no {column!r} column")
        filters.setdefault(column, []).append(value)
    return filters


def apply_where(df: pd.DataFrame, filters: dict[str, list[str]]) -> pd.DataFrame:
    """The rows matching every column's filter (any of its values); an error names what exists."""
    for column, values in filters.items():
        present = df[column].astype(str)
        kept = df[present.isin(values)]
        if kept.empty:
            known = sorted(set(present))
            shown = ", ".join(known[:12]) + (f" and {len(known) - 12} more" if len(known) > 12 else "")
            raise CliError(
                f"no trials match --where {column}={'|'.join(values)}; values present: {shown or 'none'}"
            )
        df = kept
    return df


def parse_by(text: str | None, df: pd.DataFrame) -> tuple[str, ...] | None:
    """``--by`` as columns: None for the default, () for 'none'."""
    if text is None:
        return None
    if text.strip().lower() == "none":
        return ()
    columns = tuple(c.strip() for c in text.split(",") if c.strip())
    missing = [c for c in columns if c not in df.columns]
    if missing or not columns:
        raise CliError(
            f"--by {text!r}: no column {', '.join(map(repr, missing)) or 'given'}; use columns of the "
            "records such as model, prompt_name, config, task, run_id (or none)"
        )
    if len(set(columns)) != len(columns):
        raise CliError(f"--by {text!r} repeats a column")
    return columns


def _mixes(df: pd.DataFrame, by: list[str], column: str) -> bool:
    """Does some row of ``by`` hold trials with different values of ``column``?"""
    if not by:
        return df[column].nunique(dropna=False) > 1
    return bool((df.groupby(by, dropna=False)[column].nunique(dropna=False) > 1).any())


def versions_note(left_out: pd.DataFrame) -> str:
    """What ``--all-versions`` would add: per suite, the older versions left out and their trials."""
    lines = []
    for suite, rows in left_out.groupby("suite", sort=True):
        older = ", ".join(
            f"{h or 'unknown'} ({n} trials)" for h, n in zip(rows["suite_hash"], rows["trials"], strict=True)
        )
        lines.append(
            f"suite {suite}: only its newest version, {rows['shown'].iloc[0] or 'unknown'}, is reported; "
            f"older versions left out: {older} (--all-versions reports them, each in its own rows)"
        )
    return "\n".join(lines)


def arm(df: pd.DataFrame, column: str, text: str) -> object:
    """The value of ``column`` that the flag's text names (``0.7`` names the number 0.7), or the
    text itself when none does (then :func:`passk_nb.compare` says which values there are)."""
    matches = [value for value in pd.unique(df[column]) if str(value) == text]
    return matches[0] if len(matches) == 1 else text


def default_k(df: pd.DataFrame) -> int:
    """2, or the most trials any task has when that is fewer (1)."""
    per_task = df.groupby(["run_id", "task"]).size()
    return max(1, min(2, int(per_task.max()) if len(per_task) else 2))


def _read_columns(args: argparse.Namespace) -> list[str] | None:
    """The record columns the report reads: every one but the transcripts (most of a folder's
    bytes) unless the HTML page, which shows failed trials' transcripts, or the card is asked for."""
    if args.format == "html" or args.card:
        return None
    from passk_nb.data.records import COLUMNS

    return [column for column in COLUMNS if column != "transcript"]


def _cmd_report(args: argparse.Namespace) -> int:
    from passk_nb.stats.params import default_by
    from passk_nb.stats.report import newest_suite_versions  # here: keeps `passk tasks` fast

    refuse_foreign(args.path)  # τ-bench / inspect_ai files: `passk import` first
    df = load(args.path, strict=not args.skip_bad_files, columns=_read_columns(args))
    if df.empty:
        raise CliError(f"no trial records under {args.path}; run `passk run --out {args.path}` first")
    df = apply_where(df, parse_where(args.where, df))
    note = ""
    if not args.all_versions:
        df, left_out = newest_suite_versions(df)
        note = versions_note(left_out)
    k = args.k or default_k(df)
    usable = df.loc[df["outcome"] != "infra_error", ["run_id", "task"]].groupby(["run_id", "task"]).size()
    n_max = int(usable.max()) if len(usable) else 0
    if n_max and k > n_max:
        raise CliError(
            f"--k {k} is larger than the number of trials per task (at most {n_max}); "
            f"use --k ≤ {n_max} or run more trials"
        )
    by = default_by(df, parse_by(args.by, df))
    pooled = [c for c in default_by(df, None) if c not in by and _mixes(df, list(by), c)]
    if pooled:
        warnings.warn(
            f"--by {args.by} pools trials whose {', '.join(pooled)} differ (one row mixes configurations); "
            f"add {','.join(pooled)} to --by to keep them apart",
            UserWarning,
            stacklevel=1,
        )
    if (args.price_in is None) != (args.price_out is None):
        raise CliError(
            "give both --price-in and --price-out (USD per million input and output tokens; 0 is a price)"
        )
    if args.prices is not None and args.price_in is not None:
        raise CliError("give --prices (per model) or --price-in/--price-out (one price for all), not both")
    prices = read_prices(args.prices, df) if args.prices is not None else None
    if (
        (args.on is None) != (args.a is None)
        or (args.a is None) != (args.b is None)
        or (args.on and not args.card)
    ):
        raise CliError(
            "--on, --a and --b go together, with --card: e.g. --card --on prompt_name --a default --b strict"
        )
    if args.card:
        text = _card(args, df, k, by, prices)
    else:
        text = _report(args, df, k, by, prices, note)
        note = "" if args.format in ("table", "markdown") else note
    if note:  # csv, json, html: their output stays the report's; the note goes to stderr
        for line in note.splitlines():
            status(args, line)
    if args.out:
        out = Path(args.out)
        try:
            out.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot write {out}: {exc.strerror or exc}; choose another --out") from None
        status(
            args, f"wrote the {args.format} {'card' if args.card else 'report'} of {len(df)} trials to {out}"
        )
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _card(args: argparse.Namespace, df: pd.DataFrame, k: int, by: tuple[str, ...], prices: Any) -> str:
    """The reliability card in the chosen format (a configuration: --by, else every identity
    column but the robustness arms, faults and perturbation)."""
    from passk_nb.stats.card import card_comparison, reliability_card
    from passk_nb.view.card import card_html, card_table

    if args.on is not None:
        if args.format == "html":
            raise CliError(
                "--card --on compares two cards as text: choose --format table, markdown, csv or json"
            )
        a, b = (arm(df, args.on, text) for text in (args.a, args.b))
        both = card_comparison(df, on=args.on, a=a, b=b, k=k, ci=args.ci, n_boot=args.n_boot, seed=args.seed)
        return card_table(both, args.format)
    if prices is None and args.price_in is not None:
        prices = {model: (args.price_in, args.price_out) for model in df["model"].unique()}
    card = reliability_card(
        df,
        k=k,
        by=None if args.by is None else by,
        prices=prices,
        ci=args.ci,
        n_boot=args.n_boot,
        seed=args.seed,
    )
    return card_html(card) if args.format == "html" else card_table(card, args.format)


def _report(
    args: argparse.Namespace, df: pd.DataFrame, k: int, by: tuple[str, ...], prices: Any, note: str
) -> str:
    """The report of pass@k and pass^k in the chosen format."""
    from passk_nb.stats.report import report_frame
    from passk_nb.stats.summary import best_first
    from passk_nb.view.tables import report_table

    if args.format in ("table", "markdown") and hasattr(args, "log_handler"):
        args.log_handler.notes_explain_declined = True  # its notes say where an interval was declined
    report = report_frame(
        df, k=k, by=by, ci=args.ci, n_boot=args.n_boot, seed=args.seed, cluster=args.cluster
    )
    if args.price_in is not None or prices is not None:
        from passk_nb.view.tables import report_costs

        report = report_costs(
            report, df, k=k, by=by, price_in=args.price_in, price_out=args.price_out, prices=prices
        )
    if args.sort:
        report = best_first(report, args.sort)
    if args.format == "html":
        from passk_nb.view.report_html import report_html

        return report_html(df, k=k, by=by, ci=args.ci, n_boot=args.n_boot, seed=args.seed, report=report)
    text = report_table(report, args.format, by=by, ci=args.ci, notes=not args.quiet)
    if args.format in ("table", "markdown") and note:
        text += "\n" + note
    if args.format in ("table", "markdown") and not args.quiet and not args.out:
        text += f"\n{len(df)} trials from {args.path}"
    return text
