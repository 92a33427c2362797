"""from_harbor: Harbor job folders, written by the tests in Harbor's documented layout.

Layout (https://harborframework.com/docs/run-jobs/run-evals): ``<job>/config.json``,
``<job>/result.json`` and one ``<job>/<trial>/result.json`` per trial, the trial result being
Harbor's ``TrialResult`` (task_name, trial_name, source, agent_info, agent_result,
verifier_result.rewards, exception_info, started_at, finished_at).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from passk_nb import from_harbor, summarize
from passk_nb.cli.main import main
from passk_nb.importers.checks import ImportFormatError

MODEL = {"name": "claude-sonnet-4-5", "provider": "anthropic"}


def trial(
    task: str,
    name: str,
    reward: float | None,
    start: str | None,
    *,
    exception: str | None = None,
    model: dict | None = MODEL,
    tokens: tuple[int, int] | None = (1200, 300),
) -> dict[str, Any]:
    """One trial result in Harbor's TrialResult shape."""
    return {
        "id": f"00000000-0000-0000-0000-{abs(hash(name)) % 10**12:012d}",
        "task_name": task,
        "trial_name": name,
        "trial_uri": f"file:///jobs/job/{name}",
        "task_id": {"path": f"tasks/{task}"},
        "source": "terminal-bench",
        "task_checksum": "abc",
        "config": {"job_id": "11111111-2222-3333-4444-555555555555", "trials_dir": "jobs/job"},
        "agent_info": {"name": "terminus-2", "version": "2.0.0", "model_info": model},
        "agent_result": None
        if tokens is None
        else {"n_input_tokens": tokens[0], "n_output_tokens": tokens[1], "cost_usd": 0.01},
        "verifier_result": None if reward is None else {"rewards": {"reward": reward}},
        "exception_info": None
        if exception is None
        else {
            "exception_type": exception,
            "exception_message": "agent ran out of time",
            "exception_traceback": "Traceback ...",
            "occurred_at": "2026-01-01T10:30:00",
        },
        "started_at": None if start is None else f"2026-01-01T{start}:00Z",
        "finished_at": None if start is None else f"2026-01-01T{start}:42Z",
    }


def write_job(folder: Path, trials: list[dict[str, Any]], n_attempts: int | None = None) -> Path:
    """A job folder as Harbor writes it; ``n_attempts`` defaults to the most trials of one task and agent."""
    if n_attempts is None:
        arms = [(t["task_name"], json.dumps(t["agent_info"])) for t in trials]  # attempts per task and agent
        n_attempts = max(arms.count(arm) for arm in arms)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"job_name": folder.name, "n_attempts": n_attempts}))
    (folder / "result.json").write_text(json.dumps({"id": "job", "n_total_trials": len(trials), "stats": {}}))
    for data in trials:
        sub = folder / data["trial_name"]
        (sub / "agent").mkdir(parents=True)
        (sub / "verifier").mkdir()
        (sub / "config.json").write_text(json.dumps({"task": {"path": data["task_id"]["path"]}}))
        (sub / "result.json").write_text(json.dumps(data))
        (sub / "trial.log").write_text("log\n")
    return folder


@pytest.fixture
def job(tmp_path: Path) -> Path:
    # folder names sort in a different order from the start times: the attempt order must come from time
    return write_job(
        tmp_path / "jobs" / "2026-01-01__10-00-00",
        [
            trial("fix-git", "fix-git__zzz", 1.0, "10:00"),
            trial("fix-git", "fix-git__aaa", 0.0, "11:00"),
            trial("fix-git", "fix-git__mmm", 1.0, "12:00"),
            trial("hello-world", "hello-world__b", 1.0, "10:05"),
            trial("hello-world", "hello-world__a", None, "10:10", exception="AgentTimeoutError"),
            trial("hello-world", "hello-world__c", 1.0, "10:20"),
        ],
    )


def test_attempts_are_ordered_by_start_time_not_folder_name(job: Path) -> None:
    df = from_harbor(job, errored="infra_error")
    fix = df[df["task"] == "fix-git"].sort_values("trial")
    assert fix["passed"].tolist() == [True, False, True]
    assert [json.loads(m)["trial_name"] for m in fix["provider_meta"]] == [
        "fix-git__zzz",
        "fix-git__aaa",
        "fix-git__mmm",
    ]
    assert set(df["suite"]) == {"terminal-bench"} and set(df["provider"]) == {"harbor"}
    assert set(df["model"]) == {"anthropic/claude-sonnet-4-5"} and set(df["config"]) == {
        "agent=terminus-2 2.0.0"
    }
    assert df["run_id"].nunique() == 1
    row = fix.iloc[0]
    assert row["input_tokens"] == 1200 and row["output_tokens"] == 300 and row["latency_s"] == 42.0


def test_errored_trials_count_as_the_caller_chose(job: Path) -> None:
    left_out = from_harbor(job, errored="infra_error")
    failed = from_harbor(job, errored="failure")
    errored = left_out[(left_out["task"] == "hello-world") & (left_out["trial"] == 1)].iloc[0]
    assert errored["outcome"] == "infra_error" and "AgentTimeoutError" in errored["error"]
    as_failure = failed[(failed["task"] == "hello-world") & (failed["trial"] == 1)].iloc[0]
    assert as_failure["outcome"] == "agent_error" and not as_failure["passed"]
    # the choice moves the number: hello-world passes 2 of 2 or 2 of 3
    a = summarize(left_out, k=1, by=["task"], n_boot=0).set_index("task")["pass^k"]
    b = summarize(failed, k=1, by=["task"], n_boot=0).set_index("task")["pass^k"]
    assert a["hello-world"] == 1.0 and b["hello-world"] == pytest.approx(2 / 3)
    assert a["fix-git"] == b["fix-git"] == pytest.approx(2 / 3)


