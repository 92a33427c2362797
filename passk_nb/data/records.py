"""The trial record: one row per trial, the same columns in memory and on disk.

Every run, whatever the backend, produces rows with exactly these columns. The
analysis layer (estimators, stats, plots, widgets) only relies on this table,
so records from any source (the runner, ``run_cases``, an imported τ-bench
file) go through the same functions.

>>> from passk_nb.data.records import empty_frame, COLUMNS
>>> list(empty_frame().columns) == list(COLUMNS)
True
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from passk_nb.data.redact import Redactor

#: Outcomes, one per trial. ``pass`` is the only success; ``infra_error`` (the backend or
#: the harness failed: HTTP 429/5xx or dropped connections after the retries, a missing or
#: crashed CLI, a network backend over the trial timeout) is not the agent's fault and the
#: estimators exclude it by default. ``no_lookup`` and ``false_claim`` are refusal tasks
#: that changed nothing but answered without looking at the record, or told the customer
#: the refused action happened. ``agent_error``: code the user wrote (a function agent, a
#: ``chat`` object, a text-case agent) raised or hung; a failure, like any other.
#: ``wrong_output`` only occurs for rule-based text cases (``run_cases``).
OUTCOMES: tuple[str, ...] = (
    "pass",
    "wrong_state",
    "unrequested_change",
    "format_error",
    "max_turns",
    "infra_error",
    "no_lookup",
    "false_claim",
    "agent_error",
    "wrong_output",
)

#: The ``faults`` of a run without tool faults (every run before fault injection existed).
NO_FAULTS = "none"
#: The ``perturbation`` of a run whose task prompts are sent as written.
NO_PERTURBATION = "none"
#: Identity columns whose value says "nothing of the kind": a label need not mention them then.
NOTHING_APPLIED: dict[str, str] = {"faults": NO_FAULTS, "perturbation": NO_PERTURBATION}

#: Column name -> (arrow type, pandas dtype, description).
_SPEC: dict[str, tuple[pa.DataType, str, str]] = {
    "run_id": (pa.string(), "str", "hash of the run spec; rows of one spec share it"),
    "suite": (pa.string(), "str", "suite name, e.g. 'orders'"),
    "suite_hash": (
        pa.string(),
        "str",
        "the suite's version: its fingerprint (12 hex chars of everything deciding its outcomes: tasks, "
        "checks, tools, prompts, initial state); an edited suite is a new version and a new run; '' "
        "when unknown (records written before this column, imported runs)",
    ),
    "task": (pa.string(), "str", "task id within the suite"),
    "provider": (pa.string(), "str", "backend name, e.g. 'scripted', 'ollama'"),
    "model": (pa.string(), "str", "model name as given to the backend"),
    "base_url_host": (pa.string(), "str", "host[:port] of the backend, no credentials"),
    "prompt_hash": (pa.string(), "str", "first 12 hex chars of sha256(system prompt)"),
    "prompt_name": (pa.string(), "str", "human label of the system prompt"),
    "system_prompt": (pa.string(), "str", "the exact system prompt text"),
    "temperature": (pa.float64(), "float64", "sampling temperature (NaN: backend default)"),
    "seed": (pa.int64(), "Int64", "per-trial seed given to the backend"),
    "json_mode": (pa.string(), "str", "output constraint asked of the backend: off, json or schema"),
    "protocol": (
        pa.string(),
        "str",
        "how the agent calls tools: json (the JSON action protocol), native (the API's tool calling), "
        "or text (an imported run's own text format, e.g. τ-bench's act/react agents)",
    ),
    "faults": (
        pa.string(),
        "str",
        "the run's tool-fault plan as its spec, e.g. 'timeout:get_order,noop:refund_order:p=0.5' "
        "(`run(faults=)`); 'none' for a run without faults",
    ),
    "perturbation": (
        pa.string(),
        "str",
        "how the run rewords its task prompts (`run(perturb=)`): rule names such as 'typo,synonyms', "
        "'variants:<hash>' for variant lists; 'none' for prompts sent as written",
    ),
    "config": (
        pa.string(),
        "str",
        "the run's configuration as a short label: the spec fields not at their defaults",
    ),
    "trial": (pa.int64(), "int64", "0-based trial index within (run_id, task)"),
    "round": (
        pa.int64(),
        "Int64",
        "the round that ran the trial in a run that stops when its question is answered "
        "(`run(until=)`): 0 the first round, every task's `trials`; null in a run of fixed trials",
    ),
    "allocation": (
        pa.string(),
        "str",
        "why the trial was run in such a run: 'first round', or what the allocator meant it to settle "
        "(e.g. 'settle 0.712 – 0.931 against 0.8'); null in a run of fixed trials",
    ),
    "passed": (pa.bool_(), "bool", "outcome == 'pass'"),
    "outcome": (pa.string(), "str", "one of OUTCOMES"),
    "state_ok": (pa.bool_(), "bool", "final state passed the task's check, whatever ended the trial"),
    "n_turns": (pa.int64(), "int64", "model replies in the trial"),
    "n_tool_calls": (pa.int64(), "int64", "tool calls the model made"),
    "n_tool_errors": (pa.int64(), "int64", "tool calls that returned an error"),
    "n_format_errors": (pa.int64(), "int64", "replies (native: tool calls) that broke the protocol"),
    "attempts": (pa.int64(), "int64", "backend requests, retries included"),
    "input_tokens": (pa.int64(), "Int64", "prompt tokens reported by the backend"),
    "output_tokens": (pa.int64(), "Int64", "completion tokens reported by the backend"),
    "latency_s": (pa.float64(), "float64", "wall time of the trial in seconds"),
    "started_at": (pa.timestamp("us", tz="UTC"), "datetime64[us, UTC]", "trial start time"),
    "final_answer": (pa.string(), "str", "the agent's final answer, if it gave one"),
    "state_diff": (
        pa.string(),
        "str",
        "JSON list of changed fields (null: final state not recorded, e.g. an imported run)",
    ),
    "false_claims": (
        pa.string(),
        "str",
        "JSON list of actions the final answer claims and the final state does not show "
        "(null: not checked, e.g. an imported run)",
    ),
    "faults_injected": (
        pa.string(),
        "str",
        "JSON list of the faults injected in the trial, each {call, tool, fault}: the trial's tool "
        "call number (from 1), the tool and the fault kind; [] when none was",
    ),
    "perturbation_applied": (
        pa.string(),
        "str",
        "the perturbation rule (or 'variant <i>') the trial's prompt got; null: sent as written",
    ),
    "transcript": (pa.string(), "str", "JSON list of turns"),
    "error": (pa.string(), "str", "what went wrong (format, infra), if anything"),
    "provider_meta": (pa.string(), "str", "JSON object of backend details (CLI version, cost)"),
    "harness_version": (pa.string(), "str", "passk-nb version that produced the row"),
    "text_escaped": (
        pa.bool_(),
        "bool",
        "some text of the row held invalid Unicode (lone surrogates), stored escaped: see unescape_text",
    ),
    "record_notes": (pa.string(), "str", "what the write boundary changed to store the row, if anything"),
}

#: Every column of a trial record, in the order every frame and parquet file holds them.
COLUMNS: tuple[str, ...] = tuple(_SPEC)
SCHEMA: pa.Schema = pa.schema([(name, spec[0]) for name, spec in _SPEC.items()])
DTYPES: dict[str, str] = {name: spec[1] for name, spec in _SPEC.items()}
#: Each column's meaning, in a few words: column name -> description (``docs/columns.md``).
DESCRIPTIONS: dict[str, str] = {name: spec[2] for name, spec in _SPEC.items()}
#: Identity of one trial: a run never holds two rows with the same key.
KEY: tuple[str, ...] = ("run_id", "task", "trial")
#: Fields every record must carry.
REQUIRED: tuple[str, ...] = ("run_id", "suite", "task", "trial", "passed", "outcome")
#: Values for fields a record may leave out (everything else not listed becomes null).
DEFAULTS: dict[str, Any] = {
    "suite_hash": "",
    "provider": "",
    "model": "",
    "prompt_hash": "",
    "prompt_name": "",
    "json_mode": "off",
    "protocol": "json",
    "faults": NO_FAULTS,
    "perturbation": NO_PERTURBATION,
    "config": "default",
    "false_claims": "[]",
    "faults_injected": "[]",
    "state_ok": False,
    "n_turns": 0,
    "n_tool_calls": 0,
    "n_tool_errors": 0,
    "n_format_errors": 0,
    "attempts": 0,
    "latency_s": float("nan"),
    "state_diff": "[]",
    "transcript": "[]",
    "provider_meta": "{}",
    "harness_version": "",
    "text_escaped": False,
}

#: Columns holding JSON text: lone surrogates there become standard ``\\uXXXX`` JSON escapes.
JSON_COLUMNS: frozenset[str] = frozenset({"state_diff", "transcript", "provider_meta", "faults_injected"})
#: Columns whose text a backend or the harness wrote (errors, backend metadata, the boundary's notes):
#: :func:`storable_record` masks every credential shape there, and elsewhere (what the model wrote,
#: the prompts) only the secrets the run knows, so the model's text is stored as written.
SERVER_TEXT_COLUMNS: frozenset[str] = frozenset({"error", "provider_meta", "record_notes"})
_SHAPES_ONLY = Redactor()
#: Columns that must hold a value in every row (no nulls), besides :data:`REQUIRED`.
NOT_NULL: frozenset[str] = frozenset(
    name for name, (_, dtype, _) in _SPEC.items() if dtype in ("bool", "int64")
)
_INT64_MAX = 2**63 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")
#: Columns whose integers must be ≥ 0 (counts reported by a backend or counted by the harness).
_COUNTS: frozenset[str] = frozenset(
    {
        "input_tokens",
        "output_tokens",
        "n_turns",
        "n_tool_calls",
        "n_tool_errors",
        "n_format_errors",
        "attempts",
    }
)


def outcome_problems(passed: pa.Array | pa.ChunkedArray, outcome: pa.Array | pa.ChunkedArray) -> str | None:
    """What is wrong with these records' outcomes, or None: every ``outcome`` is one of
    :data:`OUTCOMES` and ``passed`` is true exactly where it is ``"pass"``. Such records were
    edited or written by something else than passk; counting them would report a number no
    trial had, so every analysis refuses them (on reading and on counting).

    >>> outcome_problems(pa.array([True, False]), pa.array(["pass", "wrong_state"])) is None
    True
    >>> outcome_problems(pa.array([True, True]), pa.array(["pass", "PASS!"]))
    "1 row has an outcome that is not one of passk's (first: 'PASS!', row 1)"
    >>> outcome_problems(pa.array([True]), pa.array(["wrong_state"]))
    "1 row has passed=True with outcome 'wrong_state' (first: row 0)"
    """
    import pyarrow.compute as pc

    known = pc.is_in(outcome, value_set=pa.array(OUTCOMES))
    unknown = pc.invert(pc.fill_null(known, False))
    disagree = pc.fill_null(pc.not_equal(passed, pc.equal(outcome, "pass")), True)
    return outcome_text(
        pc.indices_nonzero(unknown).to_numpy(),
        pc.indices_nonzero(disagree).to_numpy(),
        lambda i: outcome[i].as_py(),
        lambda i: passed[i].as_py(),
    )


def outcome_text(
    unknown: Sequence[int] | np.ndarray,
    disagree: Sequence[int] | np.ndarray,
    outcome_at: Callable[[int], Any],
    passed_at: Callable[[int], Any],
) -> str | None:
    """What :func:`outcome_problems` reports, from the rows whose outcome is unknown and those whose
    ``passed`` disagrees with it (the first unknown one is named before any disagreement); None
    when there are neither. Shared by the store's check on reading and the analyses' on counting.

    >>> outcome_text([], [2, 5], lambda i: "wrong_state", lambda i: True)
    "2 rows have passed=True with outcome 'wrong_state' (first: row 2)"
    """
    if len(unknown):
        first, n = int(unknown[0]), len(unknown)
        return (
            f"{n} row{'s' if n > 1 else ''} {'have' if n > 1 else 'has'} an outcome that is not one of "
            f"passk's (first: {outcome_at(first)!r}, row {first})"
        )
    if len(disagree):
        first, n = int(disagree[0]), len(disagree)
        return (
            f"{n} row{'s' if n > 1 else ''} {'have' if n > 1 else 'has'} passed={passed_at(first)} "
            f"with outcome {outcome_at(first)!r} (first: row {first})"
        )
    return None


def escape_text(text: str) -> str:
    """``text`` made storable when it holds lone surrogates (invalid Unicode), losslessly.

    Backslashes are doubled and each lone surrogate is written as ``\\uXXXX``;
    :func:`unescape_text` gives the original back. Text without surrogates is
    returned unchanged (rows store it unescaped; ``text_escaped`` says which).

    >>> escape_text("Sorry \\ud83d") == "Sorry \\\\ud83d"
    True
    >>> unescape_text(escape_text("a\\\\b \\udcff")) == "a\\\\b \\udcff"
    True
    """
    if not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text.replace("\\", "\\\\"))


_ESCAPE = re.compile(r"\\\\|\\u([0-9a-f]{4})")


def unescape_text(text: str) -> str:
    """The original of a text escaped by :func:`escape_text` (``final_answer`` and ``error`` of a
    row whose ``text_escaped`` is true; JSON columns need no unescaping: ``json.loads`` restores them).

    >>> unescape_text("Sorry \\\\ud83d") == "Sorry \\ud83d"
    True
    """
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)) if m.group(1) else "\\", text)


#: Plain-text columns escaped as a whole (see :func:`escape_text`) in a row with ``text_escaped``.
ESCAPED_TEXT_COLUMNS: tuple[str, ...] = ("final_answer", "error")


def _json_escape(text: str) -> str:
    # In JSON text a lone surrogate can only sit inside a string literal, where \uXXXX is its escape.
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_INT_COLUMNS = frozenset(name for name, dtype in DTYPES.items() if dtype in ("int64", "Int64"))
_FLOAT_COLUMNS = frozenset(name for name, dtype in DTYPES.items() if dtype == "float64")
_LOW = {name: 0 if name in _COUNTS else -_INT64_MAX - 1 for name in _INT_COLUMNS}


def _check_int(name: str, value: Any, notes: list[str]) -> Any:
    if value is None or isinstance(value, bool):
        return value
    try:
        number = int(value) if not isinstance(value, float) or value.is_integer() else None
    except (TypeError, ValueError, OverflowError):
        number = None
    low = 0 if name in _COUNTS else -_INT64_MAX - 1
    if number is not None and low <= number <= _INT64_MAX:
        return number
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
    if DTYPES[name] == "Int64":
        notes.append(f"{name}={shown} out of range, stored as null")
        return None
    if name in _COUNTS:
        notes.append(f"{name}={shown} out of range, stored as 0")
        return 0
    return value  # an identity field (trial): the row cannot be stored, see _error_row


def _check_float(name: str, value: Any, notes: list[str]) -> Any:
    if value is None or isinstance(value, float):
        return value
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
        notes.append(f"{name}={shown} is not a storable number, stored as NaN")
        return math.nan


def storable_record(record: Mapping[str, Any], redact: Redactor | None = None) -> dict[str, Any]:
    """``record`` with its secrets masked, every text made storable and every number range-checked.

    The record boundary: every record passes here on its way to disk, whatever produced it.
    ``redact`` (the backend's, which knows the run's secrets; default: one that knows none) masks
    the secrets it knows in every text, and every credential shape (a bearer token, an
    ``Authorization`` value, an ``sk-`` key...) in :data:`SERVER_TEXT_COLUMNS`.
    Lone surrogates (half an emoji escape from a model or a server) cannot be
    written as UTF-8: JSON columns get the standard ``\\uXXXX`` escape, and
    ``final_answer`` and ``error`` are escaped with :func:`escape_text`; the row's
    ``text_escaped`` is then true. Counts out of range (negative, above 2**63)
    become null (token counts) or 0, other numbers that do not fit become NaN;
    ``record_notes`` says what was changed. A clean record is returned as is.

    >>> row = storable_record({"final_answer": "hi \\ud83d", "input_tokens": -3})
    >>> row["text_escaped"], row["input_tokens"], row["record_notes"]
    (True, None, 'input_tokens=-3 out of range, stored as null; lone surrogates in final_answer escaped')
    >>> row = storable_record({"final_answer": "k-9f3e-0042", "error": "HTTP 401: Bearer k-9f3e-0042"},
    ...                       Redactor(["k-9f3e-0042"]))
    >>> row["final_answer"], row["error"]
    ('[REDACTED]', 'HTTP 401: Bearer [REDACTED]')
    """
    redact = redact or _SHAPES_ONLY
    secrets = redact.knows_secrets
    row = dict(record)
    notes: list[str] = []
    escaped: list[str] = []
    for name, value in record.items():
        kind = type(value)
        if kind is str:
            if name in SERVER_TEXT_COLUMNS:
                value = row[name] = redact(value)
            elif secrets:
                value = row[name] = redact.known(value)
            if not value.isascii() and _SURROGATE.search(value):
                escaped.append(name)
        elif value is None or (kind is int and name in _INT_COLUMNS and _LOW[name] <= value <= _INT64_MAX):
            continue  # the common case, checked first
        elif name in _INT_COLUMNS:
            row[name] = _check_int(name, value, notes)
        elif name in _FLOAT_COLUMNS and kind is not float:
            row[name] = _check_float(name, value, notes)
        elif isinstance(value, str):  # a subclass of str
            value = row[name] = redact(value) if name in SERVER_TEXT_COLUMNS else redact.known(str(value))
            if _SURROGATE.search(value):
                escaped.append(name)
    if escaped:
        row["text_escaped"] = True
        for name in escaped:
            if name in JSON_COLUMNS:
                row[name] = _json_escape(row[name])
            elif name not in ESCAPED_TEXT_COLUMNS:
                row[name] = escape_text(row[name])
                notes.append(f"{name} escaped with escape_text")
        for name in ESCAPED_TEXT_COLUMNS:
            if isinstance(row.get(name), str):
                row[name] = row[name].replace("\\", "\\\\") if name not in escaped else escape_text(row[name])
        notes.append(f"lone surrogates in {', '.join(escaped)} escaped")
    if notes:
        earlier = row.get("record_notes")
        row["record_notes"] = "; ".join([earlier, *notes] if isinstance(earlier, str) and earlier else notes)
    return row


def _error_row(row: Mapping[str, Any], exc: BaseException) -> dict[str, Any]:
    """The stand-in for a record that cannot be stored: its identity and why, as an infra error."""
    keep = {
        name: value
        for name, value in row.items()
        if name in DEFAULTS or name in REQUIRED or name in ("base_url_host", "started_at", "seed")
    }
    kept = {name: value for name, value in keep.items() if _fits(name, value)}
    raw = f"record could not be stored: {type(exc).__name__}: {str(exc)[:500]}"
    reason = escape_text(raw)
    return {
        **DEFAULTS,
        **kept,
        "passed": False,
        "outcome": "infra_error",
        "state_ok": False,
        "error": reason,
        "final_answer": None,
        "text_escaped": reason != raw,
        "record_notes": "the trial's record could not be stored; this row stands in for it",
    }


def _fits(name: str, value: Any) -> bool:
    try:
        pa.array([value], type=SCHEMA.field(name).type)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return False
    return True


def _arrays(rows: list[dict[str, Any]]) -> list[pa.Array]:
    return [pa.array([row.get(name) for row in rows], type=SCHEMA.field(name).type) for name in COLUMNS]


def table_from_records(records: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Build an Arrow table with :data:`SCHEMA` from record dicts.

    Fields in :data:`DEFAULTS` may be left out; other missing fields become
    nulls. Missing :data:`REQUIRED` fields and unknown fields are errors, so a
    typo never silently drops data. Every row first goes through
    :func:`storable_record`; a row that still cannot be stored is replaced by
    an ``infra_error`` row of the same trial saying why, and never takes the
    other rows with it.

    >>> table_from_records([]).num_rows
    0
    """
    rows = []
    for i, row in enumerate(records):
        unknown = set(row) - set(COLUMNS)
        if unknown:
            raise ValueError(f"record {i}: unknown fields {sorted(unknown)}; allowed: {list(COLUMNS)}")
        missing = [name for name in REQUIRED if row.get(name) is None]
        if missing:
            raise ValueError(f"record {i}: missing required fields {missing}")
        rows.append(storable_record({**DEFAULTS, **row}))
    try:
        arrays = _arrays(rows)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        # One bad row must not take the others with it: find it and store why instead.
        for i, row in enumerate(rows):
            try:
                _arrays([row])
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                rows[i] = _error_row(row, exc)
        try:
            arrays = _arrays(rows)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"records cannot be stored, not even as error rows: {exc}") from exc
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def frame_from_table(table: pa.Table) -> pd.DataFrame:
    """Convert an Arrow table of records to a DataFrame with :data:`DTYPES`."""
    table = table.select(list(COLUMNS)).cast(SCHEMA)
    frame = table.to_pandas()
    return frame.astype(DTYPES)


def frame_from_records(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Record dicts -> DataFrame with the standard columns and dtypes.

    >>> frame_from_records([{"run_id": "r", "suite": "s", "task": "t", "trial": 0,
    ...                      "passed": True, "outcome": "pass"}]).loc[0, "outcome"]
    'pass'
    """
    return frame_from_table(table_from_records(records))


def claims_checked(df: pd.DataFrame) -> pd.Series:
    """Per trial: were the final answer's claims checked against the final state?

    False where ``false_claims`` is null: imported trials (τ-bench, inspect_ai, your own table)
    keep no final state of ours, so "claimed not done" is unknown there ("n/a"), not zero.

    >>> claims_checked(frame_from_records([{"run_id": "r", "suite": "s", "task": "t", "trial": 0,
    ...     "passed": True, "outcome": "pass", "false_claims": None}])).tolist()
    [False]
    """
    if "false_claims" not in df.columns:
        return pd.Series(False, index=df.index, dtype=bool, name="claims_checked")
    return df["false_claims"].notna().rename("claims_checked")


def empty_frame() -> pd.DataFrame:
    """A DataFrame with the record columns and no rows."""
    return frame_from_table(table_from_records([]))
