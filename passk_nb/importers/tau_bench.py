"""Trial records from τ-bench and τ²-bench result files, for the same analysis as our own runs.

τ-bench's JSON list of run results and τ²-bench's results object (or folder, or list of
simulations) become records: a reward within 1e-6 of 1 passes, crashes and the runs τ²-bench
leaves out of its metrics are ``infra_error``, a step limit is ``max_turns``, anything else
``wrong_state``. A missing trial is left out (``missing="fail"`` reproduces τ-bench's own
numbers), each trial's messages become transcript entries (tool calls as ``reply`` actions),
``state_diff`` and ``false_claims`` are null (not recorded), and ``protocol``, ``json_mode``,
``temperature`` and ``config`` are set as our own runs set them.

Every rule in full: ``docs/guide/import-export.md``.
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from passk_nb.data.ids import content_id, prompt_hash
from passk_nb.data.records import frame_from_records
from passk_nb.importers.checks import (
    MALFORMED,
    MAX_BYTES,
    FieldError,
    ImportFormatError,
    RowReader,
    check_regular,
    load_json,
    regular_files,
)
from passk_nb.importers.messages import calls_tools, chat_transcript, preview, settings_label

#: |reward − 1| at most this counts as success (τ-bench's rule).
REWARD_TOLERANCE = 1e-6
#: τ²-bench termination reasons that mean "no evaluable run" (its non-evaluable set).
TAU2_INFRA_REASONS: frozenset[str] = frozenset({"infrastructure_error", "context_window_exceeded"})
#: τ-bench's result file name: ``{strategy}-{model}-{temperature}_range_{start}-{end}_user-...``.
_TAU_FILE_NAME = re.compile(
    r"^(?P<strategy>tool-calling|act|react|few-shot)-(?P<model>.+)-(?P<temperature>[0-9.]+)_range_"
)
#: τ-bench's agent strategies that write their actions as text ("Action: {...}"), not native calls.
TAU_TEXT_STRATEGIES: frozenset[str] = frozenset({"act", "react"})
#: How a τ-bench tool result starts when the tool raised (its environment returns ``f"Error: {e}"``).
TAU_TOOL_ERROR = "Error: "
#: What ``missing=`` accepts.
MISSING_MODES: tuple[str, ...] = ("skip", "fail")


def from_tau_bench(
    source: str | os.PathLike[str] | Sequence[Any] | Mapping[str, Any],
    *,
    model: str | None = None,
    suite: str | None = None,
    run_id: str | None = None,
    missing: str = "skip",
    strict: bool = True,
    max_bytes: int = MAX_BYTES,
) -> pd.DataFrame:
    """Trial records (:mod:`passk_nb.data.records` columns) from τ-bench or τ²-bench results.

    ``source`` is a result file or τ²-bench result folder, a list of them (each becomes its own
    run and, without ``model=``, its own model), or the already-loaded JSON (a τ-bench list, a
    τ²-bench object or a list of τ²-bench simulations). ``model`` defaults to what the file says:
    τ²-bench's agent model, or for τ-bench the model in its file name
    (``tool-calling-gpt-4o-0.0_range_...json`` → ``gpt-4o``), else the file name; loaded JSON
    without ``model=`` gets ``"unknown-<run_id>"``, so two sources are never pooled silently.
    ``suite`` fills in the domain (τ²-bench records it). ``run_id`` defaults to a hash of the
    content, so the same file always gets the same id. ``prompt_hash`` is the hash of the
    trajectory's system message when it has one, so different system prompts are never pooled;
    trials without one (a crash) get the file's prompt hash when the file has exactly one.
    ``missing``: ``"skip"`` (default) leaves missing trials out, with a warning; ``"fail"`` adds
    them as failures, as τ-bench's report counts them (module docstring).

    Every field is converted to its record type where it can be (a ``duration`` of ``"1.5s"``
    is 1.5 seconds); an entry that cannot be read (a reward that is not a number, a trial that is
    not a whole number ≥ 0, a field of the wrong type) raises :class:`ImportFormatError` (a
    ValueError) naming the file, the entry and the field, never an ``infra_error`` row;
    ``strict=False`` skips such entries with a warning that counts them. Only regular files of
    at most ``max_bytes`` are read (a FIFO or a device in a results folder is refused, unread).
    A duplicate (task, trial) is a ValueError too.

    >>> results = [{"task_id": 0, "trial": t, "reward": r, "info": {}, "traj": []}
    ...            for t, r in enumerate([1.0, 0.0, 0.9999999])]
    >>> df = from_tau_bench(results, model="gpt-4o", suite="retail")
    >>> df[["task", "trial", "passed", "outcome"]]
      task  trial  passed      outcome
    0    0      0    True         pass
    1    0      1   False  wrong_state
    2    0      2    True         pass
    """
    if missing not in MISSING_MODES:
        raise ValueError(f"missing must be one of {list(MISSING_MODES)}; got missing={missing!r}")
    if _is_path_list(source):
        assert isinstance(source, Sequence)
        if run_id is not None and len(source) > 1:
            raise ValueError("run_id= names one run; with several files leave it out (each gets its own)")
        frames = [
            from_tau_bench(
                path,
                model=model,
                suite=suite,
                run_id=run_id,
                missing=missing,
                strict=strict,
                max_bytes=max_bytes,
            )
            for path in source
        ]
        return pd.concat(frames, ignore_index=True)
    label = os.fspath(source) if isinstance(source, str | os.PathLike) else "the τ-bench results"
    data, files = _load(source, max_bytes)
    try:
        rid = run_id or "tau-" + content_id(data)  # the same whenever the content is
    except MALFORMED as exc:
        raise ImportFormatError(f"{label} cannot be read ({type(exc).__name__}: {str(exc)[:200]})") from None
    file_model = _model_from_name(source)
    reader = RowReader(label, strict=strict)
    if is_tau2_simulations(data):  # τ²-bench's simulations alone, as a list
        data = {"simulations": data}
    if isinstance(data, Mapping) and "simulations" in data:
        records = _tau2_records(data, model=model, suite=suite, reader=reader, files=files)
        if not records or not records[0]["model"]:
            records = [{**r, "model": file_model or f"unknown-{rid}"} for r in records]
    elif isinstance(data, Sequence) and not isinstance(data, str | bytes):
        name = model or file_model or f"unknown-{rid}"
        settings = _tau_settings(source, data)
        records = [
            record
            for i, result in enumerate(data)
            if (
                record := reader.read(
                    _entry_label(i, result),
                    partial(_tau_record, model=name, suite=suite),
                    result,
                    names=_TAU_NAMES,
                )
            )
            is not None
        ]
        records = [{**record, **settings} for record in records]
    else:
        raise ImportFormatError(
            f"{label} is not a τ-bench result (a JSON list of {{task_id, reward, info, traj, trial}}) "
            "nor a τ²-bench result (an object with 'simulations', or a list of simulations)"
        )
    reader.warn_skipped(stacklevel=2)
    if not records:
        raise ImportFormatError(f"{label}: none of its {reader.total} records could be read")
    _reject_duplicates(records, source)
    records += _missing_trials(records, source, fill=missing == "fail")
    records = [
        {**record, **settings_label(record.get("temperature"), record["protocol"])} for record in records
    ]
    hashes = {record["prompt_hash"] for record in records} - {""}
    # a crashed trial has no transcript: give it the file's prompt so it is not split off
    fill = hashes.pop() if len(hashes) == 1 else ""
    return frame_from_records(
        {**record, "run_id": rid, "prompt_hash": record["prompt_hash"] or fill} for record in records
    )


#: Fields a τ²-bench simulation has and a τ-bench result does not (which has ``reward``).
TAU2_ONLY = frozenset({"reward_info", "termination_reason"})


def is_tau2_simulations(data: Any) -> bool:
    """Whether ``data`` is a JSON list of τ²-bench simulations, not a τ-bench result list: its
    first object has a τ²-only field (``reward_info``, ``termination_reason``) and no ``reward``.

    >>> is_tau2_simulations([{"task_id": 1, "trial": 0, "reward_info": {"reward": 1.0}}])
    True
    >>> is_tau2_simulations([{"task_id": 1, "trial": 0, "reward": 1.0}])
    False
    """
    if not isinstance(data, list):
        return False
    first = next((entry for entry in data if isinstance(entry, Mapping)), None)
    return first is not None and "reward" not in first and not TAU2_ONLY.isdisjoint(first)


#: Record columns -> the τ-bench / τ²-bench fields they come from, for messages.
_TAU_NAMES = {"task": "task_id", "latency_s": "duration", "started_at": "start_time"}


def _entry_label(i: int, result: Any, what: str = "entry") -> str:
    """``entry 3 (task '7' trial 1)``: where a record is in its file, for messages."""
    if not isinstance(result, Mapping):
        return f"{what} {i}"
    task, trial = result.get("task_id"), result.get("trial")
    parts = [
        f"task {task!r}" if isinstance(task, str | int) else "",
        f"trial {trial!r}" if isinstance(trial, int) else "",
    ]
    inner = " ".join(p for p in parts if p)
    return f"{what} {i} ({inner})" if inner else f"{what} {i}"


def _mapping(value: Any, field: str) -> Mapping[str, Any]:
    """``value`` when it is an object (None: an empty one), else a FieldError naming ``field``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FieldError(field, value, "not an object")
    return value


