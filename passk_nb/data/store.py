"""Trial records on disk: parquet files under a data folder.

Layout: ``<folder>/<run_id>/part-<time>-<random>.parquet``. Any parquet
reader (pandas, DuckDB, Polars, Spark) opens the folder as one dataset.

Writes are crash-safe: each part is written to a hidden temporary file and
renamed into place, so a process killed at any moment leaves only complete
files (plus, at worst, a hidden ``.tmp`` file every reader ignores). Writers
claim each trial first (:class:`~passk_nb.data.trial_claims.TrialClaims`), and :func:`merge` leaves one row
per trial. Two files can hold the same trial only while a resume retries an
``infra_error`` (until its merge) or after a merge was killed (until the next
merge); :func:`load` keeps one row per ``(run_id, task, trial)`` in every case
(rows of one trial that are no copies of each other are refused, never dropped), and reads
a consistent set: a file that vanishes while being read, or a merge logged while the folder
was listed, makes it list the folder again, never skip.

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

import contextlib
import datetime as dt
import itertools
import json
import os
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from passk_nb.data.ids import IDENTITY_COLUMNS
from passk_nb.data.records import (
    COLUMNS,
    DEFAULTS,
    DTYPES,
    KEY,
    NOT_NULL,
    REQUIRED,
    SCHEMA,
    empty_frame,
    frame_from_table,
    outcome_problems,
    table_from_records,
)

__all__ = [
    "write_part",
    "load",
    "existing_trials",
    "merge",
    "part_files",
    "read_consistent",
    "write_spec",
    "read_specs",
    "append_line",
    "locked_file",
    "StoreError",
]

SPEC_FILE = "_spec.json"
T = TypeVar("T")


class StoreError(OSError):
    """Writing records failed (disk full, permissions, ...); records already written are intact."""


def _is_hidden(path: Path, root: Path) -> bool:
    return any(part.startswith((".", "_")) for part in path.relative_to(root).parts)


def part_files(folder: str | os.PathLike[str]) -> list[Path]:
    """Every record file under ``folder`` (hidden and temporary files excluded), sorted."""
    return _scan(Path(folder))[0]


def _scan(root: Path) -> tuple[list[Path], dict[Path, int]]:
    """One walk of ``root``: its record files, sorted, and the size of each run's :data:`WRITTEN_LOG`.

    Entries are typed from the directory listing itself (no ``stat`` per file), so a file merged
    away while the folder is walked is still listed, and reading it then says it vanished."""
    parts: list[Path] = []
    logs: dict[Path, int] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "_"))]
        here = Path(dirpath)
        parts.extend(here / f for f in filenames if f.endswith(".parquet") and not f.startswith((".", "_")))
        if WRITTEN_LOG in filenames:
            with contextlib.suppress(FileNotFoundError):
                logs[here] = os.stat(here / WRITTEN_LOG).st_size
    return sorted(parts), logs


#: Every part written to a run folder appends one byte to this file, after the part is in place:
#: a reader that saw its size unchanged knows no part was added meanwhile (:class:`StoredTrials`).
#: A part written by :func:`merge` appends :data:`MERGED` instead: its inputs are deleted next.
WRITTEN_LOG = "_written.log"
WRITTEN, MERGED = b".", b"m"


def part_name() -> str:
    """A new part file's name: ``part-<UTC time>-<random>.parquet`` (sorts by time of writing)."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%f")
    return f"part-{stamp}-{uuid.uuid4().hex[:8]}.parquet"


def write_part(
    records: Iterable[Mapping[str, Any]] | pa.Table,
    folder: str | os.PathLike[str],
    run_id: str,
    name: str | None = None,
    *,
    merged: bool = False,
) -> Path:
    """Write records atomically as a new part file of ``run_id``; return its path.

    ``name`` (default: a new :func:`part_name`) is the file's name in ``<folder>/<run_id>/``;
    ``merged``: the part replaces others (:func:`merge`), which readers must know (:func:`load`).
    """
    table = records if isinstance(records, pa.Table) else table_from_records(records)
    run_dir = Path(folder) / run_id
    name = name or part_name()
    final, tmp = run_dir / name, run_dir / f".{name}.tmp"
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            pq.write_table(table, fh, compression="zstd")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
        with open(run_dir / WRITTEN_LOG, "ab") as log:
            log.write(MERGED if merged else WRITTEN)
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


