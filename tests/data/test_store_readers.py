"""The dataset on disk: concurrent merges and readers, foreign files, what any parquet reader sees."""

from __future__ import annotations

import threading

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import passk_nb
from passk_nb.data import store
from passk_nb.data.store import load, merge, write_part
from passk_nb.stats.parquet_counts import count_folder
from tests.helpers.records import minimal_rows as rows


def read_with_every_reader(folder):
    """Row count and (run_id, task, trial) keys as pandas, DuckDB and Polars read the folder directly."""
    import duckdb
    import polars as pl

    glob = f"{folder}/**/*.parquet"
    frames = {
        "pandas": pd.read_parquet(folder)[["run_id", "task", "trial"]],
        "duckdb": duckdb.sql(f"SELECT run_id, task, trial FROM read_parquet('{glob}')").df(),
        "polars": pl.read_parquet(glob).select("run_id", "task", "trial").to_pandas(),
    }
    return {name: (len(f), int(f.duplicated().sum())) for name, f in frames.items()}


class _Listing:
    """os.scandir's context manager over a fixed list of entries."""

    def __init__(self, entries):
        self.entries = iter(entries)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.entries)

    def close(self):
        pass


def merge_during_listing(monkeypatch, run_dir, folder, run_id, *, show_merged_part, nth=1, stale=False):
    """Make the ``nth`` listing of ``run_dir`` race a merge: the directory is read, then merged (a new
    part written, its inputs deleted), and the listing returns what it read less the inputs that
    are gone by then, with or without the merged part (a directory read is not a snapshot: an entry
    removed or added while it is read may or may not appear). ``stale``: the listing returns
    everything it read before the merge, the deleted inputs included."""
    import os

    real = os.scandir
    state = {"done": False, "calls": 0}

    def scandir(path="."):
        if state["done"] or os.path.abspath(path) != str(run_dir):
            return real(path)
        state["calls"] += 1
        if state["calls"] < nth:
            return real(path)
        state["done"] = True
        with real(path) as it:
            before = list(it)
        merge(folder, run_id)
        kept = [e for e in before if stale or not e.name.endswith(".parquet") or os.path.exists(e.path)]
        if show_merged_part:
            with real(path) as it:
                known = {e.name for e in kept}
                kept += [e for e in it if e.name not in known]
        return _Listing(kept)

    monkeypatch.setattr(os, "scandir", scandir)
    return state


@pytest.mark.parametrize("show_merged_part", [False, True])
def test_a_merge_racing_the_listing_loses_no_rows(tmp_path, monkeypatch, show_merged_part):
    # issue 29 item 6: load dropped the merged-away parts it had listed, and missed the merged part
    # created after the listing: 0 or 3 of 9 rows, no error
    monkeypatch.setattr(store, "MERGE_BELOW_BYTES", 10**9)
    for chunk in (range(0, 3), range(3, 6), range(6, 9)):
        write_part(rows("r", chunk), tmp_path, "r")
    state = merge_during_listing(
        monkeypatch, tmp_path / "r", tmp_path, "r", show_merged_part=show_merged_part
    )
    assert len(load(tmp_path)) == 9
    assert state["done"]


@pytest.mark.parametrize("nth", [1, 2, 3])
def test_a_merge_of_some_parts_racing_the_listing_loses_none_of_them(tmp_path, monkeypatch, nth):
    # a large part the merge leaves alone is listed; the small ones it merges are gone from the
    # listing and the merged part is not yet in it: only the run's log can say a merge happened
    big = write_part(rows("r", range(0, 300)), tmp_path, "r")
    monkeypatch.setattr(store, "MERGE_BELOW_BYTES", big.stat().st_size)
    for chunk in (range(300, 303), range(303, 306)):
        write_part(rows("r", chunk), tmp_path, "r")
    state = merge_during_listing(monkeypatch, tmp_path / "r", tmp_path, "r", show_merged_part=False, nth=nth)
    assert sorted(load(tmp_path)["trial"]) == list(range(306))
    assert state["done"] and len(store.part_files(tmp_path)) == 2  # the merge happened


def test_a_part_that_vanishes_between_listing_and_reading_means_relist(tmp_path, monkeypatch):
    # issue 29 item 6: the directory is read, then another process merges the run; the listing
    # still names the merged-away parts (their is_file() now false) and not the merged part. On
    # main those paths were dropped: 0 of 9 rows, no error. They must mean: list again
    monkeypatch.setattr(store, "MERGE_BELOW_BYTES", 10**9)
    for chunk in (range(0, 3), range(3, 6), range(6, 9)):
        write_part(rows("r", chunk), tmp_path, "r")
    state = merge_during_listing(
        monkeypatch, tmp_path / "r", tmp_path, "r", show_merged_part=False, stale=True
    )
    assert sorted(load(tmp_path)["trial"]) == list(range(9))
    assert state["done"] and len(store.part_files(tmp_path)) == 1  # the merge happened


