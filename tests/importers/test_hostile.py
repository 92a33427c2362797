"""Malformed and hostile input to every importer: a named error or a counted skip, never a trial.

Each importer (τ-bench, τ²-bench, inspect_ai, from_frame) is fed its own valid input with one
field replaced by a wrong type, removed, nested too deep or made huge, and special files (a
FIFO, a device, a zip whose sizes lie). Whatever happens must be one of: the import succeeds
with every trial kept and no row stored as an infrastructure error because it could not be
read; an :class:`ImportFormatError` naming the file, the record and the field; or, with
``strict=False``, the unreadable records skipped with a warning that counts them. Memory stays
bounded (tracemalloc) and nothing blocks.
"""

from __future__ import annotations

import copy
import io
import itertools
import json
import math
import os
import re
import struct
import threading
import tracemalloc
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from passk_nb.importers.checks import MAX_BYTES, ImportFormatError, read_capped
from passk_nb.importers.frame import from_frame
from passk_nb.importers.harbor import from_harbor
from passk_nb.importers.inspect_ai import from_inspect
from passk_nb.importers.tau_bench import from_tau_bench
from passk_nb.stats.summary import summarize

FIXTURES = Path(__file__).parent / "fixtures"
DEEP = "__deep__"  # stands for JSON nested 100,000 levels deep (written as text, not built)
#: One bad value of each kind a file can hold in place of the right one.
HOSTILE: dict[str, Any] = {
    "null": None,
    "list": [1, 2],
    "object": {"a": {"b": 1}},
    "text": "1.5s?",
    "huge int": 10**30,
    "negative": -5,
    "huge float": 1e308,
    "boolean": True,
    "long text": "x" * 300_000,
    "deep": DEEP,
}
MISSING = object()
#: Peak Python memory one malformed import may take (the inputs are at most a few MB).
PEAK_BYTES = 150 * 2**20


def write_json(path: Path, data: Any) -> Path:
    text = json.dumps(data)
    path.write_text(text.replace(json.dumps(DEEP), "[" * 100_000 + "]" * 100_000), encoding="utf-8")
    return path


def replaced(data: Any, where: list[Any], value: Any) -> Any:
    """A deep copy of ``data`` with the field at path ``where`` set to ``value`` (or removed)."""
    out = copy.deepcopy(data)
    target = out
    for key in where[:-1]:
        target = target[key]
    if value is MISSING and isinstance(target, list):
        del target[where[-1]]
    elif value is MISSING:
        target.pop(where[-1], None)
    else:
        target[where[-1]] = value
    return out


def import_result(call: Callable[[], pd.DataFrame]) -> tuple[pd.DataFrame | None, str, int]:
    """(the frame or None, the error or the skip warning, Python's peak memory in bytes).
    Any exception other than ImportFormatError fails the test."""
    tracemalloc.start()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                df, said = call(), ""
            except ImportFormatError as exc:
                df, said = None, str(exc)
        skipped = [str(w.message) for w in caught if str(w.message).startswith("skipped")]
        return df, said or (skipped[0] if skipped else ""), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def assert_named_error_or_counted_skip(
    call: Callable[[], pd.DataFrame], *, rows: int, infra: int, strict: bool, names: list[str]
) -> None:
    df, said, peak = import_result(call)
    assert peak < PEAK_BYTES, f"peak {peak / 2**20:.0f} MiB"
    if df is None:
        assert said, "an ImportFormatError with no message"
        assert any(name in said for name in names), said  # names the file (or the table)
        return
    assert not df["error"].fillna("").str.startswith("record could not be stored").any()
    assert int((df["outcome"] == "infra_error").sum()) <= infra  # no read problem became infra
    if said:  # strict=False skipped some: counted, and the rest kept
        assert not strict
        skipped = int(re.match(r"skipped (\d+) of (\d+)", said).group(1))  # type: ignore[union-attr]
        assert len(df) + skipped == rows, said
    else:
        assert len(df) == rows


# --- τ-bench ---------------------------------------------------------------------------

