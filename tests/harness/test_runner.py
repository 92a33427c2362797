"""run(): records, concurrency, resume, crash safety, and the forms a provider can take."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest

import passk_nb
from passk_nb.data.records import COLUMNS, DTYPES
from passk_nb.data.store import part_files
from passk_nb.harness.providers.base import BaseProvider

TASKS = passk_nb.get_suite("orders").task_ids


def test_scripted_run_gives_fifteen_passing_rows(tmp_path):
    df = passk_nb.run("scripted", trials=3, out=tmp_path, progress=False)
    assert len(df) == 15
    assert list(df.columns) == list(COLUMNS)
    assert set(df["outcome"]) == {"pass"}
    assert df.groupby("task").size().to_dict() == dict.fromkeys(TASKS, 3)
    assert df["run_id"].nunique() == 1
    assert df["prompt_hash"].iloc[0] == passk_nb.data.prompt_hash(
        passk_nb.get_suite("orders").prompts["default"]
    )
    assert len(df["prompt_hash"].iloc[0]) == 12
    assert sorted(df["seed"].unique().tolist()) == [0, 1, 2]
    assert (df["provider"] == "scripted").all() and (df["harness_version"] != "").all()


def test_returned_frame_equals_what_load_reads(tmp_path):
    df = passk_nb.run("scripted", trials=2, out=tmp_path, progress=False)
    loaded = passk_nb.load(tmp_path)
    assert dict(loaded.dtypes.astype(str)) == dict(df.dtypes.astype(str))
    assert {c: str(t) for c, t in df.dtypes.items()} == {
        c: str(pd.Series(dtype=d).dtype) for c, d in DTYPES.items()
    }
    pd.testing.assert_frame_equal(df, loaded)


def test_rerun_resumes_and_extends_without_duplicates(tmp_path):
    first = passk_nb.run("scripted", trials=2, out=tmp_path, progress=False)
    seen = []
    again = passk_nb.run("scripted", trials=2, out=tmp_path, progress=False, on_record=seen.append)
    assert seen == []
    pd.testing.assert_frame_equal(first, again)
    more = passk_nb.run("scripted", trials=4, out=tmp_path, progress=False, on_record=seen.append)
    assert len(seen) == 10 and len(more) == 20
    assert not passk_nb.load(tmp_path).duplicated(["run_id", "task", "trial"]).any()


def test_different_prompt_is_a_different_run_without_a_warning(tmp_path):
    a = passk_nb.run("scripted", trials=1, out=tmp_path, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # another prompt name is a grid built on purpose: nothing to say
        b = passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, prompt="strict")
    assert a["run_id"].iloc[0] != b["run_id"].iloc[0]
    assert a["prompt_hash"].iloc[0] != b["prompt_hash"].iloc[0]
    assert set(b["prompt_name"]) == {"strict"}
    assert len(passk_nb.load(tmp_path)) == 10


def test_an_edited_prompt_text_under_the_same_name_warns_that_the_prompt_changed(tmp_path):
    text = passk_nb.get_suite("orders").prompts["default"]
    passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, prompt=text, prompt_name="mine")
    with pytest.warns(
        UserWarning, match=r"prompt 'mine' of another text .* prompt changed \(now [0-9a-f]{12}\)"
    ):
        passk_nb.run(
            "scripted", trials=1, out=tmp_path, progress=False, prompt=text + " Be brief.", prompt_name="mine"
        )


def test_custom_prompt_text_and_unknown_prompt_name(tmp_path):
    text = passk_nb.get_suite("orders").prompts["default"] + "\nBe brief."
    df = passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, prompt=text, prompt_name="brief")
    assert set(df["prompt_name"]) == {"brief"} and df["system_prompt"].iloc[0] == text
    with pytest.raises(ValueError, match="unknown prompt name 'strcit'"):
        passk_nb.run("scripted", out=tmp_path, prompt="strcit")


class ObjectAgent:
    name = "my-agent"
    model = "v1"

    def chat(self, messages):
        return json.dumps({"answer": "I can't help with that."})


def test_provider_can_be_an_object_or_a_function(tmp_path):
    df = passk_nb.run(ObjectAgent(), tasks=["cancel-shipped-refusal"], trials=2, out=tmp_path, progress=False)
    assert set(df["outcome"]) == {"no_lookup"}  # refused without looking the order up
    assert (df["provider"].iloc[0], df["model"].iloc[0]) == ("my-agent", "v1")

    def refuser(messages):
        return '{"answer": "no"}'

    df = passk_nb.run(refuser, tasks=["refund-delivered"], trials=2, out=tmp_path, progress=False)
    assert set(df["outcome"]) == {"wrong_state"}
    assert (df["provider"].iloc[0], df["model"].iloc[0]) == ("callable", "refuser")


def test_concurrency_runs_trials_in_parallel(tmp_path):
    # counted, not timed: each call waits at a barrier that only opens once 4 calls are in flight
    # at once, so a serial runner would time the barrier out (BrokenBarrierError -> agent_error)
    barrier = threading.Barrier(4, timeout=30)
    lock = threading.Lock()
    in_flight = peak = 0

    def waits_for_company(messages):
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        try:
            barrier.wait()
        finally:
            with lock:
                in_flight -= 1
        return '{"answer": "no"}'

    df = passk_nb.run(waits_for_company, trials=4, concurrency=4, out=tmp_path, progress=False)
    assert len(df) == 20
    assert "agent_error" not in set(df["outcome"]), df["error"].dropna().unique()
    assert peak == 4  # never more than the concurrency


def test_a_crashing_agent_is_the_agents_failure_and_never_stops_the_run(tmp_path):
    def sometimes(messages):
        if "Ben Carter" in messages[1]["content"]:
            raise RuntimeError("boom")
        return '{"answer": "no"}'

    df = passk_nb.run(sometimes, trials=3, out=tmp_path, progress=False)
    assert len(df) == 15
    bad = df[df["task"] == "cancel-pending-lookup"]
    assert set(bad["outcome"]) == {"agent_error"}
    assert bad["error"].str.startswith("the agent raised RuntimeError: boom").all()
    # it counts: pass^1 over the five tasks is 0, not a mean over the four that did not crash
    assert passk_nb.summarize(df, k=1, n_boot=0)["trials"].iloc[0] == 15


def test_a_crashing_object_agent_is_an_agent_error_too(tmp_path):
    class Crashes:
        def chat(self, messages):
            raise ValueError("bad parse")

    df = passk_nb.run(Crashes(), tasks=["refund-delivered"], trials=2, out=tmp_path, progress=False)
    assert set(df["outcome"]) == {"agent_error"}


class SometimesDown(BaseProvider):
    """A backend (not user code) whose server is down for Ben Carter's task until it comes back."""

    name = "flaky-backend"
    up = False

    def chat(self, messages):
        if not self.up and "Ben Carter" in messages[1]["content"]:
            raise ConnectionError("backend down")
        return '{"answer": "no"}'


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"trials": 0}, "trials must be a whole number ≥ 1"),
        ({"concurrency": 0}, "concurrency must be"),
        ({"tasks": ["nope"]}, "unknown task 'nope'"),
        ({"tasks": "refund-delivered"}, "non-empty list of task ids"),
        ({"provider": "nope"}, "unknown provider 'nope'"),
        ({"suite": "nope"}, "unknown suite 'nope'"),
        ({"temperature": float("nan")}, "temperature must be a number ≥ 0"),
    ],
)
def test_bad_arguments_say_what_to_fix(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        passk_nb.run(out=tmp_path, progress=False, **kwargs)
    assert not any(tmp_path.iterdir())


CHILD = textwrap.dedent(
    """
    import json, sys, time
    import passk_nb

    script = {t.prompt: t.script for t in passk_nb.get_suite("orders").tasks}

    def slow_scripted(messages):
        time.sleep(0.02)
        steps = script[messages[1]["content"]]
        return json.dumps(steps[sum(m["role"] == "assistant" for m in messages)])

    passk_nb.run(slow_scripted, trials=int(sys.argv[2]), concurrency=4, out=sys.argv[1], progress=False)
    """
)


@pytest.mark.slow
def test_sigkill_midway_then_resume_gives_exactly_the_expected_rows(tmp_path):
    out, trials = tmp_path / "runs", 30
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen([sys.executable, str(script), str(out), str(trials)])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out.exists() and part_files(out)):
        time.sleep(0.05)
    time.sleep(0.3)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL
    before = passk_nb.load(out)
    assert 0 < len(before) < 5 * trials, "the kill should land mid-run"

    subprocess.run([sys.executable, str(script), str(out), str(trials)], check=True, timeout=120)
    after = passk_nb.load(out)
    assert len(after) == 5 * trials
    assert not after.duplicated(["run_id", "task", "trial"]).any()
    assert set(after["outcome"]) == {"pass"}
    assert sorted(map(tuple, after[["task", "trial"]].values.tolist())) == sorted(
        (t, i) for t in TASKS for i in range(trials)
    )
    assert len(part_files(out)) >= 1
    leftovers = [p for p in Path(out).rglob("*") if p.is_file() and p not in part_files(out)]
    assert all(p.name.startswith((".", "_")) for p in leftovers)  # temp files, _spec.json


