"""run(workers=N) and run(executor="ray"): a Python agent's trials in other processes, this
process the only writer of the run folder, a trial whose worker died run again."""

from __future__ import annotations

import json
import os
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
        passk_nb.run("openai", "m", base_url="http://127.0.0.1:9", trials=1, out=tmp_path, workers=2)
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
