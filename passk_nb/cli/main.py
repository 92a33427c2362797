"""The ``passk`` command: run the suite, list and report saved records.

    passk run --provider scripted --trials 3 --k 2
    passk runs runs
    passk report runs --k 2
    passk tasks

Every command has ``--help``. Bad input exits with status 2 and one line on stderr,
``passk: error: ...``, that says what to fix, never a traceback or a usage block;
warnings are ``passk: warning: ...`` lines.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import import_module

from passk_nb._version import __version__
from passk_nb.cli import common
from passk_nb.cli.common import PROG, ArgumentParser, CliError, cli_output, error_message
from passk_nb.cli.terminal import escaped_streams

#: The subcommands' modules (``passk_nb.cli.<name>``), in the order ``--help`` lists them; each
#: registers its own parser. Imported when the parser is built, so ``--version`` loads none.
COMMANDS = (
    "run",
    "runs",
    "report",
    "compare",
    "import_",
    "export",
    "tasks",
    "cases",
    "check_suite",
    "gate",
    "regrade",
    "probe",
)
#: Exceptions that mean the input was wrong (a bad flag value, a missing file, a missing extra).
USER_ERRORS = (CliError, ValueError, TypeError, OSError, ImportError)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``passk`` parser with every subcommand, or only the one ``argv`` names first: a command
    imports its own module and what it needs, never the others' (``passk report`` no HTTP client).

    >>> build_parser().prog
    'passk'
    >>> list(subcommands(build_parser(["report", "runs/"])))
    ['report']
    """
    parser = ArgumentParser(
        prog=PROG,
        description="Measure how reliably a tool-calling agent does its job: pass@k (can it ever?) and "
        "pass^k (does it every time?) on a state-verified task suite.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    named = next((arg for arg in argv or () if not arg.startswith("-")), None)
    only = [c for c in COMMANDS if c.rstrip("_").replace("_", "-") == named]
    for command in only or COMMANDS:
        import_module(f"passk_nb.cli.{command}").add_parser(sub)
    return parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser of each subcommand, by name."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def flags_of(parser: argparse.ArgumentParser) -> frozenset[str]:
    """Every ``--flag`` a (sub)command's parser takes."""
    return frozenset(o for a in parser._actions for o in a.option_strings if o.startswith("--"))


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser``'s arguments; an unknown one is an error of the subcommand, whose ``--help`` lists
    what it takes (argparse would point to ``passk --help``). From here on, messages advise only
    flags this subcommand has (:data:`passk_nb.cli.common.command_flags`)."""
    args, unknown = parser.parse_known_args(argv)
    command = subcommands(parser)[args.command]
    if unknown:
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    common.command_flags = flags_of(command)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``passk`` command; returns the exit status.

    >>> main(["tasks", "--prompt", "nope"])
    2
    """
    with escaped_streams():  # records' texts are printed as text, never as terminal control
        try:
            return _main(argv)
        finally:
            common.command_flags = None


def asks_version(argv: Sequence[str]) -> bool:
    """Does ``argv`` ask for ``passk --version`` (before any command)? Answered before the
    commands, and the pandas they use, are imported.

    >>> asks_version(["--version"]), asks_version(["run", "--version"])
    (True, False)
    """
    for arg in argv:
        if arg == "--version":
            return True
        if not arg.startswith("-"):
            return False
    return False


def _main(argv: Sequence[str] | None) -> int:
    if asks_version(sys.argv[1:] if argv is None else argv):
        print(f"{PROG} {__version__}")
        return 0
    try:
        args = _parse(build_parser(sys.argv[1:] if argv is None else argv), argv)
        with cli_output(quiet=getattr(args, "quiet", False)) as handler:
            args.log_handler = handler
            return int(args.func(args))
    except USER_ERRORS as exc:
        sys.stdout.flush()
        print(f"{PROG}: error: {error_message(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            f"{PROG}: interrupted; completed trials are saved, re-run the same command to resume",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