class _Vanished(Exception):
    """A file listed a moment ago is gone: another process merged it. Re-list, never skip."""


#: How often a reader re-lists a folder whose files vanish under it (a merge elsewhere) before giving up.
RELIST_ATTEMPTS = 50


def _read(path: Path, columns: list[str] | None = None) -> pa.Table:
    """One record file's table as it is stored (``columns`` only, those it has), unchecked: one
    open of the file for its schema and its rows. :func:`_read_checked` is what every reader uses."""
    try:
        with pq.ParquetFile(path) as file:
            names = file.schema_arrow.names
            return file.read(columns=None if columns is None else [c for c in columns if c in names])
    except FileNotFoundError:
        raise _Vanished(path) from None


def _read_checked(path: Path, columns: list[str] | None = None) -> pa.Table:
    """One record file as a table with the standard schema (``columns`` only), or an error naming it.

    Columns an older version did not write get their default (or null); a file
    without the required columns (not a record file: a saved summary, another
    tool's data) or with nulls where every record has a value is refused.
    """
    return _standard(_read(path, columns), path.parent, columns)


def _standard(table: pa.Table, run_dir: Path, columns: list[str] | None = None) -> pa.Table:
    """Stored records of ``run_dir`` in the standard schema (:func:`_checked`), the suite version
    filled in where an older version left it blank (:func:`_with_suite_hash`)."""
    return _with_suite_hash(_checked(table, columns), run_dir)


def _with_suite_hash(table: pa.Table, run_dir: Path) -> pa.Table:
    """Records an older version wrote without ``suite_hash`` get the suite fingerprint their run's
    ``_spec.json`` recorded (part of the run's identity, so every record of the run was made under
    it): a run resumed across that version stays one suite version, never two."""
    if "suite_hash" not in table.column_names:
        return table
    column = table.column("suite_hash")
    blank = pc.equal(column, "")
    if not pc.any(blank).as_py():
        return table
    try:
        fingerprint = json.loads((run_dir / SPEC_FILE).read_text()).get("suite_fingerprint")
    except (OSError, ValueError, AttributeError):
        return table  # no spec (an imported table, a copied file): the version stays unknown
    if not isinstance(fingerprint, str) or not fingerprint:
        return table
    filled = pc.if_else(blank, fingerprint, column)
    return table.set_column(table.column_names.index("suite_hash"), "suite_hash", filled)


def _checked(table: pa.Table, columns: list[str] | None = None) -> pa.Table:
    """A table of records as :func:`_read` returns it: the standard schema (``columns`` only), or an
    error saying what makes it no trial record file."""
    names = columns or list(SCHEMA.names)
    absent_required = [n for n in REQUIRED if n in names and n not in table.column_names]
    if absent_required:
        raise ValueError(f"not a trial record file: it lacks the columns {absent_required}")
    for n in names:
        if n not in table.column_names:  # files from an older version: absent columns get their default
            default = DEFAULTS.get(n)
            column = pa.nulls(table.num_rows, SCHEMA.field(n).type)
            if default is not None:
                column = pa.array([default] * table.num_rows, type=SCHEMA.field(n).type)
            table = table.append_column(n, column)
    table = table.select(names).cast(pa.schema([SCHEMA.field(n) for n in names]))
    holes = [n for n in names if (n in NOT_NULL or n in REQUIRED) and table.column(n).null_count]
    if holes:
        raise ValueError(f"missing values in columns {holes}, which every trial record fills")
    if "passed" in names and "outcome" in names:
        problem = outcome_problems(table.column("passed"), table.column("outcome"))
        if problem:
            raise ValueError(f"records that passk never writes: {problem}; OUTCOMES lists the outcomes")
    return table


