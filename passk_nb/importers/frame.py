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

import warnings
from collections.abc import Mapping

import numpy as np
import pandas as pd

from passk_nb.data.ids import content_id
from passk_nb.data.records import COLUMNS, OUTCOMES, frame_from_records

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
) -> pd.DataFrame:
    """Trial records from a table of your own, one row per trial.

    ``task``, ``passed``, ``trial``, ``model`` and ``outcome`` name columns of ``data``
    (``model`` may also be a column that does not exist: then it is used as the model's
    name for every row). ``passed`` may hold booleans, 0/1, or words such as
    ``pass``/``fail``, ``C``/``I`` (inspect_ai's scores). Without ``trial``, trials are
    numbered in row order within each (model, task). ``outcome`` defaults to ``pass`` /
    ``wrong_output``; give a column to keep your own (its values must be outcomes from
    :data:`~passk_nb.data.records.OUTCOMES`). ``columns`` maps further record columns
    to yours (``{"prompt_name": "variant", "input_tokens": "tokens_in"}``).

    Checked: no missing tasks or successes, no duplicate (model, task, trial), trial
    numbers whole and ≥ 0 (renumbered from 0 when they start at 1). A warning names the
    tasks with fewer trials than others (pass^k uses each task's own n).
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

    out = pd.DataFrame(index=data.index)
    out["task"] = _text_column(data[task], task)
    out["model"] = (
        _text_column(data[model], model) if model is not None and model in data.columns else (model or "")
    )
    out["passed"] = _success(data[passed], passed)
    out["trial"] = _trials(data, trial, out)
    if outcome is not None:
        values = data[outcome].astype(str)
        bad = sorted(set(values) - set(OUTCOMES))
        if bad:
            raise ValueError(
                f"column {outcome!r} holds {bad[:5]}, which are not outcomes; use {list(OUTCOMES)}"
            )
        if (values.eq("pass") != out["passed"]).any():
            raise ValueError(f"column {outcome!r} says 'pass' exactly where {passed!r} is not a success")
        out["outcome"] = values
    else:
        out["outcome"] = np.where(out["passed"], "pass", "wrong_output")
    for record_column, theirs in mapping.items():
        out[record_column] = data[theirs]
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
    records = out.astype(object).where(out.notna(), None).to_dict("records")
    return frame_from_records(records)


def _text_column(values: pd.Series, name: str) -> pd.Series:
    if values.isna().any():
        raise ValueError(f"column {name!r} has {int(values.isna().sum())} missing values")
    return values.astype(str)


def _success(values: pd.Series, name: str) -> pd.Series:
    if values.isna().any():
        raise ValueError(f"column {name!r} has {int(values.isna().sum())} missing successes")
    if pd.api.types.is_bool_dtype(values):
        return values.astype(bool)
    if pd.api.types.is_numeric_dtype(values):
        if not values.isin([0, 1]).all():
            bad = values[~values.isin([0, 1])].iloc[0]
            raise ValueError(
                f"column {name!r} holds {bad!r}: successes must be booleans, 0/1 or pass/fail words; "
                "turn scores into successes first (e.g. df[col] >= threshold)"
            )
        return values.astype(bool)
    words = values.astype(str).str.strip().str.lower()
    unknown = sorted(set(words) - _TRUE - _FALSE)
    if unknown:
        raise ValueError(f"column {name!r} holds {unknown[:5]}: use booleans, 0/1, pass/fail or C/I")
    return words.isin(_TRUE)


def _trials(data: pd.DataFrame, trial: str | None, out: pd.DataFrame) -> pd.Series:
    if trial is None:
        return out.groupby(["model", "task"]).cumcount()
    values = data[trial]
    numeric = pd.to_numeric(values, errors="coerce")
    if numeric.isna().any() or (numeric % 1 != 0).any() or (numeric < 0).any():
        bad = values[numeric.isna() | (numeric % 1 != 0) | (numeric < 0)].iloc[0]
        raise ValueError(f"column {trial!r} holds {bad!r}: trial numbers must be whole numbers ≥ 0")
    numeric = numeric.astype(np.int64)
    return numeric - 1 if numeric.min() == 1 else numeric
