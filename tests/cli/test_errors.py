"""Acceptance: every bad input, through the real entry points, is one stderr line, the prefix, exit 2.

Each case runs as a subprocess of ``python -m passk_nb`` and of the installed ``passk`` script,
so argparse's own errors, import errors and library messages are all seen as a user sees them.
"""

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

import passk_nb
from passk_nb.data.records import frame_from_records

ROOT = Path(__file__).resolve().parents[2]
PASSK_SCRIPT = Path(sys.executable).parent / "passk"
ENTRY_POINTS = {"python -m passk_nb": [sys.executable, "-m", "passk_nb"], "passk": [str(PASSK_SCRIPT)]}
#: Python keyword arguments that must never be what a CLI user is told to pass.
PYTHON_ARGUMENT = re.compile(
    r"\b(out|strict|executable|api_key_env|json_mode|json_schema|prompt_name|base_url|trial_timeout|"
    r"max_tokens|temperature|k)=|load\(|\bcall\b"
)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Data folders the report cases read: a good run, a corrupt file, only infra errors."""
    root = tmp_path_factory.mktemp("cli-errors")
    good = root / "good"
    passk_nb.run("scripted", trials=2, out=good, progress=False)
    corrupt = root / "corrupt"
    (corrupt / "r").mkdir(parents=True)
    (corrupt / "r" / "part-0.parquet").write_bytes(b"not parquet at all")
    infra = root / "infra"
    infra.mkdir()
    rows = [
        {"run_id": "r", "suite": "orders", "task": t, "trial": i, "model": "m", "passed": False,
         "outcome": "infra_error", "error": "connection refused"}
        for t in ("a", "b") for i in range(2)
    ]  # fmt: skip
    frame_from_records(rows).to_parquet(infra / "part-0.parquet")
    a_file = root / "a-file"
    a_file.write_text("not a folder")
    # `import llama_cpp` fails here as it does without the `local` extra, even where it is installed
    no_llama = root / "no-llama"
    (no_llama / "llama_cpp").mkdir(parents=True)
    (no_llama / "llama_cpp" / "__init__.py").write_text("raise ImportError('llama_cpp is absent')\n")
    return {"good": good, "corrupt": corrupt, "infra": infra, "a_file": a_file, "no_llama": no_llama}


#: (argv, a phrase the message must contain). {good}, {corrupt}, ... are the fixture's folders.
BAD_INPUT = [
    (["run", "--trials", "0"], "argument --trials: must be ≥ 1, got 0"),
    (["run", "--k", "0"], "argument --k: must be ≥ 1, got 0"),
    (["run", "--concurrency", "0"], "argument --concurrency: must be ≥ 1"),
    (["run", "--max-turns", "0"], "argument --max-turns: must be ≥ 1"),
    (["run", "--trials", "abc"], "argument --trials: expected a whole number, got 'abc'"),
    (["run", "--temperature", "-0.5"], "argument --temperature: must be ≥ 0"),
    (["run", "--trial-timeout", "0"], "argument --trial-timeout: must be > 0"),
    (["run", "--trials", "2", "--k", "3"], "--k 3 is larger than --trials 2"),
    (["run", "--provider", "nope"], "unknown provider 'nope'"),
    (["run", "--tasks", "refund-delivered,nope"], "unknown task 'nope'"),
    (["run", "--prompt", "missing/prompt.txt"], "prompt file 'missing/prompt.txt' does not exist"),
    (["run", "--prompt", "strcit"], "or give a file holding the system prompt"),
    (["run", "--provider", "scripted", "--json-mode"], "the scripted provider replays fixed scripts"),
    (["run", "--provider", "scripted", "--json-schema"], "the scripted provider replays fixed scripts"),
    (["run", "--provider", "ollama", "--model", "m", "--json-schema"], "pass --json-mode too"),
    (["run", "--provider", "llama-cpp", "--json-mode", "--json-schema"], "does not take --json-schema"),
    (["run", "--provider", "llama-cpp"], "passk-nb[local]"),
    (["run", "--provider", "claude-code", "--claude-path", "/no/such/claude"], "--claude-path PATH"),
    (
        ["run", "--provider", "anthropic", "--model", "m", "--api-key-env", "PASSK_TEST_NO_SUCH_KEY"],
        "--api-key-env",
    ),
    (["run", "--provider", "openai", "--model", "m", "--base-url", "127.0.0.1:8080"], "write it as http://"),
    (["run", "--out", "{a_file}/runs"], "pass another --out folder"),
    (["run", "--provider", "callable"], "passk_nb.run(provider=fn)"),
    (["report", "no/such/dir"], "no records at 'no/such/dir'"),
    (["report", "{corrupt}"], "pass --skip-bad-files to skip it"),
    (["report", "{infra}"], "all 4 trials were infrastructure errors"),
    (["report", "{good}", "--k", "3"], "--k 3 is larger than the number of trials per task"),
    (["report", "{good}", "--where", "modle=x"], "unknown column 'modle'"),
    (["report", "{good}", "--where", "model"], "write COLUMN=VALUE"),
    (["report", "{good}", "--where", "model=gpt-9"], "values present: known-good"),
    (["report", "{good}", "--by", "nope"], "--by 'nope'"),
    (["report", "{good}", "--format", "xml"], "argument --format: invalid choice: 'xml'"),
    (["report", "{good}", "--ci", "95"], "argument --ci: must be between 0 and 1"),
    (["report", "{good}", "--format", "csv", "--out", "{a_file}/x.csv"], "choose another --out"),
    (["runs", "no/such/dir"], "no records at 'no/such/dir'"),
    (["tasks", "--prompt", "nope"], "unknown prompt 'nope'"),
    (["tasks", "--suite", "nope"], "unknown suite 'nope'"),
    (["cases", "examples/cases.json", "--agent", "no_such_module:fn"], "no module named 'no_such_module'"),
    (["cases", "examples/cases.json", "--agent", "x:y", "--trials", "1", "--k", "2"], "--k 2 is larger"),
    ([], "the following arguments are required: COMMAND"),
    (["bogus"], "argument COMMAND: invalid choice: 'bogus'"),
    (["run", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
]


def run_passk(entry: list[str], argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", **kwargs.pop("env", {})}
    return subprocess.run(
        [*entry, *argv], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env, **kwargs
    )


@pytest.mark.slow
@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_every_bad_input_is_one_line_with_the_prefix_and_exit_2(entry, folders, tmp_path):
    """Every case of the issue's list, through both entry points: stderr is one line, exit 2."""
    assert PASSK_SCRIPT.exists(), "the passk script is installed with the package"
    env = {"PYTHONPATH": os.pathsep.join([str(folders["no_llama"]), str(ROOT)])}
    cases = []
    for argv, phrase in BAD_INPUT:
        argv = [a.format(**folders) for a in argv]
        if argv[:1] == ["run"] and "--out" not in argv:
            argv = [*argv, "--out", str(tmp_path / "runs")]
        cases.append((argv, phrase))
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda case: run_passk(ENTRY_POINTS[entry], case[0], env=env), cases))
    failures = []
    for (argv, phrase), result in zip(cases, results, strict=True):
        lines = result.stderr.splitlines()
        ok = (
            result.returncode == 2
            and len(lines) == 1
            and lines[0].startswith("passk: error: ")
            and phrase in lines[0]
            and not PYTHON_ARGUMENT.search(lines[0].replace("passk_nb.run(provider=fn)", ""))
        )
        if not ok:
            failures.append(f"{argv}: exit {result.returncode}, stderr {result.stderr!r}")
    assert not failures, "\n".join(failures)
    assert not (tmp_path / "runs").exists(), "no bad input may start a run"


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_version(entry):
    result = run_passk(ENTRY_POINTS[entry], ["--version"])
    assert result.returncode == 0
    assert result.stdout == f"passk {passk_nb.__version__}\n"


