"""Hardening: hostile model output, broken files, concurrent runs, write failures.

One bad trial must never stop a run, lose a record, or corrupt the numbers.
"""

import errno
import json
import random
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest

import passk_nb
from passk_nb.data import store
from passk_nb.data.records import OUTCOMES
from passk_nb.data.store import StoreError
from passk_nb.data.transcript import MAX_STORED_CHARS
from passk_nb.harness import batch
from passk_nb.harness.providers import BaseProvider

SUITE = passk_nb.get_suite("orders")

HOSTILE = [
    "x" * 2_000_000,
    '{"answer": "' + "y" * 2_000_000 + '"}',
    "[" * 200_000,
    '{"a": ' * 20_000,
    '{"tool": "refund_order", "args": {"order_id": "O1001", "amount": NaN}}',
    '{"tool": "refund_order", "args": {"order_id": "O1001", "amount": Infinity}}',
    '{"tool": "refund_order", "args": {"order_id": "O1001", "amount": 1e309}}',
    '{"tool": "refund_order", "args": {"order_id": "O1001", "amount": -79.99}}',
    '{"tool": "refund_order", "args": {"order_id": "O1001", "amount": "79.99"}}',
    '{"tool": "cancel_order", "args": {"order_id": "O\\uff11003"}}',
    '{"tool": "cancel_order", "args": {"order_id": "O1003\\u200b"}}',
    '{"tool": "cancel_order", "args": {"order_id": "O1003\'; DROP TABLE orders;--"}}',
    '{"tool": "cancel_order", "args": {"order_id": "$(rm -rf /); `reboot`"}}',
    '{"tool": "__class__", "args": {}}',
    '{"tool": "__init__", "args": {"state": {}, "tools": {}}}',
    '{"tool": "_state", "args": {}}',
    '{"tool": "snapshot", "args": {}}',
    '{"tool": "try_call", "args": {"name": "cancel_order", "args": {"order_id": "O1003"}}}',
    '{"tool": "cancel_order", "args": {"order_id": "O1003", "force": true}}',
    '{"tool": "refund_order", "args": {"order_id": "O1001"}}',
    '{"answer": "a"} {"answer": "b"}',
    '```json\n{"answer": "done"}\n```\nAnything else I can do?',
    "",
    "null",
    None,
    {"answer": "a dict, not text"},
]


class Hostile(BaseProvider):
    """Replies HOSTILE[seed] on every turn: trial i gets hostile reply i."""

    name = "hostile"

    def chat(self, messages):
        return HOSTILE[self.seed]


def test_every_hostile_reply_ends_in_a_defined_outcome(tmp_path):
    df = passk_nb.run(
        Hostile(model="chaos"),
        trials=len(HOSTILE),
        tasks=["cancel-pending-lookup"],
        out=tmp_path,
        progress=False,
        concurrency=4,
    )
    assert len(df) == len(HOSTILE)
    assert set(df["outcome"]) <= set(OUTCOMES)
    assert not df["outcome"].eq("infra_error").any(), df[df["outcome"] == "infra_error"]["error"].tolist()
    # nothing reached anything but the declared tools: the only possible change is a real cancellation
    for diff in df["state_diff"]:
        assert all(change["path"] == "orders.O1003.status" for change in json.loads(diff))
    # stored text is bounded, and keeps the original length
    assert df["transcript"].str.len().max() < 12 * MAX_STORED_CHARS
    big = json.loads(df.loc[df["trial"] == 0, "transcript"].iloc[0])
    assert big[1]["length"] == 2_000_000
    by_trial = df.set_index("trial")
    assert by_trial.loc[1, "final_answer"].endswith("[truncated, 2000000 chars in all]")
    errors = " ".join(df["transcript"])
    for fragment in [
        "nested too deeply",
        "non-standard JSON constant NaN",
        "must be a finite number",
        "must be positive",
        "must be a number, got string",
        "unknown tool '__class__'",
        "unknown tool 'try_call'",
        "unexpected ['force']",
        "missing ['amount']",
        "two JSON objects",
        "text outside the code fence",
        "empty reply",
        "got null",
        "reply is not text",
    ]:
        assert fragment in errors, fragment
    looks_like = by_trial.loc[9, "transcript"]
    assert "no order with id" in looks_like


