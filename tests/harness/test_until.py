"""Runs that stop when their question is answered (``run(until=)``, ``passk run --until``): the
rounds, the record columns that say why each trial ran, the budget, resuming, and bad input."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import warnings

import pandas as pd
import pytest

import passk_nb
from passk_nb.cli.main import main
from passk_nb.harness import StoppingRule
from passk_nb.harness.runner import ROUNDS_FILE, plan_round, planned_rounds


class Rounds(StoppingRule):
    """A stopping rule of one's own: asks for the given rounds, then stops; keeps what it was shown
    (``check`` and ``progress`` inherited)."""

    def __init__(self, *rounds: list[tuple[str, int]]):
        self.rounds, self.seen = list(rounds), []

    def next_round(self, records: pd.DataFrame) -> pd.DataFrame | None:
        self.seen.append(len(records))
        if not self.rounds:
            return None
        ask = self.rounds.pop(0)
        return pd.DataFrame({"task": [t for t, _ in ask], "trials": [m for _, m in ask], "reason": "asked"})


def test_rounds_continue_each_tasks_trials_and_say_why(tmp_path):
    tasks = passk_nb.get_suite("orders").task_ids[:3]
    until = Rounds([(tasks[0], 3)], [(tasks[1], 1), (tasks[0], 1)])
    df = passk_nb.run("scripted", tasks=tasks, trials=2, out=tmp_path, progress=False, until=until)
    assert until.seen == [6, 9, 11]  # asked after every completed round, with the records so far
    trials = df.groupby("task")["trial"].apply(list).to_dict()
    assert trials == {tasks[0]: [0, 1, 2, 3, 4, 5], tasks[1]: [0, 1, 2], tasks[2]: [0, 1]}
    first = df[df["trial"] < 2]
    assert (first["round"] == 0).all() and (first["allocation"] == "first round").all()
    later = df[df["trial"] >= 2].sort_values(["round", "task", "trial"])
    assert later["round"].tolist() == [1, 1, 1, 2, 2] and (later["allocation"] == "asked").all()


def test_max_trials_cuts_the_last_round_and_a_rerun_resumes(tmp_path):
    tasks = passk_nb.get_suite("orders").task_ids[:2]
    until = Rounds([(tasks[0], 5)], [(tasks[1], 5)])
    df = passk_nb.run(
        "scripted", tasks=tasks, trials=1, out=tmp_path, progress=False, until=until, max_trials=5
    )
    assert len(df) == 5 and df.groupby("task").size().to_dict() == {tasks[0]: 4, tasks[1]: 1}
    again = passk_nb.run(
        "scripted",
        tasks=tasks,
        trials=1,
        out=tmp_path,
        progress=False,
        until=Rounds([(tasks[1], 2)]),
        max_trials=8,
    )
    assert len(again) == 7 and again["round"].max() == 2  # the stored rounds continue


def test_max_trials_stops_a_run_whose_question_is_out_of_reach(tmp_path):
    """The budget is the runner's alone: Until asks on (± 0.01 is out of reach of 50 trials), the
    run cuts its last round to the budget and stops there."""
    until = passk_nb.Until("precision=0.01")
    df = passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, until=until, max_trials=50)
    assert len(df) == 50 and df["round"].max() >= 2
    assert until.next_round(df) is not None  # the question still asks for more: the budget stopped it
    assert "open" in until.progress(df) and "after 50 trials" in until.progress(df)


def test_a_gate_run_stops_once_the_anytime_interval_clears_the_threshold(tmp_path):
    until = passk_nb.Until("gate=0.6 ci=0.9")
    df = passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, until=until, max_trials=200)
    verdict = passk_nb.decide(df, until.question).iloc[0]
    assert verdict["decided"] and verdict["verdict"].startswith("passes") and len(df) < 200
    earlier = df[df["round"] < df["round"].max()]
    assert not passk_nb.decide(earlier, until.question)["decided"].iloc[
        0
    ]  # it stopped at the first round that did


def test_summarize_says_when_records_come_from_an_adaptive_run(tmp_path):
    until = passk_nb.Until("gate=0.6 ci=0.9")
    df = passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, until=until, max_trials=200)
    with pytest.warns(UserWarning, match="adaptive run .* records\\[records\\['round'\\] == 0\\]"):
        passk_nb.summarize(df, k=1, n_boot=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        passk_nb.summarize(df[df["round"] == 0], k=1, n_boot=0)  # the first round: a fixed design


def test_until_needs_next_round_and_max_trials_needs_until(tmp_path):
    with pytest.raises(TypeError, match="until must have a next_round"):
        passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, until="gate=0.8")
    with pytest.raises(ValueError, match="max_trials caps a run .* give until= too"):
        passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, max_trials=10)


def scripted_run(out) -> list[str]:
    """``passk run`` of the scripted agent, one trial per task, into ``out``."""
    return ["run", "--provider", "scripted", "--trials", "1", "--k", "1", "--out", str(out), "--no-progress"]


def test_passk_run_until_prints_the_answer(tmp_path, capsys):
    argv = scripted_run(tmp_path)
    assert main([*argv, "--until", "gate=0.6 ci=0.9", "--max-trials", "100"]) == 0
    assert "pass^1 ≥ 0.6, 90% at every look: passes: pass^1 ≥" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--until", "compare=prompt_name:a,b"], "needs both arms run in rounds together"),
        (["--until", "gate=2"], "--until: a gate needs a threshold strictly between 0 and 1"),
        (["--until", "gate=0.8 k=3"], "the first round needs --trials ≥ 3"),
        (["--max-trials", "9"], "--max-trials caps a run .* give --until too"),
    ],
)
def test_passk_run_until_refuses_what_it_cannot_do(tmp_path, capsys, flags, message):
    argv = scripted_run(tmp_path)
    assert main([*argv, *flags]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_the_progress_bar_shows_where_the_question_stands_after_each_round(tmp_path, capsys):
    until = passk_nb.Until("gate=0.6 ci=0.9")
    df = passk_nb.run("scripted", trials=1, out=tmp_path, progress=True, until=until, max_trials=200)
    err = capsys.readouterr().err
    last = df["round"].max()
    assert last >= 2 and f"round {last}: " in err
    # the interval and the trials spent, as the question stood before each later round
    assert re.search(r"round 2: open: [\d.]+ – [\d.]+ contains 0.6 after 10 trials", err)


def test_decide_by_round_and_trials_by_round_follow_the_run(tmp_path):
    until = passk_nb.Until("gate=0.6 ci=0.9")
    df = passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, until=until, max_trials=200)
    path = passk_nb.stats.decide_by_round(df, until.question)
    assert path["round"].tolist() == list(range(int(df["round"].max()) + 1))
    assert path["decided"].tolist() == [False] * (len(path) - 1) + [True]  # it stopped when decided
    assert path["trials"].is_monotonic_increasing and path["trials"].iloc[-1] == len(df)
    assert (path["hi"] - path["lo"]).is_monotonic_decreasing or path["lo"].iloc[-1] > path["lo"].iloc[0]
    spent = passk_nb.stats.trials_by_round(df)
    assert spent["trials"].sum() == len(df)
    assert spent.groupby("round")["trials"].sum().cumsum().tolist() == path["trials"].tolist()
    final = passk_nb.decide(df, until.question).iloc[0]
    assert path.iloc[-1][["lo", "hi"]].tolist() == final[["lo", "hi"]].tolist()
    # the folder (read for its counts and rounds only) decides as the frame does
    assert passk_nb.decide(tmp_path, until.question).equals(passk_nb.decide(df, until.question))
    assert passk_nb.stats.decide_by_round(tmp_path, until.question).equals(path)
    assert passk_nb.stats.trials_by_round(tmp_path).equals(spent)


def test_a_by_round_view_needs_records_of_an_until_run(tmp_path):
    df = passk_nb.run("scripted", trials=1, out=tmp_path, progress=False)
    with pytest.raises(ValueError, match="round column"):
        passk_nb.stats.decide_by_round(df.drop(columns=["round"], errors="ignore"), "gate=0.6")
    with pytest.raises(ValueError, match="did not use until="):
        passk_nb.stats.trials_by_round(df.assign(round=None))


def test_a_run_with_final_ends_on_its_last_look_with_every_task_at_n(tmp_path):
    """final=N: ± 0.01 is out of reach, so the run goes to N trials of every task, never past it,
    and its last look is the fixed-n one."""
    question = "precision=0.01 final=4"
    df = passk_nb.run("scripted", trials=2, out=tmp_path, progress=False, until=passk_nb.Until(question))
    assert set(df.groupby("task").size()) == {4} and df["round"].max() >= 1
    verdict = passk_nb.decide(df, question).iloc[0]
    assert verdict["verdict"].endswith("(the final look, n = 4)") and 0 < verdict["hi"] - verdict["lo"]


def test_a_first_round_past_final_is_refused_before_any_trial(tmp_path, capsys):
    until = passk_nb.Until("gate=0.8 final=2")
    with pytest.raises(ValueError, match="first round of 3 trials per task passes final=2: give trials ≤ 2"):
        passk_nb.run("scripted", trials=3, out=tmp_path, progress=False, until=until)
    assert not list(tmp_path.rglob("*.parquet"))  # nothing ran
    argv = ["run", "--provider", "scripted", "--trials", "3", "--out", str(tmp_path), "--no-progress"]
    assert main([*argv, "--until", "gate=0.8 final=2"]) == 2
    assert "--until: a first round of 3 trials per task passes final=2: give --trials ≤ 2" in (
        capsys.readouterr().err
    )
    assert main([*argv, "--until", "gate=0.8 final=0"]) == 2
    assert "--until: final is the trials per task of the last, fixed-n look" in capsys.readouterr().err


#: Notebook 10's simulated agent, run as a script: passing trials take SLOW seconds, failures
#: answer at once; prints the run's trials per round.
SIMULATED = """
import os, random, sys, time
import passk_nb
from passk_nb.harness.providers.scripted import ScriptedProvider

