"""Trial records from Harbor job folders (Terminal-Bench 2 and every other Harbor dataset).

A job folder holds one ``<trial>/result.json`` (Harbor's ``TrialResult``) per task × attempt;
attempts are numbered by ``started_at``. A trial without a reward is an ``infra_error`` or a
failure by the caller's explicit ``errored=`` (no default: the two give different numbers); a
reward passes at ``reward >= threshold`` (``reward_key=`` picks one of several). Kept: task,
attempt order, pass, the exception, tokens, latency, start time, agent and version, cost. Lost:
the transcript, the final state and claims.

The layout read and every field: ``docs/guide/import-export.md``.

>>> import tempfile
>>> from_harbor(tempfile.mkdtemp(), errored="infra_error")
Traceback (most recent call last):
passk_nb.importers.checks.ImportFormatError: no Harbor trials (<trial>/result.json with a task_name) under ...
"""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from passk_nb.data.ids import content_id
from passk_nb.data.records import frame_from_records
from passk_nb.data.transcript import cap_text
from passk_nb.importers.checks import (
    MAX_BYTES,
    FieldError,
    ImportFormatError,
    RowReader,
    as_float,
    as_time,
    load_json,
)

#: What ``errored=`` accepts.
ERRORED = ("infra_error", "failure")


def from_harbor(
    path: str | os.PathLike[str],
    *,
    errored: str,
    threshold: float = 1.0,
    reward_key: str | None = None,
    suite: str | None = None,
    model: str | None = None,
    strict: bool = True,
    max_bytes: int = MAX_BYTES,
) -> pd.DataFrame:
    """Trial records (:mod:`passk_nb.data.records` columns) from a Harbor job folder, or a folder
    of job folders (Harbor's ``jobs/``): one record per trial folder, one run per job, agent and
    model.

    - ``task``: the trial's ``task_name``; ``trial``: its attempt number, from ``started_at``;
      ``suite``: the trial's ``source`` (its dataset, e.g. ``terminal-bench``), else ``"harbor"``
      (``suite=`` overrides); ``provider``: ``"harbor"``; ``model``: ``model_info``'s
      ``provider/name`` (``model=`` overrides); ``config``: the agent and its version
      (``agent=terminus-2 0.1``).
    - ``errored`` (required): ``"infra_error"`` or ``"failure"`` for trials without a reward
      (see the module docstring); ``threshold``: rewards ≥ it pass; ``reward_key``: which reward
      decides when the verifier wrote several.

    Bad input raises :class:`~passk_nb.importers.checks.ImportFormatError` naming the file and
    the field; ``strict=False`` skips unreadable trials with a warning that counts them. Every
    file read is a regular file of at most ``max_bytes``.

    >>> import json, tempfile
    >>> from pathlib import Path
    >>> job = Path(tempfile.mkdtemp())
    >>> for name, reward, start in [("hello__a1", 1.0, "10:00"), ("hello__b2", 0.0, "09:00")]:
    ...     (job / name).mkdir()
    ...     _ = (job / name / "result.json").write_text(json.dumps({
    ...         "task_name": "hello", "trial_name": name, "source": "demo",
    ...         "agent_info": {"name": "oracle", "version": "1", "model_info": None},
    ...         "verifier_result": {"rewards": {"reward": reward}},
    ...         "started_at": f"2026-01-01T{start}:00Z"}))
    >>> from_harbor(job, errored="infra_error")[["suite", "task", "trial", "passed", "config"]]
      suite   task  trial  passed        config
    0  demo  hello      0   False  agent=oracle 1
    1  demo  hello      1    True  agent=oracle 1
    """
    if errored not in ERRORED:
        raise ValueError(
            f"errored={errored!r}: say how trials without a reward count, errored='infra_error' "
            "(left out of n) or errored='failure' (counted as failures, as Harbor's mean reward does)"
        )
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not math.isfinite(threshold):
        raise ValueError(
            f"threshold={threshold!r}: give the reward a trial needs to pass, e.g. threshold=1.0"
        )
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"no Harbor job folder at {root}")
    jobs = _job_folders(root, max_bytes)
    if not jobs:
        raise ImportFormatError(f"no Harbor trials (<trial>/result.json with a task_name) under {root}")
    records: list[dict[str, Any]] = []
    for job, trials in jobs:
        reader = RowReader(str(job), strict=strict)
        rows = [
            row
            for file, data in trials
            if (
                row := reader.read(
                    f"trial {file.parent.name}",
                    _record,
                    data,
                    file,
                    job,
                    errored,
                    float(threshold),
                    reward_key,
                    suite,
                    model,
                )
            )
            is not None
        ]
        reader.warn_skipped(stacklevel=3)
        numbered = _numbered(rows)
        _warn_short(numbered, _n_attempts(job, max_bytes), job)
        records.extend(numbered)
    return frame_from_records(records)


