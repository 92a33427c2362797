"""The passk command: tables, records, --help, and one-line errors with exit status 2."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import passk_nb
from passk_nb.cli.main import main
from passk_nb.harness.providers.base import BaseProvider
from passk_nb.stats.summary import summarize
from tests.helpers.fake_servers import ci_only

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.DOTALL).group(1)
    return [line for line in block.splitlines() if line.strip()]


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.split(" | ")]


def table(out: str) -> tuple[str, list[str], list[list[str]]]:
    """(caption, header cells, rows of cells) of the first table ``passk`` printed."""
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("pass@") or " | pass@" in line)
    rows = []
    for line in lines[at + 2 :]:
        if " | " not in line:
            break
        rows.append(cells(line))
    return (lines[at - 1] if at else ""), cells(lines[at]), rows


def test_run_prints_the_table_and_where_records_went(tmp_path, capsys):
    assert (
        main(
            [
                "run",
                "--provider",
                "scripted",
                "--trials",
                "3",
                "--k",
                "2",
                "--out",
                str(tmp_path),
                "--no-progress",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    caption, header, [row] = table(out)
    prompt_hash = passk_nb.data.prompt_hash(passk_nb.get_suite("orders").prompts["default"])
    run_id = passk_nb.load(tmp_path)["run_id"].iloc[0]
    # one row: every field is the same for all rows, so it is said once, above the table
    identity = f"provider/model: scripted/known-good, prompt: default ({prompt_hash}), config: default"
    version = passk_nb.load(tmp_path)["suite_hash"].iloc[0]
    assert len(version) == 12 and caption == f"suite: orders (version {version}), {identity}"
    assert header == [
        "pass@2",
        "pass^2",
        "these tasks",
        "trials",
        "infra excl.",
        "claimed not done",
        "agent errors",
    ]
    assert row == [
        "1.000 [0.478, 1.000]",  # five tasks: the new-tasks interval is honest, hence wide
        "1.000 [0.478, 1.000]",
        "[0.657, 1.000]",  # never [1.000, 1.000] (or n/a) for a group with trials
        "15/15 pass",
        "0",
        "0",
        "0",
    ]
    assert f"records: {tmp_path / run_id}" in out


def test_report_reads_saved_records(tmp_path, capsys):
    def refuses_every_other_time(messages):
        # looks the order up, then fails refusal trials 1 and 3 with a format error, refuses otherwise
        if "Eva Lin" not in messages[1]["content"]:
            return '{"answer": "no"}'
        if len(messages) == 2:
            return '{"tool": "get_order", "args": {"order_id": "O1007"}}'
        odd = refuses_every_other_time.calls % 2
        refuses_every_other_time.calls += 1
        return "prose" if odd else '{"answer": "It has shipped, so it cannot be cancelled."}'

    refuses_every_other_time.calls = 0
    passk_nb.run(
        refuses_every_other_time, trials=4, out=tmp_path, progress=False, concurrency=1, max_format_errors=1
    )
    assert main(["report", str(tmp_path), "--k", "2", "--n-boot", "0"]) == 0
    out = capsys.readouterr().out
    # only the refusal task ever passes: 2/4 -> pass@2 = 1 - C(2,2)/C(4,2) = 5/6, pass^2 = 1/6; mean over
    # 5 tasks. The fixed-task interval is summarize's, printed as it is.
    row = summarize(passk_nb.load(tmp_path), k=2, by=(), n_boot=0).iloc[0]
    expected = [
        f"{5 / 6 / 5:.3f}",
        f"{1 / 6 / 5:.3f}",
        f"[{row['pass^k_fixed_lo']:.3f}, {row['pass^k_fixed_hi']:.3f}]",
        "2/20 pass",
        "0",
        "0",
        "0",
    ]
    assert table(out)[2] == [expected]
    assert "20 trials from" in out


def test_the_interval_level_comes_from_ci(tmp_path, capsys):
    passk_nb.run("scripted", trials=4, out=tmp_path, progress=False)
    df = passk_nb.load(tmp_path)
    df.loc[df["task"] == "refund-delivered", ["passed", "outcome"]] = [False, "wrong_state"]
    df.loc[(df["task"] == "cancel-pending-lookup") & (df["trial"] == 0), ["passed", "outcome"]] = [
        False,
        "wrong_state",
    ]
    path = tmp_path / "edited.parquet"
    df.to_parquet(path)
    assert main(["report", str(path), "--k", "2", "--ci", "0.8", "--n-boot", "0"]) == 0
    out = capsys.readouterr().out
    row = passk_nb.summarize(df, k=2, ci=0.8, n_boot=0).iloc[0]
    assert table(out)[2][0][2] == f"[{row['pass^k_fixed_lo']:.3f}, {row['pass^k_fixed_hi']:.3f}]"
    assert "80% interval of pass^2 for these same tasks" in out and "95%" not in out


class DownForEva(BaseProvider):
    """A backend (not user code): its server fails Eva Lin's requests."""

    name = "flaky-backend"

    def chat(self, messages):
        if "Eva Lin" in messages[1]["content"]:
            raise ConnectionError("down")
        return '{"answer": "no"}'


