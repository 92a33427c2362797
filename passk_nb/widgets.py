"""Jupyter explorers: :func:`explore` (filters, a k slider, a live table and curve) and a
transcript viewer (:func:`show_transcript`, :func:`browse_transcripts`).

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
import json
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import HTML
from scipy import stats as sps

from passk_nb.flags import claimed_unperformed_action, unperformed_claims
from passk_nb.plots import OUTCOME_COLORS, figure_png, group_labels, plot_curve, prompt_names
from passk_nb.stats import summarize

__all__ = [
    "Explorer",
    "TranscriptBrowser",
    "explore",
    "summary_table",
    "transcript_html",
    "show_transcript",
    "browse_transcripts",
    "failed_first",
]

#: Longest text shown for one transcript entry; the rest is cut with a note.
MAX_SHOWN_CHARS = 4000
#: Columns :func:`explore` offers as filters, when present with more than one value.
FILTER_COLUMNS: tuple[str, ...] = ("provider", "model", "prompt_hash", "json_mode", "task")


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


# ---------------------------------------------------------------------------------------------
# explore


def summary_table(summary: pd.DataFrame, *, ci: float = 0.95) -> pd.DataFrame:
    """A readable table from :func:`passk_nb.stats.summarize`: values with both intervals.

    One row per group: the group columns, ``tasks`` (covered/all), ``trials``
    (successes/trials), then for each metric the value, its interval for *new tasks
    like these* (cluster bootstrap over tasks, or the exact per-task interval for
    per-task rows) and its interval for *these tasks, re-rolled* (value ± z·se_fixed,
    clipped to [0, 1]; "n < 2k" when the trials are too few to estimate it).

    >>> import pandas as pd
    >>> from passk_nb.stats import summarize
    >>> df = pd.DataFrame({"task": ["a"] * 4 + ["b"] * 4, "model": "m",
    ...                    "passed": [True] * 6 + [False] * 2})
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> summary_table(summarize(df, k=2, by="model", n_boot=200)).loc[0, "pass^k"]
    '0.583'
    """
    z = float(sps.norm.ppf(0.5 + ci / 2))
    group_cols = list(summary.columns[: list(summary.columns).index("k")])
    out = summary[group_cols].copy()
    out["k"] = summary["k"]
    out["tasks"] = [f"{c}/{n}" for c, n in zip(summary["n_tasks_covered"], summary["n_tasks"], strict=True)]
    out["trials"] = [f"{c}/{n}" for c, n in zip(summary["successes"], summary["n_trials"], strict=True)]
    for metric, se_col in (("pass@k", "pass@k_se_fixed"), ("pass^k", "se_fixed")):
        value = summary[metric]
        out[metric] = value.map(lambda v: "NaN" if pd.isna(v) else f"{v:.3f}")
        out[f"{metric} {ci:.0%} CI, new tasks"] = [
            _interval(lo, hi) for lo, hi in zip(summary[f"{metric}_lo"], summary[f"{metric}_hi"], strict=True)
        ]
        se = summary[se_col]
        out[f"{metric} {ci:.0%} CI, these tasks"] = [
            "n < 2k" if pd.isna(s) and not pd.isna(v) else _interval(v - z * s, v + z * s)
            for v, s in zip(value, se, strict=True)
        ]
    if "n_infra_excluded" in summary.columns and summary["n_infra_excluded"].any():
        out["infra excluded"] = summary["n_infra_excluded"]
    return out


def _interval(lo: float, hi: float) -> str:
    if pd.isna(lo) or pd.isna(hi):
        return "–"
    return f"[{max(lo, 0.0):.3f}, {min(hi, 1.0):.3f}]"


class Explorer(_Rendered):
    """The object :func:`explore` returns: ``widget`` (the live explorer), ``summary()``, ``figure()``."""

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
        names = prompt_names(df)
        self.filters: dict[str, widgets.SelectMultiple] = {}
        for column in FILTER_COLUMNS:
            if column not in df.columns:
                continue
            values = list(pd.unique(df[column].dropna()))
            if len(values) < 2 and column != "task":
                continue
            options = [(_value_label(column, v, names), v) for v in values]
            self.filters[column] = widgets.SelectMultiple(
                options=options,
                value=tuple(values),
                rows=min(6, len(values)),
                description=column,
                layout=widgets.Layout(width="auto"),
            )
        n_max = int(df.groupby([*by, "task"], dropna=False).size().max())
        self.k = widgets.IntSlider(
            value=min(k or 2, n_max), min=1, max=max(n_max, 1), description="k", continuous_update=False
        )
        self.table = widgets.HTML()
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.note = widgets.HTML()
        self._curves: dict[tuple[Any, ...], bytes] = {}
        for control in (*self.filters.values(), self.k):
            control.observe(self._update, names="value")
        controls = widgets.HBox(list(self.filters.values()), layout=widgets.Layout(flex_flow="row wrap"))
        super().__init__(widgets.VBox([controls, self.k, self.note, self.table, self.image]), static)
        self._update()

    def selection(self) -> pd.DataFrame:
        """The trials the filters currently select."""
        mask = np.ones(len(self.df), dtype=bool)
        for column, control in self.filters.items():
            mask &= self.df[column].isin(list(control.value)).to_numpy()
        return self.df[mask]

    def summary(self) -> pd.DataFrame:
        """:func:`passk_nb.stats.summarize` of the selection at the slider's k."""
        return summarize(
            self.selection(), k=self.k.value, by=self.by, ci=self.ci, n_boot=self.n_boot, seed=self.seed
        )

    def figure_png(self) -> bytes | None:
        """The curve of the selection as PNG (cached per selection), None when nothing is selected."""
        selected = self.selection()
        if selected.empty:
            return None
        key = (tuple(tuple(c.value) for c in self.filters.values()), self.k.value)
        if key not in self._curves:
            ax = plot_curve(
                selected, by=self.by, k=self.k.value, ci=self.ci, n_boot=self.n_boot, seed=self.seed
            )
            self._curves[key] = figure_png(ax.figure)
            plt.close(ax.figure)
        return self._curves[key]

    def _update(self, _change: object = None) -> None:
        selected = self.selection()
        if selected.empty:
            self.note.value = "<i>No trials match the filters.</i>"
            self.table.value = ""
            return
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                table = _table_html(summary_table(self.summary(), ci=self.ci), self.by, self.df)
                png = self.figure_png()
            except ValueError as err:  # e.g. k above every selected task's trials
                table, png = f"<p><b>{html.escape(str(err))}</b></p>", None
        notes = list(dict.fromkeys(str(w.message) for w in caught))
        self.note.value = "".join(f"<p style='color:#8a5a00'>⚠ {html.escape(n)}</p>" for n in notes)
        self.table.value = table + _INTERVAL_NOTE
        if png is not None:
            self.image.value = png

    def static_html(self) -> str:
        return self.note.value + self.table.value + _img(self.static_png())

    def static_png(self) -> bytes | None:
        return self.figure_png()


