"""from_tau_bench: τ-bench and τ²-bench results as trial records."""

from __future__ import annotations

import hashlib
import json
import math
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from passk_nb.data.records import COLUMNS
from passk_nb.data.transcript import parse_transcript
from passk_nb.importers.tau_bench import from_tau_bench
from passk_nb.stats.divergence import action_sequence
from passk_nb.stats.flags import claimed_unperformed_action
from passk_nb.stats.summary import curve, summarize

FIXTURE = Path(__file__).parent / "fixtures" / "tau_bench_small.json"


def test_fixture_becomes_one_record_per_trial() -> None:
    df = from_tau_bench(FIXTURE, model="gpt-4o", suite="retail")
    assert list(df.columns) == list(COLUMNS)
    assert len(df) == 12 and sorted(df["task"].unique()) == ["0", "1", "2"]
    assert (df["model"] == "gpt-4o").all() and (df["suite"] == "retail").all()
    assert (df["provider"] == "tau-bench").all()
    by_key = df.set_index(["task", "trial"])
    assert by_key.loc[("1", 2), "outcome"] == "pass"  # reward 0.9999995: within 1e-6 of 1
    assert by_key.loc[("1", 3), "outcome"] == "wrong_state"  # reward 0.5 is not a success
    assert by_key.loc[("2", 1), "outcome"] == "infra_error"  # the run crashed
    assert "RateLimitError" in by_key.loc[("2", 1), "error"]
    assert df.groupby("task")["passed"].sum().tolist() == [4, 2, 1]
    assert (df["passed"] == (df["outcome"] == "pass")).all()
    system = "You are a retail support agent. Follow the policy."
    expected_hash = hashlib.sha256(system.encode("utf-8")).hexdigest()[:12]
    assert set(df["prompt_hash"]) == {expected_hash}  # the crashed trial too: it is not split off
    assert by_key.loc[("0", 0), "n_turns"] == 2 and by_key.loc[("0", 0), "n_tool_calls"] == 1
    assert json.loads(by_key.loc[("0", 0), "transcript"])[1]["role"] == "user"


def test_run_id_is_stable_and_the_same_for_a_path_or_the_loaded_list() -> None:
    first, again = from_tau_bench(FIXTURE), from_tau_bench(str(FIXTURE))
    loaded = from_tau_bench(json.loads(FIXTURE.read_text(encoding="utf-8")))
    assert first["run_id"].nunique() == 1
    assert first.loc[0, "run_id"] == again.loc[0, "run_id"] == loaded.loc[0, "run_id"]
    assert first.loc[0, "run_id"].startswith("tau-")
    assert from_tau_bench(FIXTURE, run_id="mine")["run_id"].eq("mine").all()


def test_counting_crashes_as_failures_reproduces_tau_bench_pass_hat_k() -> None:
    """τ-bench's own report: mean over tasks of C(c, k) / C(num_trials, k), crashes failed."""
    df = from_tau_bench(FIXTURE)
    c = [4, 2, 1]
    expected = [float(sum(Fraction(math.comb(ci, k), math.comb(4, k)) for ci in c) / 3) for k in range(1, 5)]
    assert expected == pytest.approx([7 / 12, 7 / 18, 1 / 3, 1 / 3])
    out = curve(df, by=(), n_boot=0, infra="fail")
    np.testing.assert_allclose(out[out["metric"] == "pass^k"]["value"], expected, rtol=1e-12)


def test_crashes_are_excluded_by_default() -> None:
    row = summarize(from_tau_bench(FIXTURE), k=1, by=(), n_boot=0).iloc[0]
    assert (row["n_infra_excluded"], row["trials"], row["successes"]) == (1, 11, 7)
    assert row["pass^k"] == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)


