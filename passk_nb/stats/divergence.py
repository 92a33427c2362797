"""Where do failing trials part ways with the passing ones? :func:`divergence`, :func:`action_tree`.

A trial's *action sequence* is read from its stored transcript (each tool call as
``tool(key=value, ...)``, the final answer as ``answer``, a broken reply as ``<format error>``).
Each failing trial *diverges* at the first step where its action differs from that of every
passing trial sharing its prefix; :func:`divergence` counts them per point, :func:`action_tree`
gives the branching that :func:`passk_nb.view.plot_divergence` draws. With ``on=``, ``a=``, ``b=``
arm A's trials are the reference for arm B's. Free text is not an action; ``infra_error`` trials
are left out; imported runs read the same way.

The whole rule: ``docs/methods/comparisons.md``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from passk_nb.data.transcript import parse_transcript
from passk_nb.stats.checks import require_columns
from passk_nb.stats.params import default_by, share_docs
from passk_nb.stats.result import described

#: The step label of a reply that broke the action protocol.
FORMAT_ERROR = "<format error>"
#: What a failing trial "did" at the step after its last action when every action matched.
SAME_ACTIONS = "<same actions>"
#: What a sequence does after its last action.
END = "<end>"

KeyArgs = Mapping[str, Sequence[str]] | None


def action_sequence(transcript: str | None, key_args: KeyArgs = None) -> list[str]:
    """The actions of one stored transcript, as short labels.

    ``key_args`` maps a tool name to the arguments that identify its call (default: all of
    them, sorted by name); arguments not listed are dropped from the label.

    >>> t = json.dumps([{"kind": "task", "role": "user", "content": "hi"},
    ...     {"kind": "reply", "action": {"tool": "get", "args": {"id": "A", "why": "x"}}},
    ...     {"kind": "reply", "content": "oops", "format_error": "not JSON"},
    ...     {"kind": "reply", "action": {"answer": "done"}}])
    >>> action_sequence(t)
    ['get(id="A", why="x")', '<format error>', 'answer']
    >>> action_sequence(t, key_args={"get": ["id"]})[0]
    'get(id="A")'
    """
    steps = []
    for entry in parse_transcript(transcript):
        if entry.get("kind") != "reply":
            continue
        action = entry.get("action")
        if not isinstance(action, dict):
            steps.append(FORMAT_ERROR)
        elif "answer" in action:
            steps.append("answer")
        else:
            steps.append(_call_label(action, key_args))
    return steps


def _call_label(action: dict[str, Any], key_args: KeyArgs) -> str:
    tool = str(action.get("tool"))
    raw = action.get("args")
    args: dict[str, Any] = raw if isinstance(raw, dict) else {}
    keep = key_args.get(tool) if key_args is not None else None
    names = sorted(args) if keep is None else [name for name in keep if name in args]
    shown = ", ".join(
        f"{name}={json.dumps(args[name], sort_keys=True, ensure_ascii=False)}" for name in names
    )
    return f"{tool}({shown})"


@share_docs
def divergence(
    df: pd.DataFrame,
    task: str | None = None,
    *,
    by: str | Sequence[str] | None = None,
    on: str | None = None,
    a: object = None,
    b: object = None,
    key_args: KeyArgs = None,
) -> pd.DataFrame:
    """Where failing trials leave every passing trajectory, per task and configuration.

    One row per divergence point: the ``by`` columns, ``task``, ``step`` (0-based index
    of the action where the trials leave), ``prefix`` (the shared actions before it,
    joined by " → "), ``action`` (what the failing trials did there; ``<end>`` if they
    stopped, ``<same actions>`` if they took a passing trial's actions exactly),
    ``reference`` (what the passing trials with that prefix did, most common first, with
    counts), ``reference_action`` (the most common of those actions alone),
    ``n_diverging`` (failing trials that leave there), ``n_failing`` and ``n_passing`` of
    the group. Rows are sorted by group, step and count; the first row of a
    group is its earliest divergence point. Groups without both passing and failing trials
    have no rows.

    With ``on``, ``a`` and ``b``: arm ``a``'s trials (passing or not) are the reference and
    arm ``b``'s trials are walked along them ("where B's trials first differ from A's");
    ``n_failing``/``n_passing`` then count B's and A's trials, and ``by`` defaults to the
    identity columns other than ``on``.

    {df}
    task: only this task (default: every task).
    {by}
    key_args: ``{tool: [argument, ...]}``, the arguments that identify a call (default: all).

    >>> def trial(i, passed, *calls):
    ...     replies = [{"kind": "reply", "action": {"tool": t, "args": {"id": x}}} for t, x in calls]
    ...     replies.append({"kind": "reply", "action": {"answer": "ok"}})
    ...     return {"task": "t", "model": "m", "trial": i, "passed": passed,
    ...             "outcome": "pass" if passed else "wrong_state", "transcript": json.dumps(replies)}
    >>> df = pd.DataFrame([trial(0, True, ("get", "A"), ("cancel", "A")),
    ...                    trial(1, True, ("get", "A"), ("cancel", "A")),
    ...                    trial(2, False, ("get", "A"), ("cancel", "B")),
    ...                    trial(3, False, ("get", "A"))])
    >>> divergence(df)[["step", "action", "reference", "n_diverging", "n_failing"]]
       step          action          reference  n_diverging  n_failing
    0     1          answer  cancel(id="A") ×2            1          2
    1     1  cancel(id="B")  cancel(id="A") ×2            1          2
    """
    require_columns(df, ("task", "passed", "outcome", "transcript"))
    frame = df[df["outcome"].astype(str) != "infra_error"]
    if task is not None:
        if task not in set(frame["task"]):
            raise ValueError(f"task {task!r} has no usable trials; tasks present: {sorted(set(df['task']))}")
        frame = frame[frame["task"] == task]
    if on is None:
        if a is not None or b is not None:
            raise ValueError("a= and b= need on= (the column whose values are the two arms)")
        groups = default_by(frame, by)
        reference = frame["passed"].astype(bool)
        target = ~reference
    else:
        if a is None or b is None or a == b:
            raise ValueError(f"give two different arms a= and b= of column {on!r}")
        require_columns(frame, (on,))
        missing = [arm for arm in (a, b) if arm not in set(frame[on])]
        if missing:
            raise ValueError(
                f"{on}={missing} not in the frame; values present: {sorted(map(str, set(frame[on])))}"
            )
        groups = _arm_by(frame, by, on, a, b)
        reference, target = frame[on] == a, frame[on] == b
    keys = [*groups, "task"]
    sequences = frame["transcript"].map(lambda t: action_sequence(t, key_args))
    rows: list[dict[str, Any]] = []
    for key, index in frame.groupby(keys, dropna=False, sort=True).groups.items():
        ref = [sequences.loc[i] for i in index if reference.loc[i]]
        tgt = [sequences.loc[i] for i in index if target.loc[i]]
        if not ref or not tgt:
            continue
        values = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        points = Counter(_departure(seq, ref) for seq in tgt)
        for (step, prefix, action), count in points.items():
            shared = [seq for seq in ref if seq[:step] == list(prefix)]
            taken = Counter(seq[step] if step < len(seq) else END for seq in shared)
            rows.append(
                {
                    **values,
                    "step": step,
                    "prefix": " → ".join(prefix),
                    "action": action,
                    "reference": ", ".join(f"{act} ×{n}" for act, n in taken.most_common()),
                    "reference_action": taken.most_common(1)[0][0],
                    "n_diverging": count,
                    "n_failing": len(tgt),
                    "n_passing": len(ref),
                }
            )
    columns = [
        *keys,
        "step",
        "prefix",
        "action",
        "reference",
        "reference_action",
        "n_diverging",
        "n_failing",
        "n_passing",
    ]
    out = pd.DataFrame(rows, columns=columns)
    if out.empty:
        return out
    out["_neg"] = -out["n_diverging"]
    out = out.sort_values([*keys, "step", "_neg", "action"], kind="stable").drop(columns="_neg")
    return out.reset_index(drop=True)


def _departure(seq: list[str], reference: list[list[str]]) -> tuple[int, tuple[str, ...], str]:
    """(step, shared prefix, action) where ``seq`` leaves every reference sequence."""
    step = max(common_prefix(seq, ref) for ref in reference)
    if step == len(seq) and any(ref == seq for ref in reference):
        return step, tuple(seq), SAME_ACTIONS
    return step, tuple(seq[:step]), seq[step] if step < len(seq) else END


def common_prefix(x: list[str], y: list[str]) -> int:
    """How many leading actions two action sequences share.

    >>> common_prefix(["get", "cancel", "answer"], ["get", "refund"])
    1
    """
    n = 0
    for u, v in zip(x, y, strict=False):
        if u != v:
            break
        n += 1
    return n


def _arm_by(
    frame: pd.DataFrame, by: str | Sequence[str] | None, on: str, a: object, b: object
) -> tuple[str, ...]:
    if by is not None:
        return default_by(frame, by)
    arm_a, arm_b = frame[frame[on] == a], frame[frame[on] == b]
    return tuple(
        col
        for col in default_by(frame, None)
        if col != on and set(arm_a[col].dropna()) & set(arm_b[col].dropna())
    )


def action_tree(
    df: pd.DataFrame, task: str | None = None, *, key_args: KeyArgs = None, max_depth: int | None = None
) -> pd.DataFrame:
    """The branching of the action sequences of one task's trials: one row per edge.

    Columns: ``node`` and ``parent`` (integer ids; the root is 0), ``depth`` (the step,
    from 1), ``action``, ``n_pass`` and ``n_fail`` (trials whose sequence goes through the
    edge). A trial that stops without an answer (out of turns, a last message with no action, no
    action at all) ends in an ``<end>`` edge, so every trial is drawn. Sequences are cut at
    ``max_depth`` steps. The frame must hold one configuration
    (filter it first); ``infra_error`` trials are left out.

    >>> df = pd.DataFrame({"task": "t", "passed": [True, False], "outcome": ["pass", "wrong_state"],
    ...     "transcript": [json.dumps([{"kind": "reply", "action": {"answer": "a"}}]),
    ...                    json.dumps([{"kind": "reply", "format_error": "prose"}])]})
    >>> action_tree(df)[["node", "parent", "depth", "action", "n_pass", "n_fail"]]
       node  parent  depth          action  n_pass  n_fail
    0     1       0      1          answer       1       0
    1     2       0      1  <format error>       0       1
    2     3       2      2           <end>       0       1
    """
    require_columns(df, ("task", "passed", "outcome", "transcript"))
    frame = df[df["outcome"].astype(str) != "infra_error"]
    if task is not None:
        frame = frame[frame["task"] == task]
    tasks = sorted(set(frame["task"]))
    if len(tasks) != 1:
        raise ValueError(f"action_tree needs the trials of one task; pass task= (tasks present: {tasks})")
    configs = (
        frame.groupby(list(default_by(frame, None)), dropna=False).ngroups if default_by(frame, None) else 1
    )
    if configs > 1:
        raise ValueError(
            f"the trials of task {tasks[0]!r} come from {configs} configurations; filter the frame to one "
            "(e.g. df[df['config'] == ...]) so that their sequences are comparable"
        )
    ids: dict[tuple[str, ...], int] = {}
    counts: dict[tuple[str, ...], list[int]] = {}
    for transcript, passed in zip(frame["transcript"], frame["passed"].astype(bool), strict=True):
        seq = action_sequence(transcript, key_args)
        if not seq or seq[-1] != "answer":  # it stopped without answering: drawn, not dropped
            seq.append(END)
        seq = seq[:max_depth]
        for depth in range(1, len(seq) + 1):
            path = tuple(seq[:depth])
            if path not in ids:
                ids[path] = len(ids) + 1
                counts[path] = [0, 0]
            counts[path][0 if passed else 1] += 1
    rows = [
        {
            "node": node,
            "parent": ids.get(path[:-1], 0),
            "depth": len(path),
            "action": path[-1],
            "n_pass": counts[path][0],
            "n_fail": counts[path][1],
        }
        for path, node in ids.items()
    ]
    out = pd.DataFrame(rows, columns=["node", "parent", "depth", "action", "n_pass", "n_fail"])
    tree = out.sort_values(["depth", "node"], kind="stable").reset_index(drop=True)
    return described(tree, "action_tree", by=(), task=tasks[0], key_args=key_args, max_depth=max_depth)
