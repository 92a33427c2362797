"""to_inspect: passk-nb records as inspect_ai eval logs, read back by inspect_ai's own API."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers.fake_servers import require
from tests.helpers.records import records_from_marks

HAVE_INSPECT = importlib.util.find_spec("inspect_ai") is not None

#: Two configurations (prompts p and q) of one model: failures of several kinds and an infra error.
MARKS = {
    ("m", "p", "t1"): "1101",
    ("m", "p", "t2"): "0x00",
    ("m", "p", "t3"): "1111",
    ("m", "p", "t4"): "1i0u",
    ("m", "q", "t1"): "0000",
    ("m", "q", "t2"): "1101",
}


@pytest.fixture(autouse=True)
def _needs_inspect() -> None:
    require(HAVE_INSPECT, "inspect_ai (pip install 'passk-nb[inspect]')")


@pytest.fixture
def records() -> pd.DataFrame:
    return records_from_marks(MARKS, prompt_names={"p": "plain", "q": "strict"})


def test_one_log_per_configuration_that_inspect_reads(records: pd.DataFrame, tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log

    from passk_nb import to_inspect

    files = to_inspect(records, tmp_path / "logs")
    assert len(files) == 2 and all(f.suffix == ".eval" and f.parent == tmp_path / "logs" for f in files)
    logs = {read_eval_log(str(f)).eval.metadata["passk"]["prompt_name"]: read_eval_log(str(f)) for f in files}
    log = logs["plain"]
    assert log.eval.task == "orders" and log.eval.model == "test/m"
    assert {s.id for s in log.samples} == {"t1", "t2", "t3", "t4"}
    assert sorted(s.epoch for s in log.samples if s.id == "t1") == [1, 2, 3, 4]
    infra = [s for s in log.samples if s.id == "t4" and s.epoch == 2]
    assert infra[0].scores is None and infra[0].error is not None
    t2 = {s.epoch: s.scores["state_check"] for s in log.samples if s.id == "t2"}
    assert [t2[e].value for e in (1, 2, 3, 4)] == ["I", "I", "I", "I"]
    assert t2[2].metadata["passk_outcome"] == "format_error"


@pytest.mark.parametrize("k", [1, 2, 3])
def test_inspects_pass_at_reducer_gives_our_per_task_pass_at_k(
    records: pd.DataFrame, tmp_path: Path, k: int
) -> None:
    from inspect_ai.log import read_eval_log
    from inspect_ai.scorer import pass_at

    from passk_nb import summarize, to_inspect

    for file in to_inspect(records, tmp_path):
        log = read_eval_log(str(file))
        prompt = log.eval.metadata["passk"]["prompt_hash"]
        by_task: dict[str, list] = {}
        for sample in log.samples:
            if sample.scores:  # an errored epoch has no score: inspect leaves it out, as we do
                by_task.setdefault(str(sample.id), []).append(sample.scores["state_check"])
        theirs = {task: pass_at(k)(scores).value for task, scores in by_task.items()}
        ours = summarize(records[records["prompt_hash"] == prompt], k=k, by=["task"], n_boot=0)
        ours_by_task = dict(zip(ours["task"], ours["pass@k"], strict=True))
        assert theirs.keys() == ours_by_task.keys()
        for task, value in theirs.items():
            assert value == pytest.approx(ours_by_task[task], abs=1e-12), (prompt, task, k)


def test_the_headline_accuracy_is_our_pass_hat_1(records: pd.DataFrame, tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log

    from passk_nb import summarize, to_inspect

    for file in to_inspect(records, tmp_path):
        log = read_eval_log(str(file))
        prompt = log.eval.metadata["passk"]["prompt_hash"]
        [score] = log.results.scores
        ours = summarize(records[records["prompt_hash"] == prompt], k=1, by=(), n_boot=0)["pass^k"].iloc[0]
        assert score.metrics["accuracy"].value == pytest.approx(ours)


def test_from_inspect_round_trips_the_analysis_columns(records: pd.DataFrame, tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log

    from passk_nb import from_inspect, summarize, to_inspect

    files = to_inspect(records, tmp_path)
    assert from_inspect(files)["run_id"].nunique() == 2  # each log one run, never pooled
    key = ["task", "trial"]
    for file in files:
        prompt = read_eval_log(str(file), header_only=True).eval.metadata["passk"]["prompt_hash"]
        before = records[records["prompt_hash"] == prompt].sort_values(key).reset_index(drop=True)
        after = from_inspect(file).sort_values(key).reset_index(drop=True)
        for column in ("suite", "task", "trial", "passed", "outcome"):
            assert after[column].tolist() == before[column].tolist(), column
        assert set(after["model"]) == {"test/m"}  # inspect names a model provider/model
        for k in (1, 2, 3):
            a = summarize(before, k=k, by=["task"], n_boot=0).set_index("task")
            b = summarize(after, k=k, by=["task"], n_boot=0).set_index("task")
            pd.testing.assert_series_equal(a["pass@k"], b["pass@k"])
            pd.testing.assert_series_equal(a["pass^k"], b["pass^k"])


def test_a_real_run_keeps_its_transcript_as_messages(tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log

    from passk_nb import from_inspect, run, to_inspect

    df = run("scripted", trials=2, out=tmp_path / "runs", progress=False)
    [file] = to_inspect(df, tmp_path / "logs")
    log = read_eval_log(str(file))
    row = df[(df["task"] == "refund-delivered") & (df["trial"] == 1)].iloc[0]
    [sample] = [s for s in log.samples if s.id == "refund-delivered" and s.epoch == 2]
    roles = [m.role for m in sample.messages]
    assert roles[0] == "system" and sample.messages[0].text == row["system_prompt"]
    calls = [c.function for m in sample.messages if m.role == "assistant" for c in m.tool_calls or []]
    ours = [e["action"]["tool"] for e in json.loads(row["transcript"]) if "tool" in e.get("action", {})]
    assert calls == ours and calls
    results = [m for m in sample.messages if m.role == "tool"]
    assert [m.function for m in results] == ours
    # every tool message answers the call before it
    ids = [c.id for m in sample.messages if m.role == "assistant" for c in m.tool_calls or []]
    assert [m.tool_call_id for m in results] == ids
    assert sample.output.completion == row["final_answer"]
    back = from_inspect(file)
    assert sorted(back["n_tool_calls"]) == sorted(df["n_tool_calls"])


def test_two_runs_of_one_configuration_are_refused_with_the_fix(
    records: pd.DataFrame, tmp_path: Path
) -> None:
    from passk_nb import to_inspect

    twice = pd.concat([records, records.assign(run_id="other")], ignore_index=True)
    with pytest.raises(ValueError, match=r"more than once .*by= including 'run_id'"):
        to_inspect(twice, tmp_path)
    files = to_inspect(twice, tmp_path, by=["prompt_hash", "run_id"])
    assert len(files) == 4


def test_bad_input_is_named(records: pd.DataFrame, tmp_path: Path) -> None:
    from passk_nb import to_inspect

    with pytest.raises(ValueError, match=r"record columns \['outcome'\]"):
        to_inspect(records.drop(columns="outcome"), tmp_path)
    with pytest.raises(ValueError, match="no records"):
        to_inspect(records.iloc[:0], tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        to_inspect(records, tmp_path / "file")
    with pytest.raises(ValueError, match="not passk-nb outcomes"):
        to_inspect(records.assign(outcome="maybe"), tmp_path)


def test_an_edited_outcome_that_contradicts_the_score_is_refused(
    records: pd.DataFrame, tmp_path: Path
) -> None:
    from inspect_ai.log import read_eval_log, write_eval_log

    from passk_nb import from_inspect, to_inspect
    from passk_nb.importers.checks import ImportFormatError

    file = to_inspect(records, tmp_path)[0]
    log = read_eval_log(str(file))
    sample = next(s for s in log.samples if s.scores and s.scores["state_check"].value == "I")
    sample.scores["state_check"].metadata["passk_outcome"] = "pass"
    write_eval_log(log, str(file))
    with pytest.raises(
        ImportFormatError, match=r"passk_outcome 'pass', which does not fit a score that failed"
    ):
        from_inspect(file)


def test_passk_export_writes_logs_that_passk_import_reads_back(tmp_path: Path, capsys) -> None:
    from passk_nb import load
    from passk_nb.cli.main import main

    assert (
        main(
            [
                "run",
                "--provider",
                "scripted",
                "--trials",
                "2",
                "--out",
                str(tmp_path / "runs"),
                "--quiet",
                "--no-progress",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["export", str(tmp_path / "runs"), "--to", "inspect", "--out", str(tmp_path / "logs")]) == 0
    assert "1 inspect_ai logs (10 trials)" in capsys.readouterr().out
    assert main(["import", str(tmp_path / "logs"), "--out", str(tmp_path / "back"), "--quiet"]) == 0
    before, after = load(tmp_path / "runs"), load(tmp_path / "back")
    assert sorted(zip(after["task"], after["trial"], after["outcome"], strict=True)) == sorted(
        zip(before["task"], before["trial"], before["outcome"], strict=True)
    )
    assert main(["export", str(tmp_path / "runs"), "--to", "inspect"]) == 2
    assert "give the folder with --out" in capsys.readouterr().err


DEEP = "[" * 100_000 + "]" * 100_000
#: Hostile values in the records: names that look like paths, huge and deeply nested texts.
HOSTILE = {
    "suite_traversal": {"suite": "../../../escaped"},
    "absolute_suite": {"suite": "/tmp/escaped"},
    "task_traversal": {"task": "../../escaped"},
    "model_traversal": {"model": "../../../../escaped"},
    "huge_suite": {"suite": "s" * 300_000},
    "deep_transcript": {"transcript": DEEP},
    "deep_state_diff": {"state_diff": DEEP},
    "huge_answer": {"final_answer": "x" * 2_000_000},
    "transcript_of_junk": {"transcript": '[1, "a", null, {"kind": 5}]'},
}


@pytest.mark.parametrize("change", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_records_stay_in_the_folder_and_every_trial_comes_back(
    records: pd.DataFrame, tmp_path: Path, change: dict[str, str]
) -> None:
    # on the code as found: deep_transcript and deep_state_diff raised RecursionError
    from passk_nb import from_inspect, to_inspect

    df = records[records["prompt_name"] == "plain"].reset_index(drop=True)
    for column, value in change.items():
        if column in ("suite", "model"):  # one configuration's own: every row
            df[column] = value
        else:
            df[column] = df[column].astype(object)
            df.loc[0, column] = value
    folder = tmp_path / "deep" / "logs"
    [file] = to_inspect(df, folder)
    assert file.resolve().parent == folder.resolve()
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == [file]  # nothing written elsewhere
    key = ["task", "trial", "passed", "outcome"]
    back = from_inspect(file)[key].sort_values(key[:2]).reset_index(drop=True)
    before = df[key].sort_values(key[:2]).reset_index(drop=True)
    pd.testing.assert_frame_equal(back, before, check_dtype=False)


@pytest.mark.parametrize(
    ("task", "said"),
    [("t\0x", "holds a NUL character"), ("t" * 70_000, "is 70,000 bytes long")],
    ids=["nul", "huge"],
)
def test_a_task_no_eval_log_can_name_is_refused_before_anything_is_written(
    records: pd.DataFrame, tmp_path: Path, task: str, said: str
) -> None:
    # on the code as found: the NUL task's trial vanished on reading back, the huge one crashed
    # with a raw struct.error
    from passk_nb import to_inspect

    df = records.astype({"task": object})
    df.loc[0, "task"] = task
    expected = re.escape(f"to_inspect: task {task[:60]!r}") + rf"(\.\.\.)? {said}: .*df\.assign"
    with pytest.raises(ValueError, match=expected):
        to_inspect(df, tmp_path / "logs")
    assert not list(tmp_path.rglob("*.eval"))
