"""``passk cases``: run rule-based text cases n times and print per-case pass@k / pass^k.

    passk cases examples/cases_example.py --agent examples/cases_example.py:flaky_agent --trials 4 --k 2

:func:`add_parser` adds the subcommand to the ``passk`` parser.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from passk_nb.cli.common import CliError, add_quiet, positive_int, show_progress
from passk_nb.harness.case_files import load_agent, load_cases
from passk_nb.harness.cases import run_cases

_EPILOG = """examples:
  passk cases examples/cases.json --agent examples/cases_example.py:agent --trials 3
  passk cases examples/cases_example.py --agent examples/cases_example.py:flaky_agent --trials 4 --k 2
  passk cases my_cases.py --agent my_package.agents:answer --trials 10 --k 5 --out runs
A case file is a .json list of {"name", "input", "expected"} or a .py file defining CASES
(a list of dicts that may use "check" functions). Without --out nothing is saved."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``cases`` subcommand to ``subparsers`` and return its parser."""
    p = subparsers.add_parser(
        "cases",
        help="run rule-based text cases n times and print pass@k / pass^k per case",
        description="Run every case of FILE --trials times against a Python function input -> output "
        "and print, per case, the passes, pass@k and pass^k.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", help="case file: a .json list of cases or a .py file defining CASES")
    p.add_argument(
        "--agent", required=True, help="the agent function: module:function or path/to/file.py:function"
    )
    p.add_argument("--trials", type=positive_int, default=3, help="trials per case, n (default: 3)")
    p.add_argument(
        "--k", type=positive_int, help="k for pass@k and pass^k, ≤ trials (default: 2, or 1 with --trials 1)"
    )
    p.add_argument("--model", help="name recorded for the agent (default: the function's name)")
    p.add_argument("--suite", default="cases", help="suite name recorded in the rows (default: cases)")
    p.add_argument(
        "--concurrency",
        type=positive_int,
        default=1,
        help="agent calls in flight at once, in threads (default: 1, in order)",
    )
    p.add_argument(
        "--out",
        help="data folder to keep the records in (default: not saved); "
        "re-running the same command then resumes",
    )
    p.add_argument(
        "--no-progress", action="store_true", help="hide the progress bar (hidden anyway when not a terminal)"
    )
    add_quiet(p)
    p.set_defaults(func=_cmd_cases)
    return p


def cases_table(df: pd.DataFrame, k: int) -> str:
    """Per-case passes, pass@k and pass^k, then their mean over cases, as aligned text.

    >>> from passk_nb.data.records import frame_from_records
    >>> rows = [{"run_id": "r", "suite": "s", "task": "t", "trial": i, "passed": i < 3,
    ...          "outcome": "pass" if i < 3 else "wrong_output", "final_answer": "5"} for i in range(4)]
    >>> print(cases_table(frame_from_records(rows), k=2))
    case | passes | pass@2 | pass^2 | first failure
    -----+--------+--------+--------+--------------
    t    | 3/4    | 1.000  | 0.500  | output '5'
    -----+--------+--------+--------+--------------
    mean | 3/4    | 1.000  | 0.500  | 1 case
    """
    from passk_nb.stats.estimators import pass_at_k, pass_hat_k
    from passk_nb.view.tables import render_table

    grouped = df.groupby("task", sort=False)
    n = grouped.size()
    c = grouped["passed"].sum()
    at_k = np.asarray(pass_at_k(n.to_numpy(), c.to_numpy(), k))
    hat_k = np.asarray(pass_hat_k(n.to_numpy(), c.to_numpy(), k))
    rows = []
    for (task, group), n_i, c_i, a, h in zip(grouped, n, c, at_k, hat_k, strict=True):
        rows.append([task, f"{c_i}/{n_i}", f"{a:.3f}", f"{h:.3f}", _first_failure(group)])
    mean = [
        "mean",
        f"{c.sum()}/{n.sum()}",
        f"{at_k.mean():.3f}",
        f"{hat_k.mean():.3f}",
        f"{len(n)} case{'s' * (len(n) != 1)}",
    ]
    header = ["case", "passes", f"pass@{k}", f"pass^{k}", "first failure"]
    return render_table(pd.DataFrame([*rows, mean], columns=header), rule_before_last=1)


def _first_failure(trials: pd.DataFrame, limit: int = 60) -> str:
    """The error of the first failed trial, else its output; empty when every trial passed."""
    failed = trials[~trials["passed"]]
    if failed.empty:
        return ""
    error, answer = failed["error"].iloc[0], failed["final_answer"].iloc[0]
    if not pd.isna(error):
        text = error
    else:
        text = failed["outcome"].iloc[0] if pd.isna(answer) else f"output {answer!r}"
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cmd_cases(args: argparse.Namespace) -> int:
    args.k = args.k if args.k is not None else min(2, args.trials)
    if args.k > args.trials:
        raise CliError(
            f"--k {args.k} is larger than --trials {args.trials}: pass^k needs at least k trials "
            "per case; raise --trials or lower --k"
        )
    if os.getcwd() not in sys.path:  # `--agent mymodule:fn` finds modules in the current folder
        sys.path.insert(0, os.getcwd())
    try:
        cases = load_cases(args.file)
        agent = load_agent(args.agent)
    except ImportError as exc:
        raise CliError(str(exc)) from exc
    df = run_cases(
        agent,
        list(cases),
        trials=args.trials,
        suite=args.suite,
        model=args.model,
        prompt_name=Path(args.file).stem,
        concurrency=args.concurrency,
        out=args.out,
        progress=None if show_progress(args) else False,  # None: a bar for long runs only
    )
    print(cases_table(df, args.k))
    if args.quiet:
        return 0
    print(f"pass@{args.k} / pass^{args.k}: unbiased per-case estimates from {args.trials} trials each")
    if args.out:
        print(
            f"records: {Path(args.out) / df['run_id'].iloc[0]} ({len(df)} trials; "
            f"open with passk_nb.load({str(args.out)!r}))"
        )
    return 0
