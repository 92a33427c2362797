"""Nothing passk prints is terminal control (issue 29 item 13): records' texts are escaped."""

from __future__ import annotations

import io
import sys

import pytest

import passk_nb
from passk_nb.cli.main import main
from passk_nb.data.store import write_part

TITLE, CLEAR, CSI = "\x1b]0;pwned\x07", "\x1b[2J", "\x9b31m"


@pytest.fixture(scope="module")
def hostile_folder(tmp_path_factory):
    source, folder = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("hostile")
    df = passk_nb.run("scripted", trials=2, out=source, progress=False)
    df["model"] = f"known{TITLE}good"
    df["task"] = df["task"] + CLEAR
    df["prompt_name"] = f"default{CSI}"
    df.loc[df["trial"] == 1, ["passed", "outcome", "error"]] = (False, "wrong_state", f"bad{CLEAR}state\r")
    for run_id, rows in df.groupby("run_id"):
        write_part(rows.astype(object).where(rows.notna(), None).to_dict("records"), folder, str(run_id))
    return folder


@pytest.mark.parametrize(
    "argv",
    [
        ["runs", "{folder}"],
        ["report", "{folder}", "--k", "1"],
        ["report", "{folder}", "--k", "1", "--by", "model,task"],
        ["report", "{folder}", "--k", "1", "--format", "markdown"],
        ["report", "{folder}", "--k", "1", "--format", "csv"],
        ["gate", "{folder}", "--k", "1", "--min", "0.99"],
        ["report", "{folder}", "--k", "1", "--where", f"model=nope{TITLE}"],
    ],
)
def test_no_command_prints_a_control_character_from_the_records(hostile_folder, capsys, argv):
    main([a.format(folder=hostile_folder) for a in argv])
    out, err = capsys.readouterr()
    for stream in (out, err):
        assert not any(ch in stream for ch in "\x1b\x07\x9b\r"), repr(stream[:300])
    assert "\\x1b" in out + err  # shown, escaped, not dropped


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture(scope="module")
def carriage_return_folder(tmp_path_factory):
    source, folder = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("cr")
    df = passk_nb.run("scripted", trials=2, out=source, progress=False)
    df["model"] = "gpt-4o\rclaude"
    df["task"] = df["task"] + "\rrefund-ok"
    for run_id, rows in df.groupby("run_id"):
        write_part(rows.astype(object).where(rows.notna(), None).to_dict("records"), folder, str(run_id))
    return folder


@pytest.mark.parametrize(
    "argv",
    [
        ["runs", "{folder}"],
        ["report", "{folder}", "--k", "1", "--by", "model,task"],
        ["gate", "{folder}", "--k", "1", "--min", "0.99"],
    ],
)
def test_on_a_terminal_a_carriage_return_from_the_records_is_escaped_too(
    carriage_return_folder, monkeypatch, argv
):
    # on main a terminal got the records' \r raw (kept for the progress bar): a model named
    # "gpt-4o\rclaude" showed as "claude", hiding what came before it on the line
    out, err = _Terminal(), _Terminal()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    main([a.format(folder=carriage_return_folder) for a in argv])
    assert "\\x0d" in out.getvalue() + err.getvalue()  # shown, escaped, not dropped
    for stream in (out.getvalue(), err.getvalue()):
        assert not any(ch in stream for ch in "\x1b\x07\x9b\r"), repr(stream[:300])


def test_the_progress_bar_still_redraws_its_line_on_a_terminal(tmp_path, monkeypatch):
    err = _Terminal()
    monkeypatch.setattr(sys, "stdout", _Terminal())
    monkeypatch.setattr(sys, "stderr", err)
    assert main(["run", "--trials", "2", "--out", str(tmp_path), "--n-boot", "0"]) == 0
    bar = err.getvalue()
    assert "\r" in bar and "trial" in bar and "\\r" not in bar