def _messages(value: Any, field: str) -> list[Any]:
    """``value`` when it is a list of messages (None: none), else a FieldError naming ``field``."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(m, Mapping) for m in value):
        raise FieldError(field, value, "not a list of message objects")
    for m in value:
        calls = m.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise FieldError(f"{field}[].tool_calls", calls, "not a list")
    return value


def _is_path_list(source: Any) -> bool:
    return (
        isinstance(source, Sequence)
        and not isinstance(source, str | bytes)
        and len(source) > 0
        and all(isinstance(item, str | os.PathLike) for item in source)
    )


def _model_from_name(source: Any) -> str:
    """The model a τ-bench file name records, else the file name; "" for loaded JSON."""
    if not isinstance(source, str | os.PathLike):
        return ""
    path = Path(source)
    stem = path.name if path.is_dir() else path.stem
    match = _TAU_FILE_NAME.match(stem)
    return match["model"] if match else stem


def _tau_settings(source: Any, data: Sequence[Any]) -> dict[str, Any]:
    """What a τ-bench run's records can say about its settings: the protocol, and the temperature
    its file name records. The strategy in the file name decides the protocol; without one, the
    trajectories do (native when any assistant message carries ``tool_calls``)."""
    match = _TAU_FILE_NAME.match(Path(source).stem) if isinstance(source, str | os.PathLike) else None
    if match:
        native = match["strategy"] not in TAU_TEXT_STRATEGIES
    else:
        native = any(calls_tools(result.get("traj") or []) for result in data if isinstance(result, Mapping))
    return {
        "protocol": "native" if native else "text",
        "temperature": float(match["temperature"]) if match else None,
    }


def _where(source: Any) -> str:
    return f" in {os.fspath(source)}" if isinstance(source, str | os.PathLike) else ""


def _reject_duplicates(records: list[dict[str, Any]], source: Any) -> None:
    seen: dict[tuple[str, int], int] = {}
    for record in records:
        key = (record["task"], record["trial"])
        seen[key] = seen.get(key, 0) + 1
    dups = [key for key, count in seen.items() if count > 1]
    if dups:
        shown = ", ".join(f"task {t!r} trial {i}" for t, i in dups[:5])
        more = f" and {len(dups) - 5} more" if len(dups) > 5 else ""
        raise ValueError(
            f"duplicate (task, trial){_where(source)}: {shown}{more}. A result file holds each trial once; "
            "were two runs concatenated? Load them as separate files: from_tau_bench([file_a, file_b])"
        )


def _missing_trials(records: list[dict[str, Any]], source: Any, *, fill: bool) -> list[dict[str, Any]]:
    """Warn about tasks lacking some of the file's trial numbers; with ``fill``, failed rows for them."""
    trials = sorted({record["trial"] for record in records})
    by_task: dict[str, set[int]] = {}
    template: dict[str, dict[str, Any]] = {}
    for record in records:
        by_task.setdefault(record["task"], set()).add(record["trial"])
        template.setdefault(record["task"], record)
    gaps = {
        task: [t for t in trials if t not in have]
        for task, have in by_task.items()
        if len(have) < len(trials)
    }
    if not gaps:
        return []
    shown = ", ".join(f"task {task!r} lacks trial(s) {ts}" for task, ts in list(gaps.items())[:3])
    more = f" and {len(gaps) - 3} more tasks" if len(gaps) > 3 else ""
    if not fill:
        warnings.warn(
            f"missing trials{_where(source)}: {shown}{more}. They are left out (each task keeps its own n); "
            "τ-bench's report counts them as failures: pass missing='fail' to reproduce it",
            UserWarning,
            stacklevel=3,
        )
        return []
    added = []
    for task, ts in gaps.items():
        base = template[task]
        for trial in ts:
            added.append(
                {
                    **{key: base[key] for key in ("task", "suite", "provider", "model", "prompt_hash")},
                    **{key: base.get(key) for key in ("protocol", "temperature")},
                    "trial": trial,
                    "passed": False,
                    "state_ok": False,
                    "outcome": "wrong_state",
                    "state_diff": None,
                    "false_claims": None,
                    "error": "missing from the result file (τ-bench counts it as a failure)",
                }
            )
    return added