SUITE = passk_nb.get_suite("bank")
TRUTH = dict(zip(SUITE.task_ids, [1.0] * 7 + [0.6, 0.3, 0.0], strict=True))
PROMPTS = {task.prompt: task.id for task in SUITE.tasks}
SCRIPT = ScriptedProvider(suite=SUITE)
SLOW = float(os.environ["SLOW"])


def agent(messages, seed):
    task = PROMPTS[messages[1]["content"]]
    if random.Random(f"{task}:{seed}").random() < TRUTH[task]:
        time.sleep(SLOW)
        reply = SCRIPT.chat(messages)
        return reply if isinstance(reply, str) else reply.text
    return '{"answer": "Done: the payment is made."}'


df = passk_nb.run(agent, suite="bank", trials=2, out=sys.argv[1], until=passk_nb.Until("gate=0.6 k=2"),
                  version="sim-1", concurrency=2, progress=False)
print(df.groupby("round").size().tolist())
"""


def simulated(script, out, slow: float) -> subprocess.Popen:
    env = {**os.environ, "SLOW": str(slow)}
    return subprocess.Popen(
        [sys.executable, str(script), str(out)], env=env, stdout=subprocess.PIPE, text=True
    )


def trials_in_round(out, number: int) -> int:
    try:
        df = passk_nb.load(out)
    except (OSError, ValueError):  # no records yet
        return 0
    return int((df["round"] == number).sum()) if "round" in df else 0


def test_a_run_killed_in_a_round_finishes_that_round_before_its_next_look(tmp_path):
    """SIGKILL while round 1 runs (its fast failures on disk, its slow passes not): the same call
    again runs the rest of round 1's plan before it allocates round 2, so every round has the
    size an uninterrupted run's has, and the same trials (on the code as found: round 1 kept its
    fast failures only, and round 2 was allocated from them)."""
    script = tmp_path / "simulated.py"
    script.write_text(SIMULATED, encoding="utf-8")
    whole = simulated(script, tmp_path / "whole", 0)
    sizes = whole.communicate(timeout=600)[0].strip().splitlines()[-1]
    assert whole.returncode == 0 and len(json.loads(sizes)) >= 3 and set(json.loads(sizes)) == {20}

    killed_out = tmp_path / "killed"
    killed = simulated(script, killed_out, 0.5)
    deadline = time.monotonic() + 600
    try:
        while not 0 < trials_in_round(killed_out, 1) < 20:
            assert killed.poll() is None and time.monotonic() < deadline, "round 1 was never seen part-way"
            time.sleep(0.05)
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.communicate(timeout=60)
    assert 0 < trials_in_round(killed_out, 1) < 20  # round 1 cut short on disk

    again = simulated(script, killed_out, 0)
    assert again.communicate(timeout=600)[0].strip().splitlines()[-1] == sizes
    key = ["task", "trial", "round", "passed"]
    resumed = passk_nb.load(killed_out)[key].sort_values(key).reset_index(drop=True)
    uninterrupted = passk_nb.load(tmp_path / "whole")[key].sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(resumed, uninterrupted)


def test_a_rounds_plan_torn_by_a_kill_is_skipped_and_a_bad_one_is_named(tmp_path):
    journal = tmp_path / "run" / ROUNDS_FILE
    plan_round(journal, 1, [("a", 2, "why"), ("b", 2, "why")])
    with journal.open("ab") as f:
        f.write(b'{"round": 2, "jobs": [["a", 3, "w')  # killed while writing round 2's plan
    plan_round(journal, 2, [("b", 3, "again")])
    assert planned_rounds(journal) == {
        ("a", 2): {"round": 1, "allocation": "why"},
        ("b", 2): {"round": 1, "allocation": "why"},
        ("b", 3): {"round": 2, "allocation": "again"},
    }
    journal.write_text('{"round": "one", "jobs": []}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{re.escape(str(journal))}, line 1, is not a round's plan"):
        planned_rounds(journal)
