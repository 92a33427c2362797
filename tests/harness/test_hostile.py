"""Hardening: hostile model output, broken files, concurrent runs, write failures.

One bad trial must never stop a run, lose a record, or corrupt the numbers.
"""

import errno
import functools
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
    # claims: the two processes of one spec split its trials, so any reader sees each trial once
    raw = pd.read_parquet(out)
    assert len(raw) == 2 * 5 * 40 and not raw.duplicated(["run_id", "task", "trial"]).any()


def test_write_failure_is_clear_and_earlier_trials_stay_readable(tmp_path, monkeypatch):
    calls = {"n": 0}
    real_write = store.pq.write_table

    def failing_write(table, where, **kwargs):
        calls["n"] += 1
        if calls["n"] >= 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(table, where, **kwargs)

    monkeypatch.setattr(store.pq, "write_table", failing_write)
    monkeypatch.setattr(batch._Writer, "__init__", _small_writer)
    with pytest.raises(StoreError, match=r"No space left on device.*records written before are intact"):
        passk_nb.run("scripted", trials=4, out=tmp_path, progress=False, concurrency=1)
    monkeypatch.undo()
    kept = passk_nb.load(tmp_path)
    assert len(kept) == 5
    assert not any(p.name.endswith(".tmp") for p in tmp_path.rglob("*"))
    # and the next run resumes from there
    assert len(passk_nb.run("scripted", trials=4, out=tmp_path, progress=False)) == 20


_small_writer = functools.partialmethod(batch._Writer.__init__, every_s=3600.0, every_n=5)


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
    with pytest.raises(ValueError, match="trial_timeout must be a finite number of seconds > 0"):
        passk_nb.run(out=tmp_path, trial_timeout=0)


# -- the record boundary: nothing a backend sends can keep a trial off the disk ---------------------


class Surrogates(BaseProvider):
    """Answers with a lone surrogate (half an emoji escape) and absurd token counts."""

    name = "surrogates"

    def chat(self, messages):
        from passk_nb.harness.providers.base import Reply

        tokens = {0: 10**30, 1: -5, 2: 7}[self.seed % 3]
        return Reply('{"answer": "Sorry \\ud83d \\\\ done"}', input_tokens=tokens, output_tokens=3)


def test_lone_surrogates_and_absurd_token_counts_are_stored_not_fatal(tmp_path):
    from passk_nb.data.records import unescape_text
    from passk_nb.data.transcript import parse_transcript

    seen = []
    df = passk_nb.run(Surrogates(model="m"), trials=6, out=tmp_path, progress=False, on_record=seen.append)
    assert len(df) == 30 and len(seen) == 30
    assert df["text_escaped"].all()
    answer = df["final_answer"].iloc[0]
    assert unescape_text(answer) == "Sorry \ud83d \\ done"  # lossless
    replies = [e for e in parse_transcript(df["transcript"].iloc[0]) if e["kind"] == "reply"]
    assert replies[0]["action"]["answer"] == "Sorry \ud83d \\ done"
    by_seed = df.set_index("trial")
    assert pd.isna(by_seed.loc[0, "input_tokens"]).all()  # 10**30: out of range, null
    assert pd.isna(by_seed.loc[1, "input_tokens"]).all()  # negative: null
    assert (by_seed.loc[2, "input_tokens"] == 7).all()
    assert by_seed.loc[0, "record_notes"].str.contains("input_tokens=10000").all()
    assert by_seed.loc[1, "record_notes"].str.contains("input_tokens=-5 out of range").all()
    # every reader sees the rows; a rerun resumes (nothing to do) instead of crashing again
    assert len(pd.read_parquet(tmp_path)) == 30
    assert len(passk_nb.run(Surrogates(model="m"), trials=6, out=tmp_path, progress=False)) == 30


def test_run_cases_outputs_with_lone_surrogates_are_stored(tmp_path):
    cases = [{"name": "c", "input": "x", "expected": "x"}]
    df = passk_nb.run_cases(lambda x: "x \udcff", cases, trials=3, out=tmp_path)
    assert len(df) == 3 and df["passed"].all() and df["text_escaped"].all()
    memory = passk_nb.run_cases(lambda x: "x \udcff", cases, trials=2)
    assert memory["final_answer"].tolist() == ["x \\udcff"] * 2


def test_a_record_that_cannot_be_stored_becomes_its_own_error_row():
    from passk_nb.data.records import table_from_records

    good = {"run_id": "r", "suite": "s", "task": "t", "passed": True, "outcome": "pass"}
    rows = [{**good, "trial": 0}, {**good, "trial": 1, "started_at": "not a time"}, {**good, "trial": 2}]
    stored = table_from_records(rows).to_pylist()
    assert [r["outcome"] for r in stored] == ["pass", "infra_error", "pass"]
    assert stored[1]["error"].startswith("record could not be stored")
    assert stored[1]["trial"] == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": 123}, "model must be a string"),
        ({"prompt_name": 123}, "prompt_name must be a string"),
        ({"json_mode": "no"}, "json_mode must be one of"),
        ({"backend_seed": 2**70}, "backend_seed=.* is out of range"),
        ({"backend_seed": 1.5}, "backend_seed must be a whole number"),
        ({"trial_timeout": True}, "trial_timeout must be a finite number"),
        ({"trial_timeout": float("inf")}, "trial_timeout must be a finite number"),
        ({"tasks": ["refund-delivered", "refund-delivered"]}, r"tasks lists \['refund-delivered'\] more"),
        ({"trials": 10**12}, "more than 100,000 per task"),
        ({"temperature": float("nan")}, "temperature must be a number ≥ 0"),
    ],
)
def test_bad_run_arguments_fail_before_the_first_trial(kwargs, message, tmp_path):
    calls = []

    def agent(messages):
        calls.append(1)
        return '{"answer": "no"}'

    with pytest.raises((ValueError, TypeError), match=message):
        passk_nb.run(agent, out=tmp_path, progress=False, **kwargs)
    assert calls == []
    assert not list(tmp_path.rglob("*"))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout": float("nan")}, "timeout must be a finite number"),
        ({"timeout": float("inf")}, "timeout must be a finite number"),
        ({"backoff_base": float("nan")}, "backoff_base must be a finite number"),
    ],
)
def test_bad_backend_options_fail_up_front(options, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        passk_nb.run("openai", "m", base_url="http://127.0.0.1:9", out=tmp_path, progress=False, **options)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": 123}, "model must be a string"),
        ({"prompt_name": 123}, "prompt_name must be a string"),
        ({"trials": 10**12}, "more than 100,000"),
    ],
)
def test_bad_run_cases_arguments_fail_before_the_first_trial(kwargs, message):
    calls = []
    with pytest.raises((ValueError, TypeError), match=message):
        passk_nb.run_cases(lambda x: calls.append(x), [{"input": 1, "expected": "1"}], **kwargs)
    assert calls == []


