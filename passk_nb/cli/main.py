"""The ``passk`` command: run the suite, report saved records.

    passk run --provider scripted --trials 3 --k 2
    passk report runs --k 2
    passk tasks

Every command has ``--help``. Bad input exits with status 2 and one line that
says what to fix, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from passk_nb.cli import cases, gate, probe, regrade, report, run, tasks  # issue 17
from passk_nb.cli.common import CliError

#: The subcommands, in the order ``--help`` lists them; each module registers its own parser.
COMMANDS = (run, report, tasks, cases)
COMMANDS += (gate, regrade, probe)  # issue 17


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="passk",
        description="Measure how reliably a tool-calling agent does its job: pass@k (can it ever?) and "
        "pass^k (does it every time?) on a state-verified task suite.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``passk`` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (CliError, ValueError, TypeError, FileNotFoundError, OSError) as exc:
        print(f"passk: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "passk: interrupted; completed trials are saved, re-run the same command to resume",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
