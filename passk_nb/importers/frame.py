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

from passk_nb.data.ids import IDENTITY_COLUMNS, content_id, prompt_hash
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
    numbered in row order within each configuration and task. ``outcome`` defaults to ``pass`` /
    ``wrong_output``; give a column to keep your own (its values must be outcomes from
    :data:`~passk_nb.data.records.OUTCOMES`). ``columns`` maps further record columns
    to yours (``{"prompt_name": "variant", "input_tokens": "tokens_in"}``); their values
    are converted to the record's types where they can be (a number as text, ``"1.5s"``
    as seconds, ISO text as a time). No claim was checked: ``false_claims`` is null ("n/a").

    A configuration is the model and every identity column mapped (:data:`RUN_FIELDS`: suite,
    prompt, suite version, config, temperature, ...): each gets its own ``run_id``, so one table of
    several prompts, or several tables concatenated, never pool. A prompt given without its
    hash gets the hash of its ``system_prompt`` text, or else of its name; mapped settings
    (temperature, JSON mode, protocol) make the ``config`` label unless it is mapped itself.

    Checked per row: a task, a success and a whole trial number ≥ 0 (renumbered from 0 when
    they start at 1), values of the record's types. A row that fails raises
    :class:`~passk_nb.importers.checks.ImportFormatError` naming the row and the column;
    ``strict=False`` skips such rows with a warning that counts them. No duplicate
    (configuration, task, trial); a warning names the tasks with fewer trials than others of
    their configuration (pass^k uses each task's own n).

    >>> grid = pd.DataFrame({"case": ["a", "a"], "ok": [1, 0], "variant": ["terse", "polite"]})
    >>> runs = from_frame(grid, task="case", passed="ok", model="m", columns={"prompt_name": "variant"})
    >>> runs["run_id"].nunique(), runs["trial"].tolist(), bool(runs["prompt_hash"].str.len().eq(12).all())
    (2, [0, 0], True)
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
    if "provider" in mapping:
        raise ValueError(
            "columns= maps provider, which is 'imported' for every row from_frame reads: put the backend "
            "in the model's name (e.g. 'openai/gpt-4o') or map it to config"
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
    _name_prompts(out, mapping)
    if "suite" not in mapping:
        out["suite"] = suite
    identity = ["model", *(c for c in RUN_FIELDS if c in mapping)]  # what tells one run from another
    configuration = [c for c in identity if c != "model"] or None
    grouped = out[identity].astype(str)  # missing values are a value of their own here
    configs = [grouped[c] for c in identity]
    if trial is None:
        out["trial"] = out.groupby([*configs, out["task"]]).cumcount()
    elif out["trial"].min() == 1:
        out["trial"] -= 1
    key = [*identity, "task", "trial"]
    duplicated = pd.concat([grouped, out[["task", "trial"]]], axis=1).duplicated(key, keep=False)
    if duplicated.any():
        first = out[duplicated].iloc[0]
        raise ValueError(
            f"{int(duplicated.sum())} rows share a ({', '.join(key)}), e.g. task {first['task']!r} "
            f"trial {first['trial']}: map the column that tells them apart (e.g. "
            "columns={'prompt_name': 'variant'}), or remove the duplicates"
        )
    _warn_short_tasks(out, grouped)
    if configuration is not None and "config" not in mapping:
        out["config"] = _config_labels(out)
    out["provider"] = "imported"
    # one run per configuration (model, and each identity column mapped): never pools two; a table
    # of models alone keeps the run ids it always had
    out["run_id"] = [
        content_id(
            [suite, m]
            if configuration is None
            else [m, {"suite": suite, **dict(zip(configuration, rest, strict=True))}]
        )
        for m, *rest in grouped.itertuples(index=False, name=None)
    ]
    rows = out.astype(object).where(out.notna(), None).to_dict("records")
    return frame_from_records(rows)


#: Record columns that say which run a trial belongs to: each one mapped is part of the duplicate
#: key and of the run id (the identity columns, and the settings the ``config`` label names).
RUN_FIELDS: tuple[str, ...] = (
    *(c for c in IDENTITY_COLUMNS if c not in ("provider", "model")),
    "run_id",
    "base_url_host",
    "system_prompt",
    "temperature",
    "json_mode",
    "protocol",
)
#: Settings named in the ``config`` label of an imported run (as ``run()`` names them), and the
#: value that leaves them out.
_CONFIG_FIELDS: dict[str, tuple[str, Any]] = {
    "temperature": ("temperature", None),
    "json_mode": ("json", "off"),
    "protocol": ("protocol", "json"),
}


def _name_prompts(out: pd.DataFrame, mapping: Mapping[str, str]) -> None:
    """Give each row a ``prompt_hash`` when none was mapped: the hash of its ``system_prompt``, or,
    for a prompt known only by name, the hash of its name (so that prompts never share one)."""
    if "prompt_hash" in mapping:
        return
    source = (
        "system_prompt" if "system_prompt" in mapping else "prompt_name" if "prompt_name" in mapping else None
    )
    if source is not None:
        out["prompt_hash"] = [prompt_hash(text) if isinstance(text, str) else "" for text in out[source]]


def _config_labels(out: pd.DataFrame) -> list[str]:
    """The ``config`` label of each row: the mapped settings not at their defaults, or "default"."""
    labels = []
    for row in out.to_dict("records"):
        parts = [
            f"{name}={row[column]}"
            for column, (name, default) in _CONFIG_FIELDS.items()
            if column in row and not _missing(row[column]) and row[column] != default
        ]
        labels.append(", ".join(parts) or "default")
    return labels


def _warn_short_tasks(out: pd.DataFrame, grouped: pd.DataFrame) -> None:
    """Warn when, within one configuration, some tasks have fewer trials than the others."""
    sizes = out.groupby([*(grouped[c] for c in grouped.columns), out["task"]]).size()
    levels = list(range(grouped.shape[1]))
    most = sizes.groupby(level=levels).transform("max")
    short = sizes[sizes < most]
    if short.empty:
        return
    where = short.index[0]
    named = ", ".join(f"{c}={v}" for c, v in zip(grouped.columns, where[:-1], strict=True) if v)
    warnings.warn(
        f"{len(short)} of {len(sizes)} tasks have fewer trials than the others of their configuration "
        f"(e.g. {where[-1]!r}: {short.iloc[0]} of {most[short.index[0]]}, {named or 'the table'}); "
        "each task's pass^k uses its own n",
        UserWarning,
        stacklevel=3,
    )


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