def _load(source: Any, max_bytes: int) -> tuple[Any, list[str] | None]:
    """The results, and for a τ²-bench folder the file each simulation came from."""
    if not isinstance(source, str | os.PathLike):
        return source, None
    path = Path(source)
    file = path / "results.json" if path.is_dir() else path
    data = load_json(file, max_bytes=max_bytes)
    folder = file.parent / "simulations"  # τ²-bench folder format: one file per simulation
    if isinstance(data, dict) and not data.get("simulations") and folder.is_dir():
        index = data.get("simulation_index")
        if isinstance(index, list):  # τ²-bench lists its files: every one must be there
            ids = [str(e.get("id")) if isinstance(e, Mapping) else repr(e) for e in index]
            unsafe = [i for i in ids if Path(i).name != i or i in ("", ".", "..") or "\\" in i]
            if unsafe:  # a simulation's file is <id>.json in simulations/, never a path elsewhere
                raise ImportFormatError(
                    f"{file}: the simulation index names a simulation {unsafe[0][:80]!r}, which is a path, "
                    f"not a simulation id (the name of its file in {folder}); fix or remove that entry"
                )
            missing = [i for i in ids if not (folder / f"{i}.json").exists()]
            if missing:
                raise ImportFormatError(
                    f"{file}: the simulation index lists {len(missing)} simulation(s) with no file in "
                    f"{folder}, e.g. {missing[0]}; the results folder is incomplete"
                )
            for i in ids:
                check_regular(folder / f"{i}.json")
        files = regular_files(folder, "*.json")
        data = {**data, "simulations": [load_json(p, max_bytes=max_bytes) for p in files]}
        return data, [os.fspath(p) for p in files]
    return data, None


