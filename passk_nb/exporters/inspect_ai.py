"""Trial records as inspect_ai eval logs: :func:`to_inspect`, so ``inspect view`` shows passk-nb runs.

The log is built from inspect_ai's own log classes (``EvalLog``, ``EvalSample``, ``Score``, its
chat messages) and written by :func:`inspect_ai.log.write_eval_log`, so every tool that reads
inspect logs reads it; install the extra: ``pip install "passk-nb[inspect]"``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from passk_nb.data.ids import content_id
from passk_nb.data.records import OUTCOMES
from passk_nb.data.redact import mask_frame
from passk_nb.data.transcript import parse_transcript
from passk_nb.stats.params import default_by
from passk_nb.stats.summary import summarize

#: The scorer name the exported logs carry (the task's check on the final state).
SCORER = "state_check"
_INSTALL = 'pip install "passk-nb[inspect]"'
_NEEDED = ("suite", "task", "trial", "passed", "outcome")


def to_inspect(
    df: pd.DataFrame,
    path: str | os.PathLike[str],
    *,
    by: str | Sequence[str] | None = None,
) -> list[Path]:
    """Write ``df`` as inspect_ai eval logs under the folder ``path``: one ``.eval`` log per
    configuration; returns the files written.

    ``by`` names the columns that tell configurations apart (default: every identity column the
    records have, as in :func:`passk_nb.summarize`). In each log:

    - the inspect *task* is the suite, the *model* ``provider/model``, and the log's metadata
      holds the configuration's identity fields (``passk``: suite, provider, model, prompt name
      and hash, config) and its run ids;
    - each task is one *sample* (id: the task), each trial one *epoch* (``trial + 1``), its
      ``input`` the task's prompt from the transcript;
    - each epoch has one score, ``state_check``: ``"C"`` when the final state passed the task's
      check, else ``"I"``, with the outcome as its explanation and in its metadata
      (``passk_outcome``), the final answer as its answer;
    - an ``infra_error`` trial is an epoch with an ``error`` and no score, as inspect records a
      sample that failed (inspect, like passk-nb, leaves it out of the scores);
    - the transcript becomes the sample's chat messages: the system prompt, the task, each reply
      an assistant message (a tool call as an inspect ``ToolCall``), each tool result a tool
      message; token usage, start time and latency are kept;
    - the log's results hold one metric, ``accuracy`` of ``state_check`` under inspect's
      ``mean`` epoch reducer, which is pass^1 (taken from :func:`passk_nb.summarize`).

    Lost: the final state diff and false claims stay in the score's metadata only; passk-nb's
    own per-trial fields (seed, attempts, counts of tool and format errors) are in the sample's
    metadata, which inspect shows but does not analyse.

    Configurations whose records repeat a ``(task, trial)`` (two runs of one configuration)
    raise a ValueError: export with ``by=`` including ``run_id``.

    >>> import pytest; _ = pytest.importorskip("inspect_ai")  # needs passk-nb[inspect]
    >>> import tempfile, passk_nb
    >>> df = passk_nb.run("scripted", trials=2, out=tempfile.mkdtemp(), progress=False)
    >>> [written] = to_inspect(df, tempfile.mkdtemp())
    >>> written.suffix, len(passk_nb.from_inspect(written))
    ('.eval', 10)
    """
    log_api = _inspect_api()
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"to_inspect needs a DataFrame of trial records, got {type(df).__name__}")
    df = mask_frame(df)  # credentials out of what leaves: errors, transcripts, metadata
    missing = [c for c in _NEEDED if c not in df.columns]
    if missing:
        raise ValueError(
            f"to_inspect needs the record columns {missing}: pass records from passk_nb.load/run"
        )
    if df.empty:
        raise ValueError("to_inspect got no records: nothing to write")
    bad = sorted(set(df["outcome"]) - set(OUTCOMES))
    if bad:
        raise ValueError(f"to_inspect: outcomes {bad[:5]} are not passk-nb outcomes ({', '.join(OUTCOMES)})")
    _check_sample_ids(df)
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"to_inspect writes one log per configuration into a folder; {folder} is a file")
    folder.mkdir(parents=True, exist_ok=True)
    columns = list(default_by(df, by))
    unknown = [c for c in columns if c not in df.columns]
    if unknown:
        raise ValueError(f"to_inspect: by= names columns the records do not have: {unknown}")
    written = []
    groups = df.groupby(columns, dropna=False, sort=True) if columns else [((), df)]
    for key, group in groups:
        identity = dict(zip(columns, key if isinstance(key, tuple) else (key,), strict=True))
        repeated = group.duplicated(["task", "trial"])
        if repeated.any():
            row = group[repeated].iloc[0]
            raise ValueError(
                f"to_inspect: the configuration {identity} holds task {row['task']!r} trial {row['trial']} "
                "more than once (several runs?): export with by= including 'run_id'"
            )
        log = _log(group, identity, log_api)
        eval_id = log.eval.eval_id
        name = f"{log.eval.created[:19].replace(':', '-')}_{_slug(log.eval.task)}_{eval_id}.eval"
        target = folder / name
        log_api.write_eval_log(log, str(target), format="eval")
        written.append(target)
    return written


#: The longest name a zip member can have, in bytes (its header stores the length in 16 bits).
_MEMBER_NAME_BYTES = 2**16 - 1


def _check_sample_ids(df: pd.DataFrame) -> None:
    """Refuse, before anything is written, a task no ``.eval`` log can hold as a sample id: each
    sample is the zip member ``samples/<task>_epoch_<trial + 1>.json`` (inspect's own naming), whose
    name ends at a NUL character (the sample would be lost on reading) and has at most 65,535 bytes."""
    for task, trial in df.groupby("task", sort=False)["trial"].max().items():
        text = str(task)
        member = f"samples/{text}_epoch_{int(trial) + 1}.json".encode()
        if "\0" in text:
            why = "holds a NUL character"
        elif len(member) > _MEMBER_NAME_BYTES:
            why = f"is {len(text.encode()):,} bytes long"
        else:
            continue
        raise ValueError(
            f"to_inspect: task {text[:60]!r}{'...' if len(text) > 60 else ''} {why}: an inspect log "
            "stores each sample under its task id as a file name, which cannot hold it. Rename the task "
            "in the records you export (df.assign(task=...)), then export again"
        )


def _inspect_api() -> Any:
    try:
        import inspect_ai.log as log_api
    except ImportError as err:
        raise ImportError(
            f"to_inspect writes logs through inspect_ai, which is not installed: {_INSTALL}"
        ) from err
    return log_api


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:60] or "suite"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _number(value: Any) -> float | None:
    if value is None or pd.isna(value):
        return None
    return float(value)


def _log(group: pd.DataFrame, identity: dict[str, Any], log_api: Any) -> Any:
    from inspect_ai.log import EvalConfig, EvalDataset, EvalMetric, EvalResults, EvalScore, EvalSpec
    from inspect_ai.model import GenerateConfig

    group = group.sort_values(["task", "trial"], kind="stable")
    first = group.iloc[0]
    suite = str(first["suite"])
    provider, model = _text(first.get("provider")), _text(first.get("model"))
    model_name = f"{provider or 'passk'}/{model or 'unknown'}"
    run_ids = sorted({str(r) for r in group["run_id"]}) if "run_id" in group else []
    identity_text = {k: (None if pd.isna(v) else str(v)) for k, v in identity.items()}
    eval_id = content_id(["passk-nb to_inspect", identity_text, run_ids])
    starts = pd.to_datetime(group["started_at"], utc=True) if "started_at" in group else pd.Series([])
    created = starts.min() if len(starts) and starts.notna().any() else pd.Timestamp.now(tz="UTC")
    temperature = _number(first.get("temperature"))
    spec = EvalSpec(
        eval_id=eval_id,
        run_id=run_ids[0] if len(run_ids) == 1 else eval_id,
        created=created.isoformat(),
        task=suite,
        task_id=content_id(["suite", suite]),
        dataset=EvalDataset(name=suite, samples=int(group["task"].nunique())),
        model=model_name,
        config=EvalConfig(epochs=int(group.groupby("task").size().max())),
        model_generate_config=GenerateConfig(temperature=temperature),
        metadata={"passk": {**identity_text, "run_ids": run_ids}},
        packages={"passk-nb": _text(first.get("harness_version"))} if first.get("harness_version") else {},
    )
    samples = [_sample(row, model_name) for row in group.to_dict("records")]
    # inspect's headline: accuracy of state_check under the mean epoch reducer = pass^1 over tasks
    table = summarize(group, k=1, by=(), n_boot=0)
    pass1 = float(table["pass^k"].iloc[0])
    scored = int((group["outcome"] != "infra_error").sum())
    results = EvalResults(
        total_samples=len(samples),
        completed_samples=scored,
        scores=[
            EvalScore(
                name=SCORER,
                scorer=SCORER,
                reducer="mean",
                scored_samples=scored,
                unscored_samples=len(samples) - scored,
                metrics={"accuracy": EvalMetric(name="accuracy", value=pass1)},
            )
        ],
    )
    return log_api.EvalLog(status="success", eval=spec, samples=samples, results=results)


def _sample(row: dict[str, Any], model_name: str) -> Any:
    from inspect_ai.log import EvalError, EvalSample
    from inspect_ai.model import ModelOutput, ModelUsage
    from inspect_ai.scorer import Score

    messages = _messages(row)
    task_prompt = next((m.text for m in messages if m.role == "user"), str(row["task"]))
    answer = _text(row.get("final_answer"))
    outcome = str(row["outcome"])
    infra = outcome == "infra_error"
    error = _text(row.get("error"))
    scores = None
    if not infra:
        scores = {
            SCORER: Score(
                value="C" if bool(row["passed"]) else "I",
                answer=answer or None,
                explanation=outcome + (f": {error}" if error else ""),
                metadata={
                    "passk_outcome": outcome,
                    "state_diff": _json_or_none(row.get("state_diff")),
                    "false_claims": _json_or_none(row.get("false_claims")),
                },
            )
        }
    tokens_in, tokens_out = _count(row.get("input_tokens")), _count(row.get("output_tokens"))
    usage = {}
    if tokens_in is not None or tokens_out is not None:
        usage[model_name] = ModelUsage(
            input_tokens=tokens_in or 0,
            output_tokens=tokens_out or 0,
            total_tokens=(tokens_in or 0) + (tokens_out or 0),
        )
    started = row.get("started_at")
    latency = _number(row.get("latency_s"))
    meta = {
        key: _plain(row.get(key))
        for key in (
            "run_id",
            "seed",
            "n_turns",
            "n_tool_calls",
            "n_tool_errors",
            "n_format_errors",
            "attempts",
        )
        if key in row
    }
    return EvalSample(
        id=str(row["task"]),
        epoch=int(row["trial"]) + 1,
        input=task_prompt,
        target="",
        messages=messages,
        output=ModelOutput.from_content(model=model_name, content=answer),
        scores=scores,
        metadata={"passk": meta},
        model_usage=usage,
        started_at=started.isoformat() if isinstance(started, dt.datetime) and not pd.isna(started) else None,
        total_time=latency if latency is not None and math.isfinite(latency) else None,
        error=EvalError(message=error or "infra_error", traceback="", traceback_ansi="") if infra else None,
    )


def _count(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def _plain(value: Any) -> Any:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def _json_or_none(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to parse: kept as text
        return text


def _messages(row: dict[str, Any]) -> list[Any]:
    """The trial's transcript as inspect chat messages (see :func:`to_inspect`)."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser
    from inspect_ai.tool import ToolCall, ToolCallError

    messages: list[Any] = []
    system = _text(row.get("system_prompt"))
    if system:
        messages.append(ChatMessageSystem(content=system))
    pending: list[str] = []  # ids of tool calls whose results have not come yet
    n_calls = 0
    for entry in parse_transcript(row.get("transcript")):
        kind, content = entry.get("kind"), _text(entry.get("content"))
        if kind == "reply":
            raw = entry.get("action")
            action: dict[str, Any] = raw if isinstance(raw, dict) else {}
            call = None
            if isinstance(action.get("tool"), str):
                n_calls += 1
                call_id = _text(entry.get("tool_call_id")) or f"call_{n_calls}"
                given = action.get("args")
                args: dict[str, Any] = given if isinstance(given, dict) else {}
                call = ToolCall(id=call_id, function=action["tool"], arguments=args)
                pending.append(call_id)
            previous = messages[-1] if messages else None
            if call is not None and entry.get("call_index", 0) and isinstance(previous, ChatMessageAssistant):
                previous.tool_calls = [*(previous.tool_calls or []), call]  # one turn, several calls
            else:
                messages.append(ChatMessageAssistant(content=content, tool_calls=[call] if call else None))
        elif kind == "tool_result":
            answered = _text(entry.get("tool_call_id")) or (pending[0] if pending else None)
            if answered in pending:
                pending.remove(answered)
            failed = bool(entry.get("error"))
            messages.append(
                ChatMessageTool(
                    content=content,
                    tool_call_id=answered,
                    function=_text(entry.get("tool")) or None,
                    error=ToolCallError(type="unknown", message=content) if failed else None,
                )
            )
        elif entry.get("role") == "system":
            messages.append(ChatMessageSystem(content=f"[{kind}] {content}"))
        else:
            messages.append(ChatMessageUser(content=content))
    return messages