TAU = json.loads((FIXTURES / "tau_bench_small.json").read_text(encoding="utf-8"))
TAU_FIELDS = [[1, "task_id"], [1, "trial"], [1, "reward"], [1, "info"], [1, "traj"], [1, "traj", 0],
              [1, "traj", 2, "content"], [1, "traj", 2, "tool_calls"], [1, "traj", 2, "tool_calls", 0],
              [1, "traj", 0, "role"], [1]]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("field", TAU_FIELDS, ids=lambda f: ".".join(map(str, f)))
def test_tau_bench_fuzz(tmp_path: Path, field: list[Any]) -> None:
    base = from_tau_bench(write_json(tmp_path / "base.json", TAU))
    infra = int((base["outcome"] == "infra_error").sum())
    for (kind, value), strict in itertools.product([*HOSTILE.items(), ("missing", MISSING)], (True, False)):
        path = write_json(tmp_path / f"{kind}.json", replaced(TAU, field, value))
        assert_named_error_or_counted_skip(
            lambda p=path, s=strict: from_tau_bench(p, strict=s),
            rows=len(base) - (value is MISSING and field == [1]),  # the whole entry removed
            infra=infra,
            strict=strict,
            names=[str(path)],
        )


# --- τ²-bench --------------------------------------------------------------------------

TAU2 = json.loads((FIXTURES / "tau2_results_small.json").read_text(encoding="utf-8"))
TAU2_FIELDS = [["simulations", 0, key] for key in
               ("task_id", "trial", "duration", "start_time", "seed", "termination_reason",
                "reward_info", "messages")]  # fmt: skip
TAU2_FIELDS += [["simulations", 0], ["simulations", 0, "reward_info", "reward"], ["info"],
                ["info", "agent_info"], ["simulations", 0, "messages", 1, "tool_calls"]]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("field", TAU2_FIELDS, ids=lambda f: ".".join(map(str, f)))
def test_tau2_bench_fuzz(tmp_path: Path, field: list[Any]) -> None:
    base = from_tau_bench(write_json(tmp_path / "base.json", TAU2))
    infra = int((base["outcome"] == "infra_error").sum())
    for (kind, value), strict in itertools.product([*HOSTILE.items(), ("missing", MISSING)], (True, False)):
        path = write_json(tmp_path / f"{kind}.json", replaced(TAU2, field, value))
        assert_named_error_or_counted_skip(
            lambda p=path, s=strict: from_tau_bench(p, strict=s),
            rows=len(base) - (value is MISSING and field == ["simulations", 0]),
            infra=infra,
            strict=strict,
            names=[str(path)],
        )


def test_tau2_simulations_as_a_list_fuzz(tmp_path: Path) -> None:
    """τ²-bench's simulations alone, as a JSON list: hostile values in its first simulation (the
    one the format is told by) are named or skipped, never taken for τ-bench or a crash."""
    sims = TAU2["simulations"]
    for (kind, value), strict in itertools.product([*HOSTILE.items(), ("missing", MISSING)], (True, False)):
        for field in (["task_id"], ["trial"], ["reward_info"], ["termination_reason"], ["messages"]):
            path = write_json(tmp_path / f"{kind}.json", replaced(sims, [0, *field], value))
            assert_named_error_or_counted_skip(
                lambda p=path, s=strict: from_tau_bench(p, strict=s),
                rows=len(sims),
                infra=1,
                strict=strict,
                names=[str(path)],
            )


# --- Harbor ----------------------------------------------------------------------------

HARBOR_TRIAL = {
    "task_name": "hello",
    "trial_name": "hello__0",
    "source": "demo",
    "agent_info": {"name": "oracle", "version": "1", "model_info": {"name": "m", "provider": "p"}},
    "agent_result": {"n_input_tokens": 10, "n_output_tokens": 5, "cost_usd": 0.1},
    "verifier_result": {"rewards": {"reward": 1.0}},
    "exception_info": None,
    "config": {"job_id": "j1"},
    "started_at": "2026-01-01T10:00:00Z",
    "finished_at": "2026-01-01T10:01:00Z",
}
HARBOR_FIELDS = [["task_name"], ["trial_name"], ["source"], ["agent_info"], ["agent_info", "name"],
                 ["agent_info", "model_info"], ["agent_info", "model_info", "name"], ["agent_result"],
                 ["agent_result", "n_input_tokens"], ["verifier_result"], ["verifier_result", "rewards"],
                 ["verifier_result", "rewards", "reward"], ["exception_info"], ["config"],
                 ["config", "job_id"], ["started_at"], ["finished_at"]]  # fmt: skip