def tau2_results() -> dict:
    def sim(task: str, trial: int | None, reward: float | None, reason: str = "user_stop") -> dict:
        return {
            "id": f"{task}-{trial}",
            "task_id": task,
            "trial": trial,
            "termination_reason": reason,
            "duration": 12.5,
            "reward_info": None if reward is None else {"reward": reward},
            "messages": [
                {"role": "assistant", "content": "Hi!"},
                {"role": "user", "content": "Change my flight."},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "1", "name": "get_user", "arguments": {}}],
                },
            ],
        }

    return {
        "info": {
            "agent_info": {"implementation": "llm_agent", "llm": "claude-x"},
            "environment_info": {"domain_name": "airline"},
            "num_trials": 2,
        },
        "tasks": [{"id": "7"}, {"id": "8"}],
        "simulations": [
            sim("7", 0, 1.0),
            sim("7", 1, 0.0, "max_steps"),
            sim("8", 0, None, "infrastructure_error"),
            sim("8", 1, 1.0),
        ],
    }


def test_tau2_results_object() -> None:
    df = from_tau_bench(tau2_results())
    assert (df["model"] == "claude-x").all() and (df["suite"] == "airline").all()
    assert (df["provider"] == "tau2-bench").all()
    assert df["outcome"].tolist() == ["pass", "max_turns", "infra_error", "pass"]
    assert df.loc[2, "error"] == "infrastructure_error"
    assert df["latency_s"].tolist() == [12.5] * 4
    assert df["n_tool_calls"].tolist() == [1] * 4 and df["n_turns"].tolist() == [2] * 4
    assert (df["prompt_hash"] == "").all()  # τ²-bench does not store the system prompt
    assert from_tau_bench(tau2_results(), model="override")["model"].eq("override").all()


def test_tau2_folder_format_and_missing_trial_numbers(tmp_path: Path) -> None:
    data = tau2_results()
    for sim in data["simulations"]:
        sim["trial"] = None
    (tmp_path / "simulations").mkdir()
    for i, sim in enumerate(data.pop("simulations")):
        (tmp_path / "simulations" / f"{i:02d}.json").write_text(json.dumps(sim), encoding="utf-8")
    (tmp_path / "results.json").write_text(json.dumps(data), encoding="utf-8")
    df = from_tau_bench(tmp_path)
    assert df[["task", "trial"]].values.tolist() == [["7", 0], ["7", 1], ["8", 0], ["8", 1]]
    pd.testing.assert_frame_equal(from_tau_bench(tmp_path / "results.json"), df)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"results": []}, "not a τ-bench result"),
        ([{"task_id": 1, "reward": 1.0}], r"lacks \['trial'\]"),
    ],
)
def test_unknown_shapes_are_rejected(source: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        from_tau_bench(source)


def tau_results(rewards: dict[int, list[float]]) -> list[dict]:
    return [
        {"task_id": task, "trial": t, "reward": r, "info": {}, "traj": []}
        for task, rs in rewards.items()
        for t, r in enumerate(rs)
    ]


def test_two_files_without_model_are_two_groups_never_pooled(tmp_path: Path) -> None:
    # an all-pass file and a 1-in-4 file: pooled they would give pass^4 = 0.071
    good = tmp_path / "tool-calling-gpt-4o-0.0_range_0--1_user-gpt-4o-llm_0814141533.json"
    weak = tmp_path / "weak-run.json"
    good.write_text(json.dumps(tau_results({0: [1.0] * 4, 1: [1.0] * 4})), encoding="utf-8")
    weak.write_text(json.dumps(tau_results({0: [1.0, 0, 0, 0], 1: [0, 0, 0, 1.0]})), encoding="utf-8")
    df = pd.concat([from_tau_bench(good), from_tau_bench(weak)], ignore_index=True)
    assert sorted(df["model"].unique()) == ["gpt-4o", "weak-run"]  # from the τ-bench file name, else the stem
    out = summarize(df, k=4, n_boot=0).set_index("model")
    assert out["pass^k"].to_dict() == {"gpt-4o": 1.0, "weak-run": 0.0}
    pd.testing.assert_frame_equal(from_tau_bench([good, weak]), df)
    loaded = from_tau_bench(tau_results({0: [1.0]}))
    assert loaded["model"].iloc[0] == f"unknown-{loaded['run_id'].iloc[0]}"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"reward": None}, r"task 0 trial 1: reward must be a finite number .* got None"),
        ({"reward": "1"}, "reward must be a finite number"),
        ({"reward": float("nan")}, "reward must be a finite number"),
        ({"trial": 1.7}, r"trial must be a whole number ≥ 0; got 1.7"),
        ({"trial": -1}, "trial must be a whole number"),
        ({"trial": "1"}, "trial must be a whole number"),
    ],
)
def test_bad_reward_or_trial_values_are_clear_errors(entry: dict, message: str) -> None:
    results = tau_results({0: [1.0, 0.0]})
    results[1].update(entry)
    with pytest.raises(ValueError, match=message):
        from_tau_bench(results)