def _tau_record(result: Mapping[str, Any], *, model: str, suite: str | None) -> dict[str, Any]:
    if not isinstance(result, Mapping):
        raise ImportFormatError(f"τ-bench result entries must be objects; got {preview(result)}")
    missing = [key for key in ("task_id", "reward", "trial") if key not in result]
    if missing:
        raise ImportFormatError(f"τ-bench result lacks {missing}: {preview(result)}")
    info = _mapping(result.get("info"), "info")
    traj = _messages(result.get("traj"), "traj")
    crashed = "error" in info
    passed = not crashed and _passed(_reward(result))
    return {
        **_common(result, traj, passed),
        "suite": suite or "tau-bench",
        "provider": "tau-bench",
        "model": model,
        "outcome": "pass" if passed else "infra_error" if crashed else "wrong_state",
        "error": str(info["error"]) if crashed else None,
    }


def _tau2_records(
    data: Mapping[str, Any],
    *,
    model: str | None,
    suite: str | None,
    reader: RowReader,
    files: list[str] | None,
) -> list[dict[str, Any]]:
    try:
        info = _mapping(data.get("info"), "info")
        agent_info = _mapping(info.get("agent_info"), "info.agent_info")
        model = model or agent_info.get("llm") or ""
        suite = suite or _mapping(info.get("environment_info"), "info.environment_info").get("domain_name")
        temperature = _mapping(agent_info.get("llm_args"), "info.agent_info.llm_args").get("temperature")
    except FieldError as exc:
        raise ImportFormatError(f"{reader.source}: {exc}") from None
    sims = data["simulations"]
    if not isinstance(sims, list):
        raise ImportFormatError(f"{reader.source}: 'simulations' holds {preview(sims)}, not a list")
    if not sims:
        raise ImportFormatError(
            f"{reader.source}: the τ²-bench results hold no simulations: nothing to import "
            "(did the run finish?)"
        )
    seen: dict[str, int] = {}

    def record(sim: Any) -> dict[str, Any]:
        if not isinstance(sim, Mapping):
            raise ImportFormatError(f"a simulation must be an object; got {preview(sim)}")
        if "task_id" not in sim:
            raise ImportFormatError(f"the simulation lacks 'task_id': {preview(sim)}")
        task = _task(sim["task_id"])
        trial = seen.get(task, 0) if sim.get("trial") is None else sim["trial"]
        reward = _mapping(sim.get("reward_info"), "reward_info").get("reward")
        reason = sim.get("termination_reason") or ""
        if not isinstance(reason, str):
            raise FieldError("termination_reason", reason, "not text")
        infra = reason in TAU2_INFRA_REASONS
        passed = not infra and reward is not None and _passed(_reward({**sim, "reward": reward}))
        failure = "infra_error" if infra else "max_turns" if reason == "max_steps" else "wrong_state"
        messages = _messages(sim.get("messages"), "messages")
        row = {
            **_common({**sim, "trial": trial, "reward": reward}, messages, passed),
            "suite": suite or "tau2-bench",
            "provider": "tau2-bench",
            "model": model,
            "protocol": "native",  # τ²-bench's agent calls tools natively
            "outcome": "pass" if passed else failure,
            "error": reason if infra else None,
            "latency_s": sim.get("duration"),
            **_tau2_details(sim, messages, temperature),
        }
        seen[task] = seen.get(task, 0) + 1
        return row

    records = []
    for i, sim in enumerate(sims):
        where = _entry_label(i, sim, "simulation") if files is None else files[i]
        if (row := reader.read(where, record, sim, names=_TAU_NAMES)) is not None:
            records.append(row)
    return records


