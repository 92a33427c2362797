"""passk regrade: re-graded records as a new run folder, originals untouched, the checks named."""

import json
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import passk_nb
from passk_nb.cli.main import main
from passk_nb.data.store import part_files
from passk_nb.harness.fingerprint import suite_fingerprint
from passk_nb.harness.suites import get_suite
from tests.harness.test_regrade import flawed_agent

LENIENT = '''
import dataclasses

from passk_nb.harness.suites import get_suite
from passk_nb.harness.suites.base import expect_changes

ORDERS = get_suite("orders")


def any_refund(before, after):
    """Any refund of O1001 counts, partial ones (status unchanged) included."""
    expected = {"orders.O1001.refunded_amount": lambda amount: amount > 0}
    if after["orders"]["O1001"]["status"] == "refunded":
        expected["orders.O1001.status"] = "refunded"
    return expect_changes(before, after, expected)


LENIENT = dataclasses.replace(ORDERS.task("refund-delivered"), check=any_refund)
SUITE = dataclasses.replace(
    ORDERS, name="orders-lenient", tasks=tuple(LENIENT if t.id == LENIENT.id else t for t in ORDERS.tasks)
)
NOT_A_SUITE = 3
'''


def flawed_runs(folder):
    flawed_agent.calls = 0
    return passk_nb.run(flawed_agent, trials=4, out=folder, progress=False, concurrency=1)


def test_a_changed_check_writes_a_new_run_with_exactly_the_expected_flips(tmp_path, monkeypatch, capsys):
    runs, out = tmp_path / "runs", tmp_path / "regraded"
    df = flawed_runs(runs)
    before = {p: p.read_bytes() for p in part_files(runs)}
    (tmp_path / "lenient_suite.py").write_text(textwrap.dedent(LENIENT))
    monkeypatch.syspath_prepend(str(tmp_path))

    def no_provider(*args, **kwargs):
        raise AssertionError("regrade must not build or call a provider")

    monkeypatch.setattr("passk_nb.harness.providers.make_provider", no_provider)
    assert main(["regrade", str(runs), "--suite", "lenient_suite:SUITE", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "re-graded 20 trials without calling a model; 2 changed verdict" in printed
    assert "refund-delivered trial 1" in printed and "wrong_state -> pass" in printed

    assert {p: p.read_bytes() for p in part_files(runs)} == before  # originals untouched
    again = passk_nb.load(out)
    assert len(again) == len(df) and again["run_id"].nunique() == 1
    assert again["run_id"].iloc[0] != df["run_id"].iloc[0]
    merged = df.merge(again, on=["task", "trial"], suffixes=("_old", "_new"))
    flipped = merged[merged["outcome_old"] != merged["outcome_new"]]
    assert sorted(zip(flipped["task"], flipped["trial"], strict=True)) == [
        ("refund-delivered", 1),
        ("refund-delivered", 3),
    ]
    assert set(flipped["outcome_new"]) == {"pass"}
    assert (merged["transcript_old"] == merged["transcript_new"]).all()

    suite = get_suite("lenient_suite:SUITE")
    meta = json.loads(again["provider_meta"].iloc[0])
    assert meta["grader"]["checks"] == suite_fingerprint(suite)
    assert meta["grader"]["suite"] == "orders-lenient"
    assert meta["grader"]["regraded_from"] == df["run_id"].iloc[0]
    assert meta["fingerprint"] == json.loads(df["provider_meta"].iloc[0])["fingerprint"]
    assert again["config"].str.endswith(f"checks={suite_fingerprint(suite)}").all()
    assert suite_fingerprint(suite) != suite_fingerprint(passk_nb.get_suite("orders"))

    # the same checks again: refused, nothing overwritten
    assert main(["regrade", str(runs), "--suite", "lenient_suite:SUITE", "--out", str(out)]) == 2
    assert "re-graded with checks" in capsys.readouterr().err
    assert len(passk_nb.load(out)) == len(df)


def test_regrading_into_the_same_folder_keeps_both_runs_apart(tmp_path, capsys):
    df = flawed_runs(tmp_path)
    assert main(["regrade", str(tmp_path)]) == 0
    assert "0 changed verdict" in capsys.readouterr().out
    both = passk_nb.load(tmp_path)
    assert len(both) == 2 * len(df) and both["config"].nunique() == 2
    # a summary never pools the two gradings: the config column differs
    assert len(passk_nb.summarize(both, k=2, n_boot=0)) == 2


def test_bad_suite_arguments_exit_2(tmp_path, monkeypatch, capsys):
    flawed_runs(tmp_path / "runs")
    (tmp_path / "lenient_suite.py").write_text(textwrap.dedent(LENIENT))
    monkeypatch.syspath_prepend(str(tmp_path))
    for suite, message in (
        ("lenient_suite", "unknown suite 'lenient_suite'"),
        ("no_such_module_xyz:SUITE", "cannot import 'no_such_module_xyz'"),
        ("lenient_suite:NOT_A_SUITE", "is an int, not a Suite"),
    ):
        assert main(["regrade", str(tmp_path / "runs"), "--suite", suite]) == 2
        assert message in capsys.readouterr().err
    assert main(["regrade", str(tmp_path / "nowhere")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_regrade_never_imports_a_module_the_records_name(tmp_path, monkeypatch, capsys):
    runs = tmp_path / "runs"
    df = passk_nb.run("scripted", tasks=["refund-delivered"], trials=1, out=runs, progress=False)
    (tmp_path / "evilmod.py").write_text(
        "import pathlib\npathlib.Path('IMPORTED').write_text('ran')\n"
        "from passk_nb.harness.suites import get_suite\nSUITE = get_suite('orders')\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    forged = df.assign(suite="evilmod:SUITE")
    with pytest.raises(ValueError, match="records name suite 'evilmod:SUITE'.*never imported.*suite="):
        passk_nb.regrade(forged)
    part = part_files(runs)[0]
    table = pq.read_table(part)
    table = table.set_column(table.schema.get_field_index("suite"), "suite", pa.array(["evilmod:SUITE"]))
    pq.write_table(table, part)
    assert main(["regrade", str(runs)]) == 2
    assert "never imports code they name: pass --suite" in capsys.readouterr().err
    assert not (tmp_path / "IMPORTED").exists()
    # naming the suite yourself still works, with a file path too
    assert main(["regrade", str(runs), "--suite", "orders", "--out", str(tmp_path / "a")]) == 0
    assert not (tmp_path / "IMPORTED").exists()
    assert passk_nb.regrade(forged, suite="orders")["passed"].all()