def harbor_job(folder: Path, hostile: Any) -> Path:
    """A Harbor job of three trials of one task; the second trial's result.json is ``hostile``."""
    for i in range(3):
        (folder / f"hello__{i}").mkdir(parents=True)
        data = hostile if i == 1 else {**HARBOR_TRIAL, "trial_name": f"hello__{i}"}
        write_json(folder / f"hello__{i}" / "result.json", data)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("field", HARBOR_FIELDS, ids=lambda f: ".".join(map(str, f)))
def test_harbor_fuzz(tmp_path: Path, field: list[Any]) -> None:
    for (kind, value), strict in itertools.product([*HOSTILE.items(), ("missing", MISSING)], (True, False)):
        job = harbor_job(tmp_path / f"{kind}-{strict}", replaced(HARBOR_TRIAL, field, value))
        assert_named_error_or_counted_skip(
            lambda j=job, s=strict: from_harbor(j, errored="failure", strict=s),
            rows=3 - (value is MISSING and field == ["task_name"]),  # no task_name: not a trial
            infra=0,
            strict=strict,
            names=[str(job)],
        )


def test_a_harbor_result_that_is_deep_a_device_or_a_fifo_is_refused_unread(tmp_path: Path) -> None:
    job = harbor_job(tmp_path / "deep", DEEP)
    deep = job / "hello__1" / "result.json"
    with pytest.raises(ImportFormatError, match=re.escape(f"{deep} nests too deep")):
        from_harbor(job, errored="failure")
    job = harbor_job(tmp_path / "device", HARBOR_TRIAL)
    (job / "hello__1" / "result.json").unlink()
    (job / "hello__1" / "result.json").symlink_to("/dev/zero")
    df, said, peak = import_result(lambda: from_harbor(job, errored="failure"))
    assert df is None and "result.json is a character device, not a regular file" in said and peak < 4 * 2**20
    (job / "hello__1" / "result.json").unlink()
    os.mkfifo(job / "hello__1" / "result.json")
    exc = finishes(lambda: from_harbor(job, errored="failure"))
    assert isinstance(exc, ImportFormatError) and "result.json is a FIFO" in str(exc)
    (job / "hello__1" / "result.json").unlink()


# --- from_frame ------------------------------------------------------------------------

TABLE = pd.DataFrame(
    {
        "case": ["a", "a", "b", "b"],
        "attempt": [1, 2, 1, 2],
        "ok": [1, 0, 1, 1],
        "variant": ["v1"] * 4,
        "tokens": [10, 12, 9, 11],
        "secs": [1.0, 2.0, 1.5, 0.5],
        "when": ["2025-06-10T10:00:00Z"] * 4,
    }
)
MAPPED = {"prompt_name": "variant", "input_tokens": "tokens", "latency_s": "secs", "started_at": "when"}


@pytest.mark.slow
@pytest.mark.parametrize("column", list(TABLE.columns))
def test_from_frame_fuzz(column: str) -> None:
    for value, strict in itertools.product([v for v in HOSTILE.values() if v != DEEP], (True, False)):
        table = TABLE.astype(object)
        table.at[2, column] = value
        assert_named_error_or_counted_skip(
            lambda t=table, s=strict: from_frame(
                t, task="case", trial="attempt", passed="ok", model="m", columns=MAPPED, strict=s
            ),
            rows=len(TABLE),
            infra=0,
            strict=strict,
            names=["the table, row 2"],
        )


# --- inspect_ai ------------------------------------------------------------------------