def _tau2_details(sim: Mapping[str, Any], messages: list[Any], temperature: Any) -> dict[str, Any]:
    """What a τ²-bench simulation says beyond its verdict: tokens, seed, start, temperature."""
    agent = [m for m in messages if m.get("role") == "assistant"]
    usages = [m["usage"] for m in agent if isinstance(m.get("usage"), Mapping)]

    def total(key: str) -> int | None:
        values = [
            u.get(key) for u in usages if isinstance(u.get(key), int) and not isinstance(u.get(key), bool)
        ]
        return sum(values) if values else None

    return {
        "input_tokens": total("prompt_tokens"),
        "output_tokens": total("completion_tokens"),
        "seed": sim.get("seed"),
        "started_at": sim.get("start_time") or None,
        "temperature": float(temperature) if isinstance(temperature, int | float) else None,
    }


def _common(result: Mapping[str, Any], messages: list[Mapping[str, Any]], passed: bool) -> dict[str, Any]:
    """Fields τ-bench and τ²-bench results share: ids, reward, the transcript and its counts."""
    system = next((m.get("content") for m in messages[:1] if m.get("role") == "system"), None)
    return {
        "task": _task(result["task_id"]),
        "trial": _trial(result),
        "passed": passed,
        "state_ok": passed,
        "prompt_hash": prompt_hash(system) if isinstance(system, str) else "",
        **chat_transcript(messages, tool_error_prefix=TAU_TOOL_ERROR),
        "state_diff": None,  # the files hold the reward, not the final database
        "false_claims": None,  # not checked: that needs the suite's claim vocabulary and the final state
        "provider_meta": json.dumps({"reward": result["reward"]}),
    }


def _task(value: Any) -> str:
    """A task id: text or a whole number (τ-bench numbers its tasks), as text."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise FieldError("task_id", value, "not text or a whole number")
    return str(value)


def _passed(reward: float) -> bool:
    return abs(reward - 1.0) <= REWARD_TOLERANCE


def _reward(result: Mapping[str, Any]) -> float:
    reward = result.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, int | float) or not math.isfinite(reward):
        raise ValueError(
            f"task {result.get('task_id')!r} trial {result.get('trial')!r}: reward must be a finite number "
            f"(1 is a success); got {reward!r}. Fix or drop that entry"
        )
    return float(reward)


def _trial(result: Mapping[str, Any]) -> int:
    trial = result.get("trial")
    if (
        isinstance(trial, bool)
        or not isinstance(trial, int | float)
        or not math.isfinite(trial)
        or trial != int(trial)
        or trial < 0
    ):
        raise ValueError(
            f"task {result.get('task_id')!r}: trial must be a whole number ≥ 0; got {trial!r}. "
            "Fix or drop that entry"
        )
    return int(trial)
