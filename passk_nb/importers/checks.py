"""What every importer shares to read foreign files safely: one error type, capped reads of
regular files only, and field conversion that never turns a parse problem into a trial outcome.

- :class:`ImportFormatError` (a ``ValueError``): the file, the record and the field that could
  not be read, and what was found. Every importer raises it for bad input, whatever the cause
  (a wrong type, a missing key, nesting too deep, a value out of range).
- :func:`read_capped`: the bytes of a regular file, at most ``max_bytes`` (a FIFO, a device or a
  symlink to one is refused before it is read, a file over the cap is refused unread).
- :class:`RowReader`: builds one record per row of the source, converting each field to its
  record type (``"1.5"`` and ``"1.5s"`` as seconds, ISO text as a time, a number as text) and
  refusing what cannot be converted, naming the row and the field. ``strict=False`` skips such
  rows instead and warns with their count, so a row is never stored as an ``infra_error`` because
  its file was malformed.

>>> reader = RowReader("results.json", strict=True)
>>> reader.read("entry 0", dict, {"latency_s": "1.5s", "trial": 0})["latency_s"]
1.5
>>> reader.read("entry 1", dict, {"latency_s": "slow", "trial": 0})
Traceback (most recent call last):
passk_nb.importers.checks.ImportFormatError: results.json, entry 1: latency_s holds 'slow', not a duration ...
"""

from __future__ import annotations

import datetime as dt
import io
import json
import math
import os
import stat
import struct
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from passk_nb.data.records import SCHEMA

__all__ = [
    "MAX_BYTES",
    "ImportFormatError",
    "FieldError",
    "RowReader",
    "read_zip",
    "load_json",
    "read_capped",
]

#: Default cap on one imported file, on disk and expanded (a zip's members together): 256 MiB.
MAX_BYTES = 256 * 2**20
#: Exceptions that malformed input raises inside an importer's own code (a list where an object
#: was expected, a missing key, nesting too deep for Python's parsers); each becomes an
#: :class:`ImportFormatError` naming where it happened.
MALFORMED = (TypeError, AttributeError, KeyError, IndexError, ValueError, OverflowError, RecursionError)
_INT64 = (-(2**63), 2**63 - 1)
_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


class ImportFormatError(ValueError):
    """A foreign result (file, log or table) holds something that cannot be read as trial records.

    The message names the file, the record (entry, simulation, sample or row) and the field,
    shows what was found and says how to fix it.
    """


class FieldError(ValueError):
    """One field of one record cannot be converted; :class:`RowReader` adds the file and row."""

    def __init__(self, field: str, value: Any, why: str):
        self.field, self.value, self.why = field, value, why
        super().__init__(f"{field} holds {shown(value)}, {why}")

    def named(self, field: str) -> str:
        """The message with the field called ``field`` instead."""
        return f"{field} holds {shown(self.value)}, {self.why}"


