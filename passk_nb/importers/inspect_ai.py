"""Trial records from inspect_ai eval logs: :func:`from_inspect`.

inspect_ai (UK AISI) runs each sample of a task for several *epochs* and scores every
epoch with one or more scorers. Each sample × epoch becomes one trial record: the sample
is the task, the epoch the trial, and the chosen scorer's value says whether it passed.
The logs (``.eval`` and ``.json``) are read through inspect_ai's own log API
(:func:`inspect_ai.log.read_eval_log`), so every log format it reads works here; install
it with the optional extra: ``pip install "passk-nb[inspect]"``.

>>> import pytest; _ = pytest.importorskip("inspect_ai")  # the examples need the extra
>>> import tempfile
>>> from_inspect(tempfile.mkdtemp())
Traceback (most recent call last):
passk_nb.importers.checks.ImportFormatError: no inspect_ai logs (.eval or .json) under ...
"""

from __future__ import annotations

import io
import json
import math
import os
import urllib.parse
import warnings
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from passk_nb.data.ids import content_id
from passk_nb.data.records import OUTCOMES, frame_from_records
from passk_nb.data.transcript import cap_text
from passk_nb.importers.checks import (
    MALFORMED,
    MAX_BYTES,
    FieldError,
    ImportFormatError,
    RowReader,
    read_capped,
    read_zip,
)
from passk_nb.importers.messages import calls_tools, chat_transcript, settings_label

#: Score values counted as success / failure without a ``value_map`` (inspect_ai's
#: CORRECT / INCORRECT constants, booleans, and the numbers 1 / 0).
_CORRECT = frozenset({"C"})
_INCORRECT = frozenset({"I"})
_INSTALL = 'pip install "passk-nb[inspect]"'


