"""divergence(): crafted trials whose divergence point is known; action_tree() and plot_divergence()."""

import json
from collections import Counter
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

import passk_nb
from passk_nb.data.records import frame_from_records
from passk_nb.stats.divergence import action_sequence, action_tree, divergence
from passk_nb.view.divergence_plots import plot_divergence

LOOKUP = {"tool": "list_orders", "args": {"customer_id": "C002"}}
CANCEL_RIGHT = {"tool": "cancel_order", "args": {"order_id": "O1003"}}
CANCEL_WRONG = {"tool": "cancel_order", "args": {"order_id": "O1004"}}
ANSWER = {"answer": "Done."}


def transcript(*actions):
    entries = [{"kind": "task", "role": "user", "content": "cancel my pending order"}]
    for action in actions:
        if action == "prose":
            entries.append(
                {"kind": "reply", "role": "assistant", "content": "Sure!", "format_error": "not JSON"}
            )
            entries.append({"kind": "format_feedback", "role": "user", "content": "one JSON object"})
            continue
        entries.append(
            {"kind": "reply", "role": "assistant", "content": json.dumps(action), "action": action}
        )
        if "tool" in action:
            entries.append(
                {"kind": "tool_result", "role": "user", "content": "Tool result: ok", "tool": action["tool"]}
            )
    return json.dumps(entries)


def records(trials, prompt="p", task="cancel-pending-lookup"):
    """trials: [(outcome, [actions])]."""
    return frame_from_records(
        {
            "run_id": f"run-{prompt}",
            "suite": "orders",
            "task": task,
            "model": "m",
            "prompt_hash": prompt,
            "trial": i,
            "passed": outcome == "pass",
            "outcome": outcome,
            "transcript": transcript(*actions),
        }
        for i, (outcome, actions) in enumerate(trials)
    )


GOOD = [LOOKUP, CANCEL_RIGHT, ANSWER]


def test_failing_trials_leave_the_passing_ones_at_the_known_step():
    df = records(
        [
            ("pass", GOOD),
            ("pass", GOOD),
            ("pass", ["prose", LOOKUP, CANCEL_RIGHT, ANSWER]),  # a passing detour
            ("wrong_state", [LOOKUP, CANCEL_WRONG, ANSWER]),  # step 1: the wrong order
            ("wrong_state", [LOOKUP, CANCEL_WRONG, ANSWER]),
            ("wrong_state", [LOOKUP, ANSWER]),  # step 1: answers without acting
            ("format_error", ["prose", "prose"]),  # step 1, after the passing detour's first step
            ("infra_error", [CANCEL_WRONG]),  # left out
        ]
    )
    out = divergence(df)
    assert out["n_failing"].unique().tolist() == [4] and out["n_passing"].unique().tolist() == [3]
    rows = out[["step", "prefix", "action", "reference", "n_diverging"]].to_dict("records")
    assert rows == [
        {
            "step": 1,
            "prefix": 'list_orders(customer_id="C002")',
            "action": 'cancel_order(order_id="O1004")',
            "reference": 'cancel_order(order_id="O1003") ×2',
            "n_diverging": 2,
        },
        {
            "step": 1,
            "prefix": "<format error>",
            "action": "<format error>",
            "reference": 'list_orders(customer_id="C002") ×1',
            "n_diverging": 1,
        },
        {
            "step": 1,
            "prefix": 'list_orders(customer_id="C002")',
            "action": "answer",
            "reference": 'cancel_order(order_id="O1003") ×2',
            "n_diverging": 1,
        },
    ]


def test_the_reference_action_is_the_passing_trials_most_common_one():
    df = records(
        [
            ("pass", [LOOKUP, CANCEL_RIGHT, ANSWER]),
            ("pass", [LOOKUP, ANSWER]),  # a refusal-style pass: answered after the lookup
            ("pass", [LOOKUP, ANSWER]),
            ("wrong_state", [LOOKUP, CANCEL_WRONG, ANSWER]),
        ]
    )
    row = divergence(df).iloc[0]
    assert row["reference"] == 'answer ×2, cancel_order(order_id="O1003") ×1'
    assert row["reference_action"] == "answer"
    assert (row["step"], row["action"]) == (1, 'cancel_order(order_id="O1004")')


