"""What every plot shares: a new Axes when none is given, the title, the legend outside the data,
the one check that a plot was handed the result it draws, and which group columns a label needs.

>>> ax = new_axes(None)
>>> set_title(ax, None, "default title"); ax.get_title(loc="left")
'default title'
>>> import matplotlib.pyplot as plt; plt.close("all")
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FixedFormatter, FuncFormatter
from matplotlib.transforms import offset_copy

from passk_nb.view.labels import ONE_GROUP

_F = TypeVar("_F", bound=Callable[..., Axes])
#: A dollar sign matplotlib would read as the start of mathtext (not already escaped).
_DOLLAR = re.compile(r"(?<!\\)\$")


def plain_text(plot: _F) -> _F:
    """Draw every text of ``plot``'s figure as written: a ``$`` in a task id or model name is no
    mathtext (matplotlib failed on ``$$d`` and italicised ``$x$``). Titles, axis and legend labels,
    annotations and fixed tick labels get ``\\$``, which matplotlib shows as ``$``.

    >>> @plain_text
    ... def plot(ax=None):
    ...     ax = new_axes(ax); ax.set_yticks([0], labels=["$$d"]); ax.set_title("$x$"); return ax
    >>> ax = plot(); ax.figure.canvas.draw(); ax.get_title()
    '\\\\$x\\\\$'
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """

    @functools.wraps(plot)
    def drawn(*args: Any, **kwargs: Any) -> Axes:
        ax = plot(*args, **kwargs)
        figure = ax.figure
        for each in figure.axes:
            for axis in (each.xaxis, each.yaxis):
                formatter = axis.get_major_formatter()
                if isinstance(formatter, FixedFormatter):
                    formatter.seq = [_plain(str(text)) for text in formatter.seq]
                elif isinstance(formatter, FuncFormatter):  # set_ticks(..., labels=...) makes one
                    formatter.func = _plain_func(formatter.func)
        for text in figure.findobj(Text):
            text.set_text(_plain(text.get_text()))
        return ax

    return drawn  # type: ignore[return-value]


def _plain(text: str) -> str:
    return _DOLLAR.sub(r"\\$", text)


def _plain_func(func: Callable[..., Any]) -> Callable[..., str]:
    if getattr(func, "_plain", False):
        return func
    plain = functools.wraps(func)(lambda *args: _plain(str(func(*args))))
    plain._plain = True  # type: ignore[attr-defined]
    return plain


#: The default figure size of a plot, in inches.
FIGSIZE = (7.5, 4.0)


def new_axes(ax: Axes | None, figsize: tuple[float, float] = FIGSIZE) -> Axes:
    """``ax``, or the Axes of a new figure of ``figsize`` (constrained layout)."""
    if ax is not None:
        return ax
    _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def set_title(ax: Axes, title: str | None, default: str, note: str = "") -> None:
    """The title at the left: ``default`` for None, none for ``""``.

    ``note`` (what the figure's one group is, from :func:`passk_nb.view.labels.figure_labels`)
    becomes a last line ``all trials: <note>``, wrapped, unless the title already says it
    (also across the lines of a wrapped title).

    >>> ax = new_axes(None)
    >>> set_title(ax, None, "Per-task success", note="m · temperature=0.7"); ax.get_title(loc="left")
    'Per-task success\\nall trials: m · temperature=0.7'
    >>> set_title(ax, "m at temperature 0.7", "", note="m"); ax.get_title(loc="left")
    'm at temperature 0.7'
    >>> set_title(ax, "A: m ·\\ntemperature=0.7", "", note="A: m · temperature=0.7"); ax.get_title(loc="left")
    'A: m ·\\ntemperature=0.7'
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    text = default if title is None else title
    if text and note and "".join(note.split()) not in "".join(text.split()):
        text += "\n" + wrap_fields(f"{ONE_GROUP}: {note}", _TITLE_WIDTH)
    if text:
        ax.set_title(text, loc="left", fontsize="medium")


#: Characters in a line of a title's note before it wraps.
_TITLE_WIDTH = 90
#: Characters in a line of a long tick label (a configuration's name) before it wraps.
TICK_WIDTH = 60


def wrap_fields(text: str, width: int) -> str:
    """``text`` in lines of at most ``width`` characters, broken only between fields (after " · "
    or ", "), so that no ``key=value`` is cut; a field longer than ``width`` is broken after its
    "/" (a provider/model), else gets a line of its own.

    >>> print(wrap_fields("m · temperature=0.0, json=schema, max_turns=6", 24))
    m · temperature=0.0,
    json=schema, max_turns=6
    >>> print(wrap_fields("A: ollama/acme/reasoning-instruct · json=schema", 24))
    A: ollama/acme/
    reasoning-instruct ·
    json=schema
    """
    fields = re.split(r"(?<=, )|(?<= · )", text)
    fields = [
        part for field in fields for part in (re.split(r"(?<=/)", field) if len(field) > width else [field])
    ]
    lines = [""]
    for field in fields:
        if lines[-1] and len(lines[-1] + field.rstrip()) > width:
            lines.append("")
        lines[-1] += field
    return "\n".join(line.rstrip() for line in lines)


def label_inches(labels: Sequence[str], fontsize: float = 10.0) -> float:
    """About how wide the longest line of ``labels`` is, in inches, at ``fontsize`` points: for
    figures to make room for long tick labels instead of squeezing their data.

    >>> round(label_inches(["A: llama3.1:8b · strict (9c1f0a7)", "B"]), 2)
    2.75
    """
    longest = max((len(line) for label in labels for line in str(label).splitlines()), default=0)
    return longest * 0.6 * fontsize / 72


def legend_outside(ax: Axes, **options: Any) -> None:
    """The legend to the right of the data, top-aligned, small and frameless."""
    ax.legend(
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        borderaxespad=0,
        frameon=False,
        fontsize="small",
        title_fontsize="small",
        **options,
    )


def legend_below(ax: Axes, **options: Any) -> None:
    """The legend centred under the axis' tick labels and its label, small and frameless, in up
    to three columns: for a figure whose data needs the whole width."""
    below_ticks = offset_copy(ax.transAxes, fig=cast(Figure, ax.figure), y=-34, units="points")
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        bbox_transform=below_ticks,
        ncol=3,
        frameon=False,
        fontsize="small",
        **options,
    )