def from_inspect(
    log_or_dir: Any,
    *,
    scorer: str | None = None,
    value_map: Mapping[Any, bool] | None = None,
    threshold: float | None = None,
    model: str | None = None,
    family: str | None = None,
    strict: bool = True,
    max_bytes: int = MAX_BYTES,
) -> pd.DataFrame:
    """Trial records (:mod:`passk_nb.data.records` columns) from inspect_ai eval logs.

    ``log_or_dir`` is a log file (``.eval`` or ``.json``), a folder searched for logs
    (recursively, as ``inspect view`` does), an ``EvalLog`` already read, or a list of
    these. One record per sample × epoch:

    - ``task``: the sample id; when the logs hold several inspect tasks, prefixed by the
      task's name (``"gsm8k/17"``) so that samples of different tasks never share a task.
    - ``trial``: the epoch − 1; ``suite``: the inspect task's name; ``model``: the log
      header's model (``model=`` overrides it); ``provider``: ``"inspect_ai"``.
    - ``passed`` / ``outcome`` (``pass`` or ``wrong_output``) from the score of
      ``scorer`` (needed when the log has several scorers). Values ``"C"``/``"I"``
      (inspect's CORRECT/INCORRECT), booleans and 1/0 are understood; for anything
      else give ``value_map`` (``{"P": False}``: partial credit fails) or ``threshold``
      (numeric scores ≥ ``threshold`` pass, as inspect's ``pass_at(k, value=...)``
      counts them). ``value_map`` is looked up first. A log written by
      :func:`passk_nb.to_inspect` keeps passk-nb's own outcome (``wrong_state``, ``max_turns``…)
      in the score's metadata, and it is read back.
    - A sample that errored without a score is an ``infra_error`` row (left out of n
      by default); ``input_tokens`` / ``output_tokens`` are the evaluated model's usage;
      ``latency_s`` the sample's total time; prompt fields stay empty.
    - ``transcript``: the sample's messages as this package's entries
      (:func:`passk_nb.importers.messages.chat_transcript`, as for τ-bench): each tool call a
      ``reply`` with its ``action``, so :func:`passk_nb.divergence` reads the trial's tool
      calls; the last assistant message, when it calls no tool, is the ``answer``.
      ``final_answer`` is the sample's output (what inspect's scorers judged, a ``submit()``
      tool's answer included), else that last text.
    - ``protocol``: ``native`` when any sample of the log calls a tool or any model call
      was given tools (inspect calls tools through the model API), else ``text``;
      ``json_mode`` ``off``; ``config`` names the protocol and a temperature the log sets.
    - ``state_diff`` and ``false_claims`` are null: the log keeps no final state of ours,
      and no claim was checked ("[]" would say "no change" and "checked, none found").
    - ``run_id``: a hash of the log's eval id and run id, so two logs are never pooled.
    - ``task_family``: with ``family=``, the value of that key of each sample's metadata (the key
      inspect's ``stderr(cluster=...)`` takes; prefixed by the task's name as ``task`` is), so that
      ``cluster="task_family"`` resamples a family's samples together; else "" (each sample its own).

    Checked: every sample × epoch has a score from the scorer (else it names the first
    one missing), no (sample, epoch) appears twice in a log, every epoch is a whole number
    ≥ 1, and every score value is understood (else the error lists the values found and how
    to map them). A log that did not finish (status other than ``success``) gives a warning.
    Bad input raises :class:`~passk_nb.importers.checks.ImportFormatError` (a ValueError)
    naming the log, the sample and the field; ``strict=False`` skips samples whose fields
    cannot be read, with a warning that counts them. Only regular files are read, each at most
    ``max_bytes`` on disk and expanded (an ``.eval`` log is a zip), checked before reading.

    >>> import pytest; _ = pytest.importorskip("inspect_ai")  # needs passk-nb[inspect]
    >>> log = _demo_log()  # an EvalLog with one sample scored C, I over two epochs
    >>> from_inspect(log)[["suite", "task", "trial", "passed", "outcome", "model"]]
      suite task  trial  passed       outcome          model
    0  demo    a      0    True          pass  mockllm/model
    1  demo    a      1   False  wrong_output  mockllm/model
    """
    logs = _read_logs(log_or_dir, max_bytes)
    names = {log.eval.task for log in logs}
    records: list[dict[str, Any]] = []
    for log in logs:
        records.extend(
            _log_records(
                log,
                scorer=scorer,
                value_map=value_map,
                threshold=threshold,
                model=model,
                family=family,
                prefix=len(names) > 1,
                strict=strict,
            )
        )
    df = frame_from_records(records)
    for _, per_task in df.groupby("run_id")["task"]:  # within one log: every sample, every epoch?
        counts = per_task.value_counts()
        if counts.nunique() > 1:
            short = counts[counts < counts.max()]
            warnings.warn(
                f"{len(short)} of {len(counts)} samples of a log have fewer epochs than the others (e.g. "
                f"{short.index[0]!r}: {short.iloc[0]} of {counts.max()}); each task's pass^k uses its own n",
                UserWarning,
                stacklevel=2,
            )
    return df


def _log_api() -> Any:
    try:
        import inspect_ai.log as log_api
    except ImportError as err:
        raise ImportError(
            f"from_inspect reads logs through inspect_ai, which is not installed: {_INSTALL}"
        ) from err
    return log_api


def _read_logs(source: Any, max_bytes: int) -> list[Any]:
    items = list(source) if isinstance(source, list | tuple) else [source]
    if not items:
        raise ImportFormatError("from_inspect got an empty list of logs")
    log_api = _log_api()
    logs = []
    for item in items:
        if isinstance(item, log_api.EvalLog):
            logs.append(item)
            continue
        if not isinstance(item, str | os.PathLike):
            raise TypeError(
                f"from_inspect needs a log file, a folder of logs or an EvalLog, got {type(item).__name__}"
            )
        path = Path(item)
        if path.is_dir():
            found = log_api.list_eval_logs(str(path), formats=["eval", "json"], descending=False)
            if not found:
                raise ImportFormatError(f"no inspect_ai logs (.eval or .json) under {path}")
            logs.extend(_read_log(log_api, _local_path(info.name), max_bytes) for info in found)
        elif path.exists():
            logs.append(_read_log(log_api, str(path), max_bytes))
        else:
            raise FileNotFoundError(f"no inspect_ai log at {path}")
    return logs