def test_duplicate_task_trial_is_rejected() -> None:
    results = tau_results({0: [1.0, 0.0]})
    results.append(dict(results[0]))
    with pytest.raises(ValueError, match=r"duplicate \(task, trial\).*task '0' trial 0"):
        from_tau_bench(results)


def test_missing_trials_warn_and_fail_reproduces_tau_bench() -> None:
    results = [r for r in tau_results({0: [1.0] * 4, 1: [1.0] * 4}) if (r["task_id"], r["trial"]) != (1, 3)]
    with pytest.warns(UserWarning, match=r"task '1' lacks trial\(s\) \[3\].*missing='fail'"):
        df = from_tau_bench(results, model="m")
    assert len(df) == 7 and summarize(df, k=3, by=(), n_boot=0)["pass^k"].iloc[0] == 1.0
    filled = from_tau_bench(results, model="m", missing="fail")
    assert len(filled) == 8
    row = filled.set_index(["task", "trial"]).loc[("1", 3)]
    assert not row["passed"] and "missing from the result file" in row["error"]
    assert pd.isna(row["state_diff"]) and pd.isna(row["false_claims"])  # nobody knows its final state
    # τ-bench: mean over tasks of C(c, k) / C(4, k) with the missing trial failed: (1 + 1/4) / 2 at k=3
    assert summarize(filled, k=3, by=(), n_boot=0)["pass^k"].iloc[0] == pytest.approx((1 + 1 / 4) / 2)


# --- transcripts in the package's entry format ---------------------------------------------------

BUNDLED = Path(__file__).resolve().parents[2] / "data" / "tau-bench" / "tau-bench-gpt-4o-airline.json"


def raw_calls(traj: list[dict]) -> list[tuple[str, dict]]:
    """(tool name, arguments) of every tool call in a τ-bench trajectory, read from the raw JSON."""
    return [
        (call["function"]["name"], json.loads(call["function"]["arguments"]))
        for message in traj
        if message["role"] == "assistant"
        for call in message.get("tool_calls") or []
    ]


def test_bundled_trials_give_one_action_per_raw_tool_call() -> None:
    raw = json.loads(BUNDLED.read_text(encoding="utf-8"))
    df = from_tau_bench(BUNDLED, model="gpt-4o").set_index(["task", "trial"])
    assert len(df) == len(raw) == 200
    with_calls = 0
    for result in raw:
        calls = raw_calls(result["traj"])
        row = df.loc[(str(result["task_id"]), result["trial"])]
        sequence = action_sequence(row["transcript"])
        assert row["n_tool_calls"] == len(calls) == len(sequence)  # the slimmed file keeps no text turns
        assert [step.split("(")[0] for step in sequence] == [name for name, _ in calls]
        actions = [e["action"] for e in parse_transcript(row["transcript"]) if e["kind"] == "reply"]
        assert actions == [{"tool": name, "args": args} for name, args in calls]
        with_calls += bool(calls)
    assert with_calls == 182  # 18 trials of the file made no tool call