def _read_all(files: list[Path], strict: bool, columns: list[str] | None = None) -> list[pa.Table]:
    """Every file of ``files`` in the standard schema, in their order (each file's rows in one table).

    Consecutive files of one run folder stored with one schema (a run's parts) are checked as one
    table, which costs what checking one file does; only a group that fails is checked file by
    file, so the error (``strict``) or the warning naming a file that is no record file is the
    same as when every file is checked on its own."""
    stored: list[tuple[Path, pa.Table]] = []
    for path in files:
        try:
            stored.append((path, _read(path, columns)))
        except _Vanished:
            raise
        except Exception as exc:
            _unreadable(path, exc, strict)
    tables = []
    for (run_dir, _), run in itertools.groupby(stored, key=lambda item: (item[0].parent, item[1].schema)):
        group = list(run)
        try:
            tables.append(_standard(pa.concat_tables([table for _, table in group]), run_dir, columns))
        except Exception:
            for path, table in group:
                try:
                    tables.append(_standard(table, run_dir, columns))
                except Exception as exc:
                    _unreadable(path, exc, strict)
    return tables


def _unreadable(path: Path, exc: Exception, strict: bool) -> None:
    """Refuse (``strict``) or skip with a warning a file that is no trial record file, naming it."""
    message = f"cannot read record file {path}: {type(exc).__name__}: {str(exc).rstrip('. ')}"
    if strict:
        raise ValueError(
            message + ". Move the file out of the folder, or call load(..., strict=False) "
            "(passk report --skip-bad-files) to skip it."
        ) from exc
    warnings.warn(message + "; skipped", RuntimeWarning, stacklevel=5)


def _read_folder(root: Path, strict: bool, columns: list[str] | None = None) -> list[pa.Table]:
    """Every record file under ``root``, as one consistent set (:func:`read_consistent`)."""
    if root.is_file():
        return _read_all([root], strict, columns)
    return read_consistent(root, lambda files: _read_all(files, strict, columns))


def read_consistent(root: str | os.PathLike[str], read: Callable[[list[Path]], T]) -> T:
    """``read(files)`` of the record files under ``root``, done again until nothing merged meanwhile.

    A merge writes its part (logging :data:`MERGED`) before it deletes the inputs. So a read is
    complete when no file it listed vanished, and no run logged a merge between the moment before
    the listing and the moment after a second listing, nor lost a file a listing had (a folder
    without a log: copied, or older). Parts added by running writers meanwhile do not make a read
    stale: they are newer than it. A listing that missed both a merged part and its deleted inputs
    would otherwise lose their rows without an error. ``read`` raises :class:`FileNotFoundError`
    (or ``_Vanished``) for a listed file that is gone.
    """
    root = Path(root)
    logs = _scan(root)[1]  # the logs' sizes before the listing (each walk reads a log after its folder)
    for _ in range(RELIST_ATTEMPTS):
        files, _ = _scan(root)
        try:
            result = read(files)
        except (_Vanished, FileNotFoundError):
            complete = False
        else:
            complete = True
        after, logs_after = _scan(root)
        if complete and not _merged_since(logs, files) and set(files) <= set(after):
            return result
        logs = logs_after
        time.sleep(0.01)
    raise StoreError(
        f"record files under {root} kept being merged while being read ({RELIST_ATTEMPTS} listings): "
        "another process is merging them; try again"
    )


def _merged_since(logs: Mapping[Path, int], files: Iterable[Path]) -> bool:
    """Whether a run logged a merge past the size its log had before the listing (from the start,
    for a run folder that had no log then)."""
    for run_dir in {*logs, *(f.parent for f in files)}:
        try:
            with open(run_dir / WRITTEN_LOG, "rb") as fh:
                fh.seek(logs.get(run_dir, 0))
                if MERGED in fh.read():
                    return True
        except FileNotFoundError:
            if run_dir in logs:
                return True
    return False


#: What two stored rows of one trial must agree on to be the same trial stored twice.
SAME_TRIAL: tuple[str, ...] = (*IDENTITY_COLUMNS, "outcome")