class Chaos(BaseProvider):
    """Seeded mix of right actions, wrong actions, garbage, exceptions and latency."""

    name = "chaos"
    scripts = {t.prompt: t.script for t in SUITE.tasks}

    def chat(self, messages):
        turn = sum(m["role"] == "assistant" for m in messages)
        rng = random.Random(f"{self.seed}|{messages[1]['content']}|{turn}")
        time.sleep(rng.choice([0, 0, 0.001, 0.003]))
        roll = rng.random()
        if roll < 0.08:
            raise ConnectionError("connection reset by peer")
        if roll < 0.15:
            return rng.choice(["Sure thing!", "{", "null", '{"tool": "nope", "args": {}}'])
        if roll < 0.25:
            return json.dumps({"tool": "refund_order", "args": {"order_id": "O1008", "amount": 65.2}})
        script = self.scripts[messages[1]["content"]]
        return json.dumps(script[min(turn, len(script) - 1)])


@pytest.mark.slow
def test_chaos_provider_over_500_trials(tmp_path):
    df = passk_nb.run(Chaos(model="seeded"), trials=110, out=tmp_path, progress=False, concurrency=16)
    assert len(df) == 550
    assert not df.duplicated(["task", "trial"]).any()
    assert set(df["outcome"]) <= set(OUTCOMES)
    counts = df["outcome"].value_counts()
    for outcome in ["pass", "infra_error", "format_error", "unrequested_change"]:
        assert counts.get(outcome, 0) > 0, counts
    assert (
        df.loc[df["outcome"] == "infra_error", "error"].eq("ConnectionError: connection reset by peer").all()
    )
    # the same seeds give the same outcomes, whatever the thread scheduling
    again = passk_nb.run(
        Chaos(model="seeded"), trials=110, out=tmp_path / "again", progress=False, concurrency=3
    )
    pd.testing.assert_series_equal(df["outcome"], again["outcome"])
    # infra errors are excluded from the estimators: same numbers as without those rows
    from passk_nb.stats.summary import summarize

    with_infra = summarize(df, k=2, by=(), n_boot=0)
    without = summarize(df[df["outcome"] != "infra_error"], k=2, by=(), n_boot=0)
    for column in ["pass@k", "pass^k", "trials", "successes"]:
        assert with_infra[column].iloc[0] == without[column].iloc[0], column
    assert with_infra["n_infra_excluded"].iloc[0] == counts["infra_error"]


def test_corrupt_file_strict_names_it_lenient_skips_it(tmp_path):
    passk_nb.run("scripted", trials=2, out=tmp_path, progress=False)
    good = store.part_files(tmp_path)[0]
    bad = good.parent / "part-corrupt.parquet"
    bad.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    with pytest.raises(ValueError, match=r"cannot read record file .*part-corrupt\.parquet.*strict=False"):
        passk_nb.load(tmp_path)
    with pytest.warns(RuntimeWarning, match="part-corrupt.parquet"):
        df = passk_nb.load(tmp_path, strict=False)
    assert len(df) == 10


def test_corrupt_file_in_the_cli(tmp_path, capsys):
    passk_nb.run("scripted", trials=2, out=tmp_path, progress=False)
    (tmp_path / "junk.parquet").write_text("not parquet")
    from passk_nb.cli.main import main

    assert main(["report", str(tmp_path)]) == 2
    assert "junk.parquet" in capsys.readouterr().err
    assert main(["report", str(tmp_path), "--skip-bad-files", "--n-boot", "0"]) == 0
    out, err = capsys.readouterr()
    assert "10/10 pass" in out
    assert err.startswith("passk: warning: cannot read record file") and "junk.parquet" in err