def shown(value: Any) -> str:
    """``repr(value)`` cut to 60 characters, for messages (never the whole of a huge value)."""
    text = repr(value) if not isinstance(value, Mapping | list | tuple) else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def read_capped(path: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file ``path``, refusing other files and files over ``max_bytes``.

    The file is opened without blocking and checked before anything is read, so a FIFO never
    hangs the import and a symlink to ``/dev/zero`` is never read.

    >>> read_capped("/dev/zero")
    Traceback (most recent call last):
    passk_nb.importers.checks.ImportFormatError: /dev/zero is a character device, not a regular file: ...
    """
    name = os.fspath(path)
    fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        _check_regular(name, info.st_mode)
        _check_size(name, info.st_size, max_bytes)
        chunks, size = [], 0
        while size <= max_bytes and (chunk := os.read(fd, min(2**20, max_bytes + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    _check_size(name, size, max_bytes)  # the file grew while it was read
    return b"".join(chunks)


def check_regular(path: str | os.PathLike[str]) -> None:
    """Refuse ``path`` unless it is a regular file (symlinks followed), without opening it."""
    name = os.fspath(path)
    _check_regular(name, os.stat(name).st_mode)


def _check_regular(name: str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise ImportFormatError(
            f"{name} is {kind}, not a regular file: only regular files are imported; "
            "copy the results into a file, or remove it from the folder"
        )


def _check_size(name: str, size: int, max_bytes: int, what: str = "") -> None:
    if size > max_bytes:
        raise ImportFormatError(
            f"{name}{what} is {size:,} bytes, over the import limit of {max_bytes:,} bytes; "
            "if the file is genuine, raise the limit with max_bytes="
        )


#: Bytes expanded per step when a zip member is checked (:func:`read_zip`).
_STEP = 2**20
#: Zip compression methods read: stored, deflate, zstandard (inspect_ai's .eval logs).
_STORED, _DEFLATED, _ZSTD = 0, 8, 93


def read_zip(path: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES) -> io.BytesIO:
    """A zip file (an inspect ``.eval`` log) re-packed uncompressed in memory, refused when it is
    over ``max_bytes`` on disk or expanded.

    Each member is expanded in 1 MiB steps (never more at once, whatever the compression ratio)
    and must end at exactly its declared size with a matching checksum, so a member whose header
    understates its size (a zip bomb) is refused after at most its declared size; readers of the
    copy then never expand anything.
    """
    name = os.fspath(path)
    data = read_capped(name, max_bytes=max_bytes)
    out = io.BytesIO()
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
        _check_size(name, sum(m.file_size for m in members), max_bytes, " expanded")
        with warnings.catch_warnings(), zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as copy:
            warnings.simplefilter("ignore", UserWarning)  # a re-logged sample repeats a name
            for member in members:
                size, crc = 0, 0
                with copy.open(member.filename, "w", force_zip64=True) as dest:
                    for chunk in _expand(_raw_member(data, member), member):
                        size += len(chunk)
                        if size > member.file_size:
                            break
                        crc = zlib.crc32(chunk, crc)
                        dest.write(chunk)
                if size != member.file_size or crc != member.CRC:
                    raise zipfile.BadZipFile(
                        f"member {member.filename!r} does not expand to the {member.file_size:,} bytes "
                        "its header says (a zip bomb, or a damaged file)"
                    )
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, struct.error) as exc:
        raise ImportFormatError(f"{name} is not a readable .eval log (a zip file): {exc}") from None
    out.seek(0)
    return out


def _raw_member(data: bytes, member: zipfile.ZipInfo) -> memoryview:
    """The compressed bytes of ``member`` (after its local header)."""
    offset = member.header_offset
    if data[offset : offset + 4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"member {member.filename!r} has no local header")
    name_len, extra_len = struct.unpack_from("<HH", data, offset + 26)
    start = offset + 30 + name_len + extra_len
    return memoryview(data)[start : start + member.compress_size]


def _expand(raw: memoryview, member: zipfile.ZipInfo) -> Iterator[bytes]:
    """The expanded bytes of a member, at most :data:`_STEP` at a time."""
    if member.compress_type == _STORED:
        for at in range(0, len(raw), _STEP):
            yield bytes(raw[at : at + _STEP])
    elif member.compress_type == _DEFLATED:
        inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        pending: bytes | memoryview = raw
        while chunk := inflate.decompress(pending, _STEP):
            pending = inflate.unconsumed_tail
            yield chunk
    elif member.compress_type == _ZSTD:
        try:
            import zstandard  # comes with inspect_ai, which writes zstd .eval logs
        except ImportError:
            raise zipfile.BadZipFile(
                f"member {member.filename!r} is zstandard-compressed: "
                "pip install 'passk-nb[inspect]' to read it"
            ) from None

        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw), read_across_frames=True) as reader:
            while chunk := reader.read(_STEP):
                yield chunk
    else:
        raise zipfile.BadZipFile(
            f"member {member.filename!r} uses compression method {member.compress_type}, which is not read"
        )


def load_json(path: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES) -> Any:
    """The JSON value in the regular file ``path`` (capped as :func:`read_capped`), or an
    :class:`ImportFormatError` naming the file when it is not JSON or nests too deep."""
    name = os.fspath(path)
    data = read_capped(name, max_bytes=max_bytes)
    try:
        return json.loads(data)
    except RecursionError:
        raise ImportFormatError(f"{name} nests too deep to be read (thousands of levels)") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise ImportFormatError(f"{name} is not JSON: {exc}") from None


class RowReader:
    """Reads the rows of one source into records: converted, or refused with file, row and field.

    ``read(label, build, *args)`` calls ``build(*args)`` (the importer's own mapping of one row to record
    fields), converts every field to its record type, and returns the record. Anything that
    goes wrong is an :class:`ImportFormatError` naming ``source`` and ``label``; with
    ``strict=False`` the row is skipped instead (``read`` returns None) and :meth:`warn_skipped`
    says how many were.
    """

    def __init__(self, source: str, *, strict: bool = True):
        self.source = source
        self.strict = strict
        self.skipped: list[str] = []
        self.total = 0

    def read(
        self,
        label: str,
        build: Callable[..., Mapping[str, Any]],
        *args: Any,
        names: Mapping[str, str] | None = None,
    ) -> dict[str, Any] | None:
        """The record ``build(*args)`` makes, converted; None when it is skipped
        (``strict=False``). ``names`` maps record columns to the source's own field names."""
        self.total += 1
        try:
            return convert_record(build(*args), names or {})
        except (ImportFormatError, FieldError) as exc:
            problem = str(exc)
        except MALFORMED as exc:
            problem = f"cannot be read ({type(exc).__name__}: {str(exc)[:200]})"
        message = f"{self.source}, {label}: {problem}"
        if self.strict:
            raise ImportFormatError(message + _FIX) from None
        self.skipped.append(message)
        return None

    def warn_skipped(self, stacklevel: int = 3) -> None:
        """Warn once with the count of skipped rows and the first reason."""
        if self.skipped:
            warnings.warn(
                f"skipped {len(self.skipped)} of {self.total} records that could not be read "
                f"(strict=False); first: {self.skipped[0]}",
                UserWarning,
                stacklevel=stacklevel,
            )


_FIX = ". Fix or drop that record, or pass strict=False to skip such records with a count"


def convert_record(record: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """``record`` with every field converted to its record column's type (or a FieldError)."""
    out = {}
    for name, value in record.items():
        try:
            out[name] = _convert(name, value)
        except FieldError as exc:
            theirs = names.get(name)
            called = f"{name} (from {theirs!r})" if theirs and theirs != name else name
            raise ImportFormatError(exc.named(called)) from None
    return out


def _convert(name: str, value: Any) -> Any:
    if value is None or value is pd.NaT or (isinstance(value, float) and math.isnan(value)):
        return None if SCHEMA.field(name).type != pa.float64() else math.nan
    kind = SCHEMA.field(name).type
    if kind == pa.string():
        return as_text(value, name)
    if kind == pa.float64():
        return as_seconds(value, name) if name == "latency_s" else as_float(value, name)
    if kind == pa.int64():
        return as_int(value, name)
    if kind == pa.bool_():
        if isinstance(value, bool | np.bool_):
            return bool(value)
        raise FieldError(name, value, "not true or false")
    if pa.types.is_timestamp(kind):
        return as_time(value, name)
    return value


def as_text(value: Any, field: str) -> str:
    """Text as is; a number or a boolean as its text (an integer prompt name ``3`` is ``"3"``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float | np.integer | np.floating | np.bool_):
        return str(value.item() if isinstance(value, np.generic) else value)
    raise FieldError(field, value, f"a {type(value).__name__}, not text")


def as_float(value: Any, field: str) -> float:
    """A number, or text holding one (``"0.7"``)."""
    if isinstance(value, bool | np.bool_):
        raise FieldError(field, value, "a boolean, not a number")
    if isinstance(value, int | float | np.integer | np.floating):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise FieldError(field, value, "not a number")


def as_seconds(value: Any, field: str) -> float:
    """Seconds from a number, or from text with or without a unit (``"1.5"``, ``"1.5s"``,
    ``"2 min"``, ``"00:01:30"``: what :func:`pandas.to_timedelta` reads); never negative."""
    if isinstance(value, dt.timedelta | np.timedelta64):
        seconds = pd.Timedelta(value).total_seconds()
    elif isinstance(value, str):
        try:
            seconds = float(value)
        except ValueError:
            try:
                seconds = pd.Timedelta(value.strip()).total_seconds()
            except ValueError:
                raise FieldError(field, value, "not a duration (seconds, or text like '1.5s')") from None
    else:
        seconds = as_float(value, field)
    if not seconds >= 0 or math.isinf(seconds):  # NaN fails >= too
        raise FieldError(field, value, "not a duration ≥ 0")
    return seconds


def as_int(value: Any, field: str, *, low: int = _INT64[0]) -> int:
    """A whole number (``3``, ``3.0`` or ``"3"``) between ``low`` and 2**63 − 1."""
    if isinstance(value, bool | np.bool_):
        raise FieldError(field, value, "a boolean, not a whole number")
    number: Any = value
    if isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            raise FieldError(field, value, "not a whole number") from None
    if isinstance(number, float | np.floating):
        if not math.isfinite(number) or not float(number).is_integer():
            raise FieldError(field, value, "not a whole number")
        number = int(number)
    if not isinstance(number, int | np.integer):
        raise FieldError(field, value, "not a whole number")
    if not low <= int(number) <= _INT64[1]:
        raise FieldError(field, value, f"out of range (a whole number from {low} to 2**63 − 1)")
    return int(number)


def as_time(value: Any, field: str) -> pd.Timestamp:
    """A time from a datetime or ISO text (``"2025-06-10T10:00:00Z"``), in UTC (naive: UTC)."""
    if isinstance(value, bool | int | float | np.number):
        raise FieldError(field, value, "a number, not a time: give ISO text such as '2025-06-10T10:00:00Z'")
    try:
        stamp = pd.Timestamp(value)
    except (ValueError, TypeError, OverflowError):
        raise FieldError(field, value, "not a time: give ISO text such as '2025-06-10T10:00:00Z'") from None
    if stamp is pd.NaT:
        raise FieldError(field, value, "not a time: give ISO text such as '2025-06-10T10:00:00Z'")
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def regular_files(folder: Path, pattern: str) -> list[Path]:
    """The files in ``folder`` matching ``pattern``, sorted, each checked to be a regular file."""
    found = sorted(folder.glob(pattern))
    for path in found:
        check_regular(path)
    return found
