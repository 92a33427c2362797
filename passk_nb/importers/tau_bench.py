"""Trial records from τ-bench and τ²-bench result files, for the same analysis as our own runs.

- τ-bench (sierra-research/tau-bench) writes a JSON list of run results, one per
  trial: ``{"task_id", "reward", "info", "traj", "trial"}``. A trial that crashed is
  stored with reward 0, an ``"error"`` in ``info`` and an empty ``traj``: it becomes an
  ``infra_error`` row (excluded from n by default, as in our own runs; pass
  ``infra="fail"`` to the statistics to count it as τ-bench's own report does).
- τ²-bench (sierra-research/tau2-bench) writes a results object
  ``{"info", "tasks", "simulations": [...]}`` (or a folder with ``results.json`` and
  ``simulations/*.json``); each simulation has ``task_id``, ``trial``,
  ``reward_info.reward`` and ``termination_reason``. Runs that τ²-bench itself leaves out
  of its metrics (``infrastructure_error``, ``context_window_exceeded``) become
  ``infra_error`` rows.

A trial passes when its reward is within 1e-6 of 1. Other failures are ``max_turns``
when the run hit its step limit and ``wrong_state`` otherwise (τ-bench judges the final
state).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from passk_nb.data.ids import prompt_hash
from passk_nb.data.records import frame_from_records

#: |reward − 1| at most this counts as success (τ-bench's rule).
REWARD_TOLERANCE = 1e-6
#: τ²-bench termination reasons that mean "no evaluable run" (its non-evaluable set).
TAU2_INFRA_REASONS: frozenset[str] = frozenset({"infrastructure_error", "context_window_exceeded"})


def from_tau_bench(
    source: str | os.PathLike[str] | Sequence[Mapping[str, Any]] | Mapping[str, Any],
    *,
    model: str | None = None,
    suite: str | None = None,
    run_id: str | None = None,
) -> pd.DataFrame:
    """Trial records (:mod:`passk_nb.data.records` columns) from a τ-bench or τ²-bench result.

    ``source`` is a result file or τ²-bench result folder, or the already-loaded JSON (a
    τ-bench list or a τ²-bench object). ``model`` and ``suite`` fill in what τ-bench
    files do not record (τ²-bench files give the agent model and the domain; the
    arguments override them). ``run_id`` defaults to a hash of the content, so the same
    file always gets the same id. ``prompt_hash`` is the hash of the trajectory's system
    message when it has one (as :func:`passk_nb.data.ids.prompt_hash` computes it), so
    different system prompts are never pooled; trials without one (a crash) get the
    file's prompt hash when the file has exactly one.

    >>> results = [{"task_id": 0, "trial": t, "reward": r, "info": {}, "traj": []}
    ...            for t, r in enumerate([1.0, 0.0, 0.9999999])]
    >>> df = from_tau_bench(results, model="gpt-4o", suite="retail")
    >>> df[["task", "trial", "passed", "outcome"]]
      task  trial  passed      outcome
    0    0      0    True         pass
    1    0      1   False  wrong_state
    2    0      2    True         pass
    """
    data = _load(source)
    rid = run_id or _content_id(data)
    if isinstance(data, Mapping) and "simulations" in data:
        records = _tau2_records(data, model=model, suite=suite)
    elif isinstance(data, Sequence) and not isinstance(data, str | bytes):
        records = [_tau_record(result, model=model, suite=suite) for result in data]
    else:
        raise ValueError(
            "not a τ-bench result (a JSON list of {task_id, reward, info, traj, trial}) "
            "nor a τ²-bench result (an object with 'simulations')"
        )
    hashes = {record["prompt_hash"] for record in records} - {""}
    # a crashed trial has no transcript: give it the file's prompt so it is not split off
    fill = hashes.pop() if len(hashes) == 1 else ""
    return frame_from_records(
        {**record, "run_id": rid, "prompt_hash": record["prompt_hash"] or fill} for record in records
    )


def _content_id(data: Any) -> str:
    """A run id that is the same whenever the content is."""
    text = json.dumps(data, sort_keys=True, default=str)
    return "tau-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _load(source: Any) -> Any:
    if not isinstance(source, str | os.PathLike):
        return source
    path = Path(source)
    file = path / "results.json" if path.is_dir() else path
    data = json.loads(file.read_text(encoding="utf-8"))
    folder = file.parent / "simulations"  # τ²-bench folder format: one file per simulation
    if isinstance(data, dict) and not data.get("simulations") and folder.is_dir():
        sims = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]
        data = {**data, "simulations": sims}
    return data


def _tau_record(result: Mapping[str, Any], *, model: str | None, suite: str | None) -> dict[str, Any]:
    missing = [key for key in ("task_id", "reward", "trial") if key not in result]
    if missing:
        raise ValueError(f"τ-bench result lacks {missing}: {_preview(result)}")
    info = result.get("info") or {}
    traj = result.get("traj") or []
    crashed = "error" in info
    passed = _passed(result["reward"]) and not crashed
    return {
        **_common(result, traj, passed),
        "suite": suite or "tau-bench",
        "provider": "tau-bench",
        "model": model or "",
        "outcome": "pass" if passed else "infra_error" if crashed else "wrong_state",
        "error": str(info["error"]) if crashed else None,
    }


def _tau2_records(data: Mapping[str, Any], *, model: str | None, suite: str | None) -> list[dict[str, Any]]:
    info = data.get("info") or {}
    model = model or (info.get("agent_info") or {}).get("llm") or ""
    suite = suite or (info.get("environment_info") or {}).get("domain_name") or "tau2-bench"
    records = []
    seen: dict[str, int] = {}
    for sim in data["simulations"]:
        task = str(sim["task_id"])
        seen[task] = seen.get(task, 0) + 1
        trial = seen[task] - 1 if sim.get("trial") is None else sim["trial"]
        reward = (sim.get("reward_info") or {}).get("reward")
        reason = sim.get("termination_reason") or ""
        infra = reason in TAU2_INFRA_REASONS
        passed = reward is not None and _passed(reward) and not infra
        failure = "infra_error" if infra else "max_turns" if reason == "max_steps" else "wrong_state"
        records.append(
            {
                **_common({**sim, "trial": trial, "reward": reward}, sim.get("messages") or [], passed),
                "suite": suite,
                "provider": "tau2-bench",
                "model": model,
                "outcome": "pass" if passed else failure,
                "error": reason if infra else None,
                "latency_s": sim.get("duration"),
            }
        )
    return records


def _common(result: Mapping[str, Any], messages: list[Mapping[str, Any]], passed: bool) -> dict[str, Any]:
    """Fields τ-bench and τ²-bench results share: ids, reward, transcript counts."""
    system = next((m.get("content") for m in messages[:1] if m.get("role") == "system"), None)
    assistant = [m for m in messages if m.get("role") == "assistant"]
    return {
        "task": str(result["task_id"]),
        "trial": int(result["trial"]),
        "passed": passed,
        "state_ok": passed,
        "prompt_hash": prompt_hash(system) if isinstance(system, str) else "",
        "n_turns": len(assistant),
        "n_tool_calls": sum(len(m.get("tool_calls") or []) for m in assistant),
        "transcript": json.dumps(messages, default=str),
        "provider_meta": json.dumps({"reward": result["reward"]}),
    }


def _passed(reward: Any) -> bool:
    return abs(float(reward) - 1.0) <= REWARD_TOLERANCE


def _preview(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."