_INTERVAL_NOTE = (
    "<p style='font-size:smaller'>“new tasks”: cluster bootstrap over tasks (how would the agent do on other "
    "tasks like these?); “these tasks”: ± z·se from the per-task unbiased variance (how much would these "
    "exact tasks move if re-run?). With few tasks the first is wide and coarse by nature.</p>"
)


def explore(
    df: pd.DataFrame,
    *,
    by: str | Sequence[str] = ("model", "prompt_hash"),
    k: int | None = None,
    ci: float = 0.95,
    n_boot: int = 1000,
    seed: int = 0,
    static: bool | None = None,
) -> Explorer:
    """Filters (provider, model, prompt, JSON mode, task), a k slider, and a summary table and
    pass@k / pass^k curve that update as they change.

    ``by``, ``k``, ``ci``, ``n_boot``, ``seed`` as in :func:`passk_nb.stats.summarize`.
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
    by = (by,) if isinstance(by, str) else tuple(by)
    if df.empty:
        raise ValueError("the frame has no trial rows")
    return Explorer(df, by=by, k=k, ci=ci, n_boot=n_boot, seed=seed, static=static)


def _table_html(table: pd.DataFrame, by: tuple[str, ...], df: pd.DataFrame) -> str:
    shown = table.copy()
    names = prompt_names(df)
    for column in by:
        if column in shown.columns:
            shown[column] = [_value_label(column, v, names) for v in shown[column]]
    return shown.to_html(index=False, escape=True, border=0)


# ---------------------------------------------------------------------------------------------
# transcripts


def failed_first(df: pd.DataFrame) -> pd.DataFrame:
    """The trials with failures first (claimed-but-not-done actions at the very top), then passes.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"passed": [True, False], "final_answer": ["ok", "ok"], "state_diff": "[]"})
    >>> failed_first(df).index.tolist()
    [1, 0]
    """
    key = pd.DataFrame({"passed": df["passed"].astype(bool), "claimed": ~_flags(df)})
    order = key.sort_values(["passed", "claimed"], kind="stable").index
    return df.loc[order]


def transcript_html(record: Mapping[str, Any] | pd.Series) -> str:
    """One trial as HTML: header with outcome, each turn (role, parsed action or format error,
    tool results), the final state diff and the final answer. All record text is escaped.

    >>> html_text = transcript_html({"task": "t", "trial": 0, "outcome": "wrong_state", "passed": False,
    ...     "final_answer": "<script>alert(1)</script>", "state_diff": "[]", "transcript": "[]"})
    >>> "<script>" in html_text, "&lt;script&gt;alert(1)&lt;/script&gt;" in html_text
    (False, True)
    """
    get = record.get
    outcome = _text(get("outcome")) or "?"
    color = OUTCOME_COLORS.get(outcome, "#777777")
    ident = " · ".join(
        _e(part)
        for part in (
            get("task"),
            _join_nonempty(get("provider"), get("model"), sep="/"),
            _prompt_label(get("prompt_name"), get("prompt_hash")),
            f"trial {_text(get('trial'))}",
        )
        if part
    )
    badge = (
        f"<span style='background:{color};color:{'#fff' if outcome != 'max_turns' else '#000'};"
        f"padding:1px 6px;border-radius:3px'>{_e(outcome)}</span>"
    )
    parts = [
        "<div class='passk-transcript' style='border:1px solid #ccc;border-radius:4px;padding:6px 10px;"
        "margin:8px 0;font-family:system-ui,sans-serif;font-size:13px;max-width:70em'>",
        f"<div style='margin-bottom:6px'><b>{ident}</b> {badge}</div>",
    ]
    try:
        claims = unperformed_claims(_text(get("final_answer")), _text(get("state_diff")) or "[]")
    except (ValueError, TypeError, AttributeError):  # an unreadable diff is reported below
        claims = []
    if claims:
        said = "; ".join(f"“{_e(c.text)}” ({_e(c.kind)})" for c in claims)
        parts.append(
            "<div style='background:#fdecea;border-left:4px solid #D55E00;padding:4px 8px;margin:4px 0'>"
            f"⚠ <b>claimed but not done</b>: the answer says {said}, "
            "but the final database shows no such change.</div>"
        )
    error = _text(get("error"))
    if error:
        parts.append(f"<div style='color:#8a1c00'>error: {_e(_cut(error))}</div>")
    parts.append(_turns_html(_text(get("transcript"))))
    parts.append(_diff_html(_text(get("state_diff"))))
    answer = _text(get("final_answer"))
    parts.append(
        "<div><b>final answer</b>: "
        + (f"<span style='white-space:pre-wrap'>{_e(_cut(answer))}</span>" if answer else "<i>none</i>")
        + "</div></div>"
    )
    return "".join(parts)


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


class TranscriptBrowser(_Rendered):
    """The object :func:`browse_transcripts` returns: ``widget``, ``trials`` (ordered), ``limit``."""

    def __init__(self, df: pd.DataFrame, *, static: bool | None, limit: int) -> None:
        self.trials = failed_first(df)
        self.limit = limit
        self.flags = _flags(self.trials)
        kinds = ["all", "failed", "claimed but not done", *pd.unique(self.trials["outcome"])]
        start = "failed" if (~self.trials["passed"]).any() else "all"
        self.kind = widgets.Dropdown(options=kinds, value=start, description="show")
        self.trial = widgets.Dropdown(description="trial", layout=widgets.Layout(width="48em"))
        self.view = widgets.HTML()
        self.kind.observe(self._filter, names="value")
        self.trial.observe(self._show, names="value")
        super().__init__(widgets.VBox([widgets.HBox([self.kind, self.trial]), self.view]), static)
        self._filter()

    def _filter(self, _change: object = None) -> None:
        trials, kind = self.trials, self.kind.value
        if kind == "failed":
            trials = trials[~trials["passed"]]
        elif kind == "claimed but not done":
            trials = trials[self.flags]
        elif kind != "all":
            trials = trials[trials["outcome"] == kind]
        options = [(_trial_label(row, bool(self.flags.loc[i])), i) for i, row in trials.iterrows()]
        self.trial.options = options
        self.trial.value = options[0][1] if options else None
        self._show()

    def _show(self, _change: object = None) -> None:
        if self.trial.value is None:
            self.view.value = "<i>No trials of this kind.</i>"
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


def _flags(df: pd.DataFrame) -> pd.Series:
    """:func:`claimed_unperformed_action`; all False when columns are missing or a diff is unreadable."""
    try:
        return claimed_unperformed_action(df)
    except (ValueError, TypeError, AttributeError):
        return pd.Series(False, index=df.index, dtype=bool, name="claimed_unperformed_action")


def _trial_label(row: pd.Series, claimed: bool) -> str:
    mark = "✓" if row["passed"] else "✗"
    parts = [f"{mark} {row['outcome']}" + (" + claimed-not-done" if claimed else ""), str(row["task"])]
    for column in ("model", "prompt_name"):
        if column in row.index and _text(row[column]):
            parts.append(str(row[column]))
    if "json_mode" in row.index and bool(row["json_mode"]):
        parts.append("json")
    parts.append(f"trial {row.get('trial', '?')}")
    return " · ".join(parts)


_ROLE_STYLE = {
    "task": ("customer", "#0072B2"),
    "reply": ("agent", "#009E73"),
    "tool_result": ("tool", "#777777"),
    "format_feedback": ("harness", "#CC79A7"),
    "infra_error": ("infra", "#BBBBBB"),
    "agent_error": ("agent error", "#000000"),
}


def _turns_html(transcript: str | None) -> str:
    try:
        entries = json.loads(transcript or "[]")
    except json.JSONDecodeError as err:
        return f"<div style='color:#8a1c00'>unreadable transcript: {_e(err)}</div>"
    if not isinstance(entries, list):
        return "<div style='color:#8a1c00'>unreadable transcript: not a list of turns</div>"
    rows = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        kind = str(entry.get("kind", ""))
        label, color = _ROLE_STYLE.get(kind, (kind or "?", "#999999"))
        role = entry.get("role")
        who = f"{_e(label)} <span style='color:#888'>({_e(role)})</span>" if role else _e(label)
        content = _text(entry.get("content")) or ""
        if kind == "reply" and "format_error" in entry:
            body = (
                f"<span style='color:#8a1c00'><b>format error</b>: {_e(entry['format_error'])}</span>"
                f"<pre style='{_PRE}'>{_e(_cut(content))}</pre>"
            )
        elif kind == "reply" and isinstance(entry.get("action"), dict):
            body = _action_html(entry["action"]) + _raw_details(content)
        elif kind == "tool_result":
            failed = bool(entry.get("error"))
            mark = "<span style='color:#8a1c00'><b>tool error</b></span> " if failed else ""
            body = f"{mark}<pre style='{_PRE}'>{_e(_cut(content))}</pre>"
        else:
            body = f"<div style='white-space:pre-wrap'>{_e(_cut(content))}</div>"
        if entry.get("length"):
            body += f"<div style='color:#888'>(stored cut; {_e(entry['length'])} chars in all)</div>"
        rows.append(
            f"<div style='border-left:4px solid {color};padding:2px 8px;margin:3px 0'>"
            f"<div style='font-size:11px;color:{color}'><b>{who}</b></div>{body}</div>"
        )
    return "".join(rows) or "<div><i>no turns recorded</i></div>"


_PRE = "white-space:pre-wrap;margin:2px 0;background:#f6f6f6;padding:3px;font-size:12px"


def _action_html(action: dict[str, Any]) -> str:
    if "tool" in action:
        args = json.dumps(action.get("args", {}), ensure_ascii=False, default=str)
        return f"→ <code><b>{_e(action['tool'])}</b>({_e(_cut(args))})</code>"
    if "answer" in action:
        answer = _e(_cut(_text(action["answer"]) or ""))
        return f"<b>answer</b>: <span style='white-space:pre-wrap'>{answer}</span>"
    return f"<code>{_e(_cut(json.dumps(action, ensure_ascii=False, default=str)))}</code>"


def _raw_details(content: str) -> str:
    return (
        "<details><summary style='color:#888;font-size:11px'>raw reply</summary>"
        f"<pre style='{_PRE}'>{_e(_cut(content))}</pre></details>"
    )


def _diff_html(state_diff: str | None) -> str:
    try:
        entries = json.loads(state_diff or "[]")
    except json.JSONDecodeError as err:
        return f"<div style='color:#8a1c00'>unreadable state diff: {_e(err)}</div>"
    if not entries:
        return "<div style='margin:4px 0'><b>final state</b>: no change</div>"
    cells = "".join(
        f"<tr><td><code>{_e(e.get('path'))}</code></td><td>{_e(_json_value(e.get('before')))}</td>"
        f"<td>{_e(_json_value(e.get('after')))}</td></tr>"
        for e in entries
        if isinstance(e, dict)
    )
    return (
        "<div style='margin:4px 0'><b>final state</b>: changed fields"
        "<table style='border-collapse:collapse;font-size:12px'><tr><th style='text-align:left'>path</th>"
        "<th style='text-align:left'>before</th><th style='text-align:left'>after</th></tr>"
        f"{cells}</table></div>"
    )


def _json_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _img(png: bytes | None) -> str:
    if png is None:
        return ""
    data = base64.b64encode(png).decode("ascii")
    return f"<img src='data:image/png;base64,{data}' style='max-width:100%'/>"


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _text(value: Any) -> str | None:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    return str(value)


def _cut(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit} more chars]"


def _join_nonempty(*values: Any, sep: str) -> str:
    return sep.join(t for t in (_text(v) for v in values) if t)


def _prompt_label(name: Any, digest: Any) -> str:
    name, digest = _text(name), _text(digest)
    if name and digest:
        return f"{name} ({digest[:7]})"
    return name or digest or ""


def _value_label(column: str, value: Any, names: dict[str, str]) -> str:
    return str(group_labels(pd.DataFrame({column: [value]}), column, names=names).iloc[0])
