"""Jupyter explorers: :func:`explore` (filters, a k slider, a live table and curve) and a
transcript viewer (:func:`show_transcript`, :func:`browse_transcripts`, and two trials side by
side: :func:`compare_transcripts`, or the browser's "beside" choice).

Model output is untrusted text: every piece of record text is HTML-escaped before it
reaches the page, so a reply holding ``<script>`` shows as text.

The explorers are ipywidgets 8 widgets with a static fallback. Their output carries both
the live widget and a static rendering (an HTML table and a PNG figure, or the first
transcripts): JupyterLab, Notebook 7 and VS Code show the widget; a headless run (nbmake),
nbviewer or GitHub shows the static part. ``static=True`` gives only the static part,
``static=False`` only the widget.

>>> import tempfile
>>> import passk_nb
>>> df = passk_nb.run("scripted", trials=2, out=tempfile.mkdtemp(), progress=False)
>>> sorted(explore(df, static=True)._repr_mimebundle_())
['image/png', 'text/html', 'text/plain']
>>> "refund_order" in transcript_html(df.iloc[0]) or "change_address" in transcript_html(df.iloc[0])
True
"""

from __future__ import annotations

import base64
import html
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as widgets
import numpy as np
import pandas as pd
from IPython.display import HTML

from passk_nb.stats.consistency import consistency, consistency_summary
from passk_nb.stats.counts import counts
from passk_nb.stats.divergence import KeyArgs, action_sequence, common_prefix
from passk_nb.stats.flags import claimed_unperformed_action
from passk_nb.stats.params import CI, INFRA, N_BOOT, SEED, default_by
from passk_nb.stats.summary import curve, summarize
from passk_nb.view.curve_image import CurveImage, render_curve
from passk_nb.view.labels import (
    format_value,
    prompt_names,
    text_or_none,
    value_label,
)
from passk_nb.view.tables import render_table, summary_table
from passk_nb.view.transcript_html import (
    failed_first,
    transcript_html,
    transcript_pair_html,
    trial_label,
)

#: Trials up to which the explorer shows consistency when it succeeds at once (a pass over every
#: transcript, ~40 µs a trial); above, it waits for its checkbox.
CONSISTENCY_ROWS = 20_000

#: Columns :func:`explore` offers as filters, when present with more than one value.
FILTER_COLUMNS: tuple[str, ...] = ("suite_hash", "provider", "model", "prompt_hash", "json_mode", "task")


class _Rendered:
    """A widget plus its static rendering; Jupyter picks the richest one its front end can show."""

    def __init__(self, widget: widgets.Widget, static: bool | None) -> None:
        self.widget = widget
        self.static = static

    def static_html(self) -> str:
        raise NotImplementedError

    def static_png(self) -> bytes | None:
        return None

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle: dict[str, Any] = {}
        if self.static is not True:
            bundle.update(self.widget._repr_mimebundle_())
        if self.static is not False:
            bundle["text/html"] = self.static_html()
            png = self.static_png()
            if png is not None:
                bundle["image/png"] = base64.b64encode(png).decode("ascii")
        bundle["text/plain"] = f"<{type(self).__name__}: open in Jupyter to explore>"
        return bundle