def test_bundled_arguments_make_usable_labels() -> None:
    df = from_tau_bench(BUNDLED, model="gpt-4o")
    first = action_sequence(df.loc[0, "transcript"])[0]
    assert first == 'get_user_details(user_id="mia_li_3668")'
    labels = {
        step
        for t in df["transcript"]
        for step in action_sequence(t, key_args={"get_reservation_details": ["reservation_id"], "think": []})
    }
    assert "think()" in labels  # free-text arguments left out
    assert any(re.fullmatch(r'get_reservation_details\(reservation_id="[A-Z0-9]{6}"\)', s) for s in labels)


def conversation() -> list[dict]:
    """A τ-bench trajectory as the tool-calling agent writes it: system, customer, calls, results, text."""
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "get_user_details", "arguments": '{"user_id": "u1"}'},
    }
    bad = {
        "id": "c3",
        "type": "function",
        "function": {"name": "cancel_reservation", "arguments": "{not json"},
    }
    cancel = {
        "id": "c2",
        "type": "function",
        "function": {"name": "cancel_reservation", "arguments": '{"reservation_id": "<b>R1</b>"}'},
    }
    return [
        {"role": "system", "content": "# Airline policy"},
        {"role": "user", "content": "Cancel my trip please."},
        {"role": "assistant", "content": "May I have your user id?"},
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "name": "get_user_details", "content": '{"name": "U"}'},
        {"role": "assistant", "content": None, "tool_calls": [bad]},
        {"role": "tool", "tool_call_id": "c3", "name": "cancel_reservation", "content": "Error: bad input"},
        {"role": "assistant", "content": "Cancelling.", "tool_calls": [cancel]},
        {"role": "tool", "tool_call_id": "c2", "name": "cancel_reservation", "content": "Error: not found"},
        {"role": "assistant", "content": "Your reservation is cancelled."},
        {"role": "user", "content": "###STOP###"},
    ]


def test_a_conversation_becomes_task_reply_and_tool_result_entries() -> None:
    df = from_tau_bench([{"task_id": 3, "trial": 0, "reward": 0.0, "info": {}, "traj": conversation()}])
    row = df.iloc[0]
    entries = parse_transcript(row["transcript"])
    assert [e["kind"] for e in entries] == [
        "system", "task", "message", "task", "reply", "tool_result", "reply", "tool_result",
        "reply", "tool_result", "reply", "task",
    ]  # fmt: skip
    assert entries[4]["action"] == {"tool": "get_user_details", "args": {"user_id": "u1"}}
    assert entries[4]["tool_call_id"] == "c1"
    assert "format_error" in entries[6] and "{not json" in entries[6]["content"]
    assert entries[8]["content"].startswith("Cancelling.\n")  # the message's text, then the call as received
    assert entries[10]["action"] == {"answer": "Your reservation is cancelled."}
    assert row["final_answer"] == "Your reservation is cancelled."
    assert [e["error"] for e in entries if e["kind"] == "tool_result"] == [False, True, True]
    assert (row["n_turns"], row["n_tool_calls"], row["n_tool_errors"], row["n_format_errors"]) == (5, 3, 2, 1)
    # the question to the customer is not an action; the last text message is the answer
    assert action_sequence(row["transcript"]) == [
        'get_user_details(user_id="u1")',
        "<format error>",
        'cancel_reservation(reservation_id="<b>R1</b>")',
        "answer",
    ]


def test_the_transcript_browser_shows_an_imported_conversation_escaped() -> None:
    from passk_nb.view.transcript_html import transcript_html

    df = from_tau_bench([{"task_id": 3, "trial": 0, "reward": 0.0, "info": {}, "traj": conversation()}])
    page = transcript_html(df.iloc[0])
    assert "<b>get_user_details</b>" in page and "&quot;user_id&quot;: &quot;u1&quot;" in page
    assert "&lt;b&gt;R1&lt;/b&gt;" in page and "<b>R1</b>" not in page
    assert "agent says" in page and "May I have your user id?" in page
    assert "system prompt" in page and "<details>" in page  # the policy is folded
    assert "<b>answer</b>: <span style='white-space:pre-wrap'>Your reservation is cancelled.</span>" in page
    assert "<b>final state</b>: <i>not recorded</i>" in page  # τ-bench's file has no final database
    assert df["state_diff"].isna().all()
    assert df["false_claims"].isna().all()  # not checked: "[]" would say "checked, none found"
    assert "claimed but not done" not in page


