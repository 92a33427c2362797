"""`passk compare`: two prompts compared from the shell, printing exactly what compare and flips return."""

import io
import json

import pandas as pd
import pytest

from passk_nb.cli.main import main
from passk_nb.data.records import frame_from_records
from passk_nb.stats.paired import compare, flips

#: Per task, the marks of prompt "default" and of prompt "strict" (1 pass, 0 wrong_state).
MARKS = {
    "t1": ("111111", "000000"),  # a complete flip
    "t2": ("111111", "111111"),
    "t3": ("110000", "111111"),
    "t4": ("101010", "101010"),
    "t5": ("111100", "111100"),
    "t6": ("000000", "000000"),
}


@pytest.fixture(scope="module")
def path(tmp_path_factory) -> str:
    rows = [
        {
            "run_id": prompt,
            "suite": "orders",
            "provider": "test",
            "model": "m",
            "prompt_name": prompt,
            "prompt_hash": f"{prompt}-hash"[:12],
            "task": task,
            "trial": i,
            "passed": mark == "1",
            "outcome": "pass" if mark == "1" else "wrong_state",
        }
        for task, arms in MARKS.items()
        for prompt, marks in zip(("default", "strict"), arms, strict=True)
        for i, mark in enumerate(marks)
    ]
    file = tmp_path_factory.mktemp("compare") / "r.parquet"
    frame_from_records(rows).to_parquet(file)
    return str(file)


ARMS = ["--on", "prompt_name", "--a", "default", "--b", "strict"]


def passk(capsys, *argv) -> tuple[str, str]:
    assert main([str(a) for a in argv]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_json_holds_exactly_what_compare_and_flips_return(path, capsys):
    out, _ = passk(capsys, "compare", path, *ARMS, "--k", 2, "--n-boot", 500, "--format", "json")
    printed = json.loads(out)
    assert {key: printed[key] for key in ("on", "a", "b", "k")} == {
        "on": "prompt_name",
        "a": "default",
        "b": "strict",
        "k": 2,
    }
    df = pd.read_parquet(path)
    expected = {
        "compare": compare(df, on="prompt_name", a="default", b="strict", k=2, n_boot=500),
        "flips": flips(df, on="prompt_name", a="default", b="strict"),
    }
    for name, frame in expected.items():
        got = pd.DataFrame(printed[name]).astype(frame.dtypes.to_dict())
        pd.testing.assert_frame_equal(got, frame, check_exact=False, rtol=1e-12, check_frame_type=False)
    assert printed["flips"][0]["task"] == "t1" and printed["flips"][0]["flip"] is True


def test_table_markdown_and_csv_print_both_tables(path, capsys):
    out, _ = passk(capsys, "compare", path, *ARMS)
    assert out.startswith(
        "compare: b − a over the paired tasks (prompt_name: a = default, b = strict; k = 2)"
    )
    assert "\nflips: per task, prompt_name a = default against b = strict" in out
    t1 = next(line for line in out.splitlines() if line.startswith("t1 "))
    assert [c.strip() for c in t1.split(" | ")][1:4] == ["6/6", "0/6", "-1.00"] and t1.endswith("FLIP")
    markdown, _ = passk(capsys, "compare", path, *ARMS, "--format", "markdown")
    assert sum(line.startswith("|---|") for line in markdown.splitlines()) == 2
    csv, _ = passk(capsys, "compare", path, *ARMS, "--format", "csv", "--n-boot", 0)
    first, second = csv.strip().split("\n\n")
    assert pd.read_csv(io.StringIO(first))["metric"].tolist() == ["pass@k", "pass^k"]
    assert pd.read_csv(io.StringIO(second))["task"].tolist() == list(MARKS)
    only, _ = passk(capsys, "compare", path, *ARMS, "--format", "csv", "--only", "flips")
    assert pd.read_csv(io.StringIO(only))["flip"].tolist() == [True, False, False, False, False, False]


def test_bad_arms_and_columns_are_one_line_errors(path, capsys):
    assert main(["compare", path, "--on", "prompt_name", "--a", "default", "--b", "strcit"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("passk: error: prompt_name=['strcit'] not in the frame") and "'strict'" in err
    assert len(err.splitlines()) == 1
    assert main(["compare", path, "--on", "colour", "--a", "x", "--b", "y"]) == 2
    assert "--on colour: these records have no such column" in capsys.readouterr().err


def test_compare_is_listed_in_passk_help(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "compare two prompts" in capsys.readouterr().out
