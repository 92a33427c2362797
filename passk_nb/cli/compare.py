"""``passk compare``: two arms of one column (two prompts, two models) compared task by task.

    passk compare runs --on prompt_name --a default --b strict
    passk compare runs --on model --a llama3.1:8b --b qwen2.5:7b --k 4 --format markdown

Prints :func:`passk_nb.compare` (the paired difference b − a over tasks, with its intervals)
and :func:`passk_nb.flips` (per task: did its success rate change?). Every number and every
decision is a column those functions return; this command only loads, filters and prints.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

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
from passk_nb.cli.report import apply_where, arm, default_k, parse_by, parse_where
from passk_nb.data.store import load
from passk_nb.stats.params import CI, N_BOOT, SEED

FORMATS: tuple[str, ...] = ("table", "markdown", "csv", "json")
#: The two tables, in the order they print.
TABLES: tuple[str, ...] = ("compare", "flips")

_EPILOG = """examples:
  passk compare runs --on prompt_name --a default --b strict
  passk compare runs --on model --a llama3.1:8b --b qwen2.5:7b --k 4
  passk compare runs --on prompt_name --a default --b strict --format json --out compare.json
  passk compare runs --on prompt_name --a default --b strict --only flips --format csv
compare: b − a of pass@k and pass^k over the tasks both arms ran, with its interval for new
tasks like these and for these tasks re-run (passk_nb.compare). flips: per task, the success
rate under each arm, the exact test's p (--test) and the Benjamini–Hochberg q; flip = q < --alpha
(passk_nb.flips). CSV prints both tables separated by a blank line; --only prints one."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``compare`` subcommand to ``subparsers`` and return its parser."""
    p = subparsers.add_parser(
        "compare",
        help="compare two prompts, models or configurations task by task (paired difference, flips)",
        description="Compare arm B against arm A, two values of one column of the records under PATH "
        "(a folder or a parquet file), over the tasks both ran.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", help="data folder (or one parquet file) written by `passk run`")
    p.add_argument(
        "--on",
        required=True,
        metavar="COLUMN",
        help="the column whose values name the arms, e.g. prompt_name",
    )
    p.add_argument("--a", required=True, metavar="VALUE", help="arm A, the baseline: a value of --on")
    p.add_argument("--b", required=True, metavar="VALUE", help="arm B, compared against A: a value of --on")
    p.add_argument("--k", type=positive_int, help="k for pass@k and pass^k (default: 2, or 1 with 1 trial)")
    p.add_argument(
        "--by",
        help="comma-separated columns, one comparison per combination (default: every identity column "
        "both arms share; 'none' pools all trials)",
    )
    p.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="COLUMN=VALUE",
        help="keep only matching trials (repeatable), as in `passk report`",
    )
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    p.add_argument("--only", choices=TABLES, help="print only this table (default: both)")
    p.add_argument("--out", help="write the tables to this file instead of printing them")
    p.add_argument("--ci", type=level, default=CI, help=f"interval level (default: {CI})")
    p.add_argument("--alpha", type=level, default=0.05, help="false discovery rate of flips (default: 0.05)")
    p.add_argument(
        "--test",
        choices=("fisher", "boschloo"),
        default="fisher",
        help="per-task test of flips (default: fisher)",
    )
    p.add_argument(
        "--n-boot", type=non_negative_int, default=N_BOOT, help="bootstrap draws for intervals, 0 for none"
    )
    p.add_argument("--seed", type=int, default=SEED, help=f"bootstrap seed (default: {SEED})")
    add_cluster(p)
    p.add_argument("--skip-bad-files", action="store_true", help="skip unreadable files with a warning")
    add_quiet(p)
    p.set_defaults(func=_cmd_compare)
    return p