def _n_attempts(job: Path, max_bytes: int) -> int | None:
    """The job config's ``n_attempts`` (None without a readable one: nothing to check against)."""
    file = job / "config.json"
    if not file.is_file():
        return None
    config = load_json(file, max_bytes=max_bytes)
    value = config.get("n_attempts") if isinstance(config, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _warn_short(rows: list[dict[str, Any]], n_attempts: int | None, job: Path) -> None:
    """Warn when tasks have fewer trial folders than the job's ``n_attempts`` (an interrupted job,
    or trials removed by ``harbor jobs resume --filter-error-type``)."""
    if n_attempts is None:
        return
    counts: dict[tuple[str, str], int] = {}
    for row in rows:
        counts[(row["run_id"], row["task"])] = counts.get((row["run_id"], row["task"]), 0) + 1
    short = {key: n for key, n in counts.items() if n < n_attempts}
    if short:
        (_, task), n = next(iter(short.items()))
        warnings.warn(
            f"{job}: {len(short)} of {len(counts)} tasks have fewer trials than the job's n_attempts "
            f"({task!r}: {n} of {n_attempts}); each task's pass^k uses its own n, a missing attempt is not "
            "counted as a failure",
            UserWarning,
            stacklevel=3,
        )


def looks_like_harbor(path: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES) -> bool:
    """Whether ``path`` is a Harbor job folder or a folder of them (a trial ``result.json`` with a
    ``task_name`` one or two levels down).

    >>> import tempfile
    >>> looks_like_harbor(tempfile.mkdtemp())
    False
    """
    root = Path(path)
    return root.is_dir() and bool(_job_folders(root, max_bytes))


def _job_folders(root: Path, max_bytes: int) -> list[tuple[Path, list[tuple[Path, Any]]]]:
    """``[(job folder, [(trial result.json, its JSON)])]``: ``root`` itself when its subfolders
    are trials, else each subfolder of ``root`` that is a job."""
    own = _trials(root, max_bytes)
    if own:
        return [(root, own)]
    found = []
    for child in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()):
        trials = _trials(child, max_bytes)
        if trials:
            found.append((child, trials))
    return found


def _trials(job: Path, max_bytes: int) -> list[tuple[Path, Any]]:
    """The trial results of one job folder: each ``<sub>/result.json`` whose JSON is an object with
    a ``task_name`` (the job's own result.json has none)."""
    out = []
    for sub in sorted(p for p in job.iterdir() if p.is_dir() and not p.is_symlink()):
        file = sub / "result.json"
        if not file.exists():
            continue
        data = load_json(file, max_bytes=max_bytes)
        if isinstance(data, dict) and "task_name" in data:
            out.append((file, data))
    return out


