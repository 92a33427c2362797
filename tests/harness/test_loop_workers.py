"""run(workers=N) with an HTTP backend: each worker process runs its own event loop over its share of
the trials, the calling process claims and writes. The records are those of one process; a kill -9
of the calling process mid-run ends its workers and a resume stores each trial once; a worker
killed (or hung) mid-run costs only the trials it held, recorded as infrastructure errors."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

import passk_nb
from passk_nb.data.prices import price_table, trial_cost
from passk_nb.data.store import part_files
from passk_nb.harness import loop_workers
from passk_nb.harness.budget import BUDGET_FILE
from tests.harness.golden_run import VOLATILE, rule
from tests.harness.test_until import Rounds
from tests.helpers.fake_servers import FakeServer, Fault

TASKS = passk_nb.get_suite("orders").task_ids


def comparable(df: pd.DataFrame) -> list[dict]:
    """The records sorted, without when and how long (the transcript's latencies too)."""
    rows = []
    for row in df.sort_values(["task", "trial"]).to_dict("records"):
        transcript = [{k: v for k, v in e.items() if k != "latency_s"} for e in json.loads(row["transcript"])]
        row = {k: v for k, v in row.items() if k not in VOLATILE and k != "transcript"}
        rows.append(json.loads(json.dumps({**row, "transcript": transcript}, sort_keys=True, default=str)))
    return rows


def http_run(url: str, out: Path, **options):
    options = {"trials": 6, "backend_seed": 20, "concurrency": 8, "progress": False, **options}
    return passk_nb.run(
        "openai", "m", base_url=url, api_key_env=None, out=out, backoff_base=0.01, backoff_max=0.02, **options
    )


def loop_worker_pids() -> set[int]:
    return {p.pid for p in multiprocessing.active_children() if p.name == "passk-loop"}


def test_http_workers_store_each_trial_once_with_the_records_of_one_process(tmp_path):
    with FakeServer("openai", keep_alive=True, rule=rule) as server:  # 400s, token counts, refusals
        one = http_run(server.url, tmp_path / "one")
        two = http_run(server.url, tmp_path / "two", workers=2)
    raw = pd.read_parquet(tmp_path / "two")  # as on disk: one row per trial
    assert len(raw) == 5 * 6 and not raw.duplicated(["task", "trial"]).any()
    assert set(one["run_id"]) == set(two["run_id"])  # where trials run is not what is measured
    assert comparable(two) == comparable(one)
    assert set(one["outcome"]) > {"pass"}  # the faults did reach the records
    assert not loop_worker_pids()  # the workers ended with the run


def test_a_worker_killed_mid_run_costs_only_its_trials_and_a_resume_runs_them(tmp_path):
    killed: list[int] = []

    def kill_one(record):
        if not killed and (pids := sorted(loop_worker_pids())):
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    with FakeServer("openai", keep_alive=True, latency=0.02) as server:
        df = http_run(server.url, tmp_path, trials=30, workers=2, on_record=kill_one)
        assert killed
        lost = df[df["outcome"] == "infra_error"]
        assert len(df) == 5 * 30 and not df.duplicated(["task", "trial"]).any()
        assert 1 <= len(lost) <= 8  # at most the two shares dealt to the killed worker (2 x 4)
        assert lost["error"].str.contains(f"worker process {killed[0]} died").all(), lost["error"].tolist()
        assert set(df["outcome"]) == {"pass", "infra_error"}
        again = http_run(server.url, tmp_path, trials=30, workers=2)
    assert len(again) == 5 * 30 and set(again["outcome"]) == {"pass"}
    assert len(pd.read_parquet(tmp_path)) == 5 * 30


def test_a_hung_worker_is_ended_and_costs_only_its_trials(tmp_path, monkeypatch):
    monkeypatch.setattr(loop_workers, "HUNG_S", 12.0)  # it says a word every second
    stopped: list[int] = []

    def stop_one(record):
        if not stopped and (pids := sorted(loop_worker_pids())):
            os.kill(pids[0], signal.SIGSTOP)
            stopped.append(pids[0])

    with FakeServer("openai", keep_alive=True, latency=0.02) as server:
        df = http_run(server.url, tmp_path, trials=20, workers=2, on_record=stop_one)
    lost = df[df["outcome"] == "infra_error"]
    assert len(df) == 5 * 20 and not df.duplicated(["task", "trial"]).any()
    assert 1 <= len(lost) <= 8 and lost["error"].str.contains(f"process {stopped[0]} hung").all()


CHILD = textwrap.dedent(
    """
    import sys
    import passk_nb

    url, out, trials = sys.argv[1], sys.argv[2], int(sys.argv[3])
    passk_nb.run("openai", "m", base_url=url, api_key_env=None, trials=trials, concurrency=16, out=out,
                 progress=False, workers=2)
    """
)


def processes_running(script: Path) -> list[int]:
    """The processes (a run and its forked workers) whose command line names ``script``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(script).encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_a_killed_run_with_http_workers_ends_them_and_resumes_storing_each_trial_once(tmp_path):
    out, trials = tmp_path / "runs", 60
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with FakeServer("openai", keep_alive=True, latency=0.02) as server:
        command = [sys.executable, str(script), server.url, str(out), str(trials)]
        killed = subprocess.Popen(command, env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (out.exists() and part_files(out)):
            time.sleep(0.02)
        assert len(processes_running(script)) == 3  # the run and its two workers
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(timeout=60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and processes_running(script):
            time.sleep(0.05)
        assert processes_running(script) == []  # the workers saw their pipe close and exited
        subprocess.run(command, env=env, check=True, timeout=300)
    raw = pd.read_parquet(out)  # every part as it is on disk, no passk code in between
    assert len(raw) == 5 * trials and not raw.duplicated(["task", "trial"]).any()
    assert set(raw["outcome"]) == {"pass"}
    assert sorted(map(tuple, raw[["task", "trial"]].values.tolist())) == sorted(
        (t, i) for t in TASKS for i in range(trials)
    )


def test_http_workers_refuse_adaptive(tmp_path):
    with pytest.raises(ValueError, match="adaptive=True steers one process"):
        passk_nb.run("openai", "m", base_url="http://127.0.0.1:9", out=tmp_path, workers=2, adaptive=True)


def test_http_workers_keep_four_in_flight_by_default_split_over_the_workers(tmp_path):
    with FakeServer("openai", keep_alive=True, latency=0.05, admit=64) as server:
        df = http_run(server.url, tmp_path, trials=8, workers=2, concurrency=None)
    assert len(df) == 40 and set(df["outcome"]) == {"pass"}
    assert max(server.admitted) == 4  # a Python agent's default (one per worker) would hold 2


BUDGET_TASKS = ["refund-delivered", "cancel-pending-lookup"]  # three model turns each
PRICES = {"m": (1000.0, 1000.0)}  # USD per million tokens: 20 tokens a turn cost 0.02, a trial 0.06


def test_http_workers_keep_a_budget_exactly_as_one_process_does(tmp_path):
    """tests/harness/test_budget.py's first test with workers=2: the trials dealt ahead to the
    workers are counted in flight when claimed, so the same trials start and the same spend stops."""
    with FakeServer("openai", rule=lambda body: Fault("usage", size=10), latency=0.2) as server:
        options = {"tasks": BUDGET_TASKS, "trials": 4, "concurrency": 4, "prices": PRICES, "workers": 2}
        first = http_run(server.url, tmp_path, budget_usd=0.2, **options)
        assert len(first) == 3 and spend(first) == pytest.approx(0.18)  # 0.06 + 2 × 0.06 ≤ 0.2
        assert first.attrs["stopped"].startswith("budget_usd=0.2: spent")
        assert len(passk_nb.load(tmp_path)) == 3 and not loop_worker_pids()
        journal = [json.loads(line) for line in (tmp_path / first["run_id"].iloc[0] / BUDGET_FILE).open()]
        assert journal[-1]["not_started"] >= 1 and journal[-1]["spent_usd"] == pytest.approx(0.18)
        again = http_run(server.url, tmp_path, budget_usd=1.0, **options)
        assert "stopped" not in again.attrs and again["run_id"].nunique() == 1
        assert len(again) == 8 and not again.duplicated(["task", "trial"]).any()
        assert len(server.chat_requests()) == 8 * 3  # nothing run twice
        assert spend(again) == pytest.approx(0.48)


def spend(df: pd.DataFrame) -> float:
    table = price_table(PRICES)
    return sum(trial_cost(r, table) for r in df.to_dict("records"))


def test_http_workers_run_every_round_an_until_rule_asks_for(tmp_path):
    """tests/harness/test_until.py's rounds, over HTTP in two worker processes."""
    tasks = TASKS[:3]
    until = Rounds([(tasks[0], 3)], [(tasks[1], 1), (tasks[0], 1)])
    with FakeServer("openai", keep_alive=True) as server:
        df = http_run(server.url, tmp_path, tasks=tasks, trials=2, workers=2, until=until)
    assert until.seen == [6, 9, 11]  # asked after every completed round, with the records so far
    trials = df.groupby("task")["trial"].apply(list).to_dict()
    assert trials == {tasks[0]: [0, 1, 2, 3, 4, 5], tasks[1]: [0, 1, 2], tasks[2]: [0, 1]}
    later = df[df["trial"] >= 2].sort_values(["round", "task", "trial"])
    assert later["round"].tolist() == [1, 1, 1, 2, 2] and (later["allocation"] == "asked").all()
    assert set(df["outcome"]) == {"pass"} and not loop_worker_pids()


def test_http_workers_answer_an_until_question_and_stop(tmp_path):
    until = passk_nb.Until("gate=0.6 ci=0.9")
    with FakeServer("openai", keep_alive=True) as server:
        df = http_run(server.url, tmp_path, trials=1, workers=2, until=until, max_trials=200)
    verdict = passk_nb.decide(df, until.question).iloc[0]
    assert verdict["decided"] and verdict["verdict"].startswith("passes") and len(df) < 200
    assert df["round"].max() >= 1 and not df.duplicated(["task", "trial"]).any()


def test_http_workers_are_refused_before_anything_is_written_where_there_is_no_fork(tmp_path, monkeypatch):
    out = tmp_path / "runs"
    with FakeServer("openai", keep_alive=True) as server:
        monkeypatch.delattr(os, "fork")
        with pytest.raises(ValueError, match="forks its worker processes.*no fork"):
            http_run(server.url, out, workers=2)
        assert server.chat_requests() == []
    assert not out.exists() or not any(out.rglob("*"))  # no spec, no claims, no part