def test_resume_retries_infra_errors_and_keeps_one_row_per_trial(tmp_path):
    backend = SometimesDown("m")
    first = passk_nb.run(backend, trials=2, out=tmp_path, progress=False)
    assert (first["outcome"] == "infra_error").sum() == 2
    backend.up = True
    rerun = []
    second = passk_nb.run(backend, trials=2, out=tmp_path, progress=False, on_record=rerun.append)
    assert sorted((r["task"], r["trial"]) for r in rerun) == [
        ("cancel-pending-lookup", 0),
        ("cancel-pending-lookup", 1),
    ]
    assert len(second) == 10 and not second.duplicated(["task", "trial"]).any()
    assert "infra_error" not in set(second["outcome"])
    pd.testing.assert_frame_equal(second, passk_nb.load(tmp_path))


def test_completed_trials_reach_disk_within_a_second_while_others_still_run(tmp_path):
    release = threading.Event()

    def slow_on_eva(messages):
        if "Eva Lin" in messages[1]["content"]:
            release.wait(30)
        return '{"answer": "no"}'

    worker = threading.Thread(
        target=passk_nb.run, args=(slow_on_eva,), kwargs={"trials": 1, "out": tmp_path, "progress": False}
    )
    worker.start()
    try:
        deadline = time.monotonic() + 5
        seen = 0
        while time.monotonic() < deadline and seen < 4:
            time.sleep(0.1)
            seen = len(passk_nb.load(tmp_path)) if part_files(tmp_path) else 0
        assert seen == 4, "the four finished trials should be on disk while the fifth still runs"
    finally:
        release.set()
        worker.join(30)
    assert len(passk_nb.load(tmp_path)) == 5


