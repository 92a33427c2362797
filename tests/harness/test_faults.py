"""Tool-fault injection: each fault class changes outcomes as designed, reproducibly, as its own run."""

import asyncio
import json
import time

import pandas as pd
import pytest

import passk_nb
from passk_nb.harness.episode import Delay, arun_episode, episode_steps, run_episode
from passk_nb.harness.faults import Fault, parse_faults
from passk_nb.harness.providers.scripted import ScriptedProvider
from passk_nb.harness.suites import get_suite

SUITE = get_suite("orders")
PROMPT = SUITE.prompts["default"]
REFUNDS = {"refund-delivered", "refund-damaged-shipped"}
MUTATING = {"refund-delivered", "refund-damaged-shipped", "cancel-pending-lookup", "address-change-pending"}


def retrying_agent(messages):
    """The known-good script, but a call whose result is an error is sent again (twice at most);
    when it still fails the agent says so instead of claiming the action."""
    task = next(t for t in SUITE.tasks if t.prompt == messages[1]["content"])
    step, retries, failed = 0, 0, False
    for message in messages[2:]:
        if message["role"] == "user" and message["content"].startswith("Tool result"):
            if '{"error"' in message["content"] and retries < 2:
                retries += 1
            elif '{"error"' in message["content"]:
                failed, step, retries = True, step + 1, 0
            else:
                step, retries = step + 1, 0
    if failed:
        return json.dumps({"answer": "Sorry, the system failed and I could not complete your request."})
    return json.dumps(task.script[step])


def _outcomes(df):
    return dict(zip(df["task"], df["outcome"], strict=True))


def _claimed(df):
    return {t for t, c in zip(df["task"], df["false_claims"], strict=True) if json.loads(c)}


# fault spec -> (scripted outcomes that are not "pass", tasks with a false claim)
SCRIPTED = {
    "timeout:get_order": ({"cancel-shipped-refusal": "no_lookup"}, set()),
    "timeout:refund_order": (dict.fromkeys(REFUNDS, "wrong_state"), REFUNDS),
    "error:refund_order": (dict.fromkeys(REFUNDS, "wrong_state"), REFUNDS),
    "noop:*": (dict.fromkeys(MUTATING, "wrong_state"), MUTATING),
    "partial:*": ({}, set()),
    "stale:*": ({}, set()),
    "drift:*": ({}, set()),
    "latency:*:s=0.001": ({}, set()),
}
RETRYING = {
    "timeout:*": ({}, set()),
    "timeout:refund_order:n=1": ({}, set()),
    "error:refund_order": (dict.fromkeys(REFUNDS, "wrong_state"), set()),  # honest: no false claim
    "error:*": (
        {**dict.fromkeys(MUTATING, "wrong_state"), "cancel-shipped-refusal": "no_lookup"},
        set(),
    ),
    "noop:*": (dict.fromkeys(MUTATING, "wrong_state"), MUTATING),  # it trusts the success it is told
}


@pytest.mark.parametrize("protocol", ["json", "native"])
@pytest.mark.parametrize("spec", list(SCRIPTED))
def test_each_fault_changes_the_scripted_agents_outcomes_as_designed(tmp_path, spec, protocol):
    df = passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, faults=spec, protocol=protocol)
    failing, claimed = SCRIPTED[spec]
    assert _outcomes(df) == {t: failing.get(t, "pass") for t in SUITE.task_ids}
    assert _claimed(df) == claimed
    assert (df["faults"] == parse_faults(spec).label).all()
    injected = [json.loads(text) for text in df["faults_injected"]]
    kind = spec.split(":")[0]
    assert all(entry["fault"] == kind for trial in injected for entry in trial)
    # every plan strikes some call, but stale: the known-good scripts never read after their write
    assert any(injected) == (kind != "stale")


@pytest.mark.parametrize("spec", list(RETRYING))
def test_an_agent_that_retries_survives_transient_errors_only(tmp_path, spec):
    df = passk_nb.run(retrying_agent, trials=1, out=tmp_path, progress=False, faults=spec)
    failing, claimed = RETRYING[spec]
    assert _outcomes(df) == {t: failing.get(t, "pass") for t in SUITE.task_ids}
    assert _claimed(df) == claimed


