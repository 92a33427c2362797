"""τ²-bench results (sierra-research/tau2-bench) through from_tau_bench.

The fixture ``fixtures/tau2_results_small.json`` follows τ²-bench's own pydantic models
(``tau2.data_model.simulation.Results`` / ``SimulationRun`` / ``RewardInfo`` and
``tau2.data_model.message``): ``info`` (agent/user/environment info, ``num_trials``),
``tasks``, and ``simulations`` with ``task_id``, ``trial``, ``seed``, ``start_time``,
``duration``, ``termination_reason``, ``reward_info.reward`` and ``messages`` whose
assistant/user messages carry litellm ``usage`` (``prompt_tokens``/``completion_tokens``)
and whose tool messages carry ``error``. Three tasks × three trials: task 0 passes 2 of 3,
task 1 has an infrastructure error and a max_steps run, task 2 passes once (reward
0.9999995, inside τ²'s 1e-6 tolerance).

The details beyond the verdict are imported too: the agent's token usage, each simulation's
seed and start time, failed tool calls, the agent's temperature, and the messages as
transcript entries the viewer shows; duplicate, empty and incomplete results are refused.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from passk_nb.data.records import COLUMNS
from passk_nb.data.transcript import parse_transcript
from passk_nb.importers.checks import ImportFormatError
from passk_nb.importers.tau_bench import from_tau_bench
from passk_nb.stats.divergence import action_sequence
from passk_nb.stats.summary import curve

FIXTURE = Path(__file__).parent / "fixtures" / "tau2_results_small.json"
#: What a gap test expecting an error fails with while the importer accepts the input.
#: τ²-bench's own success rule (tau2.metrics.agent_metrics.is_successful).
TOLERANCE = 1e-6


def results() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def tau2_pass_hat_ks(data: dict[str, Any]) -> dict[int, float]:
    """τ²-bench's computation (agent_metrics.get_metrics_df / compute_metrics), restated:
    infrastructure errors left out, success = reward within 1e-6 of 1, per task
    C(c, k) / C(n, k), mean over tasks, k up to the smallest per-task n."""
    per_task: dict[str, list[bool]] = {}
    for sim in data["simulations"]:
        if sim["termination_reason"] == "infrastructure_error":
            continue
        reward = (sim.get("reward_info") or {}).get("reward")
        ok = reward is not None and (1 - TOLERANCE) <= reward <= (1 + TOLERANCE)
        per_task.setdefault(str(sim["task_id"]), []).append(ok)
    max_k = min(len(v) for v in per_task.values())
    return {
        k: sum(math.comb(sum(v), k) / math.comb(len(v), k) for v in per_task.values()) / len(per_task)
        for k in range(1, max_k + 1)
    }


def test_one_record_per_simulation_with_outcomes_from_reward_and_termination_reason() -> None:
    df = from_tau_bench(FIXTURE)
    assert list(df.columns) == list(COLUMNS)
    assert df[["task", "trial"]].values.tolist() == [[t, i] for t in "012" for i in range(3)]
    assert df["outcome"].tolist() == [
        "pass", "pass", "wrong_state",  # task 0: user_stop, agent_stop, reward 0
        "pass", "infra_error", "max_turns",  # task 1: infrastructure_error, max_steps
        "pass", "wrong_state", "wrong_state",  # task 2: 0.9999995, too_many_errors, agent_error
    ]  # fmt: skip
    assert (df["passed"] == (df["outcome"] == "pass")).all()
    assert (df["model"] == "gpt-4.1-mini").all() and (df["suite"] == "airline").all()
    assert (df["provider"] == "tau2-bench").all() and df["run_id"].nunique() == 1
    assert df["latency_s"].tolist() == [6.0 + n for n in range(1, 10)]
    assert df.loc[0, "n_turns"] == 3 and df.loc[0, "n_tool_calls"] == 1
    assert df.loc[4, "error"] == "infrastructure_error" and df.loc[4, "n_turns"] == 0


def test_pass_hat_k_reproduces_tau2_benchs_own_computation() -> None:
    data = results()
    expected = tau2_pass_hat_ks(data)
    assert expected == pytest.approx({1: (2 / 3 + 1 / 2 + 1 / 3) / 3, 2: (1 / 3 + 0 + 0) / 3})
    out = curve(from_tau_bench(data), ks=sorted(expected), by=(), n_boot=0)  # infra excluded by default
    ours = out[out["metric"] == "pass^k"].set_index("k")["value"].to_dict()
    assert ours == pytest.approx(expected, abs=1e-12)


def test_folder_format_with_simulation_files_named_by_id(tmp_path: Path) -> None:
    """τ²-bench's "dir" format: results.json without simulations, one file per simulation
    named ``{id}.json`` in ``simulations/``, and a ``simulation_index``."""
    data = results()
    sims = data.pop("simulations")
    data["simulation_index"] = [
        {"id": s["id"], "task_id": s["task_id"], "trial": s["trial"], "reward": None} for s in sims
    ]
    (tmp_path / "simulations").mkdir()
    for sim in reversed(sims):  # file order says nothing: the trial field does
        (tmp_path / "simulations" / f"{sim['id']}.json").write_text(json.dumps(sim), encoding="utf-8")
    (tmp_path / "results.json").write_text(json.dumps(data), encoding="utf-8")
    folder = from_tau_bench(tmp_path).sort_values(["task", "trial"], ignore_index=True)
    whole = from_tau_bench(FIXTURE)
    columns = ["task", "trial", "passed", "outcome", "model", "suite", "latency_s"]
    pd.testing.assert_frame_equal(folder[columns], whole[columns])


def simulations_list(tmp_path: Path) -> Path:
    """τ²-bench's current format: the simulations alone, as a JSON list, each with 2026 fields
    (``ticks``, ``speech_environment``) besides ``task_id``, ``trial``, ``reward_info`` and
    ``termination_reason``."""
    sims = [
        {**sim, "ticks": [{"tick": 0, "events": []}], "speech_environment": {"voice": None, "noise": 0.1}}
        for sim in results()["simulations"]
    ]
    path = tmp_path / "simulations.json"
    path.write_text(json.dumps(sims), encoding="utf-8")
    return path


def test_a_json_list_of_simulations_is_read_as_tau2(tmp_path: Path) -> None:
    # on the code as found: "τ-bench result lacks ['reward']" (taken for a τ-bench v1 list)
    path = simulations_list(tmp_path)
    listed = from_tau_bench(path)
    whole = from_tau_bench(FIXTURE)
    columns = ["task", "trial", "passed", "outcome", "error", "latency_s", "seed", "n_tool_calls"]
    pd.testing.assert_frame_equal(listed[columns], whole[columns])
    assert (listed["provider"] == "tau2-bench").all() and (listed["model"] == "simulations").all()
    loaded = from_tau_bench(json.loads(path.read_text(encoding="utf-8")), model="m")
    pd.testing.assert_frame_equal(loaded[columns], whole[columns])


# --- the details of a τ²-bench simulation ---------------------------------------------------


def test_tokens_are_the_agents_usage_summed_over_its_messages() -> None:
    df = from_tau_bench(FIXTURE)
    # the agent's messages report prompt 3000 + 3100, completion 20 + 8 (the greeting has no usage);
    # the user simulator's messages (role "user") are not the agent's tokens
    assert df[["input_tokens", "output_tokens"]].fillna(-1).iloc[0].tolist() == [6100, 28]
    assert pd.isna(df.loc[4, "input_tokens"])  # the infrastructure error has no messages


def test_seed_and_start_time_are_kept() -> None:
    df = from_tau_bench(FIXTURE)
    assert df["seed"].fillna(-1).tolist() == [300 + n for n in range(1, 10)]
    assert str(df.loc[0, "started_at"]) == str(pd.Timestamp("2025-06-10T10:00:00", tz="UTC"))


def test_tool_errors_are_counted() -> None:
    df = from_tau_bench(FIXTURE)
    assert df["n_tool_errors"].tolist() == [0] * 7 + [1, 0]


def test_the_agents_temperature_is_kept() -> None:
    assert (from_tau_bench(FIXTURE)["temperature"] == 0.0).all()


def test_the_transcript_uses_the_packages_entry_format() -> None:
    row = from_tau_bench(FIXTURE).loc[0]
    entries = parse_transcript(row["transcript"])
    # the greeting is said, not an action; the last text message is the answer
    assert [e.get("kind") for e in entries] == ["message", "task", "reply", "tool_result", "reply", "task"]
    assert entries[2]["action"] == {"tool": "get_reservation_details", "args": {"reservation_id": "0X0"}}
    assert entries[3]["tool"] == "get_reservation_details"  # τ²'s tool message names only the call id
    assert action_sequence(row["transcript"]) == ['get_reservation_details(reservation_id="0X0")', "answer"]
    assert row["final_answer"] == "Your reservation is updated."


def test_the_run_is_native_tool_calling_at_its_temperature() -> None:
    df = from_tau_bench(FIXTURE)
    assert set(df["protocol"]) == {"native"} and set(df["json_mode"]) == {"off"}
    assert set(df["config"]) == {"temperature=0.0, protocol=native"}


def test_duplicate_task_and_trial_is_an_error() -> None:
    data = results()
    data["simulations"].append(dict(data["simulations"][0], id="another-run"))
    with pytest.raises(ValueError, match="trial"):
        from_tau_bench(data)


def test_results_without_simulations_is_an_error() -> None:
    data = results()
    data["simulations"] = []
    with pytest.raises(ValueError, match="simulations"):
        from_tau_bench(data)


def test_folder_missing_a_simulation_file_listed_in_the_index_is_an_error(tmp_path: Path) -> None:
    data = results()
    sims = data.pop("simulations")
    data["simulation_index"] = [{"id": s["id"], "task_id": s["task_id"], "trial": s["trial"]} for s in sims]
    (tmp_path / "simulations").mkdir()
    for sim in sims[1:]:  # the first simulation's file is missing
        (tmp_path / "simulations" / f"{sim['id']}.json").write_text(json.dumps(sim), encoding="utf-8")
    (tmp_path / "results.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=sims[0]["id"]):
        from_tau_bench(tmp_path)


@pytest.mark.parametrize("name", ["../../escaped", "/tmp/escaped", "..", "a/../../escaped"])
def test_a_simulation_index_naming_a_path_is_refused(tmp_path: Path, name: str) -> None:
    # on the code as found: the index's check looked up <name>.json outside the folder, and the
    # import went ahead with 9 of the 10 simulations the index lists
    data = results()
    sims = data.pop("simulations")
    data["simulation_index"] = [{"id": s["id"]} for s in sims] + [{"id": name}]
    folder = tmp_path / "a" / "b"
    (folder / "simulations").mkdir(parents=True)
    for sim in sims:
        (folder / "simulations" / f"{sim['id']}.json").write_text(json.dumps(sim), encoding="utf-8")
    (tmp_path / "escaped.json").write_text(json.dumps(sims[0]), encoding="utf-8")
    (folder / "results.json").write_text(json.dumps(data), encoding="utf-8")
    expected = re.escape(f"{folder / 'results.json'}: the simulation index names a simulation {name!r}")
    with pytest.raises(ImportFormatError, match=expected + ", which is a path, not a simulation id"):
        from_tau_bench(folder)