class Explorer(_Rendered):
    """The object :func:`explore` returns: ``widget`` (the live explorer), ``summary()``, ``curve()``,
    ``figure_png()``.

    The trials are counted once (:func:`passk_nb.stats.counts.counts` per group, filter value and
    task, kept as ``counts``); every widget change recomputes from those counts, never from the
    trials. A filter change re-selects count rows, recomputes the curve and draws it once
    (:func:`passk_nb.view.curve_image.render_curve`, kept per selection). A k change recomputes
    only the summary at the new k and paints the k marker onto the drawn curve: no figure is
    drawn again.
    """

    #: Selections whose curve and drawn image are kept (the most recent ones).
    KEPT_SELECTIONS = 16

    def __init__(
        self,
        df: pd.DataFrame,
        *,
        by: tuple[str, ...],
        k: int | None,
        ci: float,
        n_boot: int,
        seed: int,
        static: bool | None,
    ) -> None:
        self.df, self.by, self.ci, self.n_boot, self.seed = df, by, ci, n_boot, seed
        self.names = prompt_names(df)
        self.filters: dict[str, widgets.SelectMultiple] = {}
        for column in FILTER_COLUMNS:
            if column not in df.columns:
                continue
            values = list(pd.unique(df[column].dropna()))
            if len(values) < 2 and column != "task":
                continue
            options = [(value_label(column, v, self.names), v) for v in values]
            self.filters[column] = widgets.SelectMultiple(
                options=options,
                value=tuple(values),
                rows=min(6, len(values)),
                description=column,
                layout=widgets.Layout(width="auto"),
            )
        #: Trial counts per (``by`` columns, filter columns, task): the only pass over the trials.
        self.counts = counts(df, by=tuple(dict.fromkeys([*by, *self.filters])), infra=INFRA)
        #: Consistency when it succeeds per (``by``, filter columns, task): read from every transcript
        #: once, when first shown (at once up to CONSISTENCY_ROWS trials, else when ticked).
        self._consistency: pd.DataFrame | None = None
        readable = {"transcript", "passed"} <= set(df.columns)
        self.show_consistency = widgets.Checkbox(
            value=readable and len(df) <= CONSISTENCY_ROWS,
            disabled=not readable,
            description="consistency when it succeeds",
        )
        per_task = counts(self.counts, by=by, infra=INFRA)
        n_max = int((per_task["n"] + per_task["n_infra"]).max())
        self.k = widgets.IntSlider(
            value=min(k or 2, n_max), min=1, max=max(n_max, 1), description="k", continuous_update=False
        )
        self.table = widgets.HTML()
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.note = widgets.HTML()
        self._selected: tuple[tuple[Any, ...], pd.DataFrame] | None = None
        self._curves: dict[tuple[Any, ...], pd.DataFrame] = {}
        self._images: dict[tuple[Any, ...], CurveImage] = {}
        self._pngs: dict[tuple[Any, ...], bytes] = {}
        for control in (*self.filters.values(), self.k, self.show_consistency):
            control.observe(self._update, names="value")
        controls = widgets.HBox(list(self.filters.values()), layout=widgets.Layout(flex_flow="row wrap"))
        parts = [controls, self.k, self.show_consistency, self.note, self.table, self.image]
        super().__init__(widgets.VBox(parts), static)
        self._update()

    def selection(self) -> pd.DataFrame:
        """The trials the filters currently select."""
        return self.df[self._mask(self.df)]

    def selected_counts(self) -> pd.DataFrame:
        """The rows of ``counts`` the filters currently select (kept until the filters change)."""
        key = self._selection_key()
        if self._selected is None or self._selected[0] != key:
            self._selected = key, self.counts[self._mask(self.counts)]
        return self._selected[1]

    def _mask(self, frame: pd.DataFrame) -> np.ndarray:
        mask = np.ones(len(frame), dtype=bool)
        for column, control in self.filters.items():
            mask &= frame[column].isin(list(control.value)).to_numpy()
        return mask

    def _selection_key(self) -> tuple[Any, ...]:
        return tuple(tuple(c.value) for c in self.filters.values())

    def summary(self) -> pd.DataFrame:
        """:func:`passk_nb.stats.summary.summarize` of the selection at the slider's k (from the counts)."""
        return summarize(
            self.selected_counts(), k=self.k.value, by=self.by, ci=self.ci, n_boot=self.n_boot, seed=self.seed
        )

    def curve(self) -> pd.DataFrame:
        """:func:`passk_nb.stats.summary.curve` of the selection (from the counts; kept per selection)."""
        key = self._selection_key()
        if key not in self._curves:
            _keep(
                self._curves,
                key,
                curve(self.selected_counts(), by=self.by, ci=self.ci, n_boot=self.n_boot, seed=self.seed),
                self.KEPT_SELECTIONS,
            )
        return self._curves[key]

    def curve_image(self) -> CurveImage | None:
        """The curve of the selection drawn without the k marker (kept per selection), None when
        nothing is selected."""
        if self.selected_counts().empty:
            return None
        key = self._selection_key()
        if key not in self._images:
            image = render_curve(self.curve(), names=self.names)
            _keep(self._images, key, image, self.KEPT_SELECTIONS)
        return self._images[key]

    def figure_png(self) -> bytes | None:
        """The curve of the selection as PNG with the k marker (the curve drawn once per selection,
        the marker painted per k), None when nothing is selected."""
        image = self.curve_image()
        if image is None:
            return None
        key = (self._selection_key(), self.k.value)
        if key not in self._pngs:
            _keep(self._pngs, key, image.png(self.k.value), 4 * self.KEPT_SELECTIONS)
        return self._pngs[key]

    def _update(self, _change: object = None) -> None:
        if self.selected_counts().empty:
            self.note.value = "<i>No trials match the filters.</i>"
            self.table.value = ""
            return
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                table = _table_html(summary_table(self.summary(), ci=self.ci), self.by, self.names)
                png = self.figure_png()
            except ValueError as err:  # e.g. k above every selected task's trials
                table, png = f"<p><b>{html.escape(str(err))}</b></p>", None
        notes = list(dict.fromkeys(str(w.message) for w in caught))
        self.note.value = "".join(f"<p style='color:#8a5a00'>⚠ {html.escape(n)}</p>" for n in notes)
        self.table.value = table + _INTERVAL_NOTE + self._consistency_html()
        if png is not None:
            self.image.value = png

    def consistency_summary(self) -> pd.DataFrame | None:
        """:func:`passk_nb.stats.consistency_summary` of the selection (None without transcripts)."""
        if self.show_consistency.disabled:
            return None
        if self._consistency is None:
            keys = [c for c in dict.fromkeys([*self.by, *self.filters]) if c != "task"]
            self._consistency = consistency(self.df, by=keys)
        return consistency_summary(self._consistency[self._mask(self._consistency)], by=self.by)

    def _consistency_html(self) -> str:
        table = self.consistency_summary() if self.show_consistency.value else None
        if table is None or table.empty:
            return ""
        shown = table.rename(columns={"tasks_passed": "tasks with a pass", "n_pass": "passing trials"})
        return "<p><b>Consistency when it succeeds</b> (share of passing trials doing the same):</p>" + (
            _table_html(shown.round(3), self.by, self.names)
        )

    def static_html(self) -> str:
        return self.note.value + self.table.value + _img(self.static_png())

    def static_png(self) -> bytes | None:
        return self.figure_png()