def test_a_huge_integer_tool_argument_is_fed_back_not_an_infra_error(tmp_path):
    amount = "1" + "0" * 400

    def agent(messages):
        if sum(m["role"] == "assistant" for m in messages) == 0:
            return '{"tool": "refund_order", "args": {"order_id": "O1001", "amount": ' + amount + "}}"
        return '{"answer": "done"}'

    df = passk_nb.run(agent, trials=1, tasks=["refund-delivered"], out=tmp_path, progress=False)
    assert df["outcome"].tolist() == ["wrong_state"]
    assert df["n_tool_errors"].tolist() == [1]
    assert "too large" in df["transcript"].iloc[0]


def test_a_failed_final_merge_says_the_trials_are_safe(tmp_path, monkeypatch):
    real_write = store.pq.write_table

    def disk_full_for_the_merge(table, where, **kwargs):
        if table.num_rows > 5:  # the parts (5 rows each) fit; the merged file does not
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(table, where, **kwargs)

    monkeypatch.setattr(store.pq, "write_table", disk_full_for_the_merge)
    monkeypatch.setattr(batch._Writer, "__init__", _small_writer)
    with pytest.warns(RuntimeWarning, match=r"merging the parts .*No space left.*every trial is safe"):
        df = passk_nb.run("scripted", trials=4, out=tmp_path, progress=False, concurrency=1)
    assert len(df) == 20
    assert len(store.part_files(tmp_path)) == 4
    assert len(pd.read_parquet(tmp_path)) == 20


SIGTERM_CHILD = textwrap.dedent(
    """
    import json, sys, time
    import passk_nb

    def slow(messages):
        time.sleep(0.05)
        return json.dumps({"answer": "no"})

    def report(record):
        print(record["task"], record["trial"], flush=True)

    passk_nb.run(slow, trials=400, concurrency=8, out=sys.argv[1], progress=False, on_record=report)
    """
)


def test_sigterm_writes_every_completed_trial_like_sigint(tmp_path):
    import signal

    script = tmp_path / "child.py"
    script.write_text(SIGTERM_CHILD)
    out = tmp_path / "runs"
    child = subprocess.Popen([sys.executable, str(script), str(out)], stdout=subprocess.PIPE, text=True)
    reported = [child.stdout.readline() for _ in range(30)]
    child.send_signal(signal.SIGTERM)
    reported += child.stdout.readlines()
    assert child.wait(timeout=30) == -signal.SIGTERM
    reported_keys = {(line.split()[0], int(line.split()[1])) for line in reported if line.strip()}
    stored = passk_nb.load(out)
    assert len(reported_keys) >= 30 and len(stored) < 5 * 400
    assert reported_keys <= set(zip(stored["task"], stored["trial"], strict=True))


def test_abandoned_threads_are_bounded_and_end(tmp_path):
    import threading

    from tests.helpers.fake_servers import FakeServer, Fault

    def trial_threads():
        return [t for t in threading.enumerate() if t.name == "passk-trial"]

    most = []
    with FakeServer("openai", rule=lambda body: Fault.hang(30)) as server:
        df = passk_nb.run(
            "openai",
            "m",
            base_url=server.url,
            api_key_env=None,
            trials=4,
            concurrency=3,
            trial_timeout=0.3,
            timeout=1.0,
            max_attempts=1,
            out=tmp_path,
            progress=False,
            on_record=lambda record: most.append(len(trial_threads())),
        )
        assert set(df["outcome"]) == {"infra_error"} and len(df) == 20
        assert max(most) <= 2 * 3, most  # the workers plus at most `concurrency` abandoned ones
        deadline = time.monotonic() + 15
        while trial_threads() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not trial_threads(), "abandoned trials still running after their requests timed out"


def test_a_backend_that_never_returns_stops_the_run_instead_of_piling_up_threads(tmp_path, monkeypatch):
    release = __import__("threading").Event()
    monkeypatch.setattr(batch, "STALL_GRACE_S", 1.0)

    def never(messages):
        release.wait(60)
        return '{"answer": "no"}'

    try:
        with pytest.raises(batch.BackendHung, match="ignore cancellation.*run again to resume"):
            passk_nb.run(never, trials=4, concurrency=2, trial_timeout=0.2, out=tmp_path, progress=False)
    finally:
        release.set()
    stored = passk_nb.load(tmp_path)
    assert 0 < len(stored) < 20 and set(stored["outcome"]) == {"agent_error"}  # a Python agent that hangs
