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

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
import pyarrow as pa

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

#: Column name -> (arrow type, pandas dtype, description).
_SPEC: dict[str, tuple[pa.DataType, str, str]] = {
    "run_id": (pa.string(), "str", "hash of the run spec; rows of one spec share it"),
    "suite": (pa.string(), "str", "suite name, e.g. 'orders'"),
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
    "config": (
        pa.string(),
        "str",
        "the run's configuration as a short label: the spec fields not at their defaults",
    ),
    "trial": (pa.int64(), "int64", "0-based trial index within (run_id, task)"),
    "passed": (pa.bool_(), "bool", "outcome == 'pass'"),
    "outcome": (pa.string(), "str", "one of OUTCOMES"),
    "state_ok": (pa.bool_(), "bool", "final state passed the task's check, whatever ended the trial"),
    "n_turns": (pa.int64(), "int64", "model replies in the trial"),
    "n_tool_calls": (pa.int64(), "int64", "tool calls the model made"),
    "n_tool_errors": (pa.int64(), "int64", "tool calls that returned an error"),
    "n_format_errors": (pa.int64(), "int64", "replies that broke the action protocol"),
    "attempts": (pa.int64(), "int64", "backend requests, retries included"),
    "input_tokens": (pa.int64(), "Int64", "prompt tokens reported by the backend"),
    "output_tokens": (pa.int64(), "Int64", "completion tokens reported by the backend"),
    "latency_s": (pa.float64(), "float64", "wall time of the trial in seconds"),
    "started_at": (pa.timestamp("us", tz="UTC"), "datetime64[us, UTC]", "trial start time"),
    "final_answer": (pa.string(), "str", "the agent's final answer, if it gave one"),
    "state_diff": (pa.string(), "str", "JSON list of changed fields"),
    "false_claims": (
        pa.string(),
        "str",
        "JSON list of actions the final answer claims and the final state does not show",
    ),
    "transcript": (pa.string(), "str", "JSON list of turns"),
    "error": (pa.string(), "str", "what went wrong (format, infra), if anything"),
    "provider_meta": (pa.string(), "str", "JSON object of backend details (CLI version, cost)"),
    "harness_version": (pa.string(), "str", "passk-nb version that produced the row"),
}

COLUMNS: tuple[str, ...] = tuple(_SPEC)
SCHEMA: pa.Schema = pa.schema([(name, spec[0]) for name, spec in _SPEC.items()])
DTYPES: dict[str, str] = {name: spec[1] for name, spec in _SPEC.items()}
DESCRIPTIONS: dict[str, str] = {name: spec[2] for name, spec in _SPEC.items()}
#: Identity of one trial: a run never holds two rows with the same key.
KEY: tuple[str, ...] = ("run_id", "task", "trial")
#: Fields every record must carry.
REQUIRED: tuple[str, ...] = ("run_id", "suite", "task", "trial", "passed", "outcome")
#: Values for fields a record may leave out (everything else not listed becomes null).
DEFAULTS: dict[str, Any] = {
    "provider": "",
    "model": "",
    "prompt_hash": "",
    "prompt_name": "",
    "json_mode": "off",
    "config": "default",
    "false_claims": "[]",
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
}


def table_from_records(records: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Build an Arrow table with :data:`SCHEMA` from record dicts.

    Fields in :data:`DEFAULTS` may be left out; other missing fields become
    nulls. Missing :data:`REQUIRED` fields and unknown fields are errors, so a
    typo never silently drops data.

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
        rows.append({**DEFAULTS, **row})
    arrays = [pa.array([row.get(name) for row in rows], type=SCHEMA.field(name).type) for name in COLUMNS]
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


def empty_frame() -> pd.DataFrame:
    """A DataFrame with the record columns and no rows."""
    return frame_from_table(table_from_records([]))