def _keep(cache: dict[Any, Any], key: Any, value: Any, size: int) -> None:
    """Store ``value`` under ``key``, dropping the oldest entries beyond ``size``."""
    cache[key] = value
    for old in list(cache)[: max(len(cache) - size, 0)]:
        del cache[old]


_INTERVAL_NOTE = (
    "<p style='font-size:smaller'>“new tasks”: an interval over tasks, Korn–Graubard (how would the agent "
    "do on other tasks like these?), declined below five tasks; “these tasks”: ± z·se from each task's "
    "exact sampling variance at the most variable rate it could have (how much would these exact "
    "tasks move if re-run?). With few tasks the "
    "first is wide: its coverage was measured, not assumed.</p>"
)


def explore(
    df: pd.DataFrame,
    *,
    by: str | Sequence[str] | None = None,
    k: int | None = None,
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    static: bool | None = None,
) -> Explorer:
    """Filters (suite version, provider, model, prompt, JSON mode, task), a k slider, and a summary
    table and pass@k / pass^k curve that update as they change.

    ``by``, ``k``, ``ci``, ``n_boot``, ``seed`` as in :func:`passk_nb.stats.summary.summarize`
    (by default every identity column, so configurations are never pooled).
    Display the returned :class:`Explorer` (last line of a cell). ``static=None`` carries
    both the widget and a static rendering (table and figure for the initial selection),
    so headless runs and notebook viewers show the static part; ``True`` only static,
    ``False`` only the widget.

    >>> import tempfile
    >>> import passk_nb
    >>> df = passk_nb.run("scripted", trials=3, out=tempfile.mkdtemp(), progress=False)
    >>> ex = explore(df, k=2, n_boot=100)
    >>> ex.summary()[["model", "pass^k"]].values.tolist()
    [['known-good', 1.0]]
    >>> ex.filters["task"].value = ("refund-delivered",)
    >>> int(ex.summary()["n_tasks"].iloc[0])
    1
    """
    if df.empty:
        raise ValueError("the frame has no trial rows")
    by = default_by(df, by)
    return Explorer(df, by=by, k=k, ci=ci, n_boot=n_boot, seed=seed, static=static)


