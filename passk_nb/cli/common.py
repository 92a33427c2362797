"""What every command shares: the parser that fails in one line, argument types, messages.

Every user error is one line on stderr, ``passk: error: ...``, exit status 2; warnings are
``passk: warning: ...``. Messages from the library that name a Python argument
(``out=``, ``api_key_env=``) are translated into the CLI flag that sets it (:func:`cli_message`).
"""

from __future__ import annotations

import argparse
import logging
import math
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn, TextIO

from passk_nb.stats.params import TooFewTasksWarning

PROG = "passk"


class CliError(Exception):
    """A usage problem: printed as one line, exit status 2."""


class ArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line (``passk: error: ...``), not a usage block.

    Subparsers made with ``add_subparsers`` inherit the class, so every command fails the same way.

    >>> parser = ArgumentParser(prog="passk demo")
    >>> _ = parser.add_argument("--trials", type=positive_int)
    >>> try:
    ...     parser.parse_args(["--trials", "0"])
    ... except CliError as exc:
    ...     print(exc)
    argument --trials: must be ≥ 1, got 0 (see `passk demo --help`)
    """

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message} (see `{self.prog} --help`)")


def positive_int(text: str) -> int:
    """A whole number ≥ 1 (an argparse ``type``).

    >>> positive_int("3")
    3
    """
    return _whole_number(text, minimum=1)


def non_negative_int(text: str) -> int:
    """A whole number ≥ 0 (an argparse ``type``).

    >>> non_negative_int("0")
    0
    """
    return _whole_number(text, minimum=0)


def _whole_number(text: str, *, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be ≥ {minimum}, got {value}")
    return value


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number ≥ 0 (an argparse ``type``).

    >>> non_negative_float("0.7")
    0.7
    """
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be ≥ 0, got {text}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (an argparse ``type``).

    >>> positive_float("2.5")
    2.5
    """
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def level(text: str) -> float:
    """An interval level strictly between 0 and 1 (an argparse ``type``).

    >>> level("0.9")
    0.9
    """
    value = _number(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, e.g. 0.95; got {text}")
    return value


def prompt_arg(text: str) -> tuple[str, str | None]:
    """A prompt name, or a file holding the prompt text: (prompt, name)."""
    path = Path(text)
    if path.suffix or "/" in text or path.is_file():
        if not path.is_file():
            raise CliError(f"prompt file {text!r} does not exist; give a prompt name or an existing file")
        return path.read_text(encoding="utf-8"), path.stem
    return text, None


def add_cluster(parser: argparse.ArgumentParser) -> None:
    """Add ``--cluster COLUMN``: the statistic's ``cluster=`` (tasks in families)."""
    parser.add_argument(
        "--cluster",
        metavar="COLUMN",
        help="the column naming each task's family (e.g. task_family): use it when tasks come in "
        "families; the interval for new tasks and the paired comparison then resample families",
    )


def add_quiet(parser: argparse.ArgumentParser) -> None:
    """Add ``--quiet``: no progress bar, no notes, only the table (for scripts)."""
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="print the table only: no progress bar, notes or status"
    )


def show_progress(args: argparse.Namespace) -> bool:
    """A progress bar only for a person watching: not with --quiet/--no-progress, not when piped."""
    if getattr(args, "quiet", False) or getattr(args, "no_progress", False):
        return False
    return _isatty(sys.stderr)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def status(args: argparse.Namespace, message: str) -> None:
    """A status line on stderr (``passk: ...``), unless ``--quiet``."""
    if not getattr(args, "quiet", False):
        print(f"{PROG}: {message}", file=sys.stderr)


