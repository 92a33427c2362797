"""Labels and colours shared by tables, plots and widgets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from passk_nb.stats.counts import as_columns

#: Okabe–Ito colours, in the order groups receive them.
PALETTE: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",  # black
)


#: One fixed colour per outcome, so a category looks the same in every figure.
OUTCOME_COLORS: dict[str, str] = {
    "pass": "#009E73",
    "wrong_state": "#E69F00",
    "unrequested_change": "#D55E00",
    "format_error": "#CC79A7",
    "max_turns": "#56B4E9",
    "infra_error": "#BBBBBB",
    "wrong_output": "#0072B2",
    "agent_error": "#000000",
}


def group_labels(
    frame: pd.DataFrame, by: str | Sequence[str], *, names: dict[str, str] | None = None
) -> pd.Series:
    """A readable label per row for its group of ``by``: the values joined by " · ".

    Prompt hashes read ``name (hash)`` when ``names`` (hash -> prompt name) or the
    frame's ``prompt_name`` column knows them; ``json_mode`` reads "JSON mode" or
    "no JSON mode".

    >>> import pandas as pd
    >>> frame = pd.DataFrame({"model": ["m"], "prompt_hash": ["7441de23b0e2"], "prompt_name": ["default"],
    ...                       "json_mode": [True]})
    >>> group_labels(frame, ["model", "prompt_hash", "json_mode"]).tolist()
    ['m · default (7441de2) · JSON mode']
    """
    by = as_columns(by)
    names = {**prompt_names(frame), **(names or {})}
    if not by:
        return pd.Series("all trials", index=frame.index)
    parts = [frame[col].map(lambda v, col=col: format_value(col, v, names)) for col in by]
    label = parts[0].astype(str)
    for part in parts[1:]:
        label = label + " · " + part.astype(str)
    return label


def format_value(column: str, value: object, names: dict[str, str]) -> str:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "–"
    if column == "prompt_hash":
        name = names.get(str(value))
        return f"{name} ({str(value)[:7]})" if name else str(value)
    if column == "json_mode":
        return "JSON mode" if bool(value) else "no JSON mode"
    return str(value)


def prompt_names(frame: pd.DataFrame) -> dict[str, str]:
    """``{prompt_hash: prompt_name}`` from a frame of records (empty when it lacks either column)."""
    if not {"prompt_hash", "prompt_name"} <= set(frame.columns):
        return {}
    pairs = frame[["prompt_hash", "prompt_name"]].dropna().drop_duplicates("prompt_hash")
    return {str(h): str(n) for h, n in zip(pairs["prompt_hash"], pairs["prompt_name"], strict=True) if n}


def join_nonempty(*values: Any, sep: str) -> str:
    return sep.join(t for t in (text_or_none(v) for v in values) if t)


def prompt_label(name: Any, digest: Any) -> str:
    name, digest = text_or_none(name), text_or_none(digest)
    if name and digest:
        return f"{name} ({digest[:7]})"
    return name or digest or ""


def value_label(column: str, value: Any, names: dict[str, str]) -> str:
    return str(group_labels(pd.DataFrame({column: [value]}), column, names=names).iloc[0])


def text_or_none(value: Any) -> str | None:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    return str(value)