def test_a_failure_with_the_same_actions_as_a_pass_is_said_to_be_one():
    # a refusal that claims the cancellation: same actions as the honest refusal, different words
    df = records([("pass", [LOOKUP, ANSWER]), ("false_claim", [LOOKUP, ANSWER]), ("wrong_state", [ANSWER])])
    out = divergence(df)
    assert out[["step", "action", "n_diverging"]].values.tolist() == [
        [0, "answer", 1],
        [2, "<same actions>", 1],
    ]


def test_key_args_decide_what_counts_as_the_same_call():
    df = records(
        [
            ("pass", [{"tool": "refund", "args": {"order_id": "A", "note": "x"}}, ANSWER]),
            ("wrong_state", [{"tool": "refund", "args": {"order_id": "A", "note": "y"}}, ANSWER]),
        ]
    )
    assert divergence(df)["step"].tolist() == [0]
    assert divergence(df, key_args={"refund": ["order_id"]})["action"].tolist() == ["<same actions>"]


def test_two_arms_of_a_flip_where_b_first_differs_from_a():
    a = records([("pass", GOOD)] * 4, prompt="A")
    b = records([("wrong_state", [LOOKUP, LOOKUP, CANCEL_RIGHT, ANSWER])] * 3 + [("pass", GOOD)], prompt="B")
    df = pd.concat([a, b], ignore_index=True)
    out = divergence(df, on="prompt_hash", a="A", b="B")
    assert out[["step", "action", "reference", "n_diverging", "n_failing", "n_passing"]].values.tolist() == [
        [1, 'list_orders(customer_id="C002")', 'cancel_order(order_id="O1003") ×4', 3, 4, 4],
        [3, "<same actions>", "<end> ×4", 1, 4, 4],
    ]
    assert "prompt_hash" not in out.columns
    # without on=, each prompt is its own group: only B has failing trials and passing ones
    assert divergence(df)["prompt_hash"].unique().tolist() == ["B"]


def test_groups_and_tasks_are_kept_apart_and_bad_input_says_what_to_do():
    df = pd.concat(
        [records([("pass", GOOD), ("wrong_state", [ANSWER])], task=t) for t in ("x", "y")], ignore_index=True
    )
    df.loc[df["task"] == "y", "run_id"] = "other"
    assert divergence(df)["task"].tolist() == ["x", "y"]
    assert divergence(df, "y")["task"].tolist() == ["y"]
    with pytest.raises(ValueError, match="task 'z' has no usable trials"):
        divergence(df, "z")
    with pytest.raises(ValueError, match="need on="):
        divergence(df, a="p", b="q")
    with pytest.raises(ValueError, match=r"prompt_hash=\['q'\] not in the frame"):
        divergence(df, on="prompt_hash", a="p", b="q")
    only_passing = records([("pass", GOOD)] * 2)
    assert divergence(only_passing).empty


def test_action_tree_counts_and_the_plot_draws_them():
    df = records(
        [
            ("pass", GOOD),
            ("pass", GOOD),
            ("wrong_state", [LOOKUP, CANCEL_WRONG, ANSWER]),
            ("wrong_state", [ANSWER]),
        ]
    )
    tree = action_tree(df)
    assert tree[["depth", "action", "n_pass", "n_fail"]].values.tolist() == [
        [1, 'list_orders(customer_id="C002")', 2, 1],
        [1, "answer", 0, 1],
        [2, 'cancel_order(order_id="O1003")', 2, 0],
        [2, 'cancel_order(order_id="O1004")', 0, 1],
        [3, "answer", 2, 0],
        [3, "answer", 0, 1],
    ]
    ax = plot_divergence(tree)
    counts = sorted(t.get_text() for t in ax.texts if "✓" in t.get_text())
    assert counts == sorted(f"{p}✓ {f}✗" for p, f in tree[["n_pass", "n_fail"]].values.tolist())
    bold = [t.get_text() for t in ax.texts if t.get_fontweight() == "bold"]
    assert sorted(bold) == ["answer", 'cancel_order(order_id="O1004")']  # where failing trials part ways
    plt.close("all")
    two_configs = pd.concat([df, records([("pass", GOOD)], prompt="q")], ignore_index=True)
    with pytest.raises(ValueError, match="come from 2 configurations"):
        action_tree(two_configs)