def require_result(frame: object, statistic: str | tuple[str, ...], plot: str, make: str) -> pd.DataFrame:
    """``frame`` when it is what the statistic ``statistic`` returned (its ``.attrs['statistic']``,
    :mod:`passk_nb.stats.result`); else the one error every plot gives: what it draws and the call
    that makes it (``make``, e.g. ``passk_nb.curve(df)``).

    >>> require_result(pd.DataFrame({"task": ["a"]}), "curve", "plot_curve", "passk_nb.curve(df)")
    Traceback (most recent call last):
    ...
    TypeError: plot_curve draws what curve() returns; this is a frame without .attrs['statistic'] (trial records?). Compute it first: passk_nb.view.plot_curve(passk_nb.curve(df)), or passk_nb.curve(df).plot()
    """  # noqa: E501
    names = (statistic,) if isinstance(statistic, str) else statistic
    if isinstance(frame, pd.DataFrame) and frame.attrs.get("statistic") in names:
        return frame
    if not isinstance(frame, pd.DataFrame):
        got = f"a {type(frame).__name__}"
    elif frame.attrs.get("statistic"):
        got = f"what {frame.attrs['statistic']}() returned"
    else:
        got = "a frame without .attrs['statistic'] (trial records?)"
    raise TypeError(
        f"{plot} draws what {names[0]}() returns; this is {got}. Compute it first: "
        f"passk_nb.view.{plot}({make}), or {make}.plot()"
    )


def label_columns(frame: pd.DataFrame, by: Sequence[str]) -> tuple[str, ...]:
    """The columns of ``by`` a label needs: those that tell the groups apart, without repeats.

    ``prompt_name`` goes when ``prompt_hash`` is there (its label shows the name); a column goes
    when the others already separate the groups (``run_id`` next to ``model``).

    >>> label_columns(pd.DataFrame({"model": ["a", "b"], "run_id": ["r1", "r2"]}), ("model", "run_id"))
    ('model',)
    """
    columns = [col for col in by if not (col == "prompt_name" and "prompt_hash" in by)]
    if not columns or frame.empty:
        return tuple(columns)
    n_groups = len(frame[columns].drop_duplicates())
    for col in reversed(list(columns)):
        rest = [c for c in columns if c != col]
        if rest and len(frame[rest].drop_duplicates()) == n_groups and col != "task":
            columns = rest
    return tuple(columns)
