"""passk gate: exit 0 when the lower bound holds, 1 when it does not, 2 on bad input; JUnit XML per task."""

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow as pa
import pytest

import passk_nb
from passk_nb.cli.main import main
from passk_nb.data.records import SCHEMA
from passk_nb.data.store import write_part
from tests.helpers.records import records_from_marks

ROOT = Path(__file__).resolve().parents[2]


def write_marks(folder, marks_by_task, model="m", prompt="p"):
    """Records of one configuration, task -> marks ("1" pass, "0" wrong_state, "i" infra_error)."""
    df = records_from_marks({(model, prompt, task): marks for task, marks in marks_by_task.items()})
    write_part(pa.Table.from_pandas(df, schema=SCHEMA, preserve_index=False), folder, df["run_id"].iloc[0])
    return folder


def test_the_scripted_suite_passes_the_gate_from_the_command_line(tmp_path):
    passk_nb.run("scripted", suite="bank", trials=4, out=tmp_path, progress=False)
    done = subprocess.run(  # the command .ci/run uses: ten tasks that all pass give a lower bound of 0.692
        [sys.executable, "-m", "passk_nb", "gate", str(tmp_path), "--k", "2", "--min", "0.6"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("## passk gate: PASS")
    assert "| 10/10 | 40/40 pass | 1.000 | 0.692 | pass |" in done.stdout


def test_a_lower_bound_below_the_threshold_fails_and_junit_names_the_failing_trials(tmp_path, capsys):
    # pass^2 per task: 1, 1, 1, 1, C(2,2)/C(4,2) = 1/6 -> mean 0.833; with five tasks the interval
    # for new tasks like these reaches far below 0.8
    data = write_marks(tmp_path / "runs", {"a": "1111", "b": "1111", "c": "1111", "d": "1111", "e": "1010"})
    junit = tmp_path / "gate.xml"
    assert main(["gate", str(data), "--k", "2", "--min", "0.8", "--junit", str(junit)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("## passk gate: FAIL")
    assert "| 0.833 |" in out and "**FAIL**" in out
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == "5" and suite.get("failures") == "1"
    failed = [case for case in suite.iter("testcase") if case.find("failure") is not None]
    assert [case.get("name") for case in failed] == ["e (pass^2)"]
    text = failed[0].find("failure").text
    assert "trial 1" in text and "trial 3" in text and "wrong_state" in text
    assert "trial 0" not in text and "trial 2" not in text


def test_the_same_data_passes_a_lower_threshold(tmp_path, capsys):
    data = write_marks(tmp_path, {"a": "1111", "b": "1111", "c": "1111", "d": "1111", "e": "1010"})
    assert main(["gate", str(data), "--k", "2", "--min", "0.1"]) == 0
    assert capsys.readouterr().out.startswith("## passk gate: PASS")


def test_the_fixed_task_interval_is_narrower_but_never_certain(tmp_path, capsys):
    # 4 tasks at 8/8 and one at 0/8: pass^4 = 0.8 exactly, yet neither interval lets 0.8 through
    # (the fixed-task SE is never zero); these tasks re-rolled is the narrower question
    data = write_marks(tmp_path, {t: "11111111" for t in "abcd"} | {"e": "00000000"})
    assert main(["gate", str(data), "--k", "4", "--min", "0.8", "--interval", "fixed"]) == 1
    assert main(["gate", str(data), "--k", "4", "--min", "0.8"]) == 1
    capsys.readouterr()
    assert main(["gate", str(data), "--k", "4", "--min", "0.5", "--interval", "fixed"]) == 0
    assert main(["gate", str(data), "--k", "4", "--min", "0.5"]) == 1


def test_bad_input_exits_2_with_one_line(tmp_path, capsys):
    data = write_marks(tmp_path, {"a": "1111", "b": "1111"})
    assert main(["gate", str(data), "--k", "2"]) == 2
    assert "give --min THRESHOLD, --baseline DIR" in capsys.readouterr().err
    assert main(["gate", str(data), "--k", "5", "--min", "0.5"]) == 2
    assert "5 is larger than n=4" in capsys.readouterr().err
    assert main(["gate", str(tmp_path / "nowhere"), "--k", "2", "--min", "0.5"]) == 2
    assert "does not exist" in capsys.readouterr().err
    short = write_marks(tmp_path / "short", {"a": "1111", "b": "11ii"})
    assert main(["gate", str(short), "--k", "3", "--min", "0.5"]) == 2
    assert "these have fewer (infra errors excluded): b (2)" in capsys.readouterr().err
    assert main(["gate", str(data), "--k", "2", "--min", "1.5"]) == 2
    assert capsys.readouterr().err.startswith("passk: error:")


def test_a_paired_regression_against_the_baseline_fails_the_gate(tmp_path, capsys):
    # five of six tasks broke (four of six is not enough for new tasks: all four share a sign
    # 2/16 of the time under no change, and compare's Korn–Graubard interval does not exclude 0)
    tasks = "abcdef"
    base = write_marks(tmp_path / "base", {t: "1111" for t in tasks})
    worse = write_marks(
        tmp_path / "worse", {t: "0000" for t in tasks[:5]} | {t: "1111" for t in tasks[5:]}, prompt="q"
    )
    same = write_marks(tmp_path / "same", {t: "1111" for t in tasks}, prompt="q")
    junit = tmp_path / "gate.xml"
    assert main(["gate", str(worse), "--k", "2", "--baseline", str(base), "--junit", str(junit)]) == 1
    out = capsys.readouterr().out
    assert "| 1.000 | 0.167 | -0.833 |" in out
    assert "a 4/4 → 0/4" in out  # the steady task leaves the flips' family: all five flips show
    failed = [
        c.get("name") for c in ET.parse(junit).getroot().iter("testcase") if c.find("failure") is not None
    ]
    assert failed == ["a (pass^2)", "b (pass^2)", "c (pass^2)", "d (pass^2)", "e (pass^2)"]
    assert main(["gate", str(same), "--k", "2", "--baseline", str(base)]) == 0
    assert "| 1.000 | 1.000 | +0.000 |" in capsys.readouterr().out


def test_a_baseline_comparison_needs_one_configuration_per_side(tmp_path, capsys):
    both = write_marks(tmp_path / "both", {"a": "11", "b": "11"}, prompt="p")
    write_marks(both, {"a": "11", "b": "11"}, prompt="q")
    base = write_marks(tmp_path / "base", {"a": "11", "b": "11"})
    assert main(["gate", str(both), "--k", "2", "--baseline", str(base)]) == 2
    assert "holds 2 configurations" in capsys.readouterr().err


GATE_CASES = [
    ({t: "1111" for t in "abcde"} | {"f": "1010"}, ["--k", "2", "--min", "0.8"]),
    ({t: "1111" for t in "abcde"} | {"f": "1010"}, ["--k", "2", "--min", "0.1"]),
    (
        {t: "11111111" for t in "abcd"} | {"e": "00000000"},
        ["--k", "4", "--min", "0.5", "--interval", "fixed"],
    ),
    (
        {t: "11111111" for t in "abcd"} | {"e": "00000000"},
        ["--k", "4", "--min", "0.8", "--interval", "fixed"],
    ),
    ({t: "1101" for t in "abcdef"}, ["--k", "1", "--min", "0.6", "--ci", "0.9"]),
]


@pytest.mark.parametrize(("marks", "argv"), GATE_CASES)
def test_the_command_prints_the_decision_of_passk_nb_gate(tmp_path, capsys, marks, argv):
    data = write_marks(tmp_path, marks)
    status = main(["gate", str(data), *argv])
    out = capsys.readouterr().out
    options = dict(zip(argv[::2], argv[1::2], strict=True))
    result = passk_nb.gate(
        passk_nb.load(data),
        k=int(options["--k"]),
        min=float(options["--min"]),
        interval=options.get("--interval", "tasks"),
        ci=float(options.get("--ci", 0.95)),
    )
    assert status == (0 if result.holds else 1)
    assert out.startswith(f"## passk gate: {'PASS' if result.holds else 'FAIL'}")
    assert f"| {result.bounds['lo'].iloc[0]:.3f} | {'pass' if result.holds else '**FAIL**'} |" in out
    assert bool(result.reasons) != result.holds


def test_passk_nb_gate_against_a_baseline_decides_as_the_command(tmp_path, capsys):
    base = write_marks(tmp_path / "base", {t: "1111" for t in "abcdef"})
    worse = write_marks(
        tmp_path / "worse", {t: "0000" for t in "abcde"} | {t: "1111" for t in "f"}, prompt="q"
    )
    result = passk_nb.gate(passk_nb.load(worse), k=2, baseline=passk_nb.load(base))
    assert main(["gate", str(worse), "--k", "2", "--baseline", str(base)]) == 1
    assert not result.holds and not result.comparison["holds"]
    assert f"[{result.comparison['lo']:+.3f}, {result.comparison['hi']:+.3f}]" in capsys.readouterr().out
    assert result.tasks.loc[result.tasks["failed"], "task"].tolist() == list("abcde")
    assert "worse than the baseline" in result.reasons[0]


@pytest.mark.parametrize("interval", ["tasks", "fixed"])
@pytest.mark.parametrize("mark", ["1", "0"])
def test_the_gate_bounds_are_never_zero_wide_on_all_pass_or_all_fail(interval, mark):
    df = records_from_marks({("m", "p", f"t{i}"): mark * 4 for i in range(10)})
    bounds = passk_nb.gate(df, k=2, min=0.5, interval=interval).bounds.iloc[0]
    assert bounds["lo"] < bounds["hi"]
    assert bounds["lo"] <= bounds["pass^k"] <= bounds["hi"]
    assert (bounds["lo"] < 1) if mark == "1" else (bounds["hi"] > 0)


def test_the_gate_reads_the_bounds_summarize_returns(tmp_path):
    df = records_from_marks({("m", "p", t): "11101111" for t in "abcdef"} | {("m", "p", "g"): "00110011"})
    summary = passk_nb.summarize(df, k=2)
    for interval, column in (("tasks", "pass^k_lo"), ("fixed", "pass^k_fixed_lo")):
        bounds = passk_nb.gate(df, k=2, min=0.5, interval=interval).bounds
        assert bounds["lo"].iloc[0] == summary[column].iloc[0]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "give a threshold (min="),
        ({"min": 1.5}, "between 0 and 1"),
        ({"min": 0.5, "interval": "new"}, "interval must be one of ['tasks', 'fixed']"),
    ],
)
def test_bad_arguments_of_passk_nb_gate_say_what_to_give(options, message):
    df = records_from_marks({("m", "p", "a"): "1111"})
    with pytest.raises(ValueError, match=re.escape(message)):
        passk_nb.gate(df, k=2, **options)


def test_control_characters_in_records_leave_the_junit_file_valid_xml(tmp_path, capsys):
    # a task id, a model name and an error carrying terminal control, a NUL and a lone surrogate
    task = "e\x1b]0;pwned\x07\x00\ud800"
    marks = {"a": "1111", "b": "1111", "c": "1111", "d": "1111", task: "1010"}
    df = records_from_marks({("m\x0b", "p", t): m for t, m in marks.items()})
    df.loc[df["outcome"] == "wrong_state", "error"] = "bad\x1b[2J\x0c reply"
    write_part(pa.Table.from_pandas(df, schema=SCHEMA, preserve_index=False), tmp_path / "runs", "r")
    junit = tmp_path / "gate.xml"
    assert main(["gate", str(tmp_path / "runs"), "--k", "2", "--min", "0.8", "--junit", str(junit)]) == 1
    suite = ET.parse(junit).getroot().find("testsuite")  # raised ParseError before
    names = [case.get("name") for case in suite.iter("testcase")]
    assert "e\\x1b]0;pwned\\x07\\x00\\ud800 (pass^2)" in names
    assert all("\x1b" not in (case.get("classname") or "") for case in suite.iter("testcase"))
    xml = junit.read_text(encoding="utf-8")
    assert not any(ch in xml for ch in "\x00\x07\x0b\x0c\x1b")


def test_cluster_makes_families_the_unit_of_the_gate(tmp_path, capsys):
    """`--cluster task_family`: twelve passing tasks in six families are six units, not twelve, so
    a threshold twelve independent tasks clear is not cleared; three families are too few."""

    def write(folder, size):
        df = records_from_marks({("m", "p", f"t{i:02d}"): "1111" for i in range(12)})
        df["task_family"] = df["task"].map(lambda task: f"f{int(task[1:]) // size}")
        write_part(
            pa.Table.from_pandas(df, schema=SCHEMA, preserve_index=False), folder, df["run_id"].iloc[0]
        )
        return folder

    six = write(tmp_path / "six", 2)
    tasks = passk_nb.gate(passk_nb.load(six), k=2, min=0.0).bounds["lo"].iloc[0]
    families = passk_nb.gate(passk_nb.load(six), k=2, min=0.0, cluster="task_family").bounds["lo"].iloc[0]
    assert families < tasks - 0.05
    threshold = f"{(tasks + families) / 2:.3f}"
    assert main(["gate", str(six), "--k", "2", "--min", threshold]) == 0
    assert main(["gate", str(six), "--k", "2", "--min", threshold, "--cluster", "task_family"]) == 1
    capsys.readouterr()
    three = write(tmp_path / "three", 4)
    assert main(["gate", str(three), "--k", "2", "--min", "0.1", "--cluster", "task_family"]) == 2
    assert "too few families" in capsys.readouterr().err