def _local_path(name: str) -> str:
    """A local path from the name ``list_eval_logs`` gives (``file:///...`` or a path)."""
    return urllib.parse.unquote(urllib.parse.urlparse(name).path) if name.startswith("file://") else name


def _read_log(log_api: Any, path: str, max_bytes: int) -> Any:
    """One log file, read only when it is a regular file within ``max_bytes`` (on disk and, for
    an ``.eval`` zip, expanded: :func:`~passk_nb.importers.checks.read_zip`); inspect_ai then
    reads it from memory."""
    if path.endswith(".eval"):
        opened, fmt = read_zip(path, max_bytes=max_bytes), "eval"
    else:
        opened, fmt = io.BytesIO(read_capped(path, max_bytes=max_bytes)), "json"
    try:
        log = log_api.read_eval_log(opened, format=fmt)
    except MALFORMED as exc:  # pydantic's ValidationError is a ValueError
        raise ImportFormatError(f"{path} is not a readable inspect_ai log: {str(exc)[:500]}") from None
    log.location = path
    return log


def _log_records(
    log: Any,
    *,
    scorer: str | None,
    value_map: Mapping[Any, bool] | None,
    threshold: float | None,
    model: str | None,
    family: str | None,
    prefix: bool,
    strict: bool,
) -> list[dict[str, Any]]:
    where = log.location or f"the log of task {log.eval.task!r}"
    samples = log.samples
    if not samples:
        raise ImportFormatError(
            f"{where} holds no samples (was it written with --no-log-samples, or read header_only?)"
        )
    if log.status != "success":
        warnings.warn(
            f"{where} has status {log.status!r}: its samples may be incomplete",
            UserWarning,
            stacklevel=4,
        )
    name = _choose_scorer(log, scorer, where)
    run_id = content_id(["inspect_ai", log.eval.eval_id, log.eval.run_id])
    eval_model = log.eval.model
    temperature = _temperature(log)
    native = False  # does any sample call tools, or was any model call given tools?
    seen: set[tuple[str, int]] = set()
    missing: list[tuple[str, int]] = []
    unknown: list[Any] = []
    records = []
    reader = RowReader(where, strict=strict)

    def build(sample: Any, key: tuple[str, int], passed: bool, outcome: str, value: Any) -> dict[str, Any]:
        nonlocal native
        messages = [_chat(m) for m in sample.messages or []]
        native = native or calls_tools(messages) or _offered_tools(sample)
        conversation = chat_transcript(messages)
        completion = sample.output.completion if sample.output else ""
        return {
            "run_id": run_id,
            "suite": log.eval.task,
            "task": f"{log.eval.task}/{key[0]}" if prefix else key[0],
            "task_family": _family(sample, family, log.eval.task if prefix else None),
            "provider": "inspect_ai",
            "model": model or eval_model,
            "temperature": _float(temperature),
            "trial": key[1] - 1,
            "passed": passed,
            "outcome": outcome,
            "state_ok": passed,
            **_usage(sample, eval_model),
            **conversation,
            # what inspect's scorers judged (a submit() tool's answer too); else the last text
            "final_answer": cap_text(completion) if completion else conversation["final_answer"],
            "state_diff": None,  # an inspect log keeps no final state of ours
            "false_claims": None,  # not checked: that needs a suite's claim vocabulary and state
            "latency_s": _float(getattr(sample, "total_time", None)),
            "started_at": _timestamp(getattr(sample, "started_at", None)),
            "error": cap_text(sample.error.message) if sample.error is not None else None,
            "provider_meta": json.dumps(
                {"scorer": name, "score": value, "sample_id": sample.id, "log": log.location},
                default=str,
            ),
        }

    for sample in samples:
        if isinstance(sample.epoch, bool) or not isinstance(sample.epoch, int) or sample.epoch < 1:
            reader.read(f"sample {sample.id!r}", _bad_epoch, sample.epoch)
            continue
        key = (str(sample.id), int(sample.epoch))
        if key in seen:
            raise ImportFormatError(
                f"{where} holds sample {key[0]!r} epoch {key[1]} more than once: "
                "was it merged from several runs? Import the runs as separate logs"
            )
        seen.add(key)
        score = (sample.scores or {}).get(name)
        value = None if score is None else score.value
        if _missing(value) and sample.error is None:
            missing.append(key)
            continue
        if _missing(value):
            passed, outcome = False, "infra_error"
        else:
            try:
                verdict = _verdict(value, value_map, threshold)
            except ImportFormatError as exc:
                raise ImportFormatError(f"{where}, sample {key[0]!r} epoch {key[1]}: {exc}") from None
            if verdict is None:
                unknown.append(value)
                continue
            passed, outcome = verdict, _outcome(score, verdict, f"{where}, sample {key[0]!r} epoch {key[1]}")
        record = reader.read(
            f"sample {key[0]!r} epoch {key[1]}",
            build,
            sample,
            key,
            passed,
            outcome,
            value,
        )
        if record is not None:
            records.append(record)
    reader.warn_skipped(stacklevel=4)
    settings = {"protocol": "native" if native else "text"}
    settings.update(settings_label(_float(temperature), settings["protocol"]))
    records = sorted(
        ({**record, **settings} for record in records), key=lambda record: (record["task"], record["trial"])
    )
    if missing:
        raise ImportFormatError(
            f"{len(missing)} sample epochs in {where} have no {name!r} score (e.g. sample "
            f"{missing[0][0]!r} epoch {missing[0][1]}): score the log first (`inspect score LOG`), "
            "or choose another scorer="
        )
    if unknown:
        found = sorted({repr(v) for v in unknown if isinstance(v, Hashable)})
        raise ImportFormatError(
            f"scorer {name!r} in {where} gave values {found[:10]} that are not C/I, booleans or 1/0: "
            "say which pass with value_map= (e.g. value_map={'P': False}) or, for numeric scores, "
            "threshold= (e.g. threshold=1.0: scores >= 1.0 pass)"
        )
    return records


