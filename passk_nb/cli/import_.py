"""``passk import``: other harnesses' results (τ-bench, τ²-bench, inspect_ai, Harbor, a CSV) as stored runs.

passk import tau-bench-gpt-4o-airline.json --out runs
passk import logs/ --from inspect --out runs
passk import jobs/2026-01-01__10-00-00 --errored infra_error --out runs
passk import results.csv --from csv --task case --passed ok --out runs

The records are written through the store like our own runs' (one run per source file and
model), so ``passk runs``, ``passk report``, ``passk gate`` and every notebook read them. Importing
the same file again adds nothing: run ids are hashes of the content, and trials already stored
are skipped.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pyarrow as pa

from passk_nb.cli.common import CliError, add_quiet, non_negative_int, status, warn
from passk_nb.data.ids import content_id
from passk_nb.data.records import COLUMNS, SCHEMA
from passk_nb.data.store import existing_trials, write_part
from passk_nb.importers.checks import MAX_BYTES, read_capped

#: What ``--from`` accepts; ``auto`` tells them apart by the files (:func:`detect_format`).
FORMATS: tuple[str, ...] = ("auto", "tau-bench", "tau2", "inspect", "harbor", "csv")
#: The ``provider`` each format's records carry (how a wrong ``--from`` is caught).
_PROVIDERS = {
    "tau-bench": "tau-bench",
    "tau2": "tau2-bench",
    "inspect": "inspect_ai",
    "harbor": "harbor",
    "csv": "imported",
}
#: Library argument names in messages -> this command's flags.
_FLAGS = (
    (r"strict=False", "--skip-bad-records"),
    (r"max_bytes=", "--max-bytes"),
    (r"scorer=", "--scorer"),
    (r"missing='fail'", "--missing fail"),
    (r"threshold=", "--threshold "),
    (r"errored='(\w+)'", r"--errored \1"),
    (r"reward_key=", "--reward-key"),
    (r"columns=\{'(\w+)': '(\w+)'\}", r"--column \1=\2"),
    (r"from_tau_bench\(\[file_a, file_b\]\)", "passk import FILE_A FILE_B"),
)

_EPILOG = """examples:
  passk import tau-bench-gpt-4o-airline.json --out runs       (a τ-bench result file)
  passk import tau2-results/ --out runs                       (τ²-bench: results.json or its folder)
  passk import logs/ --from inspect --scorer match --out runs (inspect_ai .eval / .json logs)
  passk import jobs/my-job --errored infra_error --out runs    (a Harbor / Terminal-Bench job folder)
  passk import mine.csv --task case --passed ok --trial attempt --model llm --out runs
  then: passk runs runs; passk report runs
