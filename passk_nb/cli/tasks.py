"""``passk tasks``: list a suite's tasks or print one of its prompts."""

from __future__ import annotations

import argparse

from passk_nb.cli.common import CliError
from passk_nb.harness.suites import get_suite
from passk_nb.harness.suites.registry import SUITES


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``tasks`` subcommand to ``subparsers`` and return its parser."""
    p = subparsers.add_parser("tasks", help="list the tasks of a suite, or print one of its prompts")
    p.add_argument(
        "--suite",
        default="orders",
        help=f"task suite: {', '.join(SUITES)}, module:SUITE or path/to/suite.py:SUITE (default: orders)",
    )
    p.add_argument("--prompt", help="print this system prompt (the listing names the suite's prompts)")
    p.set_defaults(func=_cmd_tasks)
    return p


def _cmd_tasks(args: argparse.Namespace) -> int:
    suite = get_suite(args.suite)
    if args.prompt:
        if args.prompt not in suite.prompts:
            raise CliError(
                f"unknown prompt {args.prompt!r} in suite {suite.name!r}; "
                f"choose from {', '.join(suite.prompts)}"
            )
        print(suite.prompts[args.prompt])
        return 0
    # a plain listing, not a table: `passk tasks` stays fast (no pandas or scipy import)
    n = len(suite.tasks)
    print(f"suite {suite.name!r}: {n} task{'' if n == 1 else 's'}; prompts: {', '.join(suite.prompts)}")
    width = max((len(task.id) for task in suite.tasks), default=0)
    for task in suite.tasks:
        print(f"  {task.id:<{width}}  {task.tests}")
    return 0