def _family(sample: Any, key: str | None, prefix: str | None) -> str:
    """The sample's family: its metadata's ``key`` (prefixed by the task's name when the logs hold
    several inspect tasks); "" without ``key``. A sample whose metadata lacks it is refused."""
    if key is None:
        return ""
    metadata = getattr(sample, "metadata", None) or {}
    if key not in metadata or metadata[key] is None:
        raise ImportFormatError(
            f"family={key!r}: the sample's metadata has no {key!r} (it has {sorted(metadata)}); "
            "name a metadata key every sample has, or leave family= out"
        )
    return f"{prefix}/{metadata[key]}" if prefix else str(metadata[key])


def _outcome(score: Any, passed: bool, where: str) -> str:
    """``pass`` or ``wrong_output``; a log written by :func:`passk_nb.to_inspect` keeps our own
    outcome in the score's metadata (``passk_outcome``), checked against the score's verdict."""
    kept = (getattr(score, "metadata", None) or {}).get("passk_outcome")
    if kept is None:
        return "pass" if passed else "wrong_output"
    if kept not in OUTCOMES or kept == "infra_error" or (kept == "pass") != passed:
        raise ImportFormatError(
            f"{where}: the score's metadata says passk_outcome {kept!r}, which does not fit a score "
            f"that {'passed' if passed else 'failed'}: was the log edited? Remove passk_outcome to "
            "import the score alone"
        )
    return str(kept)


def _bad_epoch(epoch: Any) -> dict[str, Any]:
    raise FieldError("epoch", epoch, "not an epoch (inspect numbers epochs from 1)")


def _choose_scorer(log: Any, scorer: str | None, where: str) -> str:
    names: list[str] = []
    for sample in log.samples:
        for name in sample.scores or {}:
            if name not in names:
                names.append(name)
    if scorer is not None:
        if scorer not in names:
            raise ImportFormatError(f"no {scorer!r} scores in {where}; its scorers are {names}")
        return scorer
    if len(names) != 1:
        raise ImportFormatError(
            f"{where} has scores from {len(names)} scorers {names}: choose one with scorer="
            if names
            else f"{where} has no scores: score it first (`inspect score LOG`)"
        )
    return names[0]