def test_sequences_from_a_real_run_match_the_known_good_script(tmp_path):
    df = passk_nb.run("scripted", tasks=["cancel-pending-lookup"], trials=1, out=tmp_path, progress=False)
    task = passk_nb.get_suite("orders").task("cancel-pending-lookup")
    assert len(action_sequence(df["transcript"].iloc[0])) == len(task.script)
    assert action_sequence(df["transcript"].iloc[0])[-1] == "answer"


def test_a_real_run_of_a_flawed_agent_diverges_at_the_refund(tmp_path):
    from tests.harness.test_regrade import flawed_agent

    flawed_agent.calls = 0
    df = passk_nb.run(flawed_agent, trials=4, out=tmp_path, progress=False, concurrency=1)
    out = divergence(df)
    assert out[
        ["task", "step", "action", "reference", "n_diverging", "n_failing", "n_passing"]
    ].values.tolist() == [
        [
            "refund-delivered",
            1,
            'refund_order(amount=50.0, order_id="O1001")',
            'refund_order(amount=79.99, order_id="O1001") ×2',
            2,
            2,
            2,
        ]
    ]


# --- τ-bench's published gpt-4o airline trials, through from_tau_bench ----------------------------

TAU = Path(__file__).resolve().parents[2] / "data" / "tau-bench" / "tau-bench-gpt-4o-airline.json"


def test_tau_bench_failing_trials_leave_the_passing_ones_where_the_raw_calls_part():
    """For every task solved sometimes, divergence() finds where each failing trial leaves the
    passing ones; the steps are recomputed here from the raw JSON's tool calls."""
    raw = json.loads(TAU.read_text(encoding="utf-8"))
    calls: dict[str, dict[bool, list[list[tuple[str, str]]]]] = {}
    for result in raw:
        sequence = [
            (call["function"]["name"], json.dumps(json.loads(call["function"]["arguments"]), sort_keys=True))
            for message in result["traj"]
            if message["role"] == "assistant"
            for call in message.get("tool_calls") or []
        ]
        calls.setdefault(str(result["task_id"]), {True: [], False: []})[result["reward"] == 1].append(
            sequence
        )
    mixed = sorted(task for task, runs in calls.items() if runs[True] and runs[False])
    assert len(mixed) == 26  # the tasks gpt-4o solved sometimes (README of data/tau-bench)

    out = divergence(passk_nb.from_tau_bench(TAU, model="gpt-4o"))
    assert sorted(out["task"].unique()) == mixed
    for task in mixed:
        rows = out[out["task"] == task]
        assert rows["n_diverging"].sum() == rows["n_failing"].iloc[0] == len(calls[task][False])
        expected = Counter(
            max(_shared(failing, passing) for passing in calls[task][True]) for failing in calls[task][False]
        )
        assert rows.groupby("step")["n_diverging"].sum().to_dict() == dict(expected)


def _shared(x: list, y: list) -> int:
    n = 0
    while n < min(len(x), len(y)) and x[n] == y[n]:
        n += 1
    return n


def test_tau_bench_divergence_tree_draws_for_one_task():
    df = passk_nb.from_tau_bench(TAU, model="gpt-4o")
    task = divergence(df)["task"].iloc[0]
    key_args = {"think": [], "calculate": []}
    tree = action_tree(df, task, key_args=key_args)
    trials = df[df["task"] == task]
    # every trial goes through one first edge: those that stop without a tool call too (it dropped
    # 2 of this task's 4), through an <end> edge
    assert tree[tree["depth"] == 1][["n_pass", "n_fail"]].sum().tolist() == [
        int(trials["passed"].sum()),
        int((~trials["passed"]).sum()),
    ]
    assert (tree["action"] == "<end>").any()
    ax = plot_divergence(tree, title="t")
    assert ax.get_title() == "t" and any("✗" in t.get_text() for t in ax.texts)
    plt.close("all")