def test_the_retried_timeout_is_counted_and_noted_in_the_transcript(tmp_path):
    df = passk_nb.run(retrying_agent, trials=1, out=tmp_path, progress=False, faults="timeout:refund_order")
    row = df.set_index("task").loc["refund-delivered"]
    assert row["n_tool_calls"] == 3 and row["n_tool_errors"] == 1
    assert json.loads(row["faults_injected"]) == [{"call": 2, "tool": "refund_order", "fault": "timeout"}]
    noted = [e for e in json.loads(row["transcript"]) if e.get("faults")]
    assert [(e["tool"], e["faults"]) for e in noted] == [("refund_order", ["timeout"])]


def test_a_faulted_run_is_its_own_run_and_never_resumes_a_clean_one(tmp_path):
    clean = passk_nb.run("scripted", trials=2, out=tmp_path, progress=False)
    seen = []
    faulted = passk_nb.run(
        "scripted", trials=2, out=tmp_path, progress=False, faults="noop:*", on_record=seen.append
    )
    assert len(seen) == 10  # every trial ran again
    assert clean["run_id"].iloc[0] != faulted["run_id"].iloc[0]
    assert set(clean["faults"]) == {"none"} and set(faulted["faults"]) == {"noop:*"}
    again = passk_nb.run(
        "scripted", trials=2, out=tmp_path, progress=False, faults="noop:*", on_record=seen.append
    )
    assert len(seen) == 10  # the faulted run resumes itself
    pd.testing.assert_frame_equal(faulted, again)
    summary = passk_nb.summarize(passk_nb.load(tmp_path), k=1, n_boot=0)
    assert sorted(summary["faults"]) == ["none", "noop:*"]  # never pooled


def test_probabilistic_faults_are_reproducible_at_any_concurrency(tmp_path):
    spec = "timeout:*:p=0.5,noop:refund_order:p=0.5"
    runs = [
        passk_nb.run(
            "scripted", trials=6, out=tmp_path / str(c), progress=False, faults=spec, concurrency=c
        ).set_index(["task", "trial"])
        for c in (1, 4)
    ]
    pd.testing.assert_series_equal(runs[0]["faults_injected"], runs[1]["faults_injected"])
    pd.testing.assert_series_equal(runs[0]["outcome"], runs[1]["outcome"])
    per_trial = runs[0]["faults_injected"].map(json.loads)
    assert 0 < per_trial.map(bool).sum() < len(per_trial)  # p=0.5 strikes some trials, not all
    assert per_trial.map(json.dumps).nunique() > 2  # different trials draw differently


def test_the_blocking_and_the_asyncio_driver_inject_the_same_faults():
    plan = parse_faults("timeout:*:p=0.5,latency:*:s=0.001")
    task = SUITE.task("refund-delivered")
    for key in ("refund-delivered:0", "refund-delivered:1", "refund-delivered:2"):
        options = {"system_prompt": PROMPT, "faults": plan, "trial_key": key}
        blocking = run_episode(SUITE, task, ScriptedProvider(suite=SUITE), **options)
        awaited = asyncio.run(arun_episode(SUITE, task, ScriptedProvider(suite=SUITE), **options))
        assert blocking["faults_injected"] == awaited["faults_injected"]
        assert blocking["outcome"] == awaited["outcome"]


def test_latency_is_a_delay_the_driver_waits_for():
    steps = episode_steps(
        SUITE,
        SUITE.task("refund-delivered"),
        system_prompt=PROMPT,
        faults=parse_faults("latency:get_order:s=0.25"),
    )
    provider = ScriptedProvider(suite=SUITE)
    request, kinds = next(steps), []
    while True:
        kinds.append(type(request).__name__)
        try:
            request = (
                steps.send(None)
                if isinstance(request, Delay)
                else steps.send(provider.chat(request.messages))
            )
        except StopIteration as stop:
            result = stop.value
            break
    assert kinds == ["ChatRequest", "Delay", "ChatRequest", "ChatRequest"]
    timed = run_episode(
        SUITE,
        SUITE.task("refund-delivered"),
        provider,
        system_prompt=PROMPT,
        faults=parse_faults("latency:get_order:s=0.25"),
    )
    assert timed["latency_s"] >= 0.25 and result["outcome"] == timed["outcome"] == "pass"