--from auto (the default) reads the format from the files: .eval logs and JSON objects with an
inspect 'eval' header are inspect_ai, a folder of trial folders holding result.json with a
task_name is a Harbor job (or a folder of jobs), a JSON list is τ-bench, a JSON object τ²-bench (a
folder holding results.json too), .csv a table. Harbor needs --errored: trials without a reward
are infra_error (left out of n) or failure (counted, as Harbor's mean reward does). Imported
trials have no claim check: reports show "n/a" in "claimed not done"."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``import`` subcommand to ``subparsers`` and return its parser."""
    p = subparsers.add_parser(
        "import",
        help="store another harness's results (τ-bench, τ²-bench, inspect_ai, Harbor, CSV) as runs to report",
        description="Read the results of another harness and store them as trial records under --out, "
        "one run per source file and model, for passk runs / report / gate.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("source", nargs="+", help="result file(s) or folder(s)")
    p.add_argument("--from", dest="fmt", choices=FORMATS, default="auto", help="the format (default: auto)")
    p.add_argument("--out", required=True, help="data folder to store the records in (e.g. runs)")
    p.add_argument("--model", help="model name (csv: a column, or one name for every row)")
    p.add_argument("--suite", help="suite name (τ-bench: the domain; csv: default 'imported')")
    p.add_argument(
        "--missing",
        choices=("skip", "fail"),
        default="skip",
        help="τ-bench: trials missing from the file are left out (skip) or failures, as τ-bench counts them",
    )
    p.add_argument("--scorer", help="inspect: the scorer whose values decide success (needed with several)")
    p.add_argument("--threshold", type=float, help="inspect, harbor: scores (rewards) ≥ this pass")
    p.add_argument(
        "--errored",
        choices=("infra_error", "failure"),
        help="harbor (required): trials without a reward are infra errors (left out of n) or failures",
    )
    p.add_argument("--reward-key", help="harbor: the reward that decides when the verifier wrote several")
    csv = p.add_argument_group("csv columns")
    csv.add_argument("--task", help="the task column")
    csv.add_argument("--passed", help="the success column (booleans, 0/1, pass/fail, C/I)")
    csv.add_argument("--trial", help="the trial column (default: row order within each task)")
    csv.add_argument("--outcome", help="a column of outcomes of our own vocabulary")
    csv.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="RECORD=YOURS",
        help="map a further record column to yours, e.g. prompt_name=variant (repeatable)",
    )
    p.add_argument(
        "--skip-bad-records",
        action="store_true",
        help="skip records that cannot be read, with a count (default: stop at the first, naming it)",
    )
    p.add_argument(
        "--max-bytes",
        type=non_negative_int,
        default=MAX_BYTES,
        help=f"largest file read, on disk and expanded (default: {MAX_BYTES:,})",
    )
    add_quiet(p)
    p.set_defaults(func=_cmd_import)
    return p


#: File names of other harnesses' results (what ``passk report`` points to ``passk import`` for).
FOREIGN_SUFFIXES: tuple[str, ...] = (".json", ".eval", ".csv")


def refuse_foreign(path: str | os.PathLike[str]) -> None:
    """A CliError pointing to ``passk import`` when ``path`` holds another harness's results (a
    ``.json``, ``.eval`` or ``.csv`` file, or a folder of them without parquet records); judged
    by names only, nothing is read.

    >>> refuse_foreign("tau-bench-gpt-4o-airline.json")
    Traceback (most recent call last):
    passk_nb.cli.common.CliError: tau-bench-gpt-4o-airline.json holds no passk records ...
    """
    p = Path(path)
    if p.is_dir():
        if next(p.rglob("*.parquet"), None) is not None:
            return
        if not any(next(p.rglob(f"*{suffix}"), None) for suffix in FOREIGN_SUFFIXES):
            return
    elif p.suffix not in FOREIGN_SUFFIXES:
        return
    raise CliError(
        f"{p} holds no passk records (parquet) but looks like another harness's results; import them "
        f"first: passk import {p} --out runs (τ-bench, τ²-bench, inspect_ai, Harbor or CSV), then use runs"
    )


def detect_format(path: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES) -> str:
    """The format of ``path`` for ``--from auto``: ``tau-bench``, ``tau2``, ``inspect``, ``harbor`` or
    ``csv``.

    Decided by the name (``.eval``, ``.csv``), a folder's contents (``results.json``: τ²-bench;
    trial folders with a Harbor ``result.json``: harbor; inspect logs), or the JSON value (a list:
    τ-bench, or τ²-bench when it lists simulations; an object with an inspect ``eval`` header:
    inspect; another object: τ²-bench).
    Anything else is an error asking for ``--from``.

    >>> import json, tempfile
    >>> file = Path(tempfile.mkdtemp()) / "results.json"
    >>> _ = file.write_text(json.dumps([{"task_id": 0, "trial": 0, "reward": 1.0}]))
    >>> detect_format(file)
    'tau-bench'
    """
    p = Path(path)
    if p.is_dir():
        if (p / "results.json").exists():
            return "tau2"
        from passk_nb.importers.harbor import looks_like_harbor

        if looks_like_harbor(p, max_bytes=max_bytes):
            return "harbor"
        if any(p.rglob("*.eval")) or any(_json_kind(f, max_bytes) == "inspect" for f in p.rglob("*.json")):
            return "inspect"
        found = sorted(p.glob("*.json"))
        if found and all(_json_kind(f, max_bytes) == "tau-bench" for f in found):
            return "tau-bench"
        raise CliError(
            f"cannot tell which harness wrote the files in {p}: pass --from {'|'.join(FORMATS[1:])}"
        )
    if p.suffix == ".eval":
        return "inspect"
    if p.suffix == ".csv":
        return "csv"
    if not p.exists():
        raise CliError(f"no such file or folder: {p}")
    kind = _json_kind(p, max_bytes)
    if kind is None:
        raise CliError(f"cannot tell which harness wrote {p}: pass --from {'|'.join(FORMATS[1:])}")
    return kind


def _json_kind(path: Path, max_bytes: int) -> str | None:
    """tau-bench (a list of results), tau2 (a list of simulations), inspect (an object with an
    'eval' header and 'status'), tau2 (another object), or None when the file is not JSON."""
    raw = read_capped(path, max_bytes=max_bytes)  # a FIFO or a file over the cap: said as such
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if isinstance(data, list):
        from passk_nb.importers.tau_bench import is_tau2_simulations

        return "tau2" if is_tau2_simulations(data) else "tau-bench"
    if isinstance(data, dict):
        return "inspect" if isinstance(data.get("eval"), dict) and "status" in data else "tau2"
    return None


def read_source(args: argparse.Namespace, source: str, fmt: str) -> pd.DataFrame:
    """The records of one source in format ``fmt`` (the library importer's own checks apply)."""
    strict = not args.skip_bad_records
    if fmt in ("tau-bench", "tau2"):
        from passk_nb.importers.tau_bench import from_tau_bench

        df = from_tau_bench(
            source,
            model=args.model,
            suite=args.suite,
            missing=args.missing,
            strict=strict,
            max_bytes=args.max_bytes,
        )
    elif fmt == "inspect":
        from passk_nb.importers.inspect_ai import from_inspect

        df = from_inspect(
            source,
            scorer=args.scorer,
            threshold=args.threshold,
            model=args.model,
            strict=strict,
            max_bytes=args.max_bytes,
        )
    elif fmt == "harbor":
        from passk_nb.importers.harbor import from_harbor

        if args.errored is None:
            raise CliError(
                f"{source} is a Harbor job: say how trials without a reward count, --errored infra_error "
                "(left out of n) or --errored failure (counted as failures, as Harbor's mean reward does)"
            )
        df = from_harbor(
            source,
            errored=args.errored,
            threshold=1.0 if args.threshold is None else args.threshold,
            reward_key=args.reward_key,
            suite=args.suite,
            model=args.model,
            strict=strict,
            max_bytes=args.max_bytes,
        )
    else:
        df = _read_csv(args, source, strict)
    wanted = _PROVIDERS[fmt]
    if len(df) and (df["provider"] != wanted).any():
        found = next(f for f, name in _PROVIDERS.items() if name == df["provider"].iloc[0])
        raise CliError(
            f"{source} holds {found} results, not {fmt}: pass --from {found} (or leave --from out)"
        )
    return df


def _read_csv(args: argparse.Namespace, source: str, strict: bool) -> pd.DataFrame:
    from passk_nb.importers.frame import from_frame

    if not args.task or not args.passed:
        raise CliError("a CSV import needs --task and --passed: the columns naming the task and its success")
    mapping = {}
    for item in args.column:
        record, sep, theirs = item.partition("=")
        if not sep or record not in COLUMNS or not theirs:
            raise CliError(f"--column {item!r}: give RECORD=YOURS with RECORD one of the record columns")
        mapping[record] = theirs
    data = read_capped(source, max_bytes=args.max_bytes)
    try:
        table = pd.read_csv(io.BytesIO(data))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise CliError(f"{source} is not a readable CSV table: {exc}") from None
    df = from_frame(
        table,
        task=args.task,
        passed=args.passed,
        trial=args.trial,
        model=args.model,
        outcome=args.outcome,
        suite=args.suite or "imported",
        columns=mapping,
        strict=strict,
    )
    # one run per file and model: two tables of one model are two runs, never merged
    digest = hashlib.sha256(data).hexdigest()
    return df.assign(run_id=[content_id(["csv", digest, rid]) for rid in df["run_id"]])


def store_runs(df: pd.DataFrame, out: str | os.PathLike[str]) -> list[tuple[str, int, int]]:
    """Write each run of ``df`` under ``out``, skipping trials already stored; returns
    ``(run_id, trials written, trials already there)`` per run."""
    written = []
    for run_id, rows in df.groupby("run_id", sort=False):
        have = existing_trials(out, str(run_id))
        new = rows[[key not in have for key in zip(rows["task"], rows["trial"], strict=True)]]
        if len(new):
            table = pa.Table.from_pandas(new[list(COLUMNS)], schema=SCHEMA, preserve_index=False)
            write_part(table, out, str(run_id))
        written.append((str(run_id), len(new), len(rows) - len(new)))
    return written


@contextmanager
def _flags_of_this_command() -> Iterator[None]:
    """Library errors and warnings that name Python arguments say this command's flags instead."""

    def translate(text: str) -> str:
        for pattern, flag in _FLAGS:
            text = re.sub(pattern, flag, text)
        return text

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        except ValueError as exc:  # ImportFormatError and the importers' other checks
            raise CliError(translate(str(exc))) from None
        finally:
            for w in caught:
                warn(translate(str(w.message)))


def _cmd_import(args: argparse.Namespace) -> int:
    total = 0
    for source in args.source:
        with _flags_of_this_command():
            fmt = detect_format(source, max_bytes=args.max_bytes) if args.fmt == "auto" else args.fmt
            df = read_source(args, source, fmt)
        for run_id, new, old in store_runs(df, args.out):
            rows = df[df["run_id"] == run_id]
            what = f"{rows['provider'].iloc[0]}/{rows['model'].iloc[0]}"
            again = f" ({old} already there)" if old else ""
            status(
                args, f"{source}: {new} trials of run {run_id} ({what}, {fmt}) stored in {args.out}{again}"
            )
            total += new
    if not args.quiet:
        out = args.out
        print(f"{total} trials imported into {out}; see them with: passk runs {out}; passk report {out}")
    return 0
