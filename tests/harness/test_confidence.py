"""A stated confidence: the JSON protocol's ``"confidence"`` beside ``"answer"``, the ``+confidence``
prompts that ask for it, and the record column that keeps it (null: not stated)."""

import json
import math

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import passk_nb
from passk_nb.data.records import COLUMNS, frame_from_records
from passk_nb.harness.fingerprint import suite_fingerprint
from passk_nb.harness.protocol import Answer, parse_action
from passk_nb.harness.suites import get_suite
from passk_nb.harness.suites.build import CONFIDENCE_TEXT


def _agent(confidence):
    """A function agent that answers at once, stating ``confidence`` (left out when ``...``)."""

    def agent(messages):
        reply = {"answer": "I could not do that, sorry."}
        if confidence is not ...:
            reply["confidence"] = confidence
        return json.dumps(reply)

    return agent


def test_the_json_protocol_reads_a_stated_confidence_beside_the_answer():
    assert parse_action('{"answer": "Done.", "confidence": 0.25}') == Answer("Done.", 0.25)
    assert parse_action('{"answer": "Done."}').confidence is None
    assert parse_action('{"answer": "Done.", "confidence": null}') == Answer("Done.")


def test_a_function_agent_stating_confidence_gets_it_recorded(tmp_path):
    df = passk_nb.run(
        _agent(0.3), suite="orders", trials=2, out=tmp_path, progress=False, prompt="default+confidence"
    )
    assert df["confidence"].tolist() == [0.3] * len(df)
    assert (df["prompt_name"] == "default+confidence").all()
    assert df["system_prompt"].iloc[0].endswith(CONFIDENCE_TEXT)
    again = passk_nb.load(tmp_path)  # and on disk
    assert again["confidence"].tolist() == [0.3] * len(df)
    reply = [e for e in json.loads(df["transcript"].iloc[0]) if e["kind"] == "reply"][-1]
    assert reply["action"]["confidence"] == 0.3


@pytest.mark.parametrize("bad", ["high", 80, -0.1, True, [0.5], {"p": 0.5}])
def test_a_bad_confidence_gets_a_note_and_the_trial_is_kept(tmp_path, bad):
    df = passk_nb.run(_agent(bad), suite="orders", trials=1, out=tmp_path, progress=False)
    assert len(df) == len(get_suite("orders").tasks)
    assert not df["outcome"].isin(["format_error", "agent_error", "infra_error"]).any()
    assert (df["final_answer"] == "I could not do that, sorry.").all()
    assert df["confidence"].isna().all()
    note = "is not a number in [0, 1], stored as not stated"
    assert df["record_notes"].str.contains(note, regex=False).all()
    assert (df["n_format_errors"] == 0).all()


def test_an_unstated_confidence_is_null_with_no_note(tmp_path):
    df = passk_nb.run(_agent(...), suite="orders", trials=1, out=tmp_path, progress=False)
    assert df["confidence"].isna().all() and df["record_notes"].isna().all()


def test_the_record_boundary_checks_a_confidence_from_any_source():
    row = {"run_id": "r", "suite": "s", "task": "t", "passed": True, "outcome": "pass"}
    rows = [{**row, "trial": i, "confidence": c} for i, c in enumerate([0.9, 1.5, "0.7", None])]
    df = frame_from_records(rows)
    assert df["confidence"].iloc[0] == 0.9 and df["confidence"].iloc[1:].isna().all()
    assert df["record_notes"].iloc[1] == "confidence=1.5 is not a number in [0, 1], stored as not stated"
    assert df["record_notes"].iloc[2] == "confidence='0.7' is not a number in [0, 1], stored as not stated"
    assert pd.isna(df["record_notes"].iloc[3])


def test_an_imported_table_goes_through_the_same_check():
    table = pd.DataFrame({"case": list("aabb"), "ok": [1, 0, 1, 1], "p": [0.9, 80, 0.7, None]})
    df = passk_nb.from_frame(table, task="case", passed="ok", model="m", columns={"confidence": "p"})
    assert df["confidence"].iloc[[0, 2]].tolist() == [0.9, 0.7] and df["confidence"].iloc[[1, 3]].isna().all()
    assert df["record_notes"].iloc[1] == "confidence=80.0 is not a number in [0, 1], stored as not stated"


def test_records_written_before_the_column_load_with_confidence_not_stated(tmp_path):
    run = tmp_path / "old-run"
    run.mkdir()
    row = {"run_id": "old-run", "suite": "s", "task": "t", "trial": 0, "passed": True, "outcome": "pass"}
    pq.write_table(pa.Table.from_pylist([row]), run / "part-0.parquet")  # no confidence column
    df = passk_nb.load(tmp_path)
    assert "confidence" in COLUMNS and df["confidence"].dtype == "float64"
    assert math.isnan(df["confidence"].iloc[0])


def test_confidence_prompts_leave_every_suite_fingerprint_and_prompt_unchanged():
    """The fingerprints and prompts the bundled records hold (data/qwen2.5-1.5b-orders: orders
    07a3f3091f4d): a ``+confidence`` prompt is made from its name, not stored in the suite."""
    pinned = {"orders": "07a3f3091f4d", "bank": "185a8b31a997", "starter": "190f8b605bb6"}
    for name, fingerprint in pinned.items():
        suite = get_suite(name)
        assert suite_fingerprint(suite) == fingerprint
        assert not any(p.endswith("+confidence") for p in suite.prompts)


def test_a_confidence_prompt_under_native_or_a_schema_says_what_to_change(tmp_path):
    with pytest.raises(ValueError, match="under protocol='native' the final answer is plain text"):
        passk_nb.run("scripted", suite="orders", out=tmp_path, prompt="default+confidence", protocol="native")
    with pytest.raises(ValueError, match="action schema has no field"):
        passk_nb.run(
            "ollama", model="m", suite="orders", out=tmp_path, prompt="strict+confidence", json_mode="schema"
        )
    with pytest.raises(ValueError, match=r"each also as '<name>\+confidence'"):
        passk_nb.run("scripted", suite="orders", out=tmp_path, prompt="nope+confidence")
