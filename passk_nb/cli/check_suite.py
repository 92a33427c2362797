"""``passk check-suite SUITE``: is a suite ready to measure with?

    passk check-suite bank
    passk check-suite my_package.my_module:SUITE

Exit 0 when every check passes, 1 with one line per problem otherwise.
"""

from __future__ import annotations

import argparse

from passk_nb.cli.common import CliError
from passk_nb.harness.suites.registry import SUITES


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``check-suite`` subcommand to ``subparsers`` and return its parser."""
    p = subparsers.add_parser(
        "check-suite",
        help="check a task suite: known-good scripts pass, doing nothing fails, tools never crash",
        description="Run a suite's checks before measuring with it: every known-good script passes its "
        "task, an agent that does nothing fails every task, checks are deterministic, and tools answer "
        "bad arguments with a tool error instead of raising.",
    )
    p.add_argument(
        "suite",
        help=f"a built-in suite name ({', '.join(SUITES)}), module:SUITE or path/to/suite.py:SUITE",
    )
    p.set_defaults(func=_cmd_check_suite)
    return p


def _cmd_check_suite(args: argparse.Namespace) -> int:
    from passk_nb.harness.suites import get_suite
    from passk_nb.harness.suites.checks import check_suite

    try:
        suite = get_suite(args.suite)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    problems = check_suite(suite)
    for problem in problems:
        print(f"✗ {problem}")
    n_tools = len(suite.tools)
    if problems:
        where = f"{len(suite.tasks)} tasks and {n_tools} tools"
        print(f"suite {suite.name!r}: {len(problems)} problem{'' if len(problems) == 1 else 's'} in {where}")
        return 1
    print(f"✓ suite {suite.name!r}: {len(suite.tasks)} tasks and {n_tools} tools pass every check")
    return 0
