"""Trial transcripts as HTML: every piece of record text escaped, so model output shows as text.

:func:`transcript_html` shows one trial; :func:`transcript_pair_html` shows two side by
side, aligned by step, with the first step where their actions differ highlighted.
Pure functions (no ipywidgets): the transcript browser and the HTML report use them.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from passk_nb.stats.divergence import KeyArgs, action_sequence
from passk_nb.stats.flags import claimed_unperformed_action, false_claims
from passk_nb.view.labels import OUTCOME_COLORS, join_nonempty, luminance, prompt_label, text_or_none

#: Longest text shown for one transcript entry; the rest is cut with a note.
MAX_SHOWN_CHARS = 4000


def failed_first(df: pd.DataFrame) -> pd.DataFrame:
    """The trials with failures first (claimed-but-not-done actions at the very top), then passes.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"passed": [True, False], "final_answer": ["ok", "ok"], "state_diff": "[]"})
    >>> failed_first(df).index.tolist()
    [1, 0]
    """
    key = pd.DataFrame({"passed": df["passed"].astype(bool), "claimed": ~claimed_unperformed_action(df)})
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
    parts = [
        "<div class='passk-transcript' style='border:1px solid #ccc;border-radius:4px;padding:6px 10px;"
        "margin:8px 0;font-family:system-ui,sans-serif;font-size:13px;max-width:70em'>",
        _header_html(record),
    ]
    parts.append(_turns_html(text_or_none(get("transcript"))))
    parts.append(_ending_html(record))
    parts.append("</div>")
    return "".join(parts)


def _header_html(record: Mapping[str, Any] | pd.Series) -> str:
    """Who and what (task, model, prompt, trial), the outcome badge, claimed-not-done and errors."""
    get = record.get
    outcome = text_or_none(get("outcome")) or "?"
    color = OUTCOME_COLORS.get(outcome, "#777777")
    ident = " · ".join(
        _e(part)
        for part in (
            get("task"),
            join_nonempty(get("provider"), get("model"), sep="/"),
            prompt_label(get("prompt_name"), get("prompt_hash")),
            f"trial {text_or_none(get('trial'))}",
        )
        if part
    )
    badge = (
        f"<span style='background:{color};color:{'#000' if luminance(color) > 0.5 else '#fff'};"
        f"padding:1px 6px;border-radius:3px'>{_e(outcome)}</span>"
    )
    parts = [f"<div style='margin-bottom:6px'><b>{ident}</b> {badge}</div>"]
    claims = false_claims(get("false_claims"))
    if claims:
        said = "; ".join(f"“{_e(c.get('text'))}” ({_e(c.get('kind'))})" for c in claims)
        parts.append(
            "<div style='background:#fdecea;border-left:4px solid #D55E00;padding:4px 8px;margin:4px 0'>"
            f"⚠ <b>claimed but not done</b>: the answer says {said}, "
            "but the final database shows no such change.</div>"
        )
    error = text_or_none(get("error"))
    if error:
        parts.append(f"<div style='color:#8a1c00'>error: {_e(_cut(error))}</div>")
    return "".join(parts)


def _ending_html(record: Mapping[str, Any] | pd.Series) -> str:
    """The final state diff and the final answer."""
    answer = text_or_none(record.get("final_answer"))
    return (
        _diff_html(text_or_none(record.get("state_diff")))
        + "<div><b>final answer</b>: "
        + (f"<span style='white-space:pre-wrap'>{_e(_cut(answer))}</span>" if answer else "<i>none</i>")
        + "</div>"
    )


#: Background of the first step where the two trials' actions differ.
DIFFER_COLOR = "#fdecea"


def transcript_pair_html(
    left: Mapping[str, Any] | pd.Series,
    right: Mapping[str, Any] | pd.Series,
    *,
    key_args: KeyArgs = None,
) -> str:
    """Two trials side by side, aligned by step, the first differing step highlighted.

    A *step* is one reply of the agent with what came back to it (the tool result, or the
    harness's note on a format error); the customer's message comes first. Steps compare
    by action as in :func:`passk_nb.stats.divergence.divergence` (tool and arguments, or
    ``answer`` whatever its wording, or ``<format error>``; ``key_args`` picks the
    arguments that count). The first step whose actions differ is highlighted and named
    above the panes; when every action matches, that is said instead (the trials then
    differ in what they said). Both panes are escaped like :func:`transcript_html`.

    >>> import json
    >>> def trial(outcome, *actions):
    ...     replies = [{"kind": "reply", "action": a, "content": json.dumps(a)} for a in actions]
    ...     return {"task": "t", "outcome": outcome, "transcript": json.dumps(replies)}
    >>> get = {"tool": "get", "args": {"id": "A"}}
    >>> page = transcript_pair_html(trial("pass", get, {"answer": "ok"}),
    ...                             trial("wrong_state", get, {"tool": "cancel", "args": {"id": "<script>"}}))
    >>> "first difference at step 1" in page, "<script>" in page, "&lt;script&gt;" in page
    (True, False, True)
    """
    sides = [_steps(text_or_none(record.get("transcript"))) for record in (left, right)]
    actions = [action_sequence(text_or_none(record.get("transcript")), key_args) for record in (left, right)]
    first = _first_difference(*actions)
    if first is None:
        note = (
            "same actions at every step: the trials differ only in what the agent said"
            if actions[0] == actions[1]
            else "the two transcripts cannot be compared"
        )
    else:
        did = [_e(a[first]) if first < len(a) else "<i>nothing (ended)</i>" for a in actions]
        note = f"<b>first difference at step {first}</b>: left {did[0]} · right {did[1]}"
    cell = "vertical-align:top;padding:2px 6px;width:50%;border-top:1px solid #eee"
    rows = [
        f"<tr><td style='{cell}'>{_header_html(left)}</td><td style='{cell}'>{_header_html(right)}</td></tr>",
    ]
    heads = [side[0] for side in sides]
    rows.append(f"<tr><td style='{cell}'>{heads[0]}</td><td style='{cell}'>{heads[1]}</td></tr>")
    n_steps = max(len(side[1]) for side in sides)
    for step in range(n_steps):
        differs = step == first
        style = f"background:{DIFFER_COLOR};" if differs else ""
        mark = " ← first difference" if differs else ""
        label = (
            f"<tr><td colspan='2' style='font-size:11px;color:#555;padding:4px 6px 0;{style}'>"
            f"<b>step {step}</b>{mark}</td></tr>"
        )
        panes = [
            side[1][step] if step < len(side[1]) else "<div style='color:#888'><i>(ended)</i></div>"
            for side in sides
        ]
        rows.append(label)
        rows.append(
            f"<tr style='{style}'><td style='{cell}'>{panes[0]}</td><td style='{cell}'>{panes[1]}</td></tr>"
        )
    rows.append(
        f"<tr><td style='{cell}'>{_ending_html(left)}</td><td style='{cell}'>{_ending_html(right)}</td></tr>"
    )
    return (
        "<div class='passk-transcript-pair' style='border:1px solid #ccc;border-radius:4px;padding:6px 10px;"
        "margin:8px 0;font-family:system-ui,sans-serif;font-size:13px;max-width:110em'>"
        f"<div style='margin-bottom:6px'>{note}</div>"
        f"<table style='border-collapse:collapse;width:100%;table-layout:fixed'>{''.join(rows)}</table></div>"
    )


def _steps(transcript: str | None) -> tuple[str, list[str]]:
    """(HTML of what came before the first reply, [HTML of each step]): a step is a reply and what follows."""
    entries, problem = _entries(transcript)
    if problem:
        return problem, []
    head: list[str] = []
    steps: list[list[str]] = []
    for entry in entries:
        if entry.get("kind") == "reply":
            steps.append([])
        (steps[-1] if steps else head).append(_entry_html(entry))
    return "".join(head), ["".join(step) for step in steps]


def _first_difference(left: list[str], right: list[str]) -> int | None:
    """The first step where the two action sequences differ (one ending counts), None if equal."""
    for step, (a, b) in enumerate(zip(left, right, strict=False)):
        if a != b:
            return step
    return None if len(left) == len(right) else min(len(left), len(right))


def trial_label(row: pd.Series, claimed: bool) -> str:
    mark = "✓" if row["passed"] else "✗"
    parts = [f"{mark} {row['outcome']}" + (" + claimed-not-done" if claimed else ""), str(row["task"])]
    for column in ("model", "prompt_name"):
        if column in row.index and text_or_none(row[column]):
            parts.append(str(row[column]))
    if "json_mode" in row.index and row["json_mode"] not in ("off", False, None):
        parts.append(f"json={row['json_mode']}")
    parts.append(f"trial {row.get('trial', '?')}")
    return " · ".join(parts)


_ROLE_STYLE = {
    "system": ("system prompt", "#555555"),
    "task": ("customer", "#0072B2"),
    "reply": ("agent", "#009E73"),
    "message": ("agent says", "#009E73"),
    "tool_result": ("tool", "#777777"),
    "format_feedback": ("harness", "#CC79A7"),
    "task_done": ("harness", "#CC79A7"),
    "infra_error": ("infra", "#BBBBBB"),
    "agent_error": ("agent error", "#000000"),
}


def _entries(transcript: str | None) -> tuple[list[dict[str, Any]], str | None]:
    """The transcript's entries, or an HTML note saying why it cannot be read."""
    try:
        entries = json.loads(transcript or "[]")
    except (ValueError, RecursionError) as err:  # not JSON, or nested too deep to parse
        return [], f"<div style='color:#8a1c00'>unreadable transcript: {_e(_why(err))}</div>"
    if not isinstance(entries, list):
        return [], "<div style='color:#8a1c00'>unreadable transcript: not a list of turns</div>"
    return [entry for entry in entries if isinstance(entry, dict)], None


def _why(err: Exception) -> str:
    return "nested too deep to read" if isinstance(err, RecursionError) else str(err)


def _turns_html(transcript: str | None) -> str:
    entries, problem = _entries(transcript)
    if problem:
        return problem
    return "".join(_entry_html(entry) for entry in entries) or "<div><i>no turns recorded</i></div>"


def _entry_html(entry: dict[str, Any]) -> str:
    """One transcript entry (a customer message, a reply, a tool result...), escaped."""
    kind = str(entry.get("kind", ""))
    label, color = _ROLE_STYLE.get(kind, (kind or "?", "#999999"))
    role = entry.get("role")
    who = f"{_e(label)} <span style='color:#888'>({_e(role)})</span>" if role else _e(label)
    content = text_or_none(entry.get("content")) or ""
    if kind == "reply" and "format_error" in entry:
        body = (
            f"<span style='color:#8a1c00'><b>format error</b>: {_e(entry['format_error'])}</span>"
            f"<pre style='{_PRE}'>{_e(_cut(content))}</pre>"
        )
    elif kind == "reply" and isinstance(entry.get("action"), dict):
        body = _action_html(entry["action"]) + _raw_details(content)
    elif kind == "system":  # long (τ-bench's policy is pages): folded
        body = (
            f"<details><summary style='color:#888;font-size:11px'>{_e(len(content))} chars</summary>"
            f"<div style='white-space:pre-wrap'>{_e(_cut(content))}</div></details>"
        )
    elif kind == "tool_result":
        failed = bool(entry.get("error"))
        mark = "<span style='color:#8a1c00'><b>tool error</b></span> " if failed else ""
        body = f"{mark}<pre style='{_PRE}'>{_e(_cut(content))}</pre>"
    else:
        body = f"<div style='white-space:pre-wrap'>{_e(_cut(content))}</div>"
    if entry.get("length"):
        body += f"<div style='color:#888'>(stored cut; {_e(entry['length'])} chars in all)</div>"
    return (
        f"<div style='border-left:4px solid {color};padding:2px 8px;margin:3px 0'>"
        f"<div style='font-size:11px;color:{color}'><b>{who}</b></div>{body}</div>"
    )


_PRE = "white-space:pre-wrap;margin:2px 0;background:#f6f6f6;padding:3px;font-size:12px"


def _action_html(action: dict[str, Any]) -> str:
    if "tool" in action:
        args = json.dumps(action.get("args", {}), ensure_ascii=False, default=str)
        return f"→ <code><b>{_e(action['tool'])}</b>({_e(_cut(args))})</code>"
    if "answer" in action:
        answer = _e(_cut(text_or_none(action["answer"]) or ""))
        return f"<b>answer</b>: <span style='white-space:pre-wrap'>{answer}</span>"
    return f"<code>{_e(_cut(json.dumps(action, ensure_ascii=False, default=str)))}</code>"


def _raw_details(content: str) -> str:
    return (
        "<details><summary style='color:#888;font-size:11px'>raw reply</summary>"
        f"<pre style='{_PRE}'>{_e(_cut(content))}</pre></details>"
    )


def _diff_html(state_diff: str | None) -> str:
    if state_diff is None:  # e.g. an imported run whose file keeps only the verdict
        return "<div style='margin:4px 0'><b>final state</b>: <i>not recorded</i></div>"
    try:
        entries = json.loads(state_diff or "[]")
    except (ValueError, RecursionError) as err:  # not JSON, or nested too deep to parse
        return f"<div style='color:#8a1c00'>unreadable state diff: {_e(_why(err))}</div>"
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        return "<div style='color:#8a1c00'>unreadable state diff: not a list of changes</div>"
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


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _cut(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit} more chars]"