def _one_row_per_trial(table: pa.Table, where: str) -> pa.Table:
    """Keep one row per ``(run_id, task, trial)``: a real outcome over an infra error, else the first;
    sorted by that key (the table itself when it holds each trial once, in that order already).

    Rows of one trial with real outcomes are copies of one trial (a merge killed half way) only
    when they agree on :data:`SAME_TRIAL`; otherwise they are different trials under one run id,
    and keeping one would drop the others without a word: refused, naming them (``where``: the
    folder, for the message)."""
    n = table.num_rows
    if n == 0 or _in_key_order(table):  # a merged run, or runs read in key order: nothing to sort
        return table
    infra = pc.equal(table.column("outcome"), "infra_error")
    # stable: rows of one trial keep the order they were read in, a real outcome before an infra error
    order = pc.sort_indices(
        table.select(list(KEY)).append_column("_infra", infra),
        sort_keys=[(c, "ascending") for c in (*KEY, "_infra")],
    )
    _, same = _adjacent(table.select(list(KEY)).take(order))  # each sorted row's key is the one before's
    first = np.concatenate([[True], ~same])
    group = np.cumsum(first) - 1
    repeated = (np.bincount(group)[group] > 1) & ~infra.take(order).to_numpy(zero_copy_only=False)
    if repeated.sum() > 1:
        compared = [c for c in SAME_TRIAL if c in table.column_names]
        rows = table.take(np.sort(order.to_numpy()[repeated]))
        keyed = rows.select(list(KEY)).to_pandas()
        problem = repeated_trials_problem(pd.concat([keyed, rows.select(compared).to_pandas()], axis=1))
        if problem:
            raise ValueError(f"{where}: {problem}")
    return table.take(order.to_numpy()[first])  # not in key order (else returned above): moved


def _in_key_order(table: pa.Table) -> bool:
    """Whether each row's ``(run_id, task, trial)`` is above the row's before it: sorted by the key,
    every trial once (one pass over the key, where sorting it would take several)."""
    return bool(_adjacent(table)[0].all())


