"""`passk cases FILE --agent module:function`: per-case pass@k / pass^k, exit 2 on bad input."""

import argparse
import re
import sys
from pathlib import Path

import pytest

from passk_nb.cli import main as cli
from passk_nb.data.store import load

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_PY = ROOT / "examples" / "cases_example.py"
EXAMPLE_JSON = ROOT / "examples" / "cases.json"


@pytest.fixture
def passk(monkeypatch, capsys):
    """Run `passk ARGS...` in-process with the cases subcommand; return (status, stdout, stderr)."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command may add the current folder

    def run(*args):
        status = cli.main([str(a) for a in args])
        out, err = capsys.readouterr()
        return status, out, err

    return run


def table_row(out, name):
    line = next(line for line in out.splitlines() if line.startswith(name + " "))
    return [cell.strip() for cell in line.split("|")]


def test_flaky_agent_table_shows_pass_at_k_above_pass_hat_k(passk):
    agent = f"{EXAMPLE_PY}:flaky_agent"
    status, out, err = passk("cases", EXAMPLE_PY, "--agent", agent, "--trials", 6, "--k", 2)
    assert status == 0, err
    assert table_row(out, "case")[:4] == ["case", "passes", "pass@2", "pass^2"]
    assert [table_row(out, name)[1] for name in ("math", "geo", "unknown")] == ["5/6", "5/6", "0/6"]
    mean = table_row(out, "mean")
    assert mean[1] == "10/18" and float(mean[2]) > float(mean[3])
    assert "output 'hmm, not sure'" in table_row(out, "math")[4]


def test_json_cases_and_module_agent_from_the_current_folder(passk, monkeypatch):
    monkeypatch.chdir(ROOT)
    status, out, err = passk("cases", "examples/cases.json", "--agent", "examples.cases_example:agent")
    assert status == 0, err
    assert table_row(out, "math")[1:4] == ["3/3", "1.000", "1.000"]
    assert table_row(out, "unknown")[1:4] == ["0/3", "0.000", "0.000"]
    assert table_row(out, "mean")[1] == "6/9"


def test_out_keeps_records_and_rerun_resumes(passk, tmp_path):
    args = (
        "cases",
        EXAMPLE_JSON,
        "--agent",
        f"{EXAMPLE_PY}:agent",
        "--trials",
        2,
        "--out",
        tmp_path,
        "--model",
        "toy",
        "--no-progress",
    )
    status, out, err = passk(*args)
    assert status == 0, err
    df = load(tmp_path)
    assert len(df) == 6 and set(df["suite"]) == {"cases"} and set(df["model"]) == {"toy"}
    assert set(df["prompt_name"]) == {"cases"} and re.search(r"records: .*\(6 trials", out)
    files = sorted(tmp_path.rglob("*.parquet"))
    assert passk(*args)[0] == 0
    assert sorted(tmp_path.rglob("*.parquet")) == files  # nothing new to run


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--agent", "no_such_module_xyz:agent"), "no module named 'no_such_module_xyz'"),
        (("--agent", f"{EXAMPLE_PY}:nope"), "no attribute 'nope'; functions it defines: agent, flaky_agent"),
        (("--agent", "examples/missing.py:agent"), "does not exist"),
        (("--agent", "justaname"), "module:function"),
        (("--agent", f"{EXAMPLE_PY}:CASES"), "not a function"),
        (("--agent", f"{EXAMPLE_PY}:agent", "--trials", "2", "--k", "3"), "--k 3 is larger than --trials 2"),
    ],
)
def test_bad_agent_or_k_exits_2_with_one_line(passk, args, message):
    status, out, err = passk("cases", EXAMPLE_JSON, *args)
    assert status == 2 and out == ""
    assert err.startswith("passk: error: ") and message in err
    assert "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bad.json", "[{\n", "invalid JSON at line 2"),
        ("nocases.py", "x = 1\n", "defines no CASES"),
        ("noinput.json", '[{"name": "q", "expected": "4"}]', "case 'q' has no 'input' key"),
        ("missing.json", None, "no case file"),
    ],
)
def test_bad_case_file_exits_2_with_one_line(passk, tmp_path, name, text, message):
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    status, out, err = passk("cases", path, "--agent", f"{EXAMPLE_PY}:agent")
    assert status == 2 and message in err and "Traceback" not in err


def test_bad_trials_is_a_usage_error(passk):
    status, out, err = passk("cases", EXAMPLE_JSON, "--agent", f"{EXAMPLE_PY}:agent", "--trials", "0")
    assert status == 2 and out == ""
    assert err == "passk: error: argument --trials: must be ≥ 1, got 0 (see `passk cases --help`)\n"


def test_cases_default_k_is_min_two_trials_and_quiet_prints_the_table_only(passk):
    status, out, err = passk(
        "cases", EXAMPLE_JSON, "--agent", f"{EXAMPLE_PY}:agent", "--trials", 1, "--quiet"
    )
    assert status == 0 and err == ""
    assert table_row(out, "case")[:4] == ["case", "passes", "pass@1", "pass^1"]
    assert out.splitlines()[-1].startswith("mean ")


def test_help_lists_the_options(passk, capsys):
    with pytest.raises(SystemExit) as exc:
        passk("cases", "--help")
    assert exc.value.code == 0
    help_text = capsys.readouterr().out
    assert all(opt in help_text for opt in ("--agent", "--trials", "--k", "--out", "--concurrency"))


def test_passk_command_has_the_cases_subcommand():
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert "cases" in sub.choices
