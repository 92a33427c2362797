"""Trial records on disk: parquet files under a data folder.

Layout: ``<folder>/<run_id>/part-<time>-<random>.parquet``. Any parquet
reader (pandas, DuckDB, Polars, Spark) opens the folder as one dataset.

Writes are crash-safe: each part is written to a hidden temporary file and
renamed into place, so a process killed at any moment leaves only complete
files (plus, at worst, a hidden ``.tmp`` file every reader ignores). When two
files hold the same trial (a crash between compaction steps, or two processes
running the same spec at once), :func:`load` keeps one row per
``(run_id, task, trial)``.

>>> import tempfile
>>> from passk_nb.data.records import frame_from_records
>>> folder = tempfile.mkdtemp()
>>> rows = [{"run_id": "r1", "suite": "s", "task": "t", "trial": i, "passed": True, "outcome": "pass"}
...         for i in range(3)]
>>> _ = write_part(rows, folder, "r1")
>>> len(load(folder))
3
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from passk_nb.data.records import (
    COLUMNS,
    DTYPES,
    KEY,
    SCHEMA,
    empty_frame,
    frame_from_table,
    table_from_records,
)

__all__ = ["write_part", "load", "existing_trials", "compact", "part_files", "write_spec", "read_specs"]

SPEC_FILE = "_spec.json"


class StoreError(OSError):
    """Writing records failed (disk full, permissions, ...); records already written are intact."""


def _is_hidden(path: Path, root: Path) -> bool:
    return any(part.startswith((".", "_")) for part in path.relative_to(root).parts)


def part_files(folder: str | os.PathLike[str]) -> list[Path]:
    """Every record file under ``folder`` (hidden and temporary files excluded), sorted."""
    root = Path(folder)
    return sorted(p for p in root.rglob("*.parquet") if p.is_file() and not _is_hidden(p, root))


def write_part(
    records: Iterable[Mapping[str, Any]] | pa.Table, folder: str | os.PathLike[str], run_id: str
) -> Path:
    """Write records atomically as a new part file of ``run_id``; return its path."""
    table = records if isinstance(records, pa.Table) else table_from_records(records)
    run_dir = Path(folder) / run_id
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%f")
    name = f"part-{stamp}-{uuid.uuid4().hex[:8]}.parquet"
    final, tmp = run_dir / name, run_dir / f".{name}.tmp"
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            pq.write_table(table, fh, compression="zstd")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StoreError(
            f"could not write {table.num_rows} records to {run_dir}: {exc.strerror or exc}. "
            "Check free space and write permission, or pass another out= folder; "
            "records written before are intact."
        ) from exc
    return final


def write_spec(folder: str | os.PathLike[str], run_id: str, spec: Mapping[str, Any]) -> None:
    """Record the run's spec beside its parts (``<run_id>/_spec.json``, ignored by parquet readers)."""
    run_dir = Path(folder) / run_id
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        tmp = run_dir / f".{SPEC_FILE}.{uuid.uuid4().hex[:8]}.tmp"
        tmp.write_text(json.dumps(dict(spec), sort_keys=True, indent=1))
        os.replace(tmp, run_dir / SPEC_FILE)
    except OSError as exc:
        raise StoreError(
            f"could not write to {run_dir}: {exc.strerror or exc}. "
            "Check free space and write permission, or pass another out= folder"
        ) from exc


