"""Where trajectories branch: :func:`plot_divergence` draws the tree of one task's action sequences.

>>> import json, pandas as pd
>>> replies = lambda *acts: json.dumps([{"kind": "reply", "action": a} for a in acts])
>>> get, ok = {"tool": "get", "args": {"id": "A"}}, {"answer": "done"}
>>> df = pd.DataFrame({"task": "t", "passed": [True, True, False], "outcome": ["pass", "pass", "wrong_state"],
...                    "transcript": [replies(get, ok), replies(get, ok), replies(ok)]})
>>> from passk_nb.stats.divergence import action_tree
>>> ax = plot_divergence(action_tree(df))
>>> sorted(t.get_text() for t in ax.texts if "✓" in t.get_text())
['0✓ 1✗', '2✓ 0✗', '2✓ 0✗']
>>> import matplotlib.pyplot as plt; plt.close("all")
"""

from __future__ import annotations

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from passk_nb.view.axes import legend_outside, new_axes, plain_text, require_result
from passk_nb.view.labels import OUTCOME_COLORS, cut_text

#: Edge colours: every trial through the edge passed, failed, or both.
PASS_COLOR, FAIL_COLOR, MIXED_COLOR = OUTCOME_COLORS["pass"], OUTCOME_COLORS["unrequested_change"], "#777777"
#: Longest action label drawn (longer ones are cut with "…").
MAX_LABEL = 34


@plain_text
def plot_divergence(
    tree: pd.DataFrame,
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """The branching of one task's action sequences, passing and failing trials together.

    Step by step from the left, each edge is one action (``tool(key=value)``, ``answer`` or
    ``<format error>``), labelled with the trials that took it (``3✓ 1✗``: three passing,
    one failing) and drawn green when only passing trials took it, vermillion when only
    failing ones did, grey when both; its width grows with the count. A bold vermillion
    edge leaving a path that passing trials took is where failing trials part ways (the
    rows of :func:`passk_nb.stats.divergence.divergence`). ``tree`` is what
    :func:`passk_nb.stats.action_tree` returned for one task of one configuration. Returns the Axes.
    """
    make = "passk_nb.stats.action_tree(df, task)"
    tree = require_result(tree, "action_tree", "plot_divergence", make)
    task_name = str(tree.attrs["task"])
    if ax is None:
        depth = int(tree["depth"].max()) if len(tree) else 1
        leaves = max(1, int((~tree["node"].isin(tree["parent"])).sum()))
        ax = new_axes(None, figsize=(min(3.2 * depth + 1.5, 18), min(0.7 * leaves + 1.5, 12)))
    y = _layout(tree)
    pass_through = dict(zip(tree["node"], tree["n_pass"], strict=True)) | {0: 1}
    widest = max(1, int((tree["n_pass"] + tree["n_fail"]).max())) if len(tree) else 1
    for row in tree.itertuples():
        n = row.n_pass + row.n_fail
        color = PASS_COLOR if row.n_fail == 0 else FAIL_COLOR if row.n_pass == 0 else MIXED_COLOR
        parts = row.n_pass == 0 and pass_through[row.parent] > 0
        x0, x1, y0, y1 = row.depth - 1, row.depth, y[row.parent], y[row.node]
        ax.plot([x0, x1], [y0, y1], color=color, lw=1 + 5 * n / widest, solid_capstyle="round", zorder=1)
        ax.scatter([x1], [y1], s=18, color=color, zorder=2)
        label = cut_text(row.action, MAX_LABEL)
        mid = ((x0 + x1) / 2, (y0 + y1) / 2)
        ax.annotate(
            label,
            mid,
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=8,
            fontweight="bold" if parts else "normal",
            color=FAIL_COLOR if parts else "black",
        )
        ax.annotate(
            f"{row.n_pass}✓ {row.n_fail}✗",
            mid,
            xytext=(0, -3),
            textcoords="offset points",
            fontsize=7,
            ha="center",
            va="top",
        )
    ax.scatter([0], [y[0]], s=30, color="black", zorder=2)
    ax.annotate("start", (0, y[0]), xytext=(-4, 4), textcoords="offset points", ha="right", fontsize=8)
    depths = range(int(tree["depth"].max()) if len(tree) else 0)
    ax.set_xticks([d + 0.5 for d in depths], [str(d) for d in depths])
    ax.set_xlabel("step (as in divergence())")
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_xlim(-0.3, (int(tree["depth"].max()) if len(tree) else 1) + 0.2)
    legend_outside(
        ax,
        handles=[
            Line2D([], [], color=PASS_COLOR, lw=3, label="passing trials only"),
            Line2D([], [], color=MIXED_COLOR, lw=3, label="both"),
            Line2D([], [], color=FAIL_COLOR, lw=3, label="failing trials only"),
        ],
    )
    if title != "":
        ax.set_title(title or f"{task_name}: where trajectories branch")
    return ax


def _layout(tree: pd.DataFrame) -> dict[int, float]:
    """y of every node: leaves one apart in depth-first order, a parent at the mean of its children."""
    children: dict[int, list[int]] = {}
    for node, parent in zip(tree["node"], tree["parent"], strict=True):
        children.setdefault(int(parent), []).append(int(node))
    y: dict[int, float] = {}
    next_leaf = [0.0]

    def place(node: int) -> float:
        kids = children.get(node, [])
        if not kids:
            y[node] = -next_leaf[0]
            next_leaf[0] += 1
        else:
            y[node] = sum(place(kid) for kid in kids) / len(kids)
        return y[node]

    place(0)
    return y
