"""A declined interval for new tasks (fewer than five tasks) is said once, short, in CLI words,
never under --quiet, and not at all where the table's notes already say it."""

import pytest

from passk_nb.cli.main import main
from passk_nb.data.records import frame_from_records


@pytest.fixture(scope="module")
def path(tmp_path_factory) -> str:
    """Two prompts x three tasks x four trials: every row has fewer than five tasks."""
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
            "passed": i < 2,
            "outcome": "pass" if i < 2 else "wrong_state",
        }
        for prompt in ("default", "strict")
        for task in ("t1", "t2", "t3")
        for i in range(4)
    ]
    file = tmp_path_factory.mktemp("few") / "r.parquet"
    frame_from_records(rows).to_parquet(file)
    return str(file)


def stderr(capsys, *argv) -> list[str]:
    assert main([str(a) for a in argv]) == 0
    return capsys.readouterr().err.splitlines()


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "{path}", "--format", "csv"],
        ["report", "{path}", "--format", "json"],
        ["compare", "{path}", "--on", "prompt_name", "--a", "default", "--b", "strict", "--only", "compare"],
    ],
)
def test_said_once_short_in_cli_words_and_silent_under_quiet(path, capsys, argv):
    argv = [a.format(path=path) for a in argv]
    [line] = stderr(capsys, *argv)
    assert line.startswith("passk: warning: no interval for new tasks") and "fewer than 5 tasks" in line
    assert len(line) < 200, line
    assert "min_tasks" not in line and "provider" not in line and "prompt_hash" not in line
    assert stderr(capsys, *argv, "--quiet") == []


def test_not_said_where_the_table_notes_say_it(path, capsys):
    assert main(["report", path]) == 0
    captured = capsys.readouterr()
    assert "declined: too few tasks" in captured.out and captured.err == ""


@pytest.mark.parametrize("quiet", [[], ["--quiet"]])
def test_a_run_of_two_tasks_prints_no_warning(tmp_path, capsys, quiet):
    argv = ["run", "--provider", "scripted", "--tasks", "refund-delivered,cancel-shipped-refusal"]
    assert stderr(capsys, *argv, "--trials", 2, "--out", tmp_path, "--no-progress", *quiet) == []