INSPECT_KEYS = ("id", "epoch", "scores", "messages", "total_time", "model_usage", "output", "error")
INSPECT_FIELDS = [["samples", 0, key] for key in INSPECT_KEYS]
INSPECT_FIELDS += [["samples", 0], ["samples"], ["eval"], ["samples", 0, "scores", "match", "value"]]


@pytest.mark.slow
@pytest.mark.parametrize("field", INSPECT_FIELDS, ids=lambda f: ".".join(map(str, f)))
def test_inspect_fuzz(small_inspect_logs: tuple[Path, Path], tmp_path: Path, field: list[Any]) -> None:
    log = json.loads(small_inspect_logs[1].read_text(encoding="utf-8"))
    for (kind, value), strict in itertools.product([*HOSTILE.items(), ("missing", MISSING)], (True, False)):
        path = write_json(tmp_path / f"{kind}.json", replaced(log, field, value))
        assert_named_error_or_counted_skip(
            lambda p=path, s=strict: from_inspect(p, strict=s),
            rows=4 - (value is MISSING and field == ["samples", 0]),
            infra=0,
            strict=strict,
            names=[str(path)],
        )


# --- the findings, one by one ----------------------------------------------------------


def tau2_with(durations: list[Any], passes: int) -> dict[str, Any]:
    """τ²-bench results: one simulation per task, the first ``passes`` passing, with these durations."""
    template = TAU2["simulations"][0]
    sims = [
        {**template, "id": f"sim-{i}", "task_id": str(i), "trial": 0, "duration": duration,
         "termination_reason": "user_stop", "reward_info": {"reward": 1.0 if i < passes else 0.0}}
        for i, duration in enumerate(durations)
    ]  # fmt: skip
    return {**TAU2, "simulations": sims}


def test_tau2_durations_as_text_are_converted_not_infra(tmp_path: Path) -> None:
    # 13 passing simulations with numeric durations, 7 failing ones with "1.5s": on main the 7
    # became infra_error rows (left out of n) and pass^1 read 1.000
    path = write_json(tmp_path / "results.json", tau2_with([7.0] * 13 + ["1.5s"] * 7, passes=13))
    df = from_tau_bench(path)
    assert (df["outcome"] == "infra_error").sum() == 0
    assert df.loc[df["task"].astype(int) >= 13, "latency_s"].tolist() == [1.5] * 7
    assert summarize(df, k=1, n_boot=0)["pass^k"].iloc[0] == pytest.approx(0.65)


def test_tau2_unreadable_duration_is_named_or_skipped_with_a_count(tmp_path: Path) -> None:
    path = write_json(tmp_path / "results.json", tau2_with([7.0] * 13 + ["slow"] * 7, passes=13))
    with pytest.raises(ImportFormatError, match=rf"{re.escape(str(path))}, simulation 13 \(task '13' "
                       r"trial 0\): latency_s \(from 'duration'\) holds 'slow', not a duration"):  # fmt: skip
        from_tau_bench(path)
    with pytest.warns(UserWarning, match=r"skipped 7 of 20 records .*strict=False"):
        df = from_tau_bench(path, strict=False)
    assert len(df) == 13 and (df["outcome"] == "infra_error").sum() == 0


def test_from_frame_converts_integer_names_text_latency_and_times() -> None:
    # on main: every row an infra_error ("record could not be stored")
    table = TABLE.assign(variant=[3] * 4, secs=["1.5s", "2", "0.5 s", "1 min"])
    df = from_frame(table, task="case", trial="attempt", passed="ok", model="m", columns=MAPPED)
    assert (df["outcome"] == "infra_error").sum() == 0
    assert df["prompt_name"].tolist() == ["3"] * 4
    assert df["latency_s"].tolist() == [1.5, 2.0, 0.5, 60.0]
    assert df["started_at"].iloc[0] == pd.Timestamp("2025-06-10T10:00:00Z")
    assert summarize(df, k=1, n_boot=0)["pass^k"].iloc[0] == pytest.approx(0.75)