def test_no_claim_is_checked_for_any_imported_trial() -> None:
    for df in (from_tau_bench(FIXTURE), from_tau_bench(tau2_results()), from_tau_bench(BUNDLED)):
        assert df["false_claims"].isna().all() and df["state_diff"].isna().all()
        assert not claimed_unperformed_action(df).any()  # not flagged: nothing was checked


def test_a_trajectory_that_ends_on_a_tool_call_has_no_answer() -> None:
    again = {"role": "assistant", "content": None, "tool_calls": conversation()[4]["tool_calls"]}
    traj = [*conversation()[:6], again]  # the step limit hit mid-work
    row = from_tau_bench([{"task_id": 3, "trial": 0, "reward": 0.0, "info": {}, "traj": traj}]).iloc[0]
    assert pd.isna(row["final_answer"])
    assert [e["kind"] for e in parse_transcript(row["transcript"])][2] == "message"  # the question
    assert action_sequence(row["transcript"]) == ['get_user_details(user_id="u1")'] * 2


def test_fixture_conversation_reads_as_the_call_and_the_answer() -> None:
    df = from_tau_bench(FIXTURE).set_index(["task", "trial"])
    assert action_sequence(df.loc[("0", 0), "transcript"]) == [
        'cancel_pending_order(order_id="#W0")',
        "answer",
    ]
    assert df.loc[("0", 0), "final_answer"] == "Done."
    assert (
        df.loc[("2", 0), "n_tool_errors"] == 0
    )  # τ-bench's errors start with "Error: "; "error" is a result
    assert action_sequence(df.loc[("2", 1), "transcript"]) == []  # the crash has no transcript


# --- what the records claim about the run's settings -------------------------------------------------


def test_bundled_trials_say_native_tool_calls_no_json_mode_and_unknown_temperature() -> None:
    df = from_tau_bench(BUNDLED, model="gpt-4o")
    assert set(df["protocol"]) == {"native"}  # τ-bench's tool-calling agent: the API's function calling
    assert set(df["json_mode"]) == {"off"} and set(df["config"]) == {"protocol=native"}
    assert df["temperature"].isna().all()  # neither the file nor its name says


@pytest.mark.parametrize(
    ("name", "protocol", "temperature", "config"),
    [
        ("tool-calling-gpt-4o-0.0_range_0--1_user-x.json", "native", 0.0, "temperature=0.0, protocol=native"),
        ("react-gpt-4o-0.7_range_0--1_user-x.json", "text", 0.7, "temperature=0.7, protocol=text"),
    ],
)
def test_the_file_name_says_the_strategy_and_temperature(
    tmp_path: Path, name: str, protocol: str, temperature: float, config: str
) -> None:
    path = tmp_path / name
    path.write_text(json.dumps(tau_results({0: [1.0, 0.0]})), encoding="utf-8")
    df = from_tau_bench(path)
    assert set(df["protocol"]) == {protocol} and set(df["temperature"]) == {temperature}
    assert set(df["config"]) == {config} and set(df["json_mode"]) == {"off"}


def test_loaded_trajectories_without_tool_calls_are_not_said_to_be_native() -> None:
    text_only = [{"role": "assistant", "content": 'Action:\n{"name": "respond", "arguments": {}}'}]
    df = from_tau_bench([{"task_id": 0, "trial": 0, "reward": 1.0, "info": {}, "traj": text_only}])
    assert df.loc[0, "protocol"] == "text"
    assert df.loc[0, "config"] == "protocol=text"


def test_tau2_runs_are_native_with_their_temperature() -> None:
    df = from_tau_bench(tau2_results())
    assert set(df["protocol"]) == {"native"} and set(df["json_mode"]) == {"off"}
    assert set(df["config"]) == {"protocol=native"}  # tau2_results() records no temperature