def test_parts_written_during_a_load_do_not_make_it_retry(tmp_path, monkeypatch):
    # a running writer adds parts all the time: a load is consistent without them
    write_part(rows("r", range(3)), tmp_path, "r")
    real = store._read_all
    written = iter(range(3, 3 + 3 * (store.RELIST_ATTEMPTS + 5), 3))

    def read_while_a_writer_writes(files, strict, columns=None):
        start = next(written)
        write_part(rows("r", range(start, start + 3)), tmp_path, "r")
        return real(files, strict, columns)

    monkeypatch.setattr(store, "_read_all", read_while_a_writer_writes)
    assert len(load(tmp_path)) >= 3


def read_during_merges(folder, read):
    """``read()`` (a row count) again and again while another thread writes 98 more rows of run r
    in parts of 2 and merges them every third part; asserts no read saw fewer rows than the one
    before, and returns the number of reads."""
    write_part(rows("r", range(2)), folder, "r")
    done = threading.Event()
    errors = []

    def writer_and_merger():
        try:
            for start in range(2, 100, 2):
                write_part(rows("r", range(start, start + 2)), folder, "r")
                if start % 6 == 0:
                    merge(folder, "r")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=writer_and_merger)
    thread.start()
    seen, reads = 0, 0
    while not done.is_set() or reads < 5:
        n = read()
        assert n >= seen, "a read lost rows another one had seen"
        seen, reads = n, reads + 1
    thread.join()
    assert not errors, errors
    return reads


def test_load_during_merges_never_fails_nor_loses_rows(tmp_path):
    def read():
        df = load(tmp_path)
        assert not df.duplicated(["run_id", "task", "trial"]).any()
        return len(df)

    assert read_during_merges(tmp_path, read) > 5
    assert len(load(tmp_path)) == 100


def test_merge_leaves_one_row_per_trial_for_every_reader(tmp_path):
    first = write_part(rows("r", range(4), outcome="infra_error"), tmp_path, "r")
    retried = write_part(rows("r", range(4)), tmp_path, "r")  # a resume retried the infra errors
    write_part(rows("r", range(4, 8)), tmp_path, "r")
    # a merge killed after writing its output: its inputs are still there too
    write_part(pq.read_table(retried), tmp_path, "r")
    assert read_with_every_reader(tmp_path)["duckdb"] == (16, 8)
    merge(tmp_path, "r")
    assert read_with_every_reader(tmp_path) == {name: (8, 0) for name in ("pandas", "duckdb", "polars")}
    assert set(load(tmp_path)["outcome"]) == {"pass"}
    assert not first.exists()


def test_summarize_refuses_a_frame_with_repeated_trials(tmp_path):
    df = passk_nb.run("scripted", trials=2, out=tmp_path, progress=False)
    with pytest.raises(ValueError, match=r"5 trials appear more than once .*drop_duplicates"):
        passk_nb.summarize(pd.concat([df, df.iloc[:5]]), k=1)


def test_load_names_a_foreign_parquet_and_lenient_mode_skips_it(tmp_path):
    passk_nb.run("scripted", trials=2, out=tmp_path, progress=False)
    summary = tmp_path / "summary.parquet"
    pd.DataFrame({"task": ["a"], "pass@k": [0.5]}).to_parquet(summary)
    with pytest.raises(ValueError, match=r"summary\.parquet.*lacks the columns"):
        load(tmp_path)
    with pytest.warns(RuntimeWarning, match=r"summary\.parquet"):
        assert len(load(tmp_path, strict=False)) == 10


def test_load_fills_columns_an_older_version_lacked_and_names_broken_parts(tmp_path):
    passk_nb.run("scripted", trials=2, out=tmp_path, progress=False)
    part = store.part_files(tmp_path)[0]
    table = pq.read_table(part)
    pq.write_table(table.drop(["n_tool_errors", "text_escaped", "record_notes"]), part)  # an older version
    df = load(tmp_path)
    assert len(df) == 10 and (df["n_tool_errors"] == 0).all() and not df["text_escaped"].any()
    broken = tmp_path / "run" / "part-broken.parquet"
    broken.parent.mkdir()
    holes = table.slice(0, 2)
    holes = holes.set_column(holes.schema.get_field_index("n_turns"), "n_turns", pa.nulls(2, pa.int64()))
    pq.write_table(holes, broken)
    with pytest.raises(ValueError, match=r"part-broken\.parquet.*missing values in columns \['n_turns'\]"):
        load(tmp_path)
    with pytest.warns(RuntimeWarning, match=r"part-broken\.parquet"):
        assert len(load(tmp_path, strict=False)) == 10