def _adjacent(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """For each row after the first, whether its ``(run_id, task, trial)`` is above the previous
    row's, and whether it is the same."""
    n = table.num_rows
    above, same = np.zeros(n - 1, dtype=bool), np.ones(n - 1, dtype=bool)
    for column in KEY:
        values = table.column(column)
        after, before = values.slice(1), values.slice(0, n - 1)
        above |= same & pc.greater(after, before).to_numpy(zero_copy_only=False)
        same &= pc.equal(after, before).to_numpy(zero_copy_only=False)
    return above, same


def repeated_trials_problem(rows: pd.DataFrame, n: int | None = None) -> str | None:
    """What is wrong when ``rows`` (real outcomes: :data:`~passk_nb.data.records.KEY` and some of
    :data:`SAME_TRIAL`) hold one trial twice with different values; None when every repeat is a
    copy (``n``: how many trials clash, when ``rows`` hold only some). Shared by :func:`load` and
    the counting of a folder without loading it.

    >>> rows = pd.DataFrame({"run_id": "r", "task": "t", "trial": 0, "prompt_name": ["a", "b"]})
    >>> print(repeated_trials_problem(rows))  # doctest: +ELLIPSIS
    1 trial is stored more than once with different prompt_name (e.g. run r, task 't', trial 0: ...
    >>> repeated_trials_problem(pd.concat([rows.iloc[:1]] * 2)) is None
    True
    """
    compared = [c for c in rows.columns if c not in KEY]
    distinct = rows.astype({c: str for c in compared}).drop_duplicates()
    clash = distinct[distinct.duplicated(list(KEY), keep=False)]
    if clash.empty:
        return None
    first = clash[(clash[list(KEY)] == clash[list(KEY)].iloc[0]).all(axis=1)]
    differing = [c for c in compared if first[c].nunique() > 1]
    n = int(clash[list(KEY)].drop_duplicates().shape[0]) if n is None else n
    run, task, trial = first[list(KEY)].iloc[0]
    shown = "; ".join(f"{c} " + " / ".join(map(repr, pd.unique(first[c]))) for c in differing)
    return (
        f"{n} trial{' is' if n == 1 else 's are'} stored more than once with different "
        f"{', '.join(differing)} (e.g. run {run}, task {task!r}, trial {trial}: {shown}): different "
        "configurations or results under one run id, and keeping one row would drop the others. Give "
        "each configuration its own run_id (from_frame and `passk import` put every mapped identity "
        "column in it: import the table again into a new folder), or remove the extra rows"
    )


def load(
    path: str | os.PathLike[str], *, strict: bool = True, columns: Sequence[str] | None = None
) -> pd.DataFrame:
    """Read every trial record under ``path`` (a folder or one file) as one DataFrame.

    ``columns`` reads only those columns (in that order), so an analysis never loads the
    transcripts: ``load(folder, columns=["model", "task", "passed", "outcome"])``.

    Rows are unique by ``(run_id, task, trial)`` and sorted by it; where a
    trial was stored twice (a resumed run retried an ``infra_error``, or a run
    was killed in the middle of its final merge), a real outcome is kept over
    an infra error, else the first row read. No row is dropped that is not such
    a copy: rows of one ``(run_id, task, trial)`` with real outcomes that differ in
    an identity column or the outcome (two configurations under one run id) are
    refused with a ``ValueError`` naming them.

    With ``strict=True`` (the default) a file that is not readable as trial
    records raises an error naming it; with ``strict=False`` it is skipped
    with a warning naming it and every other file still loads. A file that
    another process merges away while it is being read is never skipped: the
    folder is listed again.

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
    read = None if columns is None else list(dict.fromkeys([*wanted, *KEY, *SAME_TRIAL]))  # what dedup needs
    tables = _read_folder(root, strict, read)
    if not tables:
        return empty_frame()[wanted]
    table = _one_row_per_trial(pa.concat_tables(tables), f"records under {str(path)!r}")  # sorted by key
    if read is None:
        return _frame(table)
    return table.to_pandas().astype({c: DTYPES[c] for c in read})[wanted]


def existing_trials(folder: str | os.PathLike[str], run_id: str) -> set[tuple[str, int]]:
    """``(task, trial)`` pairs stored for ``run_id`` under ``folder`` with a real outcome.

    Trials that ended in ``infra_error`` are not counted: resuming runs them
    again, and :func:`load` then prefers the new row.
    """
    run_dir = Path(folder) / run_id
    if not run_dir.is_dir():
        return set()
    tables = _read_folder(run_dir, strict=True, columns=["task", "trial", "outcome"])
    return {
        (task, int(trial))
        for table in tables
        for task, trial, outcome in zip(*table.to_pydict().values(), strict=True)
        if outcome != "infra_error"
    }


class StoredTrials:
    """The trials of ``run_id`` already stored with a real outcome, kept up to date cheaply.

    :meth:`has` looks at the size of the run's ``_written.log`` (one byte per part any process
    wrote, appended once the part is in place): only when it grew since the last look does it
    list the run's parts (one directory, no recursion) and read the key columns of the files it
    has not seen (a merged part included). Asking again costs one ``stat``, and no lock: the
    trials' threads ask once each. Parts written through :meth:`write_part` are never read back.
    """

    def __init__(self, folder: str | os.PathLike[str], run_id: str):
        self.run_dir = Path(folder) / run_id
        self._files: dict[Path, frozenset[tuple[str, int]]] = {}
        self._writing: set[Path] = set()  # parts this object is writing: a listing skips them
        self._keys: set[tuple[str, int]] = set()  # the union of _files' keys, grown in place
        self._size: int | None = None  # the log's size when the parts were last listed
        self._lock = threading.Lock()

    def has(self, key: tuple[str, int]) -> bool:
        """Whether ``(task, trial)`` is stored with a real outcome, as of now."""
        if self._log_size() != self._size:
            with self._lock:
                self._refresh()
        return key in self._keys

    def stored_among(self, keys: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
        """Those of ``keys`` stored with a real outcome, as of now: :meth:`has` of each, at the
        cost of one look at the log for all of them."""
        if self._log_size() != self._size:
            with self._lock:
                self._refresh()
        return [key for key in keys if key in self._keys]

    def write_part(self, records: Sequence[Mapping[str, Any]], table: pa.Table | None = None) -> Path:
        """Write a part of this run (:func:`write_part`; ``table``: the records already as one, by
        :func:`~passk_nb.data.records.table_from_records`) and take its keys from ``records``, so it
        is never read back; :meth:`has` answers meanwhile from what it knew."""
        keys = frozenset((r["task"], int(r["trial"])) for r in records if r.get("outcome") != "infra_error")
        path = self.run_dir / part_name()
        with self._lock:
            self._writing.add(path)
        try:
            write_part(
                records if table is None else table, self.run_dir.parent, self.run_dir.name, name=path.name
            )
            with self._lock:
                self._files[path] = keys
                self._keys |= keys
        finally:
            with self._lock:
                self._writing.discard(path)
        return path

    def _log_size(self) -> int:
        try:
            return os.stat(self.run_dir / WRITTEN_LOG).st_size
        except FileNotFoundError:
            return -1

    def _listing(self) -> list[Path]:
        try:
            with os.scandir(self.run_dir) as entries:
                names = [e.name for e in entries if e.name.endswith(".parquet") and e.name[0] not in "._"]
        except FileNotFoundError:
            return []
        return [self.run_dir / name for name in sorted(names)]

    def _refresh(self) -> None:
        """List and read the new parts; the caller holds the lock."""
        size = self._log_size()  # before listing: a part added after the listing grows it again
        if size == self._size:
            return  # another thread listed meanwhile
        for _ in range(RELIST_ATTEMPTS):
            files = self._listing()
            try:
                for f in files:
                    if f not in self._files and f not in self._writing:
                        t = _read_checked(f, ["task", "trial", "outcome"]).to_pydict()
                        self._files[f] = keys = frozenset(
                            (task, int(trial))
                            for task, trial, outcome in zip(t["task"], t["trial"], t["outcome"], strict=True)
                            if outcome != "infra_error"
                        )
                        self._keys |= keys
            except _Vanished:
                continue
            current = set(files)
            if any(f not in current for f in self._files):  # merged or deleted: count what is left
                self._files = {f: keys for f, keys in self._files.items() if f in current}
                self._keys = set().union(*self._files.values())
            self._size = size
            return
        raise StoreError(f"record files under {self.run_dir} kept vanishing while being listed")


#: Parts at least this large are left alone by :func:`merge` unless they hold a trial twice.
MERGE_BELOW_BYTES = 64 * 2**20


def _delete_parts(files: list[Path]) -> None:
    for f in files:
        f.unlink(missing_ok=True)


def merge(folder: str | os.PathLike[str], run_id: str) -> Path | None:
    """Merge the small parts of ``run_id`` into one, with exactly one row per trial; return it.

    Every part smaller than :data:`MERGE_BELOW_BYTES`, and every part that
    shares a trial with another part (an ``infra_error`` a resume retried, the
    leftovers of a merge that was killed), is read, reduced to one row per
    ``(run_id, task, trial)`` as :func:`load` does, written as one new part,
    and then deleted. One process merges a run at a time (a lock file beside
    the parts); the parts of writers still running are merged too, which is
    safe: a writer never rewrites a part. Crash-safe: the merged part is
    complete before any input is deleted; a crash between the two leaves each
    trial twice until the next merge, and :func:`load` keeps one.

    After a merge, and until another process adds parts, every parquet reader
    sees exactly one row per trial. Returns None when nothing needed merging.
    """
    return merge_known(folder, run_id)[0]


def merge_known(
    folder: str | os.PathLike[str], run_id: str, known: Mapping[Path, pa.Table] | None = None
) -> tuple[Path | None, pa.Table | None]:
    """:func:`merge`, taking the parts in ``known`` (path -> the table written there) from memory
    instead of reading them back; also returns what the part it returns holds, as :func:`load`
    reads it (None when it returns no part)."""
    run_dir = Path(folder) / run_id
    if not run_dir.is_dir():
        return None, None
    with _merge_lock(run_dir):
        for _ in range(RELIST_ATTEMPTS):
            try:
                return _merge_locked(folder, run_id, run_dir, known or {})
            except _Vanished:
                time.sleep(0.01)
    raise StoreError(f"parts of {run_dir} kept vanishing while being merged; is an older passk merging them?")


def _merge_locked(
    folder: str | os.PathLike[str], run_id: str, run_dir: Path, known: Mapping[Path, pa.Table]
) -> tuple[Path | None, pa.Table | None]:
    files = part_files(run_dir)
    try:
        small = [f for f in files if f.stat().st_size < MERGE_BELOW_BYTES]
    except FileNotFoundError as exc:
        raise _Vanished(exc.filename) from None
    # merged whatever they hold: read once, whole (or taken as written, when this process wrote them:
    # checked as one table, as a check's cost is mostly per table and column)
    mine = [f for f in small if f in known]
    checked = _checked(pa.concat_tables([known[f] for f in mine])) if mine else None
    read = {f: _read_checked(f) for f in small if f not in known}
    if checked is not None:
        offsets = itertools.accumulate((known[f].num_rows for f in mine), initial=0)
        read.update({f: checked.slice(at, known[f].num_rows) for f, at in zip(mine, offsets, strict=False)})
    big = {f: _read_checked(f, ["task", "trial"]) for f in files if f not in read}  # merged if they must be
    seen: dict[tuple[str, int], int] = {}
    for table in [*read.values(), *big.values()] if big or len(read) < 2 else []:  # else all merged
        for key in zip(table.column("task").to_pylist(), table.column("trial").to_pylist(), strict=True):
            seen[key] = seen.get(key, 0) + 1
    doubled = {k for k, n in seen.items() if n > 1}
    for f, keys in big.items():
        t = keys.to_pydict()
        if any(k in doubled for k in zip(t["task"], t["trial"], strict=True)):
            read[f] = _read_checked(f)
    inputs = [f for f in files if f in read]
    if len(inputs) < 2 and not doubled:
        return (inputs[0], read[inputs[0]]) if inputs else (None, None)
    table = _one_row_per_trial(pa.concat_tables([read[f] for f in inputs]), f"records of run {run_dir}")
    merged = write_part(table, folder, run_id, merged=True)
    _delete_parts(inputs)
    return merged, table


def load_merged(run_dir: str | os.PathLike[str], part: Path, table: pa.Table) -> pd.DataFrame | None:
    """What :func:`load` of ``run_dir`` returns, from ``table`` (what its part ``part`` holds, as
    :func:`merge_known` returned it) when ``part`` is the folder's only record file; else None."""
    if part_files(run_dir) != [part]:
        return None
    return _frame(_one_row_per_trial(table, f"records of run {run_dir}"))