def test_from_frame_names_the_row_and_column_it_cannot_convert() -> None:
    table = TABLE.assign(when=["2025-06-10T10:00:00Z", "yesterday", "2025-06-10T10:00:00Z", "soon"])
    with pytest.raises(
        ImportFormatError, match=r"the table, row 1: started_at \(from 'when'\) holds 'yesterday'"
    ):
        from_frame(table, task="case", trial="attempt", passed="ok", model="m", columns=MAPPED)
    with pytest.warns(UserWarning, match="skipped 2 of 4 records"):
        df = from_frame(
            table, task="case", trial="attempt", passed="ok", model="m", columns=MAPPED, strict=False
        )
    assert df["task"].tolist() == ["a", "b"]


@pytest.mark.parametrize("epoch", [0, -5])
def test_inspect_epochs_below_one_are_refused(
    small_inspect_logs: tuple[Path, Path], tmp_path: Path, epoch: int
) -> None:
    # on main: stored as trial -1 / -6
    log = json.loads(small_inspect_logs[1].read_text(encoding="utf-8"))
    log["samples"][0]["epoch"] = epoch
    path = write_json(tmp_path / "log.json", log)
    with pytest.raises(ImportFormatError, match=rf"{re.escape(str(path))}, sample .*: epoch holds {epoch}"):
        from_inspect(path)
    with pytest.warns(UserWarning, match="skipped 1 of 4"):
        df = from_inspect(path, strict=False)
    assert len(df) == 3 and df["trial"].min() == 0


def test_wrong_types_raise_one_error_type_naming_file_and_record(tmp_path: Path) -> None:
    # on main: AttributeError / TypeError / KeyError naming no file
    cases = {
        "info.json": replaced(TAU, [1, "info"], "crashed"),
        "traj.json": replaced(TAU, [1, "traj"], {"role": "user"}),
        "sim.json": replaced(TAU2, ["simulations", 0], "not a simulation"),
        "task.json": replaced(TAU2, ["simulations", 0, "task_id"], MISSING),
        "deep.json": DEEP,
    }
    for name, data in cases.items():
        path = write_json(tmp_path / name, data)
        with pytest.raises(ImportFormatError, match=re.escape(str(path))):
            from_tau_bench(path)
    with pytest.raises(ImportFormatError, match=r", entry 1 \(task 1 trial 0\): info holds 'crashed'"):
        from_tau_bench(tmp_path / "info.json")


# --- special files and sizes -----------------------------------------------------------


