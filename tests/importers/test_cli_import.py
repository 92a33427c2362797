"""``passk import``: other harnesses' results stored as runs that every command reads.

On the bundled τ-bench file, the τ²-bench fixture, a real inspect_ai log and a CSV table; the
stored records equal the library importer's, a second import adds nothing, a wrong ``--from``
and unreadable records are one-line errors naming the file and the flag to use, and reports
show "n/a" (not "0") in "claimed not done" for trials whose claims were never checked.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from passk_nb.cli.main import main
from passk_nb.data.store import load
from passk_nb.importers.inspect_ai import from_inspect
from passk_nb.importers.tau_bench import from_tau_bench

ROOT = Path(__file__).resolve().parents[2]
TAU_BENCH = ROOT / "data" / "tau-bench" / "tau-bench-gpt-4o-airline.json"
TAU2 = Path(__file__).parent / "fixtures" / "tau2_results_small.json"


def passk(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def same_records(stored: pd.DataFrame, imported: pd.DataFrame) -> None:
    key = ["run_id", "task", "trial"]
    pd.testing.assert_frame_equal(
        stored.sort_values(key).reset_index(drop=True), imported.sort_values(key).reset_index(drop=True)
    )


def test_the_bundled_tau_bench_file_is_stored_once_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    code, out, err = passk(capsys, "import", TAU_BENCH, "--model", "gpt-4o", "--out", runs)
    assert code == 0, err
    assert "200 trials imported" in out and "(tau-bench/gpt-4o, tau-bench)" in err
    same_records(load(runs), from_tau_bench(TAU_BENCH, model="gpt-4o"))
    code, out, err = passk(capsys, "import", TAU_BENCH, "--model", "gpt-4o", "--out", runs)
    assert code == 0 and "0 trials imported" in out and "(200 already there)" in err
    assert len(load(runs)) == 200
    code, out, err = passk(capsys, "report", runs, "--k", "2")
    assert code == 0, err
    header, _, row = out.splitlines()[1:4]
    cells = dict(
        zip([c.strip() for c in header.split("|")], [c.strip() for c in row.split("|")], strict=True)
    )
    assert cells["claimed not done"] == "n/a" and cells["trials"] == "84/200 pass"
    assert "n/a: imported trials" in out
    html = tmp_path / "report.html"
    code, _, err = passk(capsys, "report", runs, "--format", "html", "--out", html)
    assert code == 0, err
    assert "<td>84/200 pass</td><td>0</td><td>n/a</td>" in html.read_text(encoding="utf-8")


def test_report_on_a_foreign_file_points_to_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # on main: "not a parquet file ... pass --skip-bad-files"
    for command in ("report", "runs"):
        code, _, err = passk(capsys, command, TAU_BENCH)
        assert code == 2 and f"import them first: passk import {TAU_BENCH} --out runs" in err
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(TAU2, folder / "results.json")
    code, _, err = passk(capsys, "report", folder)
    assert code == 2 and "passk import" in err


def test_tau2_results_are_detected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = passk(capsys, "import", TAU2, "--out", tmp_path / "runs")
    assert code == 0, err
    same_records(load(tmp_path / "runs"), from_tau_bench(TAU2))
    code, _, err = passk(capsys, "import", TAU2, "--from", "tau-bench", "--out", tmp_path / "other")
    assert code == 2 and "holds tau2 results, not tau-bench: pass --from tau2" in err


def test_a_json_list_of_tau2_simulations_is_detected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # on the code as found: taken for τ-bench ("holds tau2 results, not tau-bench")
    sims = json.loads(TAU2.read_text(encoding="utf-8"))["simulations"]
    path = tmp_path / "sims.json"
    path.write_text(json.dumps([{**sim, "ticks": [], "speech_environment": None} for sim in sims]))
    code, _, err = passk(capsys, "import", path, "--out", tmp_path / "runs")
    assert code == 0, err
    same_records(load(tmp_path / "runs"), from_tau_bench(path))


def test_a_real_inspect_log_is_detected_and_reported(
    small_inspect_logs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    for log in small_inspect_logs:  # the .eval log's folder, then the .json log itself
        code, _, err = passk(capsys, "import", log.parent if log.suffix == ".eval" else log, "--out", runs)
        assert code == 0, err
        assert "(inspect_ai/mockllm/model, inspect)" in err
    same_records(load(runs), from_inspect(list(small_inspect_logs)))
    code, out, err = passk(capsys, "report", runs, "--k", "1", "--by", "run_id")
    assert code == 0, err
    caption = out.splitlines()[0]  # n/a in both rows: said once, above the table
    assert "claimed not done: n/a" in caption and out.count("3/4 pass") == 2


def test_a_csv_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "mine.csv"
    pd.DataFrame(
        {"case": list("aabb"), "attempt": [1, 2, 1, 2], "ok": ["pass", "fail", "pass", "pass"], "v": [3] * 4}
    ).to_csv(table, index=False)
    runs = tmp_path / "runs"
    code, _, err = passk(capsys, "import", table, "--out", runs)
    assert code == 2 and "needs --task and --passed" in err
    args = ["import", table, "--task", "case", "--passed", "ok", "--trial", "attempt", "--model", "m"]
    code, _, err = passk(capsys, *args, "--column", "prompt_name=v", "--out", runs)
    assert code == 0, err
    df = load(runs)
    assert df["passed"].tolist() == [True, False, True, True] and df["prompt_name"].tolist() == ["3"] * 4
    other = tmp_path / "other.csv"
    pd.read_csv(table).assign(ok="fail").to_csv(other, index=False)
    code, _, err = passk(capsys, *args[:1], other, *args[2:], "--out", runs)  # same model: its own run
    assert code == 0, err
    assert load(runs)["run_id"].nunique() == 2 and len(load(runs)) == 8


def test_unreadable_records_name_the_file_and_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(TAU2.read_text(encoding="utf-8"))
    data["simulations"][1]["duration"] = "slow"
    bad = tmp_path / "results.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    code, _, err = passk(capsys, "import", bad, "--out", tmp_path / "runs")
    assert code == 2
    assert f"{bad}, simulation 1" in err and "'duration'" in err and "--skip-bad-records" in err
    assert "strict=False" not in err and "--skip-bad-files" not in err
    code, out, err = passk(capsys, "import", bad, "--skip-bad-records", "--out", tmp_path / "runs")
    assert code == 0 and "skipped 1 of 9 records" in err and "8 trials imported" in out
    code, _, err = passk(capsys, "import", bad, "--max-bytes", "1000", "--out", tmp_path / "runs")
    assert code == 2 and "over the import limit of 1,000 bytes" in err and "--max-bytes" in err


def test_undetectable_files_ask_for_from(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    odd = tmp_path / "notes.json"
    odd.write_text("not json", encoding="utf-8")
    code, _, err = passk(capsys, "import", odd, "--out", tmp_path / "runs")
    assert (
        code == 2
        and "cannot tell which harness wrote" in err
        and "--from tau-bench|tau2|inspect|harbor|csv" in err
    )