@pytest.mark.parametrize("entry", [*ENTRY_POINTS.values(), [sys.executable, "-m", "passk_nb.cli.main"]])
def test_version_imports_nothing_heavy(entry):
    """`passk --version` answers before any command, pandas, numpy or a provider SDK loads."""
    python, *rest = entry
    if python != sys.executable:  # the installed script, run by the same interpreter
        python, rest = sys.executable, [python]
    result = run_passk([python, "-X", "importtime", *rest], ["--version"])
    assert result.returncode == 0 and result.stdout == f"passk {passk_nb.__version__}\n"
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if "|" in line}
    assert "passk_nb" in imported  # the import log was read
    assert not imported & {"pandas", "numpy", "anthropic", "scipy", "pyarrow"}


def test_warnings_are_passk_lines_not_python_warnings(folders, tmp_path):
    mixed = tmp_path / "mixed"
    (mixed / "r").mkdir(parents=True)
    (mixed / "r" / "part-0.parquet").write_bytes(b"garbage")
    passk_nb.run("scripted", trials=2, out=mixed, progress=False)
    result = run_passk(ENTRY_POINTS["passk"], ["report", str(mixed), "--skip-bad-files", "--n-boot", "0"])
    assert result.returncode == 0, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("passk: warning: cannot read record file ") and line.endswith("skipped")
    assert "Warning" not in result.stderr and ".py:" not in result.stderr


def test_quiet_prints_the_table_only_and_nothing_on_stderr(tmp_path):
    result = run_passk(ENTRY_POINTS["passk"], ["run", "--trials", "2", "--out", str(tmp_path), "--quiet"])
    assert result.returncode == 0 and result.stderr == ""
    caption, header, rule, row = result.stdout.splitlines()
    from passk_nb.harness.fingerprint import suite_fingerprint

    version = suite_fingerprint(passk_nb.get_suite("orders"))
    assert caption.startswith(f"suite: orders (version {version}), provider/model: scripted/known-good")
    assert header.startswith("pass@2 ") and set(rule) <= {"-", "+"} and "10/10 pass" in row


def test_piped_output_has_no_progress_bar_and_no_escape_codes(tmp_path):
    """Not a terminal (and NO_COLOR set): no progress bar, no ANSI escapes, status lines only."""
    argv = ["run", "--trials", "2", "--out", str(tmp_path)]
    first = run_passk(ENTRY_POINTS["passk"], argv)
    again = run_passk(ENTRY_POINTS["passk"], [*argv[:2], "3", *argv[3:]])
    for result in (first, again):
        assert result.returncode == 0
        assert "\x1b[" not in result.stdout + result.stderr and "\r" not in result.stderr
    assert first.stderr == ""
    run_id = passk_nb.load(tmp_path)["run_id"].iloc[0]
    assert again.stderr == f"passk: resuming run {run_id}: 10 of 15 trials already recorded, running 5\n"


def test_summarize_values_are_unchanged_by_the_report_frame(folders):
    """The report's numbers are summarize's: the extra columns only add counts."""
    from passk_nb.stats.report import report_frame

    df = passk_nb.load(folders["good"])
    report = report_frame(df, k=2, n_boot=200)
    expected = passk_nb.summarize(df, k=2, n_boot=200)
    pd.testing.assert_frame_equal(report[expected.columns], expected)