def test_report_shows_infra_errors_excluded(tmp_path, capsys):
    passk_nb.run(DownForEva("flaky"), trials=2, out=tmp_path, progress=False)
    assert main(["report", str(tmp_path), "--k", "1", "--n-boot", "0"]) == 0
    [row] = table(capsys.readouterr().out)[2]
    # no pass in 8 usable trials is not certainty: never [0.000, 0.000]
    assert row == [
        "0.000",
        "0.000",
        "[0.000, 0.345]",
        "0/8 pass; k=1 covers 4/5 tasks",
        "2 (pass^1 0.000 if failures)",
        "0",
        "0",
    ]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "--trials", "2", "--k", "3"], "--k 3 is larger than --trials 2"),
        (["run", "--provider", "nope"], "unknown provider 'nope'"),
        (["run", "--tasks", "refund-delivered,nope"], "unknown task 'nope'"),
        (["run", "--prompt", "missing/prompt.txt"], "prompt file 'missing/prompt.txt' does not exist"),
        (["run", "--prompt", "strcit"], "unknown prompt name 'strcit'"),
        (["report", "no/such/dir"], "no records at 'no/such/dir'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    assert main([*argv, *(["--out", str(tmp_path)] if argv[0] == "run" else [])]) == 2
    err = capsys.readouterr().err
    assert err.startswith("passk: error: ") and message in err
    assert "Traceback" not in err


def test_report_k_above_trials(tmp_path, capsys):
    passk_nb.run("scripted", trials=2, out=tmp_path, progress=False)
    assert main(["report", str(tmp_path), "--k", "3"]) == 2
    assert "--k 3 is larger than the number of trials per task" in capsys.readouterr().err


def test_prompt_from_file_is_labelled_by_its_stem(tmp_path, capsys):
    prompt = tmp_path / "terse.txt"
    prompt.write_text(passk_nb.get_suite("orders").prompts["default"] + "\nBe terse.")
    assert (
        main(
            [
                "run",
                "--prompt",
                str(prompt),
                "--trials",
                "1",
                "--k",
                "1",
                "--out",
                str(tmp_path / "r"),
                "--no-progress",
                "--n-boot",
                "0",
            ]
        )
        == 0
    )
    assert "terse (" in capsys.readouterr().out
    assert set(passk_nb.load(tmp_path / "r")["prompt_name"]) == {"terse"}


@pytest.mark.parametrize("command", [[], ["run"], ["report"], ["tasks"]])
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    assert "usage: passk" in capsys.readouterr().out


def test_python_dash_m_is_the_same_command(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "passk_nb", "tasks"], capture_output=True, text=True, check=True
    )
    assert "cancel-shipped-refusal" in result.stdout


def test_readme_starts_with_exactly_the_two_commands_and_ci_runs_the_second():
    commands = readme_commands()
    assert len(commands) == 2
    assert "passk run --provider scripted" in commands[0]
    assert commands[1].endswith("pytest")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert commands[1] in ci


FRESH_VENV_WHY = (
    "re-installs the package in a fresh virtualenv from a package index (minutes, needs the network)"
)


