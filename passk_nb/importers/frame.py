"""Trials from any table: :func:`from_frame` maps your columns onto trial records.

>>> import pandas as pd
>>> mine = pd.DataFrame({"case": ["a", "a", "b", "b"], "attempt": [1, 2, 1, 2],
...                      "ok": [1, 0, 1, 1], "llm": "m"})
>>> df = from_frame(mine, task="case", trial="attempt", passed="ok", model="llm")
>>> df[["task", "trial", "passed", "outcome"]].values.tolist()  # doctest: +NORMALIZE_WHITESPACE
[['a', 0, True, 'pass'], ['a', 1, False, 'wrong_output'],
 ['b', 0, True, 'pass'], ['b', 1, True, 'pass']]
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from passk_nb.data.ids import content_id
from passk_nb.data.records import COLUMNS, OUTCOMES, frame_from_records
from passk_nb.importers.checks import FieldError, ImportFormatError, RowReader, as_int, as_text

#: Values accepted as success / failure in the ``passed`` column (besides booleans and 0/1).
_TRUE = frozenset({"true", "pass", "passed", "yes", "y", "c", "correct", "1"})
_FALSE = frozenset({"false", "fail", "failed", "no", "n", "i", "incorrect", "0"})


def from_frame(
    data: pd.DataFrame,
    *,
    task: str,
    passed: str,
    trial: str | None = None,
    model: str | None = None,
    outcome: str | None = None,
    suite: str = "imported",
    columns: Mapping[str, str] | None = None,
    strict: bool = True,
) -> pd.DataFrame:
    """Trial records from a table of your own, one row per trial.

    ``task``, ``passed``, ``trial``, ``model`` and ``outcome`` name columns of ``data``
    (``model`` may also be a column that does not exist: then it is used as the model's
    name for every row). ``passed`` may hold booleans, 0/1, or words such as
    ``pass``/``fail``, ``C``/``I`` (inspect_ai's scores). Without ``trial``, trials are
    numbered in row order within each (model, task). ``outcome`` defaults to ``pass`` /
    ``wrong_output``; give a column to keep your own (its values must be outcomes from
    :data:`~passk_nb.data.records.OUTCOMES`). ``columns`` maps further record columns
    to yours (``{"prompt_name": "variant", "input_tokens": "tokens_in"}``); their values
    are converted to the record's types where they can be (a number as text, ``"1.5s"``
    as seconds, ISO text as a time). No claim was checked: ``false_claims`` is null ("n/a").

    Checked per row: a task, a success and a whole trial number ≥ 0 (renumbered from 0 when
    they start at 1), values of the record's types. A row that fails raises
    :class:`~passk_nb.importers.checks.ImportFormatError` naming the row and the column;
    ``strict=False`` skips such rows with a warning that counts them. No duplicate (model,
    task, trial); a warning names the tasks with fewer trials than others (pass^k uses each
    task's own n).
    """
    if not isinstance(data, pd.DataFrame):
        raise TypeError(f"from_frame needs a pandas DataFrame, got {type(data).__name__}")
    mapping = dict(columns or {})
    needed = [c for c in (task, passed, trial, outcome, *mapping.values()) if c is not None]
    missing = [c for c in needed if c not in data.columns]
    if missing:
        raise ValueError(f"columns {missing} are not in the table; it has {list(data.columns)}")
    unknown = sorted(set(mapping) - set(COLUMNS))
    if unknown:
        raise ValueError(
            f"columns= maps unknown record columns {unknown}; record columns are {list(COLUMNS)}"
        )
    if data.empty:
        raise ValueError("the table has no rows")
    model_column = model if model is not None and model in data.columns else None
    names = {"task": task, "passed": passed, "trial": trial or "", "outcome": outcome or "", **mapping}
    if model_column:
        names["model"] = model_column

    def record(row: Mapping[str, Any]) -> dict[str, Any]:
        ok = _success(row[passed], passed)
        out: dict[str, Any] = {
            "task": as_text(_present(row[task], task), task),
            "model": as_text(_present(row[model_column], model_column), model_column)
            if model_column
            else (model or ""),
            "passed": ok,
            "trial": None if trial is None else as_int(_present(row[trial], trial), trial, low=0),
            "outcome": "pass" if ok else "wrong_output",
            "state_diff": None,  # a table of one's own keeps no final state of ours
            "false_claims": None,  # and no claim was checked: "n/a", not "0"
        }
        if outcome is not None:
            value = row[outcome]
            if value not in OUTCOMES:
                raise FieldError(outcome, value, f"not an outcome; use one of {list(OUTCOMES)}")
            if (value == "pass") != ok:
                raise FieldError(outcome, value, f"which contradicts {passed!r} ({row[passed]!r})")
            out["outcome"] = value
        out.update({name: row[theirs] for name, theirs in mapping.items()})
        return out

    reader = RowReader("the table", strict=strict)
    records = []
    for index, row in zip(data.index, data.to_dict("records"), strict=True):
        converted = reader.read(f"row {index!r}", record, row, names=names)
        if converted is not None:
            records.append(converted)
    reader.warn_skipped(stacklevel=2)
    if not records:
        raise ImportFormatError(f"the table: none of its {len(data)} rows could be read")
    out = pd.DataFrame(records)
    if trial is None:
        out["trial"] = out.groupby(["model", "task"]).cumcount()
    elif out["trial"].min() == 1:
        out["trial"] -= 1
    duplicated = out.duplicated(["model", "task", "trial"], keep=False)
    if duplicated.any():
        first = out[duplicated].iloc[0]
        raise ValueError(
            f"{int(duplicated.sum())} rows share a (model, task, trial), e.g. task {first['task']!r} "
            f"trial {first['trial']}: give the trial column, or remove the duplicates"
        )
    per_task = out.groupby(["model", "task"]).size()
    if per_task.nunique() > 1:
        short = per_task[per_task < per_task.max()]
        warnings.warn(
            f"{len(short)} of {len(per_task)} tasks have fewer trials than the others (e.g. "
            f"{short.index[0][1]!r}: {short.iloc[0]} of {per_task.max()}); each task's pass^k uses its own n",
            UserWarning,
            stacklevel=2,
        )
    out["suite"] = suite
    out["provider"] = "imported"
    out["run_id"] = [
        content_id([suite, str(m)]) for m in out["model"]
    ]  # one run per model: never pools two models
    rows = out.astype(object).where(out.notna(), None).to_dict("records")
    return frame_from_records(rows)


def _present(value: Any, name: str | None) -> Any:
    if _missing(value):
        raise FieldError(str(name), value, "a missing value")
    return value


def _missing(value: Any) -> bool:
    return (
        value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value))
    )


def _success(value: Any, name: str) -> bool:
    """A success from a boolean, 0/1, or a pass/fail word."""
    if _missing(value):
        raise FieldError(name, value, "a missing success")
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | float | np.integer | np.floating):
        if value in (0, 1):
            return bool(value)
        raise FieldError(
            name,
            value,
            "not a success: use booleans, 0/1 or pass/fail words; "
            "turn scores into successes first (e.g. df[col] >= threshold)",
        )
    word = str(value).strip().lower() if isinstance(value, str) else None
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise FieldError(name, value, "not a success: use booleans, 0/1, pass/fail or C/I")