def _frame(table: pa.Table) -> pd.DataFrame:
    """Records with one row per trial, sorted by key (:func:`_one_row_per_trial`), as :func:`load`
    returns them: standard dtypes."""
    return frame_from_table(table)


@contextlib.contextmanager
def _merge_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``<run_dir>/_merge.lock`` exclusively (released by the system if the process dies)."""
    with locked_file(run_dir / "_merge.lock"):
        yield


def append_line(path: Path, line: bytes) -> None:
    """Append one line (``line`` without its newline) to the journal ``path``, under the file's
    lock, on disk before it returns. A line a writer killed mid-write left is cut first (with the
    lock held no live writer is mid-line), so every line of the journal is one whole entry."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked_file(path) as f:
        end = pos = f.seek(0, os.SEEK_END)
        while pos > 0:
            step = min(pos, 1 << 16)
            f.seek(pos - step)
            newline = f.read(step).rfind(b"\n")
            if newline >= 0:
                pos += newline + 1 - step
                break
            pos -= step
        if pos < end:
            f.truncate(pos)
        f.write(line + b"\n")
        f.flush()
        os.fsync(f.fileno())


@contextlib.contextmanager
def locked_file(path: Path) -> Iterator[BinaryIO]:
    """``path`` opened for appending and reading (created if missing), held exclusively while the
    block runs: one process at a time, the lock released by the system if the process dies.
    Windows has no lock: the writers of one file must then not overlap."""
    with open(path, "a+b") as fh:
        try:
            import fcntl
        except ImportError:
            yield fh
            return
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield fh
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
