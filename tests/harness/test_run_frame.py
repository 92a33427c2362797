"""run()'s returned frame comes from the merge at the end, in memory, not read back from the parts it
just wrote; it is exactly what load() reads from the folder, in every case the merge can leave."""

from __future__ import annotations

import pandas as pd
import pytest

import passk_nb
from passk_nb.data import store
from passk_nb.harness import batch


@pytest.fixture
def reads(monkeypatch):
    """The record files read, by path."""
    seen: list = []
    read = store._read

    def counted(path, columns=None):
        seen.append(path)
        return read(path, columns)

    monkeypatch.setattr(store, "_read", counted)
    return seen


@pytest.fixture
def small_parts(monkeypatch):
    """Parts of 100 records (the writer's default is a second's, up to 2,000): a run of 250 writes
    several."""
    monkeypatch.setattr(batch._Writer.__init__, "__defaults__", (1.0, 100))


def test_a_run_returns_its_records_without_reading_back_its_parts(tmp_path, reads, small_parts):
    df = passk_nb.run("scripted", trials=50, out=tmp_path, progress=False)  # 250 records: several parts
    assert reads == []
    assert len(store.part_files(tmp_path)) == 1  # merged
    pd.testing.assert_frame_equal(df, passk_nb.load(tmp_path))


def test_a_resumed_run_reads_only_the_parts_written_before(tmp_path, reads):
    passk_nb.run("scripted", trials=2, out=tmp_path, progress=False)
    earlier = store.part_files(tmp_path)
    reads.clear()
    df = passk_nb.run("scripted", trials=4, out=tmp_path, progress=False)
    assert set(reads) == set(earlier)  # the trials stored already, and the merge; not the new parts
    assert len(df) == 20
    pd.testing.assert_frame_equal(df, passk_nb.load(tmp_path))


def test_past_the_memory_cap_the_merge_reads_the_parts_back(tmp_path, reads, monkeypatch, small_parts):
    monkeypatch.setattr(batch, "KEEP_WRITTEN_BYTES", 0)
    df = passk_nb.run("scripted", trials=50, out=tmp_path, progress=False)
    assert len(reads) >= 2
    pd.testing.assert_frame_equal(df, passk_nb.load(tmp_path))


def test_when_the_merge_leaves_other_parts_the_frame_is_read_from_the_folder(
    tmp_path, reads, monkeypatch, small_parts
):
    monkeypatch.setattr(store, "MERGE_BELOW_BYTES", 0)  # no part is small: none is merged
    df = passk_nb.run("scripted", trials=50, out=tmp_path, progress=False)
    assert len(store.part_files(tmp_path)) >= 2 and len(reads) >= 2
    pd.testing.assert_frame_equal(df, passk_nb.load(tmp_path))


def test_the_merged_part_stands_for_the_folder_only_while_it_is_alone(tmp_path):
    rows = [
        {"run_id": "r", "suite": "s", "task": "t", "trial": i, "passed": True, "outcome": "pass"}
        for i in range(3)
    ]
    store.write_part(rows[:2], tmp_path, "r")
    store.write_part(rows[2:], tmp_path, "r")
    part, table = store.merge_known(tmp_path, "r")
    assert part is not None and table is not None
    pd.testing.assert_frame_equal(
        store.load_merged(tmp_path / "r", part, table), passk_nb.load(tmp_path / "r")
    )
    store.write_part([{**rows[0], "trial": 3}], tmp_path, "r")  # another writer, after the merge
    assert store.load_merged(tmp_path / "r", part, table) is None


def test_a_run_in_rounds_returns_what_load_reads(tmp_path):
    df = passk_nb.run(
        "scripted", trials=2, out=tmp_path, progress=False, until=passk_nb.Until("gate=0.8"), max_trials=30
    )
    assert len(df) == 30
    pd.testing.assert_frame_equal(df, passk_nb.load(tmp_path))