CHILD = textwrap.dedent(
    """
    import sys, time, json
    import passk_nb

    def slowish(messages):
        time.sleep(0.005)
        return json.dumps({"answer": "no"})

    seed = int(sys.argv[2])
    passk_nb.run(slowish, trials=40, backend_seed=seed, concurrency=4, out=sys.argv[1], progress=False)
    """
)


@pytest.mark.slow
def test_concurrent_processes_in_one_folder(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    out = tmp_path / "runs"
    # two different specs and a duplicate of the first, all at once
    procs = [subprocess.Popen([sys.executable, str(script), str(out), seed]) for seed in ("0", "1", "0")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    df = passk_nb.load(out)
    assert sorted(df.groupby("run_id").size().tolist()) == [5 * 40, 5 * 40]
    assert not df.duplicated(["run_id", "task", "trial"]).any()


def test_write_failure_is_clear_and_earlier_trials_stay_readable(tmp_path, monkeypatch):
    calls = {"n": 0}
    real_write = store.pq.write_table

    def failing_write(table, where, **kwargs):
        calls["n"] += 1
        if calls["n"] >= 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(table, where, **kwargs)

    monkeypatch.setattr(store.pq, "write_table", failing_write)
    monkeypatch.setattr(batch._Writer, "__init__", lambda self, out, run_id: _small_writer(self, out, run_id))
    with pytest.raises(StoreError, match=r"No space left on device.*records written before are intact"):
        passk_nb.run("scripted", trials=4, out=tmp_path, progress=False, concurrency=1)
    monkeypatch.undo()
    kept = passk_nb.load(tmp_path)
    assert len(kept) == 5
    assert not any(p.name.endswith(".tmp") for p in tmp_path.rglob("*"))
    # and the next run resumes from there
    assert len(passk_nb.run("scripted", trials=4, out=tmp_path, progress=False)) == 20


def _small_writer(writer, out, run_id):
    writer.out, writer.run_id, writer.every_s, writer.every_n = out, run_id, 3600.0, 5
    writer.pending, writer.parts, writer.last = [], [], time.monotonic()


class HangsOnEva(BaseProvider):
    """A backend (not user code) that never answers Eva Lin's task until released."""

    name = "hanging-backend"

    def __init__(self, release):
        super().__init__("m")
        self.release = release

    def chat(self, messages):
        if "Eva Lin" in messages[1]["content"]:
            self.release.wait(30)
        return '{"answer": "no"}'


def test_a_hung_backend_times_out_and_the_run_goes_on(tmp_path):
    release = __import__("threading").Event()
    start = time.monotonic()
    try:
        df = passk_nb.run(
            HangsOnEva(release), trials=3, out=tmp_path, progress=False, concurrency=2, trial_timeout=0.5
        )
    finally:
        release.set()
    assert time.monotonic() - start < 10
    assert len(df) == 15
    hung = df[df["task"] == "cancel-shipped-refusal"]
    assert set(hung["outcome"]) == {"infra_error"}
    assert hung["error"].str.contains(r"trial timed out after 0\.\d s \(trial_timeout=0.5\)").all()
    assert set(df[df["task"] != "cancel-shipped-refusal"]["outcome"]) == {"wrong_state"}
    assert (hung["latency_s"] >= 0.5).all()


def test_a_process_with_a_hung_backend_still_exits(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text(
        textwrap.dedent(
            f"""
        import time, passk_nb
        def hang(messages):
            time.sleep(3600)
        df = passk_nb.run(hang, trials=1, out={str(tmp_path / "runs")!r}, progress=False, trial_timeout=0.3)
        print(sorted(set(df["outcome"])))  # a Python agent that hangs: the agent's failure
        """
        )
    )
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['agent_error']"


def test_bad_trial_timeout(tmp_path):
    with pytest.raises(ValueError, match="trial_timeout must be a positive number"):
        passk_nb.run(out=tmp_path, trial_timeout=0)