def _temperature(log: Any) -> float | None:
    """The temperature the log's model calls used: the eval's generate config (``eval(...,
    temperature=...)``, stored in the plan) overrides the model's own (``get_model(config=...)``)."""
    for config in (getattr(log.plan, "config", None), log.eval.model_generate_config):
        value = getattr(config, "temperature", None)
        if value is not None:
            return float(value)
    return None


def _float(value: Any) -> float:
    return float("nan") if value is None else float(value)


def _timestamp(value: Any) -> pd.Timestamp | None:
    return pd.Timestamp(value) if value else None


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _verdict(value: Any, value_map: Mapping[Any, bool] | None, threshold: float | None) -> bool | None:
    """Whether a score value is a success; None when it is not understood."""
    if isinstance(value, dict | list):
        keys = list(value) if isinstance(value, dict) else f"a list of {len(value)}"
        raise ImportFormatError(
            f"score values with several parts ({keys}) are not supported: "
            "write a scorer that gives one value per sample, or use from_frame on your own table"
        )
    if value_map is not None and value in value_map:
        return bool(value_map[value])
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        if threshold is not None:
            return bool(value >= threshold)
        return bool(value) if value in (0, 1) else None
    if isinstance(value, str):
        text = value.strip().upper()
        if text in _CORRECT or text in _INCORRECT:
            return text in _CORRECT
    return None


def _usage(sample: Any, eval_model: str) -> dict[str, int | None]:
    usage = sample.model_usage or {}
    picked = [usage[eval_model]] if eval_model in usage else list(usage.values())
    if not picked:
        return {"input_tokens": None, "output_tokens": None}
    return {
        "input_tokens": sum(u.input_tokens for u in picked),
        "output_tokens": sum(u.output_tokens for u in picked),
    }


def _chat(message: Any) -> dict[str, Any]:
    """One inspect ``ChatMessage`` as the plain message :func:`chat_transcript` reads.

    The text is inspect's own ``message.text`` (the text parts of a content list, joined);
    a tool call keeps its ``function``, ``arguments`` and ``parse_error``; a tool message its
    ``tool_call_id``, ``function`` and whether it failed (``error``, whose message stands in
    for an empty result).
    """
    plain: dict[str, Any] = {"role": message.role, "content": message.text or ""}
    if message.role == "assistant":
        plain["tool_calls"] = [
            {"id": c.id, "function": c.function, "arguments": c.arguments, "parse_error": c.parse_error}
            for c in message.tool_calls or []
        ]
    elif message.role == "tool":
        failed = message.error is not None
        plain.update(tool_call_id=message.tool_call_id, function=message.function or "", error=failed)
        plain["content"] = plain["content"] or (message.error.message if failed else "")
    return plain


def _offered_tools(sample: Any) -> bool:
    """Whether any model call of the sample was given tools (its ``model`` events say so)."""
    return any(
        getattr(e, "event", None) == "model" and getattr(e, "tools", None) for e in sample.events or []
    )


def _demo_log() -> Any:  # pragma: no cover - used by the docstring example only
    """A tiny EvalLog built in memory (one sample, two epochs, scored C then I)."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSample, EvalSpec
    from inspect_ai.model import GenerateConfig
    from inspect_ai.scorer import Score

    spec = EvalSpec(
        created="2026-01-01T00:00:00+00:00",
        task="demo",
        dataset=EvalDataset(),
        model="mockllm/model",
        config=EvalConfig(),
        model_generate_config=GenerateConfig(),
    )
    samples = [
        EvalSample(id="a", epoch=e, input="q", target="x", scores={"match": Score(value=v)})
        for e, v in ((1, "C"), (2, "I"))
    ]
    return EvalLog(status="success", eval=spec, samples=samples)