@pytest.mark.slow
@ci_only(FRESH_VENV_WHY)
def test_readme_first_command_in_a_fresh_virtualenv(tmp_path):
    """The README's first command, verbatim, in a copy of the repo with a brand-new venv."""
    work = tmp_path / "checkout"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(work)], check=True)
    for path in ["pyproject.toml", "README.md", "passk_nb"]:  # the working tree, not only what is committed
        subprocess.run(["cp", "-r", str(ROOT / path), str(work)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if ".venv" not in p and "venv/" not in p
    )
    result = subprocess.run(
        ["bash", "-c", readme_commands()[0]], cwd=work, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "scripted/known-good" in result.stdout and "15/15 pass" in result.stdout
    assert (work / ".venv" / "bin" / "passk").exists()
    assert len(passk_nb.load(work / "runs")) == 15


def test_the_fresh_virtualenv_test_is_skipped_offline_with_its_reason(tmp_path):
    """A user's plain `pytest` (no CI, no PASSK_REQUIRE_ALL) skips it and says why; CI runs it."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PASSK_REQUIRE_ALL")}
    test = "tests/cli/test_cli.py::test_readme_first_command_in_a_fresh_virtualenv"
    argv = [
        sys.executable,
        "-m",
        "pytest",
        test,
        "-rs",
        "-p",
        "no:nbmake",
        "-o",
        "addopts=",
        "-p",
        "no:cacheprovider",
    ]
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert "1 skipped" in result.stdout, result.stdout[-2000:]
    assert FRESH_VENV_WHY in result.stdout.replace("\n", " ")


def test_readme_output_is_what_the_first_command_prints(tmp_path, monkeypatch, capsys):
    text = (ROOT / "README.md").read_text()
    shown = re.search(r"The first command prints.*?```text\n(.*?)```", text, re.DOTALL).group(1)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--provider", "scripted", "--trials", "3", "--k", "2", "--no-progress"]) == 0
    assert capsys.readouterr().out == shown


def test_a_run_whose_every_trial_is_an_infra_error_says_what_to_check(tmp_path, capsys):
    # a backend that accepts connections and drops every request (one that is not there at all is
    # refused before anything is sent: tests/cli/test_messages.py)
    from tests.helpers.fake_servers import FakeServer, Fault

    with FakeServer("openai", rule=lambda body: Fault.drop()) as server:
        argv = ["run", "--provider", "openai", "--model", "m", "--base-url", server.url]
        argv += ["--max-attempts", "1"]
        assert main([*argv, "--trials", "1", "--out", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("passk: error: all 5 trials were infrastructure errors, which are excluded")
    assert "Check that the backend runs" in err and "k ≤ 0" not in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("argv", [["tasks"], ["--version"], ["run", "--trials", "0"]])
def test_quick_commands_do_not_load_the_statistics(argv):
    """`passk tasks`, `--version` and argument errors stay fast: no scipy, no matplotlib."""
    code = (
        "import sys\nfrom passk_nb.cli.main import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('scipy', 'matplotlib', 'passk_nb.stats.summary') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines()[-1] == "[]"


def test_a_report_loads_no_runner_and_no_http_client(tmp_path):
    """`passk report` builds only its own parser: the run's harness and aiohttp (0.1-0.2 s of a
    report's start-up, issue 47) are not imported."""
    import passk_nb

    passk_nb.run("scripted", trials=2, out=tmp_path, progress=False)
    code = (
        "import sys\nfrom passk_nb.cli.main import main\n"
        f"assert main(['report', {str(tmp_path)!r}]) == 0\n"
        "print(sorted(m for m in sys.modules if m.startswith(('aiohttp', 'passk_nb.harness'))))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines()[-1] == "[]"


HERE_SUITE = """
from tests.harness.test_suites import _ticket_suite

SUITE = _ticket_suite()
"""


@pytest.mark.parametrize(
    "spelling", ["desk_in_cwd:SUITE", "./desk_in_file.py:SUITE", "sub/desk_in_sub.py:SUITE"]
)
def test_every_suite_command_loads_a_suite_from_where_it_lives(tmp_path, monkeypatch, capsys, spelling):
    name = spelling.split(":")[0].rsplit("/", 1)[-1].removesuffix(".py")
    folder = tmp_path / "sub" if spelling.startswith("sub/") else tmp_path
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(HERE_SUITE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, name, raising=False)
    assert main(["check-suite", spelling]) == 0, capsys.readouterr()
    assert main(["tasks", "--suite", spelling]) == 0
    assert "close-t1" in capsys.readouterr().out
    assert main(["run", "--suite", spelling, "--trials", "1", "--k", "1", "--out", str(tmp_path / "r")]) == 0
    assert "records:" in capsys.readouterr().out
    assert passk_nb.load(tmp_path / "r")["passed"].all()
    monkeypatch.delitem(sys.modules, name, raising=False)


def test_a_suite_file_named_like_a_loaded_module_never_shadows_it(tmp_path, monkeypatch):
    import json

    (tmp_path / "json.py").write_text(HERE_SUITE)
    monkeypatch.chdir(tmp_path)
    assert passk_nb.get_suite(str(tmp_path / "json.py") + ":SUITE").name == "tickets"
    assert sys.modules["json"] is json