def test_the_guarantees_recipes_keep_one_row_per_trial(tmp_path):
    import re
    from pathlib import Path

    import duckdb
    import polars as pl

    page = (Path(__file__).parents[2] / "docs" / "guarantees.md").read_text()
    sql = re.search(r"`(SELECT \* FROM read_parquet\('DIR[^`]+)`", page).group(1)
    polars_code = re.search(r'`(pl\.read_parquet\("DIR[^`]+)`', page).group(1)
    write_part(rows("r", range(4), outcome="infra_error"), tmp_path, "r")
    write_part(rows("r", range(4)), tmp_path, "r")  # a resume retrying them, not merged yet
    write_part(rows("r", range(2, 6)), tmp_path, "r")  # leftovers of a killed merge
    for frame in (
        duckdb.sql(sql.replace("DIR", str(tmp_path))).df(),
        eval(polars_code.replace("DIR", str(tmp_path)), {"pl": pl}).to_pandas(),
    ):
        assert sorted(frame["trial"]) == list(range(6))
        assert set(frame["outcome"]) == {"pass"}


def test_merge_leaves_large_parts_alone_unless_they_hold_a_trial_twice(tmp_path, monkeypatch):
    big = write_part(rows("r1", range(0, 50)), tmp_path, "r1")
    monkeypatch.setattr(store, "MERGE_BELOW_BYTES", big.stat().st_size)  # parts this large count as large
    small = [write_part(rows("r1", [i]), tmp_path, "r1") for i in (50, 51)]
    merged = merge(tmp_path, "r1")
    parts = store.part_files(tmp_path / "r1")
    assert big in parts and merged in parts and len(parts) == 2 and not any(p in parts for p in small)
    # retried infra errors: in small parts, and in a large part (which then is merged too)
    write_part(rows("r1", [53], outcome="infra_error"), tmp_path, "r1")
    write_part(rows("r1", [53]) + rows("r1", [52]), tmp_path, "r1")
    big_infra = write_part(
        rows("r1", [60], outcome="infra_error") + rows("r1", range(61, 110)), tmp_path, "r1"
    )
    write_part(rows("r1", [60]), tmp_path, "r1")
    sizes = (big.stat().st_size, big_infra.stat().st_size)
    monkeypatch.setattr(store, "MERGE_BELOW_BYTES", min(sizes))  # both large parts now
    merge(tmp_path, "r1")
    parts = store.part_files(tmp_path / "r1")
    frame = pd.concat([pd.read_parquet(p) for p in parts])
    assert not frame.duplicated(["task", "trial"]).any() and len(frame) == 104
    assert big in parts  # holds no trial twice
    assert frame.loc[frame["trial"] == 53, "outcome"].tolist() == ["pass"]
    assert big_infra not in parts and frame.loc[frame["trial"] == 60, "outcome"].tolist() == ["pass"]


@pytest.mark.parametrize(
    "passed, outcome, says",
    [(True, "wrong_state", "passed=True with outcome 'wrong_state'"), (True, "PASS!", "'PASS!'")],
)
def test_records_whose_outcome_and_passed_disagree_are_refused_on_reading(tmp_path, passed, outcome, says):
    # issue 29 item 12: passk gate exited 0 on such records
    good = rows("r", range(3))
    bad = {**good[0], "trial": 3, "passed": passed, "outcome": outcome}
    write_part(good, tmp_path, "r")
    part = write_part([bad], tmp_path, "r")
    with pytest.raises(ValueError, match=f"{part.name}.*{says}"):
        load(tmp_path)
    with pytest.warns(RuntimeWarning, match=says):
        assert len(load(tmp_path, strict=False)) == 3
    from passk_nb.cli.main import main

    assert main(["gate", str(tmp_path), "--k", "1", "--min", "0.1"]) == 2


@pytest.mark.parametrize("engine", ["duckdb", "pandas"])
def test_counting_a_folder_during_merges_never_fails_nor_loses_trials(tmp_path, engine):
    # count_folder's DuckDB path listed the parts once: a merge between its listing and its read
    # made the read fail (a part gone) or miss the merged part's rows
    def read():
        return int(count_folder(tmp_path, by=(), engine=engine)["n"].sum())

    read_during_merges(tmp_path, read)
    assert read() == 100