def finishes(call: Callable[[], Any], seconds: float = 30) -> BaseException | None:
    """Run ``call`` in a thread; the exception it raised, after asserting it did not block."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still blocked after {seconds} s"
    return outcome[0]


def test_a_fifo_in_a_tau2_folder_is_refused_not_read(tmp_path: Path) -> None:
    # on main: blocks forever opening the FIFO
    data = copy.deepcopy(TAU2)
    sims = data.pop("simulations")
    (tmp_path / "simulations").mkdir()
    for sim in sims[:-1]:
        write_json(tmp_path / "simulations" / f"{sim['id']}.json", sim)
    fifo = tmp_path / "simulations" / f"{sims[-1]['id']}.json"
    os.mkfifo(fifo)
    write_json(tmp_path / "results.json", data)
    exc = finishes(lambda: from_tau_bench(tmp_path))
    assert isinstance(exc, ImportFormatError) and f"{fifo} is a FIFO (named pipe)" in str(exc)
    fifo.unlink()  # (a writer opening it would now block, not the test)


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/null"])
def test_a_symlink_to_a_device_is_refused_unread(tmp_path: Path, target: str) -> None:
    # on main: /dev/zero read until memory ran out (5.3 GB)
    link = tmp_path / "results.json"
    link.symlink_to(target)
    df, said, peak = import_result(lambda: from_tau_bench(link))
    assert df is None and "is a character device, not a regular file" in said and str(link) in said
    assert peak < 2**20
    inspect_link = tmp_path / "log.eval"
    inspect_link.symlink_to(target)
    pytest.importorskip("inspect_ai")
    assert isinstance(finishes(lambda: from_inspect(inspect_link)), ImportFormatError)


def test_files_over_the_cap_are_refused_before_they_are_read(tmp_path: Path) -> None:
    path = write_json(tmp_path / "big.json", [TAU[0]] * 2_000)  # ~5 MB
    size = path.stat().st_size
    df, said, peak = import_result(lambda: from_tau_bench(path, max_bytes=2**20))
    assert df is None and f"is {size:,} bytes, over the import limit of 1,048,576 bytes" in said
    assert peak < 2**20  # nothing of it was read
    assert MAX_BYTES == 256 * 2**20 and len(read_capped(path)) == size  # within the default cap


def eval_log_with(
    tmp_path: Path, real: Path, member_bytes: int, *, method: int, declared: int | None = None
) -> Path:
    """The real .eval log ``real`` with one more sample member of ``member_bytes`` spaces,
    compressed with ``method`` (8: deflate, 93: zstandard, as inspect_ai writes); ``declared``:
    the size its headers claim (a zip bomb understates it)."""
    pytest.importorskip("inspect_ai.log")  # its import teaches zipfile zstandard
    buf = io.BytesIO()
    with zipfile.ZipFile(real) as src, zipfile.ZipFile(buf, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        huge = zipfile.ZipInfo("samples/huge_epoch_1.json")
        huge.compress_type = method
        dst.writestr(huge, b" " * member_bytes)
    data = bytearray(buf.getvalue())
    if declared is not None:
        with zipfile.ZipFile(io.BytesIO(bytes(data))) as z:
            offset = z.getinfo("samples/huge_epoch_1.json").header_offset
        struct.pack_into("<I", data, offset + 22, declared)  # the local header's size
        at = data.rfind(b"PK\x01\x02")  # the central directory entry of the last member
        struct.pack_into("<I", data, at + 24, declared)
    path = tmp_path / f"huge-{method}-{member_bytes}-{declared}.eval"
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, 93], ids=["deflate", "zstd"])
def test_an_eval_log_that_expands_past_the_cap_is_refused_in_bounded_memory(
    small_inspect_logs: tuple[Path, Path], tmp_path: Path, method: int
) -> None:
    # on main: a 1.5 MB .eval holding a 1.5 GiB sample reached 3.2 GB; here 64 MiB in < 1 MB
    eval_log = small_inspect_logs[0]
    honest = eval_log_with(tmp_path, eval_log, 64 * 2**20, method=method)
    assert honest.stat().st_size < 2**20
    df, said, peak = import_result(lambda: from_inspect(honest, max_bytes=8 * 2**20))
    assert (
        df is None and f"{honest} expanded is" in said and "over the import limit of 8,388,608 bytes" in said
    )
    assert peak < 4 * 2**20
    lying = eval_log_with(tmp_path, eval_log, 64 * 2**20, method=method, declared=1_000)  # "1 kB"
    df, said, peak = import_result(lambda: from_inspect(lying, max_bytes=8 * 2**20))
    assert df is None and str(lying) in said and "does not expand to the 1,000 bytes its header says" in said
    assert peak < 8 * 2**20
    assert len(from_inspect(eval_log)) == 4  # the real (zstandard) log itself still reads


def test_a_fifo_among_inspect_logs_is_refused(small_inspect_logs: tuple[Path, Path], tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / small_inspect_logs[1].name).write_bytes(small_inspect_logs[1].read_bytes())
    os.mkfifo(folder / "stuck.json")
    assert finishes(lambda: from_inspect(folder)) is None  # inspect lists regular files only
    exc = finishes(lambda: from_inspect(folder / "stuck.json"))
    assert isinstance(exc, ImportFormatError) and "stuck.json is a FIFO" in str(exc)


def test_loaded_values_that_are_not_json_are_named() -> None:
    results = [{"task_id": 0, "trial": 0, "reward": 1.0, "info": {}, "traj": []}]
    results[0]["reward"] = math.inf
    with pytest.raises(ImportFormatError, match=r"the τ-bench results, entry 0 .*reward must be a finite"):
        from_tau_bench(results)