def _cmd_compare(args: argparse.Namespace) -> int:
    from passk_nb.stats.paired import compare, flips

    refuse_foreign(args.path)  # τ-bench / inspect_ai files: `passk import` first
    df = load(args.path, strict=not args.skip_bad_files)
    if df.empty:
        raise CliError(f"no trial records under {args.path}; run `passk run --out {args.path}` first")
    df = apply_where(df, parse_where(args.where, df))
    if args.on not in df.columns:
        raise CliError(f"--on {args.on}: these records have no such column; e.g. prompt_name, model, config")
    a, b = arm(df, args.on, args.a), arm(df, args.on, args.b)
    by = parse_by(args.by, df)
    k = args.k or default_k(df)
    tables: dict[str, pd.DataFrame] = {}
    if args.only in (None, "compare"):
        tables["compare"] = compare(
            df,
            on=args.on,
            a=a,
            b=b,
            k=k,
            by=by,
            ci=args.ci,
            n_boot=args.n_boot,
            seed=args.seed,
            cluster=args.cluster,
        )
    if args.only in (None, "flips"):
        tables["flips"] = flips(df, on=args.on, a=a, b=b, by=by, alpha=args.alpha, test=args.test)
    text = render(tables, args.format, on=args.on, a=args.a, b=args.b, k=k, ci=args.ci)
    if args.out:
        out = Path(args.out)
        try:
            out.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot write {out}: {exc.strerror or exc}; choose another --out") from None
        status(args, f"wrote the {args.format} comparison to {out}")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def render(tables: dict[str, pd.DataFrame], fmt: str, *, on: str, a: str, b: str, k: int, ci: float) -> str:
    """The frames of :func:`passk_nb.compare` and :func:`passk_nb.flips` as ``fmt``: text or markdown
    tables for people, CSV or JSON holding the frames themselves at full precision."""
    if fmt == "csv":
        return "\n".join(frame.to_csv(index=False) for frame in tables.values())
    if fmt == "json":
        rows = {
            name: json.loads(frame.to_json(orient="records", double_precision=15))
            for name, frame in tables.items()
        }
        return json.dumps({"on": on, "a": a, "b": b, "k": k, "ci": ci, **rows}, indent=1)
    from passk_nb.view.tables import render_table

    heading = {
        "compare": f"compare: b − a over the paired tasks ({on}: a = {a}, b = {b}; k = {k})",
        "flips": f"flips: per task, {on} a = {a} against b = {b}",
    }
    parts = []
    for name, frame in tables.items():
        display, caption = (compare_display if name == "compare" else flips_display)(frame, ci=ci)
        lines = [heading[name] + (f"; {caption}" if caption else "")]
        lines += [""] if fmt == "markdown" else []
        lines.append(render_table(display, fmt))
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _labels(frame: pd.DataFrame, keys: list[str]) -> tuple[pd.DataFrame, str]:
    """The group columns that differ among rows (as labels) and a caption of the ones all share."""
    from passk_nb.view.tables import row_fields, split_fields

    varying, constant = split_fields(row_fields(frame, keys))
    caption = ", ".join(f"{name}: {value}" for name, value in constant.items())
    labels = pd.DataFrame({name: values.to_numpy() for name, values in varying.items()}, index=frame.index)
    return labels, caption


def _signed(lo: float, hi: float, before: str = "") -> str:
    """An interval of a difference, signed: ``[-0.120, +0.300]``; ``–`` when it is missing."""
    return "–" if pd.isna(lo) or pd.isna(hi) else f"{before}[{lo:+.3f}, {hi:+.3f}]"


def compare_display(frame: pd.DataFrame, *, ci: float) -> tuple[pd.DataFrame, str]:
    """The text cells of :func:`passk_nb.compare`'s frame, one row per group and metric."""
    keys = list(frame.columns[: frame.columns.get_loc("metric")])
    out, caption = _labels(frame, keys)
    out["metric"] = [m.replace("k", str(k)) for m, k in zip(frame["metric"], frame["k"], strict=True)]
    out["tasks"] = frame["n_tasks"].astype(int).astype(str)
    out["a"] = frame["a"].map("{:.3f}".format)
    out["b"] = frame["b"].map("{:.3f}".format)
    level = f"{ci:.0%}"
    out[f"b − a [{level} new tasks]"] = [
        f"{diff:+.3f}"
        + (_signed(lo, hi, " ") if not pd.isna(lo) else "" if method == "none" else f" ({method})")
        for diff, lo, hi, method in zip(
            frame["diff"], frame["lo"], frame["hi"], frame["ci_method"], strict=True
        )
    ]
    out["these tasks"] = [
        _signed(lo, hi) for lo, hi in zip(frame["fixed_lo"], frame["fixed_hi"], strict=True)
    ]
    out["corr"] = frame["corr"].map(lambda c: "–" if pd.isna(c) else f"{c:.2f}")
    return out.reset_index(drop=True), caption


def flips_display(frame: pd.DataFrame, *, ci: float) -> tuple[pd.DataFrame, str]:
    """The text cells of :func:`passk_nb.flips`' frame, one row per task."""
    keys = list(frame.columns[: frame.columns.get_loc("task")])
    out, caption = _labels(frame, keys)
    out["task"] = frame["task"].astype(str)
    for arm_name in ("a", "b"):
        out[arm_name] = [
            f"{int(s)}/{int(n)}"
            for s, n in zip(frame[f"successes_{arm_name}"], frame[f"trials_{arm_name}"], strict=True)
        ]
    out["b − a"] = frame["delta"].map("{:+.2f}".format)
    out["p"] = frame["p_value"].map("{:.3g}".format)
    out["q"] = frame["q_value"].map(lambda q: "not tested" if pd.isna(q) else f"{q:.3g}")
    out["flip"] = frame["flip"].map({True: "FLIP", False: ""})
    return out.reset_index(drop=True), caption
