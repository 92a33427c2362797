"""The reliability card drawn: :func:`plot_card` (one row per measure, each configuration's value
and interval) and :func:`card_html` (one HTML page). Both draw :func:`~passk_nb.stats.reliability_card`'s
rows as they are; an axis the run did not measure is written as such.

>>> import tempfile, passk_nb
>>> from passk_nb.stats.card import reliability_card
>>> df = passk_nb.run("scripted", trials=3, out=tempfile.mkdtemp(), progress=False)
>>> card = reliability_card(df, k=2, n_boot=50)
>>> ax = plot_card(card)
>>> [t.get_text() for t in ax.get_yticklabels()][:2]
['pass@2', 'pass^2']
>>> "not measured" in card_html(card)
True
>>> import matplotlib.pyplot as plt; plt.close("all")
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from passk_nb.stats.params import share_docs
from passk_nb.stats.result import result_by
from passk_nb.view.axes import new_axes, require_result, set_title
from passk_nb.view.labels import PALETTE, figure_labels
from passk_nb.view.report_html import _figure

_MAKE = "passk_nb.stats.reliability_card(df)"


def _configurations(card: pd.DataFrame) -> tuple[pd.Series, str]:
    """Each row's configuration label (the fields that differ between the card's configurations),
    and what the one configuration is when there is one."""
    return figure_labels(card, list(result_by(card, "reliability_card()")))


def _on_unit_scale(card: pd.DataFrame) -> pd.Series:
    """The rows drawn on the shared axis: shares, rates and changes in them (not costs)."""
    return card["axis"] != "cost"


@share_docs
def plot_card(card: pd.DataFrame, *, ax: Axes | None = None, title: str | None = None) -> Axes:
    """Every measured share of the card on one axis: a row per measure, a marker per configuration,
    its interval as a line; a measure the run did not measure says so at the left edge.

    card: what :func:`passk_nb.stats.reliability_card` returned.
    {ax}
    {title}

    Costs are on another scale: they are in :func:`card_html`'s table.
    """
    card = require_result(card, "reliability_card", "plot_card", _MAKE)
    shown = card[_on_unit_scale(card)]
    labels, note = _configurations(shown)
    measures = list(dict.fromkeys(shown["measure"]))
    configurations = list(dict.fromkeys(labels))
    ax = new_axes(ax, figsize=(7.5, 0.45 * len(measures) + 1.6))
    step = 0.6 / max(len(configurations), 1)
    for j, configuration in enumerate(configurations):
        rows = shown[labels == configuration]
        y = (
            np.array([measures.index(m) for m in rows["measure"]])
            + (j - (len(configurations) - 1) / 2) * step
        )
        color = PALETTE[j % len(PALETTE)]
        measured = rows["measured"].to_numpy(dtype=bool)
        ax.hlines(y[measured], rows["lo"][measured], rows["hi"][measured], color=color, linewidth=2)
        ax.plot(rows["value"][measured], y[measured], "o", color=color, label=configuration)
    for i, measure in enumerate(measures):
        if not shown.loc[shown["measure"] == measure, "measured"].any():
            ax.text(-0.98, i, "not measured", va="center", fontsize=8, color="0.4", style="italic")
    axes_of = shown.drop_duplicates("measure").set_index("measure")["axis"]
    for i, measure in enumerate(measures):
        if i == 0 or axes_of[measure] != axes_of[measures[i - 1]]:
            if i:
                ax.axhline(i - 0.5, color="0.85", linewidth=0.8)
            ax.text(0.99, i - 0.45, axes_of[measure], transform=ax.get_yaxis_transform(), ha="right",
                    va="top", fontsize=8, color="0.45")  # fmt: skip
    ax.set_yticks(range(len(measures)), measures)
    ax.set_ylim(len(measures) - 0.5, -0.5)
    ax.set_xlim(-1.0, 1.0)
    ax.axvline(0, color="0.8", linewidth=0.8)
    ax.set_xlabel(f"value and {int(round(100 * card.attrs.get('ci', 0.95)))}% interval")
    if len(configurations) > 1:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    set_title(ax, title, "Reliability card", note=note)
    return ax


def _value(value: float) -> str:
    """A value as the card writes it: ∞ for a cost never paid back (pass^k = 0), — for none."""
    if np.isinf(value):
        return "∞"
    return "—" if np.isnan(value) else f"{value:.3g}"


def _cell(row: pd.Series) -> str:
    if not row["measured"]:
        return f"<span class='absent'>{html.escape(str(row['note']))}</span>"
    value = _value(row["value"])
    interval = "" if not np.isfinite(row["lo"]) else f" [{row['lo']:.3g}, {row['hi']:.3g}]"
    note = f"<div class='note'>{html.escape(str(row['interval']))}" + (
        f"; {html.escape(str(row['note']))}</div>" if row["note"] else "</div>"
    )
    return f"<b>{value}</b>{interval}{note}"


def card_html(card: pd.DataFrame, *, title: str = "Reliability card") -> str:
    """One HTML page: the card's figure, then a table of every axis and measure with a column per
    configuration (value, interval, which interval; how to measure what was not)."""
    card = require_result(card, "reliability_card", "card_html", _MAKE)
    labels, note = _configurations(card)
    configurations = list(dict.fromkeys(labels))
    figure = _figure(plot_card(card), title)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in configurations)
    body = []
    for (axis, measure), rows in card.assign(_config=labels).groupby(["axis", "measure"], sort=False):
        cells = "".join(f"<td>{_cell(rows[rows['_config'] == c].iloc[0])}</td>" for c in configurations)
        body.append(
            f"<tr><td class='axis'>{html.escape(axis)}</td><td>{html.escape(measure)}</td>{cells}</tr>"
        )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p>{html.escape(note)}</p>{figure}"
        f"<table><thead><tr><th>axis</th><th>measure</th>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></body></html>"
    )


def _text(row: pd.Series) -> str:
    if not row["measured"]:
        return str(row["note"])
    if not np.isfinite(row["lo"]):
        return _value(row["value"])
    value = "point not shown" if np.isnan(row["value"]) else _value(row["value"])  # e.g. pass^K past n
    return f"{value} [{row['lo']:.3g}, {row['hi']:.3g}]"


def card_table(card: pd.DataFrame, fmt: str = "table") -> str:
    """The card as text: ``"table"`` or ``"markdown"`` (a row per axis and measure, a column per
    configuration: value [interval], or how to measure it), ``"csv"`` or ``"json"`` (every column).
    Given :func:`~passk_nb.stats.card_comparison`'s frame: a column per configuration and one for
    the paired difference b − a [interval]."""
    card = require_result(card, ("reliability_card", "card_comparison"), "card_table", _MAKE)
    if card.attrs["statistic"] == "card_comparison" and fmt in ("table", "markdown"):
        return _comparison_text(card, fmt)
    if fmt == "csv":
        return card.to_csv(index=False)
    if fmt == "json":
        return card.to_json(orient="records", indent=1)
    labels, note = _configurations(card)
    wide = (
        card.assign(configuration=labels, shown=card.apply(_text, axis=1))
        .pivot_table(
            index=["axis", "measure"], columns="configuration", values="shown", aggfunc="first", sort=False
        )
        .reset_index()
    )
    wide.columns.name = None
    level = int(round(100 * card.attrs.get("ci", 0.95)))
    head = f"reliability card{': ' + note if note else ''} ({level}% intervals)"
    if fmt == "markdown":
        cells = [list(wide.columns), ["---"] * wide.shape[1], *wide.astype(str).values.tolist()]
        return head + "\n\n" + "\n".join("| " + " | ".join(row) + " |" for row in cells)
    return head + "\n" + wide.to_string(index=False)


def _comparison_text(both: pd.DataFrame, fmt: str) -> str:
    a, b = (str(both.attrs[key]) for key in ("a", "b"))
    wide = pd.DataFrame(
        {
            "axis": both["axis"],
            "measure": both["measure"],
            a: both["a"].map(_value),
            b: both["b"].map(_value),
            f"{b} − {a}": [
                _value(d) + ("" if not np.isfinite(lo) else f" [{lo:.3g}, {hi:.3g}]")
                for d, lo, hi in zip(both["diff"], both["lo"], both["hi"], strict=True)
            ],
        }
    )
    head = f"{both.attrs['on']}: {b} against {a}, paired by task where an interval is shown"
    if fmt == "markdown":
        cells = [list(wide.columns), ["---"] * wide.shape[1], *wide.astype(str).values.tolist()]
        return head + "\n\n" + "\n".join("| " + " | ".join(row) + " |" for row in cells)
    return head + "\n" + wide.to_string(index=False)


_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:60em;margin:1em auto;color:#222}"
    "table{border-collapse:collapse;width:100%}td,th{border-top:1px solid #ddd;padding:.35em .6em;"
    "text-align:left;vertical-align:top}.axis{color:#555}.note{font-size:.8em;color:#666}"
    ".absent{color:#888;font-style:italic}img.figure{max-width:100%}"
)