def warn(message: str) -> None:
    """A warning line on stderr: ``passk: warning: ...``."""
    print(f"{PROG}: warning: {one_line(cli_message(message))}", file=sys.stderr)


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) made one space.

    >>> one_line("a\\n  b")
    'a b'
    """
    return " ".join(str(text).split())


#: Python arguments named in library messages -> the CLI flag that sets them.
_TRANSLATIONS: tuple[tuple[str, str], ...] = (
    (r"pass another out= folder", "pass another --out folder"),
    (
        r"call load\(\.\.\., strict=False\) \(passk report --skip-bad-files\) to skip it",
        "pass --skip-bad-files to skip it",
    ),
    (r"call load\(\.\.\., strict=False\) to skip it", "pass --skip-bad-files to skip it"),
    (r"strict=False", "--skip-bad-files"),
    (r"pass executable=PATH", "pass --claude-path PATH"),
    (r"api_key_env=", "--api-key-env"),
    (
        r"json_schema=True constrains JSON mode: pass json_mode=True too",
        "--json-schema constrains JSON mode: pass --json-mode too",
    ),
    (r"with json_mode=False", "without --json-mode"),
    (r"leave temperature unset", "leave --temperature unset"),
    (r"takes no base_url", "takes no --base-url"),
    (r"provider='(\w[\w-]*)'", r"--provider \1"),
    (
        r", or pass the full system prompt text \(with prompt_name= to label it\)",
        ", or give a file holding the system prompt",
    ),
    (r"\(model=\.\.\. / --model\)", "(--model)"),
    (
        r", or pass an object with a chat\(messages\) method or a function",
        " (a Python function works from Python: passk_nb.run(provider=fn))",
    ),
    (r"see its documentation for the options it takes", "see `passk run --help`"),
    (r"choose k ≤ (\d+)", r"choose --k ≤ \1"),
    (r"choose a smaller k\b", "choose a smaller --k"),
    (r"try test='boschloo'", "try --test boschloo"),
    (r"\bk=(\d+) is larger than", r"--k \1 is larger than"),
    (r"the base URL \(base_url=\)", "--base-url"),
    (r"trial_timeout must", "--trial-timeout must"),
    (r"\bmax_tokens must", "--max-tokens must"),
    (r"\btimeout must", "--timeout must"),
    (r"\bseed_repeats must", "--seed-repeats must"),
    (r"(?<![\w-])repeats must", "--repeats must"),
    (r"\btrials=(\d+) is more than", r"--trials \1 is more than"),
    (r"^max_trials caps", "--max-trials caps"),
    (r"give until= too", "give --until too"),
    (
        r"^(a first round of \d+ trials per task passes final=\d+): give trials ≤",
        r"--until: \1: give --trials ≤",
    ),
    (r"a larger trials= extends", "a larger --trials extends"),
    (r"\bseed_temperature must", "--seed-temperature must"),
    (r"(?<![\w-])temperature must", "--temperature must"),
    (r" \(or None for the backend's default\)", " (or leave --temperature unset for the backend's default)"),
)
#: Option names in "does not take the option 'x'" that a CLI flag of another name sets.
_FLAG_OF_OPTION = {"executable": "--claude-path"}


def cli_message(text: str) -> str:
    """``text`` with the Python arguments it names replaced by the CLI flags that set them.

    >>> cli_message("Check free space and write permission, or pass another out= folder")
    'Check free space and write permission, or pass another --out folder'
    >>> cli_message("the llama-cpp provider does not take the option 'json_schema'; see its documentation "
    ...             "for the options it takes")
    'the llama-cpp provider does not take --json-schema; see `passk run --help`'
    """
    for pattern, replacement in _TRANSLATIONS:
        text = re.sub(pattern, replacement, text)

    def flag(match: re.Match[str]) -> str:
        name = match.group(1)
        return "does not take " + _FLAG_OF_OPTION.get(name, "--" + name.replace("_", "-"))

    text = re.sub(r"does not take the option '(\w+)'", flag, text)
    if command_flags is not None:
        for name, (pattern, replacement) in _ADVICE_OF_FLAG.items():
            if name not in command_flags:
                text = re.sub(pattern, replacement, text)
    return text


#: The flags of the command running now (set by ``passk`` once its arguments are parsed), so that
#: a message advises only flags this command has; None outside a command.
command_flags: frozenset[str] | None = None
#: Advice naming a flag that only some commands have -> how it reads in the other commands.
_ADVICE_OF_FLAG: dict[str, tuple[str, str]] = {
    "--skip-bad-files": (r",? or pass --skip-bad-files to skip it", ""),
}


def flags_named(text: str) -> set[str]:
    """The ``--flags`` a message names.

    >>> sorted(flags_named("pass --out DIR, or --skip-bad-files; not -x or a--b"))
    ['--out', '--skip-bad-files']
    """
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text))


def error_message(exc: BaseException) -> str:
    """The one line a user sees for ``exc``."""
    if isinstance(exc, ModuleNotFoundError) and exc.name == "llama_cpp" and "pip install" not in str(exc):
        return (
            "the llama-cpp provider needs the `local` extra: pip install 'passk-nb[local]'"
            " (docs/guide/local-model.md)"
        )
    text = str(exc) or type(exc).__name__
    if isinstance(exc, FileNotFoundError) and exc.filename and str(exc.filename) not in text:
        text = f"{text}: {exc.filename}"
    return one_line(cli_message(text))  # advising only flags of the command running


class _LogToStderr(logging.Handler):
    """The library's log records as ``passk: ...`` lines (``passk: warning: ...`` from WARNING up)."""

    def __init__(self, quiet: bool):
        super().__init__(logging.INFO)
        self.quiet = quiet
        #: Commands may say a record their own way: rewrite(record) -> the line's text, or None.
        self.rewrite: Callable[[logging.LogRecord], str | None] | None = None
        #: Set by a command whose output's notes explain a declined interval: no warning then.
        self.notes_explain_declined = False
        self._said_declined = False

    def show_warning(
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        """A Python warning as a ``passk: warning:`` line; a declined interval for new tasks in the
        command's words, once, and not under ``--quiet`` or where the output's notes say it."""
        if isinstance(message, TooFewTasksWarning):
            if self.quiet or self.notes_explain_declined or self._said_declined:
                return
            self._said_declined = True
            rows = "" if message.rows == 1 else f" ({message.declined} of {message.rows} rows)"
            message = (
                f"no interval for new tasks{rows}: fewer than {message.min_tasks} tasks; read the "
                "interval for these tasks re-run (these tasks, *fixed_lo/*fixed_hi), or add tasks"
            )
        warn(str(message))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.rewrite(record) if self.rewrite else None
            if text is not None:
                if not self.quiet:
                    print(f"{PROG}: {text}", file=sys.stderr)
            elif record.levelno >= logging.WARNING:
                detail = f": {record.exc_info[1]}" if record.exc_info and record.exc_info[1] else ""
                warn(record.getMessage() + detail)
            elif not self.quiet:
                print(f"{PROG}: {one_line(record.getMessage())}", file=sys.stderr)
        except Exception:  # a logging handler never raises
            self.handleError(record)


@contextmanager
def cli_output(quiet: bool = False) -> Iterator[_LogToStderr]:
    """Within the block, Python warnings and the ``passk_nb`` logger print as ``passk:`` lines."""
    logger = logging.getLogger("passk_nb")
    handler = _LogToStderr(quiet)
    old_level, old_propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = handler.show_warning
        try:
            yield handler
        finally:
            logger.removeHandler(handler)
            logger.setLevel(old_level)
            logger.propagate = old_propagate
