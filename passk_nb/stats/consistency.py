"""Consistency when it succeeds: do the passing trials of a task do the same thing each time?

Per configuration and task, among the *passing* trials (read from the stored transcripts as in
:func:`~passk_nb.stats.divergence.action_sequence`): ``same_tools``, ``same_arguments`` and
``same_turns`` (the shares that match the most common call sequence, calls with arguments, and
number of turns) and ``n_sequences``. A share is 1 when every passing trial did the same (with one
passing trial trivially, ``n_pass`` says), NaN when none passed. Answers' wording is not compared.

Why two agents at the same pass^k can differ here: ``docs/methods/comparisons.md``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import pandas as pd

from passk_nb.stats.checks import require_columns
from passk_nb.stats.divergence import action_sequence
from passk_nb.stats.params import default_by

__all__ = ["consistency", "consistency_summary"]


def _modal_share(values: list[object]) -> float:
    """The share of ``values`` equal to the most common one (NaN for none)."""
    if not values:
        return float("nan")
    return Counter(values).most_common(1)[0][1] / len(values)


def consistency(df: pd.DataFrame, *, by: str | Sequence[str] | None = None) -> pd.DataFrame:
    """Consistency when it succeeds, per configuration and task (see the module).

    df: trial records with ``task``, ``passed`` and ``transcript`` (``n_turns`` for ``same_turns``).
    by: the configuration's columns (default: every identity column the frame has).

    Returns the ``by`` columns, ``task``, ``n_trials``, ``n_pass``, ``same_tools``,
    ``same_arguments``, ``same_turns`` and ``n_sequences``.

    >>> import json
    >>> def t(*calls):
    ...     return json.dumps([{"kind": "reply", "action": {"tool": c, "args": {"id": a}}} for c, a in calls]
    ...                       + [{"kind": "reply", "action": {"answer": "done"}}])
    >>> df = pd.DataFrame({"task": "refund", "passed": [True, True, True, False],
    ...     "n_turns": [3, 3, 3, 2],
    ...     "transcript": [t(("get", "O1"), ("refund", "O1")), t(("get", "O1"), ("refund", "O1")),
    ...                    t(("get", "O2"), ("refund", "O1")), t(("refund", "O1"))]})
    >>> row = consistency(df, by=()).iloc[0]
    >>> columns = ("n_pass", "same_tools", "same_arguments", "same_turns", "n_sequences")
    >>> [round(float(row[c]), 2) for c in columns]
    [3.0, 1.0, 0.67, 1.0, 2.0]
    """
    require_columns(df, ["task", "passed", "transcript"])
    keys = list(default_by(df, by))
    rows = []
    for key, part in df.groupby([*keys, "task"], sort=True, dropna=False):
        values = key if isinstance(key, tuple) else (key,)
        passing = part[part["passed"].astype(bool)]
        calls = [
            tuple(step for step in action_sequence(text) if step != "answer")
            for text in passing["transcript"]
        ]
        tools = [tuple(step.split("(", 1)[0] for step in seq) for seq in calls]
        turns = (
            pd.to_numeric(passing["n_turns"], errors="coerce").dropna().astype(int).tolist()
            if "n_turns" in passing.columns
            else []
        )
        rows.append(
            {
                **dict(zip([*keys, "task"], values, strict=True)),
                "n_trials": len(part),
                "n_pass": len(passing),
                "same_tools": _modal_share(list(tools)),
                "same_arguments": _modal_share(list(calls)),
                "same_turns": _modal_share(list(turns)) if len(turns) == len(passing) else np.nan,
                "n_sequences": len(set(calls)),
            }
        )
    return pd.DataFrame(rows)


def consistency_summary(table: pd.DataFrame, *, by: str | Sequence[str] | None = None) -> pd.DataFrame:
    """:func:`consistency`'s per-task table summed up per configuration: the shares over every
    passing trial of the tasks (each task's share weighted by its passing trials), the tasks with a
    pass, and the passing trials.

    >>> table = pd.DataFrame({"model": "m", "task": ["a", "b", "c"], "n_trials": 4, "n_pass": [4, 2, 0],
    ...     "same_tools": [1.0, 0.5, float("nan")], "same_arguments": [0.75, 0.5, float("nan")],
    ...     "same_turns": [1.0, 1.0, float("nan")], "n_sequences": [2, 2, 0]})
    >>> consistency_summary(table).round(3).values.tolist()
    [['m', 2, 6, 0.833, 0.667, 1.0]]
    """
    keys = list(default_by(table, by)) if by is not None else _keys_of(table)
    rows = []
    for key, part in table.groupby(keys, sort=True, dropna=False) if keys else [((), table)]:
        values = key if isinstance(key, tuple) else (key,)
        passed = part[part["n_pass"] > 0]
        weights = passed["n_pass"].to_numpy(dtype=float)
        row: dict[str, object] = dict(zip(keys, values, strict=True))
        row.update({"tasks_passed": len(passed), "n_pass": int(weights.sum())})
        for col in ("same_tools", "same_arguments", "same_turns"):
            shares = passed[col].to_numpy(dtype=float)
            ok = ~np.isnan(shares)
            row[col] = float(np.average(shares[ok], weights=weights[ok])) if ok.any() else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


#: consistency()'s own columns (the rest of its table are the configuration's keys).
_COLUMNS = frozenset(
    {"task", "n_trials", "n_pass", "same_tools", "same_arguments", "same_turns", "n_sequences"}
)


def _keys_of(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if c not in _COLUMNS]
