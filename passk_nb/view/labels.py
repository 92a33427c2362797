"""Labels and colours shared by tables, plots and widgets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from passk_nb.data.records import NOTHING_APPLIED
from passk_nb.stats.checks import as_columns
from passk_nb.stats.result import prompt_names

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

#: Twenty colours for figures with more groups than the Okabe–Ito palette has (matplotlib's tab20,
#: dark and light of each hue taken apart so that neighbouring groups differ in hue).
_MANY: tuple[str, ...] = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94",
    "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
)  # fmt: skip


def group_colors(n: int) -> list[str]:
    """One colour per group: Okabe–Ito up to eight groups, twenty distinct hues up to twenty
    (past that, colours repeat: a figure with more lines than that needs small multiples).

    >>> group_colors(2)
    ['#0072B2', '#E69F00']
    >>> len(set(group_colors(13)))
    13
    """
    palette = PALETTE if n <= len(PALETTE) else _MANY
    return [palette[i % len(palette)] for i in range(n)]


#: One fixed colour for every outcome of :data:`passk_nb.data.records.OUTCOMES`, so a category
#: looks the same in every figure and no failure is drawn in a colour near pass's green. Chosen so
#: that every pair stays apart (CIEDE2000) for normal vision and under simulated protanopia,
#: deuteranopia and tritanopia: tests/view/test_outcome_colors.py measures it.
OUTCOME_COLORS: dict[str, str] = {
    "pass": "#009E73",  # bluish green
    "wrong_state": "#E69F00",  # orange
    "unrequested_change": "#D55E00",  # vermillion
    "format_error": "#55DDFF",  # light cyan
    "max_turns": "#2222BB",  # deep blue
    "infra_error": "#BBBBBB",  # grey (hatched in the outcome chart: not the agent's fault)
    "no_lookup": "#554400",  # dark olive
    "false_claim": "#882255",  # wine
    "agent_error": "#000000",  # black
    "wrong_output": "#556699",  # slate blue
}
#: Failures a counts table did not break down by outcome: pale, edged, apart from every outcome.
UNCOUNTED_COLOR = "#F2F2F2"


def luminance(color: str | Sequence[float]) -> float:
    """Perceived brightness of a colour in [0, 1]: write black text on it above 0.5, else white.

    >>> round(luminance("#ffffff"), 6), luminance((0.0, 0.0, 0.0, 1.0))
    (1.0, 0.0)
    """
    if isinstance(color, str):
        r, g, b = (int(color[i : i + 2], 16) / 255 for i in (1, 3, 5))
    else:
        r, g, b = (float(v) for v in color[:3])
    return 0.299 * r + 0.587 * g + 0.114 * b


def group_labels(
    frame: pd.DataFrame, by: str | Sequence[str], *, names: dict[str, str] | None = None
) -> pd.Series:
    """A readable label per row for its group of ``by``: only what differs among the rows, joined by " · ".

    Columns with one value in the whole frame are left out (unless every column is);
    ``prompt_name`` is shown inside the prompt hash's label (``name (hash)``, using
    ``names`` or the frame's ``prompt_name`` column); a ``config`` label keeps only its
    fields that differ among the rows; ``json_mode`` reads "JSON: schema", ``suite_hash``
    "suite version 3f2a9c1".

    >>> import pandas as pd
    >>> frame = pd.DataFrame({"model": ["m", "m"], "prompt_hash": ["7441de23b0e2"] * 2,
    ...                       "prompt_name": ["default"] * 2,
    ...                       "config": ["max_tokens=64, temperature=0.7", "max_tokens=64, json=schema"]})
    >>> group_labels(frame, ["model", "prompt_hash", "config"]).tolist()
    ['temperature=0.7', 'json=schema']
    >>> group_labels(frame.iloc[:1], ["model", "prompt_hash"]).tolist()
    ['m · default (7441de2)']
    """
    by = as_columns(by)
    names = {**prompt_names(frame), **(names or {})}
    if not by:
        return pd.Series("all trials", index=frame.index)
    shown = [col for col in by if not (col == "prompt_name" and "prompt_hash" in by)]
    shown = [col for col in shown if not _clean_runs(frame, col)] or shown
    varying = [col for col in shown if frame[col].nunique(dropna=False) > 1]
    parts = []
    for col in varying or shown:
        if col == "config" and varying:
            differences = config_differences(frame[col], frame["model"] if "model" in frame else None)
            if differences.nunique() > 1 or len(varying) == 1:
                parts.append(differences)
        else:
            parts.append(frame[col].map(lambda v, col=col: format_value(col, v, names)).astype(str))
    label = parts[0]
    for part in parts[1:]:
        label = label + " · " + part
    return label


#: What a figure calls its group when it has only one; what that group is comes once, in the title.
ONE_GROUP = "all trials"


def figure_labels(
    frame: pd.DataFrame,
    by: str | Sequence[str],
    *,
    shown: str | Sequence[str] | None = None,
    names: dict[str, str] | None = None,
) -> tuple[pd.Series, str]:
    """A figure's label per row for its group of ``by``, and what its one group is ("" unless one).

    Several groups: :func:`group_labels` of the ``shown`` columns (default ``by``): only what
    differs among the groups. One group: nothing differs, so it is :data:`ONE_GROUP` in legends and
    ticks, and every field of ``by`` (the whole ``config``) comes back once, for the title
    (:func:`passk_nb.view.axes.set_title`'s ``note``), as the report says them once above its table.

    >>> import pandas as pd
    >>> frame = pd.DataFrame({"model": ["m", "m"], "config": ["max_turns=6, temperature=0.7"] * 2})
    >>> labels, described = figure_labels(frame, ["model", "config"])
    >>> labels.tolist(), described
    (['all trials', 'all trials'], 'm · max_turns=6, temperature=0.7')
    >>> figure_labels(frame.assign(model=["a", "b"]), ["model", "config"])[0].tolist()
    ['a', 'b']
    """
    by = as_columns(by)
    if not by or frame.empty:
        return group_labels(frame, by, names=names), ""
    if len(frame[list(by)].drop_duplicates()) > 1:
        return group_labels(frame, by if shown is None else shown, names=names), ""
    described = str(group_labels(frame.iloc[:1], by, names={**prompt_names(frame), **(names or {})}).iloc[0])
    return pd.Series(ONE_GROUP, index=frame.index, dtype=object), "" if described == ONE_GROUP else described


def config_differences(configs: pd.Series, models: pd.Series | None = None) -> pd.Series:
    """Each ``config`` label cut down to the fields that differ among ``configs``.

    A Python agent's code fingerprint (``agent=…``) is left out where ``models`` (the agent's
    name) already tells the rows apart, and shortened to 7 characters where two share a name.

    >>> config_differences(pd.Series(["a=1, b=2", "a=1, b=3", "a=1"])).tolist()
    ['b=2', 'b=3', 'default']
    >>> agents = pd.Series(["agent=180a577b6038", "agent=8cdb6adf1960", "agent=81982f96c347"])
    >>> config_differences(agents, pd.Series(["careful", "hasty", "hasty"])).tolist()
    ['default', 'agent=8cdb6ad', 'agent=81982f9']
    """
    fields = [_config_fields(str(c)) for c in configs]
    keys = sorted({key for f in fields for key in f})
    differing = [key for key in keys if len({f.get(key) for f in fields}) > 1]
    if "agent" in differing:
        agents = pd.Series([f.get("agent", "") for f in fields], index=configs.index)
        names = models.astype(str) if models is not None else pd.Series("", index=configs.index)
        per_name = agents.groupby(names).transform("nunique")
        for f, shared_name in zip(fields, per_name > 1, strict=True):
            if "agent" in f:
                f["agent"] = f["agent"][:7]
                if not shared_name:
                    del f["agent"]  # the agent's name tells it apart
    labels = [", ".join(f"{key}={f[key]}" for key in differing if key in f) or "default" for f in fields]
    return pd.Series(labels, index=configs.index, dtype=object)


def config_shared(configs: pd.Series) -> str:
    """The ``config`` fields every one of ``configs`` has with the same value ("" when none).

    >>> config_shared(pd.Series(["a=1, b=2", "a=1, b=3"]))
    'a=1'
    """
    fields = [_config_fields(str(c)) for c in configs]
    if not fields:
        return ""
    first = fields[0]
    return ", ".join(
        f"{key}={value}" for key, value in first.items() if all(f.get(key) == value for f in fields)
    )


def _config_fields(config: str) -> dict[str, str]:
    if config in ("", "default", "nan", "None"):
        return {}
    fields = {}
    for part in config.split(", "):
        key, _, value = part.partition("=")
        fields[key] = value
    return fields


def _clean_runs(frame: pd.DataFrame, column: str) -> bool:
    """Whether ``column`` is ``faults`` or ``perturbation`` and no row had any: nothing to label."""
    return column in NOTHING_APPLIED and bool((frame[column] == NOTHING_APPLIED[column]).all())


def format_value(column: str, value: object, names: dict[str, str]) -> str:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "–"
    if column == "prompt_hash":
        name = names.get(str(value))
        return f"{name} ({str(value)[:7]})" if name else str(value)
    if column == "suite_hash":
        return f"suite version {str(value)[:7] or 'unknown'}"
    if column == "json_mode":
        return f"JSON: {value}"
    if column in NOTHING_APPLIED:
        return f"{column}: {value}"
    return str(value)


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


def cut_text(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its first ``limit - 1`` and "…".

    >>> cut_text("refund_order(O1001)", 8), cut_text("answer", 8)
    ('refund_…', 'answer')
    """
    return text if len(text) <= limit else text[: limit - 1] + "…"
