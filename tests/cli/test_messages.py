"""Messages lead somewhere (issue 28 section 5): every flag a message names is one its command has."""

from __future__ import annotations

import ast
import keyword
import re
from pathlib import Path

import pytest

import passk_nb
from passk_nb.cli import common
from passk_nb.cli.main import build_parser, flags_of, main, subcommands

PARSERS = subcommands(build_parser())
FLAGS = {name: flags_of(parser) | {"--help"} for name, parser in PARSERS.items()}
CLI = Path(passk_nb.__file__).parent / "cli"
#: "passk CMD ..." inside a message: the flags that follow belong to CMD
SUGGESTION = re.compile(r"passk ([a-z][a-z-]*)([^`\n;)]*)")


def misnamed(message: str, command: str) -> set[str]:
    """Flags ``message`` names that are not ``command``'s (or, in a suggested ``passk OTHER ...``,
    not OTHER's)."""
    wrong, rest = set(), message
    for match in SUGGESTION.finditer(message):
        other = match.group(1)
        if other in FLAGS:
            wrong |= {f for f in common.flags_named(match.group(2)) if f not in FLAGS[other]}
            rest = rest.replace(match.group(0), " ")
    return wrong | {f for f in common.flags_named(rest) if f not in FLAGS[command]}


def messages(path: Path) -> list[str]:
    """The string literals of a module but docstrings (an f-string with its fields as X) that name a
    flag."""
    tree = ast.parse(path.read_text())
    inside = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    inside |= {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}  # docstrings
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            found.append("".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside:
            found.append(node.value)
    return [m for m in found if common.flags_named(m)]


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_every_message_of_a_command_names_only_flags_it_has(command):
    name = command.replace("-", "_")
    module = CLI / f"{name}_.py" if keyword.iskeyword(name) else CLI / f"{name}.py"  # import_.py
    wrong = {m[:80]: sorted(misnamed(m, command)) for m in messages(module) if misnamed(m, command)}
    assert not wrong


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_library_advice_is_rewritten_for_the_flags_of_the_command(command, monkeypatch):
    monkeypatch.setattr(common, "command_flags", FLAGS[command])
    for module in Path(passk_nb.__file__).parent.rglob("*.py"):
        if module.parent.name == "cli":
            continue
        for message in messages(module):
            for flag in common.flags_named(common.cli_message(message)) - common.flags_named(message):
                # a flag the translation brought in: the command has it, or its advice was dropped
                assert flag in FLAGS[command] or flag not in common._ADVICE_OF_FLAG, (command, message)


def test_run_and_regrade_never_advise_skip_bad_files(tmp_path, capsys):
    # passk run and passk regrade take no --skip-bad-files, yet said "pass --skip-bad-files"
    assert main(["run", "--provider", "scripted", "--trials", "1", "--out", str(tmp_path), "--quiet"]) == 0
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    (run_dir / "part-broken.parquet").write_bytes(b"junk")
    capsys.readouterr()
    for argv, has_flag in (
        (["run", "--provider", "scripted", "--trials", "2", "--out", str(tmp_path), "--quiet"], False),
        (["regrade", str(tmp_path)], False),
        (["report", str(tmp_path)], True),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "part-broken.parquet" in err and "Move the file out of the folder" in err
        assert ("--skip-bad-files" in err) is has_flag, err
        assert ".." not in err


def test_an_unknown_argument_points_to_the_subcommands_help(capsys):
    assert main(["report", "runs", "--nope"]) == 2
    assert "see `passk report --help`" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--repeats", "100000000"], "--repeats must be from 2"),
        (["--seed-repeats", "1000000000"], "--seed-repeats must be from 0"),
        (["--seed-repeats", "-1"], "--seed-repeats: must be ≥ 0"),
        (["--temperature", "-3"], "--temperature must be a number from 0 to 2"),
        (["--temperature", "nan"], "--temperature must be a number from 0 to 2"),
        (["--seed-temperature", "9"], "--seed-temperature must be a number from 0 to 2"),
    ],
)
def test_probe_bounds_its_numbers_before_sending_anything(argv, says, capsys, tmp_path):
    assert main(["probe", "--provider", "scripted", "--out", str(tmp_path), "--no-progress", *argv]) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "_probes").exists()


def test_small_messages_read_right(tmp_path, capsys):
    assert main(["run", "--provider", "scripted", "--trials", "100001", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--trials 100001 is more than" in err and "trials=" not in err
    assert main(["tasks", "--suite", "bank"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "prompts: default, strict, fewshot" in lines[0]
    starts = {len(line) - len(line.lstrip()) + len(line.split()[0]) for line in lines[1:]}
    columns = {line.index(line.split()[1], len(line.split()[0]) + 2) for line in lines[1:]}
    assert len(columns) == 1, lines  # the descriptions start in one column
    assert starts
    assert "(default, strict)" not in PARSERS["run"].format_help()


@pytest.mark.parametrize("command", ["run", "probe"])
def test_a_dead_backend_fails_fast_with_one_line_and_runs_nothing(command, tmp_path, capsys):
    # before: passk probe printed 54 s of retry warnings and progress bars, then its error
    import socket
    import time

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [command, "--provider", "openai", "--model", "m", "--base-url", f"http://127.0.0.1:{port}"]
    argv += ["--out", str(tmp_path), "--no-progress"]
    started = time.monotonic()
    assert main(argv) == 2
    assert time.monotonic() - started < 10  # one connection attempt, no retries
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "passk: error: cannot reach the openai backend" in err
    assert f"127.0.0.1:{port}" in err and "--base-url" in err
    assert not list(tmp_path.iterdir())  # nothing recorded, no run folder


def test_run_from_python_fails_fast_too(tmp_path):
    from passk_nb.harness.preflight import BackendUnreachable

    with pytest.raises(BackendUnreachable, match="nothing was run"):
        passk_nb.run("openai", model="m", base_url="http://127.0.0.1:1", out=tmp_path, progress=False)