def test_there_is_no_silent_default_for_errored_trials(job: Path) -> None:
    with pytest.raises(TypeError, match="errored"):
        from_harbor(job)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"errored='maybe'.*errored='infra_error'.*errored='failure'"):
        from_harbor(job, errored="maybe")


def test_trials_without_start_time_come_last_by_folder_name(tmp_path: Path) -> None:
    folder = write_job(
        tmp_path / "job",
        [trial("t", "t__b", 0.0, None), trial("t", "t__a", 1.0, None), trial("t", "t__z", 1.0, "09:00")],
    )
    df = from_harbor(folder, errored="infra_error").sort_values("trial")
    assert [json.loads(m)["trial_name"] for m in df["provider_meta"]] == ["t__z", "t__a", "t__b"]


def test_a_folder_of_jobs_is_one_run_per_job_and_model(tmp_path: Path) -> None:
    write_job(tmp_path / "jobs" / "a", [trial("t", "t__1", 1.0, "10:00")])
    other = {"name": "gpt-5", "provider": "openai"}
    write_job(
        tmp_path / "jobs" / "b",
        [trial("t", "t__2", 0.0, "10:00", model=other), trial("t", "t__3", 1.0, "10:00", model=MODEL)],
    )
    df = from_harbor(tmp_path / "jobs", errored="infra_error")
    assert len(df) == 3 and set(df["model"]) == {"openai/gpt-5", "anthropic/claude-sonnet-4-5"}
    # job_id is shared by the tests' configs, so runs differ by model only here
    assert df.groupby("run_id")["model"].nunique().max() == 1 and df["run_id"].nunique() == 2
    assert sorted(df["trial"]) == [0, 0, 0]


def test_threshold_and_reward_key(tmp_path: Path) -> None:
    data = trial("t", "t__1", None, "10:00")
    data["verifier_result"] = {"rewards": {"tests": 0.5, "style": 1.0}}
    folder = write_job(tmp_path / "job", [data])
    with pytest.raises(
        ImportFormatError, match=r"several rewards \['style', 'tests'\]: choose one with reward_key="
    ):
        from_harbor(folder, errored="infra_error")
    assert not from_harbor(folder, errored="infra_error", reward_key="tests")["passed"].iloc[0]
    assert from_harbor(folder, errored="infra_error", reward_key="tests", threshold=0.5)["passed"].iloc[0]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "verifier_result",
            {"rewards": {"reward": "high"}},
            r"verifier_result\.rewards\.reward holds 'high', not a number",
        ),
        ("verifier_result", [1.0], r"verifier_result holds list, not an object"),
        ("started_at", "yesterday", r"started_at holds 'yesterday', not a time"),
        ("agent_info", "terminus", r"agent_info holds 'terminus', not an object"),
        ("task_name", 7, r"task_name holds 7, not a task name"),
    ],
)
def test_a_malformed_trial_names_its_file_trial_and_field(
    tmp_path: Path, field: str, value: Any, message: str
) -> None:
    good, bad = trial("t", "t__good", 1.0, "10:00"), trial("t", "t__bad", 1.0, "11:00")
    bad[field] = value
    folder = write_job(tmp_path / "job", [good, bad])
    with pytest.raises(ImportFormatError, match=rf"job, trial t__bad: {message}") as caught:
        from_harbor(folder, errored="infra_error")
    assert str(folder) in str(caught.value)
    with pytest.warns(UserWarning) as said:  # the skip, and (mostly) the attempt it leaves missing
        kept = from_harbor(folder, errored="infra_error", strict=False)
    assert any("skipped 1 of 2 records" in str(w.message) for w in said)
    assert len(kept) == 1


def test_a_result_that_is_not_json_and_a_fifo_are_refused(tmp_path: Path) -> None:
    import os

    folder = write_job(tmp_path / "job", [trial("t", "t__1", 1.0, "10:00")])
    (folder / "t__1" / "result.json").write_text("{not json")
    with pytest.raises(ImportFormatError, match=r"t__1/result.json is not JSON"):
        from_harbor(folder, errored="infra_error")
    (folder / "t__1" / "result.json").unlink()
    os.mkfifo(folder / "t__1" / "result.json")
    with pytest.raises(ImportFormatError, match="FIFO"):
        from_harbor(folder, errored="infra_error")


def test_passk_import_reads_a_job_and_asks_for_errored(job: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "runs"
    assert main(["import", str(job), "--out", str(out), "--quiet"]) == 2
    assert "--errored infra_error" in capsys.readouterr().err
    assert main(["import", str(job), "--errored", "failure", "--out", str(out), "--quiet"]) == 0
    assert main(["report", str(out), "--k", "1", "--quiet", "--format", "json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["rows"]
    assert row["trials"] == 6 and row["successes"] == 4 and row["n_infra_excluded"] == 0
    assert row["n_agent_errors"] == 1  # the timed-out attempt, counted as a failure by choice
    assert row["pass^k"] == pytest.approx((2 / 3 + 2 / 3) / 2)


def test_tasks_with_fewer_trials_than_n_attempts_are_said(tmp_path: Path) -> None:
    folder = write_job(
        tmp_path / "job",
        [
            trial("a", "a__1", 1.0, "10:00"),
            trial("a", "a__2", 1.0, "10:01"),
            trial("b", "b__1", 0.0, "10:00"),
        ],
        n_attempts=2,
    )
    with pytest.warns(
        UserWarning, match=r"1 of 2 tasks have fewer trials than the job's n_attempts \('b': 1 of 2\)"
    ):
        df = from_harbor(folder, errored="infra_error")
    assert len(df) == 3  # nothing invented for the missing attempt