def _table_html(table: pd.DataFrame, by: tuple[str, ...], names: dict[str, str]) -> str:
    shown = table.copy()
    for column in by:
        if column in shown.columns:
            shown[column] = [format_value(column, v, names) for v in shown[column]]  # as value_label
    return _TABLE_STYLE + render_table(shown, "html")


_TABLE_STYLE = (
    "<style>table.passk-table {border-collapse: collapse; font-size: 13px}"
    " table.passk-table th, table.passk-table td {border: 1px solid #ccc; padding: 2px 6px; text-align: left}"
    " table.passk-table th {background: #f3f3f3}</style>"
)


def show_transcript(df: pd.DataFrame | pd.Series | Mapping[str, Any], row: Any = None) -> HTML:
    """The transcript of one trial as displayable HTML (see :func:`transcript_html`).

    ``row`` is an index label of ``df``; by default the first trial of
    :func:`failed_first`. A single record (a Series or dict) may be passed as ``df``.

    >>> import pandas as pd
    >>> df = pd.DataFrame([{"task": "t", "trial": 0, "passed": False, "outcome": "format_error",
    ...                     "final_answer": None, "state_diff": "[]",
    ...                     "transcript": '[{"kind": "reply", "role": "assistant", "format_error": "bad", '
    ...                                   '"content": "<img src=x onerror=alert(1)>"}]'}])
    >>> out = show_transcript(df).data
    >>> "<img src=x" in out, "&lt;img src=x onerror=alert(1)&gt;" in out
    (False, True)
    """
    if isinstance(df, pd.DataFrame):
        if df.empty:
            raise ValueError("the frame has no trial rows")
        record = failed_first(df).iloc[0] if row is None else df.loc[row]
    else:
        record = df
    return HTML(transcript_html(record))


def compare_transcripts(
    df: pd.DataFrame, left: Any = None, right: Any = None, *, key_args: KeyArgs = None
) -> HTML:
    """Two trials side by side, aligned by step, the first step where their actions differ
    highlighted (see :func:`passk_nb.view.transcript_html.transcript_pair_html`).

    ``left`` and ``right`` are index labels of ``df``. By default ``right`` is the first
    failing trial of :func:`failed_first` and ``left`` the passing trial of the same task (and
    configuration) whose actions share the longest prefix with it, the success it left last
    (as :func:`passk_nb.divergence` walks it). Record text is escaped.

    >>> import json, pandas as pd
    >>> reply = lambda a: {"kind": "reply", "action": a}
    >>> get, ok = {"tool": "get", "args": {"id": "A"}}, {"answer": "done"}
    >>> df = pd.DataFrame({"task": "t", "trial": [0, 1], "passed": [True, False],
    ...                    "outcome": ["pass", "wrong_state"], "final_answer": "done", "state_diff": "[]",
    ...                    "transcript": [json.dumps([reply(get), reply(ok)]), json.dumps([reply(ok)])]})
    >>> "first difference at step 0" in compare_transcripts(df).data
    True
    """
    if df.empty:
        raise ValueError("the frame has no trial rows")
    if right is None:
        failing = failed_first(df)
        failing = failing[~failing["passed"].astype(bool)]
        if failing.empty:
            raise ValueError("no failing trial to compare; pass left= and right= (index labels of df)")
        right = failing.index[0]
    if left is None:
        same = df["task"] == df.loc[right, "task"]
        for column in default_by(df, None):
            same &= df[column].astype(str) == str(df.loc[right, column])
        passing = df[same & df["passed"].astype(bool)]
        if passing.empty:
            raise ValueError(
                f"no passing trial of task {df.loc[right, 'task']!r} in the same configuration to set beside "
                "the failing one; pass left= (an index label of df)"
            )
        target = action_sequence(text_or_none(df.loc[right, "transcript"]), key_args)
        shared = [
            common_prefix(action_sequence(text_or_none(t), key_args), target) for t in passing["transcript"]
        ]
        left = passing.index[shared.index(max(shared))]  # the closest success: longest shared prefix
    for name, label in (("left", left), ("right", right)):
        if label not in df.index:
            raise ValueError(f"{name}={label!r} is not an index label of the frame")
    return HTML(transcript_pair_html(df.loc[left], df.loc[right], key_args=key_args))