def read_specs(folder: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """``{run_id: spec}`` for every run under ``folder`` that recorded its spec."""
    specs = {}
    for path in Path(folder).glob(f"*/{SPEC_FILE}"):
        try:
            specs[path.parent.name] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # a spec is a convenience for messages; the records are the truth
    return specs


def _read(path: Path, columns: list[str] | None = None) -> pa.Table:
    file = pq.ParquetFile(path)
    table = file.read(
        columns=None if columns is None else [n for n in columns if n in file.schema_arrow.names]
    )
    names = columns or list(SCHEMA.names)
    missing = [n for n in names if n not in table.column_names]
    for n in missing:  # files from an older version: absent columns are null
        table = table.append_column(n, pa.nulls(table.num_rows, SCHEMA.field(n).type))
    return table.select(names).cast(pa.schema([SCHEMA.field(n) for n in names]))


def _read_all(files: list[Path], strict: bool, columns: list[str] | None = None) -> list[pa.Table]:
    tables = []
    for path in files:
        try:
            tables.append(_read(path, columns))
        except Exception as exc:
            message = f"cannot read record file {path}: {type(exc).__name__}: {exc}"
            if strict:
                raise ValueError(
                    message + ". Move or delete the file, or call load(..., strict=False) to skip it."
                ) from exc
            warnings.warn(message + "; skipped", RuntimeWarning, stacklevel=3)
    return tables


def load(
    path: str | os.PathLike[str], *, strict: bool = True, columns: Sequence[str] | None = None
) -> pd.DataFrame:
    """Read every trial record under ``path`` (a folder or one file) as one DataFrame.

    Rows are unique by ``(run_id, task, trial)`` and sorted by it; where a
    trial was stored twice (a resumed run retried an ``infra_error``, or two
    processes ran the same spec at once), a real outcome is kept over an infra
    error, else the first row read.

    With ``strict=True`` (the default) an unreadable file raises an error
    naming it; with ``strict=False`` it is skipped with a warning and every
    other file still loads.

    ``columns`` reads only those columns (in that order), so an analysis never loads the
    transcripts: ``load(folder, columns=["model", "task", "passed", "outcome"])``.

    >>> load("no/such/folder")
    Traceback (most recent call last):
    ...
    FileNotFoundError: no records at 'no/such/folder': run `passk run --out no/such/folder` first, ...
    """
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(
            f"no records at {str(path)!r}: run `passk run --out {path}` first, or check the path"
        )
    wanted = list(COLUMNS) if columns is None else list(columns)
    unknown = [c for c in wanted if c not in COLUMNS]
    if unknown or isinstance(columns, str) or len(set(wanted)) < len(wanted):
        raise ValueError(
            f"columns must be a list of distinct record columns {list(COLUMNS)}; got {columns!r}"
        )
    read = list(dict.fromkeys([*wanted, *KEY, "outcome"]))  # what deduplication needs
    files = [root] if root.is_file() else part_files(root)
    tables = _read_all(files, strict, None if columns is None else read)
    if not tables:
        return empty_frame()[wanted]
    table = pa.concat_tables(tables)
    frame = (
        frame_from_table(table) if columns is None else table.to_pandas().astype({c: DTYPES[c] for c in read})
    )
    # One row per trial: a real outcome beats an infra error that a resumed run retried.
    frame = frame.assign(_infra=frame["outcome"] == "infra_error")
    frame = frame.sort_values([*KEY, "_infra"], kind="stable").drop_duplicates(subset=list(KEY), keep="first")
    return frame[wanted].reset_index(drop=True)


def existing_trials(folder: str | os.PathLike[str], run_id: str) -> set[tuple[str, int]]:
    """``(task, trial)`` pairs stored for ``run_id`` under ``folder`` with a real outcome.

    Trials that ended in ``infra_error`` are not counted: resuming runs them
    again, and :func:`load` then prefers the new row.
    """
    run_dir = Path(folder) / run_id
    if not run_dir.is_dir():
        return set()
    tables = _read_all(part_files(run_dir), strict=True, columns=["task", "trial", "outcome"])
    return {
        (task, int(trial))
        for table in tables
        for task, trial, outcome in zip(*table.to_pydict().values(), strict=True)
        if outcome != "infra_error"
    }


def compact(files: list[Path], folder: str | os.PathLike[str], run_id: str) -> Path | None:
    """Merge ``files`` (parts of ``run_id``) into one new part, then delete them.

    Crash-safe: the merged file is complete before any part is removed, and
    :func:`load` drops the duplicate rows if a crash leaves both.
    """
    if len(files) < 2:
        return files[0] if files else None
    merged = write_part(pa.concat_tables([_read(f) for f in files]), folder, run_id)
    for f in files:
        f.unlink(missing_ok=True)
    return merged