def _call(spec, calls, key="k"):
    """The results the agent sees for ``calls`` (tool, args) under ``spec``, and what was injected."""
    env, injector = SUITE.make_env(), parse_faults(spec).injector(key)
    initial = env.snapshot()
    seen = [injector.call(env, tool, args, initial)[0] for tool, args in calls]
    return seen, injector.injected, env.peek()


REFUND = ("refund_order", {"order_id": "O1001", "amount": 79.99})
LOOKUP = ("get_order", {"order_id": "O1001"})


def test_stale_shows_the_state_before_the_agents_own_write():
    seen, injected, state = _call("stale:get_order", [LOOKUP, REFUND, LOOKUP])
    assert seen[0]["ok"]["status"] == "delivered" and seen[2]["ok"]["status"] == "delivered"
    assert state["orders"]["O1001"]["status"] == "refunded"  # the write happened
    assert injected == [{"call": 3, "tool": "get_order", "fault": "stale"}]  # call 1 was not stale yet


def test_noop_reports_success_and_changes_nothing_and_passes_errors_through():
    seen, injected, state = _call("noop:*", [REFUND, LOOKUP, ("cancel_order", {"order_id": "O1001"})])
    assert seen[0] == {"ok": {"order_id": "O1001", "refunded": 79.99, "status": "refunded"}}
    assert state["orders"]["O1001"]["status"] == "delivered"
    assert "error" in seen[2]  # a call the system refuses still says so
    assert injected == [{"call": 1, "tool": "refund_order", "fault": "noop"}]  # a no-op read is no fault


def test_partial_cuts_lists_on_the_first_call_only():
    listing = ("list_orders", {"customer_id": "C001"})
    seen, injected, _ = _call("partial:list_orders", [listing, listing])
    assert [len(s["ok"]) for s in seen] == [1, 2]
    assert injected == [{"call": 1, "tool": "list_orders", "fault": "partial"}]


def test_drift_renames_fields():
    seen, _, _ = _call("drift:get_order", [LOOKUP])
    assert {"orderId", "shippingAddress", "status"} <= set(seen[0]["ok"]) and "order_id" not in seen[0]["ok"]
    seen, _, _ = _call("drift:get_order:field=status:to=state", [LOOKUP])
    assert seen[0]["ok"]["state"] == "delivered" and "status" not in seen[0]["ok"]
    assert "order_id" in seen[0]["ok"]


def test_the_nth_call_and_unknown_tools():
    seen, injected, _ = _call("error:get_order:n=2", [LOOKUP, LOOKUP, LOOKUP, ("nope", {})])
    assert ["error" in s for s in seen] == [False, True, False, True]
    assert "unknown tool" in seen[3]["error"]  # the agent's own mistake, not a fault
    assert injected == [{"call": 2, "tool": "get_order", "fault": "error"}]


def test_the_label_is_canonical_and_objects_equal_specs():
    assert parse_faults(" timeout : get_order : n=1 ").label == "timeout:get_order:n=1"
    assert (
        parse_faults([Fault("noop", "refund_order", p=0.5)]).label
        == parse_faults("noop:refund_order:p=0.5").label
    )
    assert parse_faults("latency:*:s=1.0").label == "latency:*:s=1"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("explode:*", "unknown fault kind 'explode'; choose from timeout"),
        ("timeout:get_order:n=1:p=0.5", "give n= .* or p= .*, not both"),
        ("timeout:*:p=2", r"0 < p ≤ 1; got 2.0"),
        ("timeout:*:n=0", "an integer ≥ 1; got 0"),
        ("timeout:*:n=two", "n= must be an integer, got 'two'"),
        ("timeout:*:s=1", "s= is the latency fault's seconds"),
        ("noop:*:field=status", "field= and to= belong to the drift fault"),
        ("timeout:*:when=1", "unknown option 'when'"),
        ("timeout:*,,noop:*", "empty fault in the spec"),
        ("timeout:*:n=1:get_order", "the tool comes right after the kind"),
        (f"timeout:*:n={10**23}", "n=100000000000000000000000 can never fire"),
        ("", "faults='' names no fault: leave faults out"),
        ("  ", "names no fault"),
    ],
)
def test_a_bad_spec_says_what_is_wrong(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_faults(spec)


def test_a_fault_that_can_never_fire_is_refused_before_any_trial(tmp_path):
    with pytest.raises(ValueError, match="'timeout:\\*:n=11' can never fire: .* max_turns=10"):
        passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, faults="timeout:*:n=11")
    with pytest.raises(ValueError, match="names no fault"):
        passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, faults="")
    assert not list(tmp_path.iterdir())
    df = passk_nb.run(  # native replies may call several tools: only the fixed bound applies
        "scripted", trials=1, out=tmp_path, progress=False, faults="timeout:*:n=11", protocol="native"
    )
    assert len(df) == 5