def _record(
    data: dict[str, Any],
    file: Path,
    job: Path,
    errored: str,
    threshold: float,
    reward_key: str | None,
    suite: str | None,
    model: str | None,
) -> dict[str, Any]:
    task = data["task_name"]
    if not isinstance(task, str) or not task:
        raise FieldError("task_name", task, "not a task name (text)")
    agent = _object(data.get("agent_info"), "agent_info")
    info = _object(agent.get("model_info"), "agent_info.model_info")
    agent_name = str(agent.get("name") or "unknown")
    agent_version = str(agent.get("version") or "")
    model_name = (
        model or "/".join(str(v) for v in (info.get("provider"), info.get("name")) if v) or agent_name
    )
    reward = _reward(data.get("verifier_result"), reward_key)
    exception = _object(data.get("exception_info"), "exception_info")
    error = None
    if exception:
        error = cap_text(
            f"{exception.get('exception_type', 'Exception')}: {exception.get('exception_message', '')}"
        )
    if reward is not None:
        passed = reward >= threshold
        outcome = "pass" if passed else "wrong_output"
    else:
        passed, outcome = False, "infra_error" if errored == "infra_error" else "agent_error"
        error = error or "no reward: the verifier did not run or wrote no reward"
    started = as_time(data["started_at"], "started_at") if data.get("started_at") else None
    finished = as_time(data["finished_at"], "finished_at") if data.get("finished_at") else None
    result = _object(data.get("agent_result"), "agent_result")
    job_id = (
        str(data.get("config", {}).get("job_id") or job.name)
        if isinstance(data.get("config"), dict)
        else job.name
    )
    config = f"agent={agent_name}" + (f" {agent_version}" if agent_version else "")
    return {
        "run_id": content_id(["harbor", job_id, config, model_name]),
        "suite": suite
        or (data.get("source") if isinstance(data.get("source"), str) and data["source"] else "harbor"),
        "task": task,
        "provider": "harbor",
        "model": model_name,
        "protocol": "text",
        "config": config,
        "passed": passed,
        "outcome": outcome,
        "state_ok": passed,
        "input_tokens": result.get("n_input_tokens"),
        "output_tokens": result.get("n_output_tokens"),
        "latency_s": (finished - started).total_seconds()
        if started is not None and finished is not None
        else None,
        "started_at": started,
        "error": error,
        "transcript": "[]",
        "state_diff": None,
        "false_claims": None,
        "provider_meta": json.dumps(
            {
                "trial_name": data.get("trial_name", file.parent.name),
                "trial_dir": str(file.parent),
                "reward": reward,
                "cost_usd": result.get("cost_usd"),
            },
            default=str,
        ),
    }


def _object(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FieldError(field, value, "not an object")
    return value


def _reward(verifier: Any, key: str | None) -> float | None:
    """The deciding reward of a ``verifier_result``; None when there is none."""
    rewards = _object(_object(verifier, "verifier_result").get("rewards"), "verifier_result.rewards")
    if not rewards:
        return None
    if key is None:
        if len(rewards) != 1 and "reward" not in rewards:
            raise FieldError(
                "verifier_result.rewards",
                rewards,
                f"several rewards {sorted(rewards)}: choose one with reward_key=",
            )
        key = "reward" if "reward" in rewards else next(iter(rewards))
    if key not in rewards:
        raise FieldError("verifier_result.rewards", rewards, f"no {key!r} reward (reward_key=)")
    value = rewards[key]
    if value is None:
        return None
    number = as_float(value, f"verifier_result.rewards.{key}")
    if not math.isfinite(number):
        raise FieldError(f"verifier_result.rewards.{key}", value, "not a finite number")
    return number


def _numbered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each run's attempts of a task numbered 0, 1, … in the order they started (trials without a
    start time last, by folder name)."""
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        by_key.setdefault((row["run_id"], row["task"]), []).append(row)

    def order(row: dict[str, Any]) -> tuple[bool, pd.Timestamp, str]:
        started = row["started_at"]
        name = json.loads(row["provider_meta"])["trial_name"]
        return started is None, started if started is not None else pd.Timestamp(0, tz="UTC"), str(name)

    return [
        {**row, "trial": i}
        for attempts in by_key.values()
        for i, row in enumerate(sorted(attempts, key=order))
    ]