def test_a_run_resumed_across_the_suite_hash_version_stays_one_suite_version(tmp_path):
    """Records written before ``suite_hash`` existed read the fingerprint their run's spec recorded:
    a run resumed by the newer version is one suite version in load, the report and merges."""
    passk_nb.run("scripted", trials=2, out=tmp_path, progress=False)
    [part] = store.part_files(tmp_path)
    table = pq.read_table(part)
    fingerprint = table.column("suite_hash")[0].as_py()
    assert fingerprint
    old, new = table.slice(0, 4), table.slice(4)
    pq.write_table(old.drop(["suite_hash"]), part)  # what the older version wrote
    write_part(new, tmp_path, part.parent.name)  # what the resumed run added
    assert set(load(tmp_path)["suite_hash"]) == {fingerprint}
    merge(tmp_path, part.parent.name)
    assert set(pq.read_table(store.part_files(tmp_path)[0]).column("suite_hash").to_pylist()) == {fingerprint}
    assert set(load(tmp_path)["suite_hash"]) == {fingerprint}
    copied = tmp_path.parent / "copied.parquet"  # a file out of its run folder: the version is unknown
    pq.write_table(old.drop(["suite_hash"]), copied)
    assert set(load(copied)["suite_hash"]) == {""}


def test_the_merge_checks_the_parts_this_process_wrote_as_one_table_and_sorts_them(tmp_path, monkeypatch):
    """Issue 50: a check's cost is mostly per table and column, so the parts a run wrote (and keeps
    in memory) are checked once, together; with no trial twice they are sorted by key in Arrow."""
    from passk_nb.data.records import table_from_records

    known = {}
    for start in (12, 0, 8, 4):  # written out of order, as trials end
        table = table_from_records(rows("r", range(start, start + 4)))
        known[write_part(table, tmp_path, "r")] = table
    checks = []
    real_checked = store._checked

    def counted(table, columns=None):
        checks.append(table.num_rows)
        return real_checked(table, columns)

    monkeypatch.setattr(store, "_checked", counted)
    part, merged = store.merge_known(tmp_path, "r", known)
    assert checks == [16]  # the four parts, as one table
    assert merged is not None and merged.column("trial").to_pylist() == list(range(16))
    assert pq.read_table(part, columns=["trial"]).column("trial").to_pylist() == list(range(16))
    assert load(tmp_path)["trial"].tolist() == list(range(16))


def test_a_runs_parts_are_checked_as_one_table_and_a_bad_part_is_still_named(tmp_path, monkeypatch):
    """Checking a run of many parts costs one check, not one per part (10,000 parts took ~4 ms each);
    a part that is no record file among them is still the one the error and the warning name."""
    for i in range(30):
        write_part(rows("r", range(2 * i, 2 * i + 2)), tmp_path, "r")
    checks = []
    checked = store._checked
    monkeypatch.setattr(
        store, "_checked", lambda table, columns=None: checks.append(1) or checked(table, columns)
    )
    assert len(load(tmp_path)) == 60
    assert len(checks) == 1
    bad = write_part([{**rows("r", [60])[0], "passed": False}], tmp_path, "r")  # outcome pass, passed False
    with pytest.raises(ValueError, match=f"{bad.name}.*passed=False with outcome 'pass'"):
        load(tmp_path)
    with pytest.warns(RuntimeWarning, match=bad.name):
        assert len(load(tmp_path, strict=False)) == 60


def test_one_row_per_trial_sorts_prefers_real_outcomes_keeps_the_first_copy_and_moves_nothing_else():
    records = [
        {"run_id": "r", "task": "b", "trial": 0, "outcome": "wrong_state", "transcript": "t4"},
        {"run_id": "r", "task": "a", "trial": 0, "outcome": "infra_error", "transcript": "t0"},
        {"run_id": "r", "task": "a", "trial": 0, "outcome": "pass", "transcript": "t1"},
        {"run_id": "r", "task": "a", "trial": 1, "outcome": "infra_error", "transcript": "t3"},
        {"run_id": "r", "task": "a", "trial": 0, "outcome": "pass", "transcript": "t2"},  # a copy: dropped
        {"run_id": "q", "task": "z", "trial": 5, "outcome": "pass", "transcript": "t5"},
    ]
    table = pa.Table.from_pylist([{**r, "suite": "s", "passed": r["outcome"] == "pass"} for r in records])
    kept = store._one_row_per_trial(table, "here")
    assert kept.column("transcript").to_pylist() == ["t5", "t1", "t3", "t4"]
    assert store._one_row_per_trial(kept, "here") is kept  # in key order, once each: the table itself
    assert (
        len(store._one_row_per_trial(pa.concat_tables([kept, kept.slice(3)]), "here")) == 4
    )  # in order, twice
    clash = table.set_column(table.schema.get_field_index("outcome"), "outcome", pa.array(["pass"] * 6))
    clash = clash.set_column(clash.schema.get_field_index("passed"), "passed", pa.array([True] * 6))
    assert len(store._one_row_per_trial(clash, "here")) == 4  # copies, the infra errors now passes
    differ = table.append_column("model", pa.array(["m", "m", "m", "m", "other", "m"]))
    with pytest.raises(ValueError, match=r"here: 1 trial is stored more than once with different model"):
        store._one_row_per_trial(differ, "here")
