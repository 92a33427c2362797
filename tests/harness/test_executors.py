"""run(workers=N) and run(executor="ray"): a Python agent's trials in other processes, this
process the only writer of the run folder, a trial whose worker died run again."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import passk_nb
from passk_nb.harness.providers.base import Reply
from passk_nb.harness.providers.scripted import ScriptedProvider
from passk_nb.harness.suites import get_suite
from tests.helpers.fake_servers import require

TASKS = ["refund-delivered", "cancel-pending-lookup", "cancel-shipped-refusal"]


class Agent:
    """The orders suite's known-good script, saying which process answered; with ``die``, the
    process answering the task of customer C002 exits (once per marker file, or every time)."""

    def __init__(self, die: Path | None = None, always: bool = False):
        self.die, self.always = die, always
        self._script: ScriptedProvider | None = None

    def __call__(self, messages):
        if self.die is not None and "C002" in messages[1]["content"]:
            if self.always or not self.die.exists():
                self.die.touch()
                os._exit(3)
        if self._script is None:
            self._script = ScriptedProvider(suite=get_suite("orders"))
        reply = self._script.chat(messages)
        text = reply.text if isinstance(reply, Reply) else reply
        return Reply(text, meta={"pid": os.getpid()})


def pids(df) -> set[int]:
    return {(json.loads(m) if isinstance(m, str) else m)["pid"] for m in df["provider_meta"]}


def agent_run(agent, tmp_path, **options):
    options = {
        "trials": 2,
        "progress": False,
        "out": tmp_path / "runs",
        "tasks": TASKS,
        "version": "v1",
        **options,
    }
    return passk_nb.run(agent, **options)


def test_workers_run_the_trials_in_other_processes_with_the_same_records(tmp_path):
    threads = agent_run(Agent(), tmp_path, out=tmp_path / "threads")
    df = agent_run(Agent(), tmp_path, workers=2)
    assert len(df) == 6 and df["passed"].all()
    assert os.getpid() not in pids(df) and 1 <= len(pids(df)) <= 2
    assert pids(threads) == {os.getpid()}
    assert set(df["run_id"]) == set(threads["run_id"])  # where trials run is not what is measured
    cols = ["task", "trial", "outcome", "n_turns", "final_answer"]
    assert df[cols].reset_index(drop=True).equals(threads[cols].reset_index(drop=True))
    assert len(list((tmp_path / "runs").glob("*/*.parquet"))) == 1  # one writer, one merged file


def test_a_trial_whose_worker_died_runs_again(tmp_path):
    marker = tmp_path / "died-once"
    df = agent_run(Agent(die=marker), tmp_path, workers=2)
    assert marker.exists()  # a worker did die
    assert len(df) == 6 and df["passed"].all(), df[["task", "outcome", "error"]]


def test_a_trial_that_kills_its_worker_every_time_is_the_agents_failure(tmp_path):
    df = agent_run(Agent(die=tmp_path / "m", always=True), tmp_path, workers=1, concurrency=1, trials=1)
    by_task = df.set_index("task")
    assert by_task.loc["cancel-pending-lookup", "outcome"] == "agent_error"
    assert "worker process running this trial died twice" in by_task.loc["cancel-pending-lookup", "error"]
    assert by_task.loc["refund-delivered", "passed"] and by_task.loc["cancel-shipped-refusal", "passed"]


def test_executor_refusals(tmp_path):
    with pytest.raises(ValueError, match="waits on its model instead: raise concurrency"):
        passk_nb.run("openai", "m", base_url="http://127.0.0.1:9", trials=1, out=tmp_path, executor="ray")
    with pytest.raises(ValueError, match="ray_address= names the Ray cluster"):
        agent_run(Agent(), tmp_path, ray_address="127.0.0.1:6379")
    with pytest.raises(ValueError, match="executor must be one of"):
        agent_run(Agent(), tmp_path, executor="dask")
    with pytest.raises(ValueError, match="workers"):
        agent_run(Agent(), tmp_path, workers=0)


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster of two worker CPUs on 127.0.0.1, for this module's Ray tests."""
    try:
        import ray
    except ImportError:
        require(False, "ray (pip install 'passk-nb[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    yield ray
    ray.shutdown()


def test_ray_runs_the_trials_as_tasks_and_reruns_a_lost_worker(ray_cluster, tmp_path):
    marker = tmp_path / "died-once"
    df = agent_run(Agent(die=marker), tmp_path, executor="ray", concurrency=4)
    assert marker.exists()  # a Ray worker died in the middle of a trial
    assert len(df) == 6 and df["passed"].all(), df[["task", "outcome", "error"]]
    assert os.getpid() not in pids(df)
    threads = agent_run(Agent(), tmp_path, out=tmp_path / "threads")
    assert set(df["run_id"]) == set(threads["run_id"])


def test_passk_run_workers_runs_the_scripted_agent_in_processes(tmp_path, capsys):
    from passk_nb.cli.main import main

    args = ["run", "--provider", "scripted", "--trials", "2", "--workers", "2", "--k", "2"]
    assert main([*args, "--out", str(tmp_path), "--n-boot", "0", "--no-progress"]) == 0
    assert "10/10 pass" in capsys.readouterr().out
    df = passk_nb.load(tmp_path)
    assert len(df) == 10 and df["passed"].all()


#: A run in its own interpreter (so that whether the process exits is what is tested): the orders
#: suite under workers=2, trial_timeout=3, with an agent that, by customer, hangs (C001, trials 0
#: and 1), calls os._exit (C002), is killed by SIGKILL as the OOM killer does (C003), or forks on
#: its first turn a child that comes back into the harness (C004); C005 is left alone. It prints the
#: run's records, then resumes the run and prints how many rows it has.
HOSTILE_RUN = """
import json, os, signal, sys, time
import passk_nb
from passk_nb.harness.providers.scripted import ScriptedProvider
from passk_nb.harness.suites import get_suite

script = {}

def agent(messages, seed=None):
    prompt = messages[1]["content"]
    if "C001" in prompt and seed in (0, 1):
        time.sleep(120)
    if "C002" in prompt:
        os._exit(3)
    if "C003" in prompt:
        os.kill(os.getpid(), signal.SIGKILL)
    if "C004" in prompt and len(messages) == 2:
        os.fork()  # parent and child both go on with the trial
    if "s" not in script:
        script["s"] = ScriptedProvider(suite=get_suite("orders"))
    return script["s"].chat(messages)

options = dict(trials=4, workers=2, trial_timeout=3, out=sys.argv[1], progress=False, version="v1")
df = passk_nb.run(agent, **options)
print(json.dumps(df[["task", "trial", "outcome", "error"]].to_dict("records")))
print(len(passk_nb.run(agent, **options)))
"""


def test_hung_crashing_and_forking_trials_under_workers_cost_only_themselves(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", HOSTILE_RUN, str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=240,  # the process must exit: a hung worker once kept it alive for good
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    rows = {(r["task"], r["trial"]): r for r in json.loads(lines[-2])}
    assert len(rows) == 20 and lines[-1] == "20"  # every trial stored once; a resume runs none again
    for (task, trial), row in rows.items():
        if task == "refund-delivered" and trial in (0, 1):  # hung: given up on, its worker ended
            assert row["outcome"] == "agent_error" and "timed out after 3" in row["error"], row
        elif task in ("cancel-pending-lookup", "refund-damaged-shipped"):  # its worker died twice
            assert row["outcome"] == "agent_error" and "died twice" in row["error"], row
        else:  # the trials beside them, the forking agent's among them, are never blamed
            assert row["outcome"] == "pass", row


def gone(pid: int, within: float = 60.0) -> bool:
    """Whether process ``pid`` ends within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


class HostileAgent(Agent):
    """:class:`Agent`, but the process answering customer C001's trial 0 hangs, or (``kill``) the one
    answering C002 kills itself by SIGKILL every time, as the OOM killer would."""

    def __init__(self, kill: bool = False, hung_pid: Path | None = None):
        super().__init__()
        self.kill, self.hung_pid = kill, hung_pid

    def __call__(self, messages, seed=None):
        if "C001" in messages[1]["content"] and seed == 0:
            if self.hung_pid is not None:
                self.hung_pid.write_text(str(os.getpid()))
            time.sleep(120)
        if self.kill and "C002" in messages[1]["content"]:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__call__(messages)


def test_ray_cancels_a_hung_trial_and_blames_only_a_trial_killing_its_workers(ray_cluster, tmp_path):
    hung_pid = tmp_path / "hung.pid"
    df = agent_run(HostileAgent(hung_pid=hung_pid), tmp_path, executor="ray", trial_timeout=5, concurrency=4)
    assert gone(int(hung_pid.read_text()))  # the hung trial's task was cancelled, its worker killed
    by = df.set_index(["task", "trial"])["outcome"].to_dict()
    assert by.pop(("refund-delivered", 0)) == "agent_error"  # the hung one alone: the rest waited untimed
    assert set(by.values()) == {"pass"}, df[["task", "trial", "outcome", "error"]]
    lost = agent_run(HostileAgent(kill=True), tmp_path / "k", executor="ray", trials=1, tasks=TASKS[1:2])
    assert lost["outcome"].tolist() == ["agent_error"]
    assert "Ray worker running this trial was lost 4 times" in lost["error"].iloc[0]


#: A Ray run in its own interpreter, on a local cluster of one CPU: 4 trials of 3 tasks, one at a
#: time; with a marker path, the trial of index 2 writes it and hangs (the driver is then killed).
RAY_RUN = """
import os, sys, time
import passk_nb
from tests.harness.test_executors import TASKS, Agent

class Stalls(Agent):
    marker = sys.argv[2] if len(sys.argv) > 2 else None  # read here: a Ray worker has argv of its own

    def __call__(self, messages, seed=None):
        if self.marker and seed == 2:
            open(self.marker, "w").close()
            time.sleep(120)
        return super().__call__(messages)

options = dict(trials=4, tasks=TASKS, version="v1", progress=False, out=sys.argv[1])
df = passk_nb.run(Stalls(), executor="ray", workers=1, **options)
print(len(df), int(df["passed"].sum()), len(df.drop_duplicates(["task", "trial"])))
"""


def test_a_killed_ray_driver_resumes_with_every_stored_trial_kept(tmp_path):
    require(importlib.util.find_spec("ray") is not None, "ray (pip install 'passk-nb[ray]')")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "RAY_ADDRESS": ""}
    out, marker = tmp_path / "runs", tmp_path / "stalled"
    command = [sys.executable, "-c", RAY_RUN, str(out)]
    driver = subprocess.Popen([*command, str(marker)], env=env, start_new_session=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 180
        while not (marker.exists() and list(out.glob("*/part-*.parquet"))) and time.monotonic() < deadline:
            assert driver.poll() is None, "the driver ended before it was killed"
            time.sleep(0.2)
        assert marker.exists(), "the run never reached its stalling trial"
        time.sleep(1.5)  # the records before it reach disk at least every second
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)  # the driver and the local cluster it started
        driver.wait()
    before = passk_nb.load(out)
    assert len(before) == 2 and before["passed"].all()  # the two trials run before the stall
    resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stdout.split() == ["12", "12", "12"]  # every trial once, all passed
    after = passk_nb.load(out).set_index(["task", "trial"])
    for _, row in before.iterrows():  # the stored trials were kept, not run again
        assert after.loc[(row["task"], row["trial"]), "started_at"] == row["started_at"]


def test_workers_take_a_perturbation_rule_that_does_not_pickle(tmp_path):
    df = agent_run(Agent(), tmp_path, workers=2, perturb={"thanks": lambda text, rng: text + " Thanks!"})
    assert len(df) == 6 and df["passed"].all(), df[["task", "outcome", "error"]]
    assert set(df["perturbation_applied"]) == {"thanks"}