def test_a_tool_the_suite_lacks_is_refused_before_any_trial(tmp_path):
    with pytest.raises(
        ValueError, match="names tool 'get_orders', which suite 'orders' lacks; its tools: list_orders"
    ):
        passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, faults="timeout:get_orders")
    assert not list(tmp_path.iterdir())
    with pytest.raises(TypeError, match="faults must be a spec"):
        passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, faults=3)


def test_passk_run_faults_records_the_plan(tmp_path, capsys):
    from passk_nb.cli.main import main

    argv = ["run", "--provider", "scripted", "--trials", "1", "--k", "1", "--no-progress"]
    assert main([*argv, "--out", str(tmp_path), "--faults", "noop:refund_order"]) == 0
    df = passk_nb.load(tmp_path)
    assert set(df["faults"]) == {"noop:refund_order"}
    assert _outcomes(df) == {t: "wrong_state" if t in REFUNDS else "pass" for t in SUITE.task_ids}
    assert main([*argv, "--out", str(tmp_path), "--faults", "noop:refund"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("passk: error: ") and "names tool 'refund'" in err and "Traceback" not in err


def test_robustness_of_faulted_runs_names_the_tasks_each_fault_breaks(tmp_path):
    for spec in ("none", "noop:*", "timeout:refund_order", "latency:*:s=0.001"):
        passk_nb.run("scripted", trials=2, out=tmp_path, progress=False, faults=spec)
    out = passk_nb.robustness(tmp_path, k=2, n_boot=0)
    rows = out[out["metric"] == "pass^k"].set_index("faults")
    assert set(rows.index) == {"noop:*", "timeout:refund_order", "latency:*:s=0.001"}
    assert rows.loc["noop:*", "broken"] == ", ".join(sorted(MUTATING))
    assert rows.loc["timeout:refund_order", "broken"] == ", ".join(sorted(REFUNDS))
    assert rows.loc["latency:*:s=0.001", "n_broken"] == 0
    assert rows.loc["noop:*", "diff"] == pytest.approx(-len(MUTATING) / len(SUITE.tasks))
    assert rows.loc["timeout:refund_order", "fault_class"] == "explicit transient"


def script_agent(messages):
    """The orders suite's known-good script as a Python agent."""
    task = next(t for t in SUITE.tasks if t.prompt == messages[1]["content"])
    return json.dumps(task.script[sum(1 for m in messages if m["role"] == "assistant")])


@pytest.mark.parametrize(
    ("agent", "options"),
    [("scripted", {}), (script_agent, {"version": "v1"}), (script_agent, {"version": "v1", "workers": 2})],
    ids=["backend", "python-agent", "python-agent-in-workers"],
)
def test_a_trial_timed_out_inside_an_injected_delay_is_infra_whatever_the_backend(tmp_path, agent, options):
    start = time.monotonic()
    df = passk_nb.run(
        agent,
        trials=1,
        tasks=["refund-delivered", "cancel-shipped-refusal"],
        out=tmp_path,
        progress=False,
        faults="latency:*:s=30",
        trial_timeout=1.5,
        **options,
    )
    assert set(df["outcome"]) == {"infra_error"}, df[["outcome", "error"]]
    assert df["error"].str.contains("inside the harness's injected latency").all()
    assert time.monotonic() - start < 25  # the delays given up on were cut short, not slept out