def test_the_runs_provider_meta_is_encoded_once_and_a_trials_own_notes_added():
    """Issue 50: most trials add nothing to the run's ``provider_meta``; its JSON is then encoded once
    for the run (an encoder per record cost ~4 µs), and a trial's own notes still reach its record."""
    from passk_nb.harness.runner import _record

    base = {"provider_meta": {"max_tokens": 1024, "timeout_s": 120.0}}
    plain = [_record(base, "t", trial, 0, {"outcome": "pass"}) for trial in range(3)]
    assert plain[0]["provider_meta"] == json.dumps(base["provider_meta"])
    assert plain[1]["provider_meta"] is plain[0]["provider_meta"] is plain[2]["provider_meta"]
    noted = _record(base, "t", 3, 0, {"provider_meta": {"usage_note": "x", "max_tokens": 7}})
    assert json.loads(noted["provider_meta"]) == {"max_tokens": 7, "timeout_s": 120.0, "usage_note": "x"}
    other = {"provider_meta": {"max_tokens": 1024, "timeout_s": 120.0}}  # another run: equal, not it
    assert _record(other, "t", 0, 0, {})["provider_meta"] == plain[0]["provider_meta"]
    assert base["provider_meta"] == {"max_tokens": 1024, "timeout_s": 120.0}