class TranscriptBrowser(_Rendered):
    """The object :func:`browse_transcripts` returns: ``widget``, ``trials`` (ordered), ``limit``.

    ``beside`` picks a second trial to show side by side with the chosen one
    (:func:`passk_nb.view.transcript_html.transcript_pair_html`); "—" shows one trial.
    """

    def __init__(self, df: pd.DataFrame, *, static: bool | None, limit: int) -> None:
        self.trials = failed_first(df)
        self.limit = limit
        self.flags = claimed_unperformed_action(self.trials)
        kinds = ["all", "failed", "claimed but not done", *pd.unique(self.trials["outcome"])]
        start = "failed" if (~self.trials["passed"]).any() else "all"
        self.kind = widgets.Dropdown(options=kinds, value=start, description="show")
        self.trial = widgets.Dropdown(description="trial", layout=widgets.Layout(width="48em"))
        every = [(trial_label(row, bool(self.flags.loc[i])), i) for i, row in self.trials.iterrows()]
        self.beside = widgets.Dropdown(
            options=[("—", None), *every],
            value=None,
            description="beside",
            layout=widgets.Layout(width="48em"),
        )
        self.view = widgets.HTML()
        self.kind.observe(self._filter, names="value")
        self.trial.observe(self._show, names="value")
        self.beside.observe(self._show, names="value")
        controls = widgets.VBox([widgets.HBox([self.kind, self.trial]), self.beside])
        super().__init__(widgets.VBox([controls, self.view]), static)
        self._filter()

    def _filter(self, _change: object = None) -> None:
        trials, kind = self.trials, self.kind.value
        if kind == "failed":
            trials = trials[~trials["passed"]]
        elif kind == "claimed but not done":
            trials = trials[self.flags]
        elif kind != "all":
            trials = trials[trials["outcome"] == kind]
        options = [(trial_label(row, bool(self.flags.loc[i])), i) for i, row in trials.iterrows()]
        self.trial.options = options
        self.trial.value = options[0][1] if options else None
        self._show()

    def _show(self, _change: object = None) -> None:
        if self.trial.value is None:
            self.view.value = "<i>No trials of this kind.</i>"
        elif self.beside.value is not None and self.beside.value != self.trial.value:
            self.view.value = transcript_pair_html(
                self.trials.loc[self.trial.value], self.trials.loc[self.beside.value]
            )
        else:
            self.view.value = transcript_html(self.trials.loc[self.trial.value])

    def static_html(self) -> str:
        shown = self.trials.head(self.limit)
        rest = len(self.trials) - len(shown)
        head = (
            f"<p>{len(self.trials)} trials, {int((~self.trials['passed']).sum())} failed, "
            f"{int(self.flags.sum())} claimed an action that was not done. "
            f"Showing the first {len(shown)}, failures first"
            + (f" ({rest} more in the live browser)." if rest else ".")
            + "</p>"
        )
        return head + "".join(transcript_html(row) for _, row in shown.iterrows())


def browse_transcripts(df: pd.DataFrame, *, static: bool | None = None, limit: int = 3) -> TranscriptBrowser:
    """A transcript browser: pick a kind of trial (failed, claimed but not done, an outcome) and
    a trial, failures first; the transcript shows below (:func:`transcript_html`).

    The static rendering (headless runs, viewers; ``static`` as in :func:`explore`)
    shows the first ``limit`` trials of :func:`failed_first`.

    >>> import tempfile
    >>> import passk_nb
    >>> df = passk_nb.run("scripted", trials=1, out=tempfile.mkdtemp(), progress=False)
    >>> browser = browse_transcripts(df, static=True, limit=1)
    >>> browser._repr_mimebundle_()["text/html"].count("class='passk-transcript'")
    1
    """
    if df.empty:
        raise ValueError("the frame has no trial rows")
    return TranscriptBrowser(df, static=static, limit=limit)


def _img(png: bytes | None) -> str:
    if png is None:
        return ""
    data = base64.b64encode(png).decode("ascii")
    return f"<img src='data:image/png;base64,{data}' style='max-width:100%'/>"
