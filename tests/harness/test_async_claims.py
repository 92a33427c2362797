"""HTTP trials (asyncio tasks on the transport loop, claimed a lease at a time) keep the run's
crash-safety: processes of one spec in one folder, one killed by SIGKILL mid-run, then a resume,
leave exactly one row per trial, every one the server's known-good answer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest

import passk_nb
from passk_nb.data.store import part_files
from tests.helpers.fake_servers import FakeServer

TASKS = passk_nb.get_suite("orders").task_ids

CHILD = textwrap.dedent(
    """
    import sys
    import passk_nb

    url, out, trials = sys.argv[1], sys.argv[2], int(sys.argv[3])
    passk_nb.run("openai", "m", base_url=url, api_key_env=None, trials=trials, concurrency=16, out=out,
                 progress=False)
    """
)


@pytest.mark.slow
def test_http_runs_sharing_a_folder_killed_and_resumed_store_each_trial_once(tmp_path):
    out, trials = tmp_path / "runs", 60
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with FakeServer("openai", keep_alive=True, latency=0.02) as server:
        command = [sys.executable, str(script), server.url, str(out), str(trials)]
        killed, other = subprocess.Popen(command, env=env), subprocess.Popen(command, env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (out.exists() and part_files(out)):
            time.sleep(0.02)
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(timeout=60)
        assert killed.returncode == -signal.SIGKILL
        assert other.wait(timeout=300) == 0
        subprocess.run(command, env=env, check=True, timeout=300)
    raw = pd.read_parquet(out)  # every part as it is on disk, no passk code in between
    assert len(raw) == 5 * trials and not raw.duplicated(["task", "trial"]).any()
    assert set(raw["outcome"]) == {"pass"}
    assert sorted(map(tuple, raw[["task", "trial"]].values.tolist())) == sorted(
        (t, i) for t in TASKS for i in range(trials)
    )
