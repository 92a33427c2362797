"""StoredTrials: what a running run knows of the trials already on disk, cheaply and without stalls."""

from __future__ import annotations

import threading

from passk_nb.data import store
from passk_nb.data.store import StoredTrials, merge, write_part
from tests.helpers.records import minimal_rows


def rows(trials, outcome="pass", task="t"):
    return minimal_rows("r", trials, outcome, task)


def counting_listings(monkeypatch):
    listings = []
    real = StoredTrials._listing

    def listing(self):
        listings.append(1)
        return real(self)

    monkeypatch.setattr(StoredTrials, "_listing", listing)
    return listings


def test_a_part_another_writer_adds_is_seen_at_the_next_question(tmp_path, monkeypatch):
    listings = counting_listings(monkeypatch)
    stored = StoredTrials(tmp_path, "r")
    assert not stored.has(("t", 0))  # no folder yet
    write_part(rows([0, 1]), tmp_path, "r")  # another process's part
    assert stored.has(("t", 0)) and stored.has(("t", 1)) and not stored.has(("t", 2))
    asked = len(listings)
    for trial in range(2, 50):
        assert not stored.has(("t", trial))
    assert len(listings) == asked  # nothing written meanwhile: no listing, one stat per question
    write_part(rows([7], outcome="infra_error") + rows([8]), tmp_path, "r")
    assert stored.has(("t", 8)) and not stored.has(("t", 7))  # an infra error is retried, not stored
    assert len(listings) == asked + 1


def test_a_merge_keeps_every_key_known(tmp_path):
    stored = StoredTrials(tmp_path, "r")
    for i in range(3):
        write_part(rows([i]), tmp_path, "r")
    assert stored.has(("t", 2))
    merge(tmp_path, "r")  # three parts become one: the log grows, the listing reads the merged part
    assert [stored.has(("t", i)) for i in range(4)] == [True, True, True, False]
    assert set(stored._files) == set(store.part_files(tmp_path / "r"))


def test_parts_without_a_log_are_read_on_the_first_question(tmp_path):
    write_part(rows([0]), tmp_path, "r")
    (tmp_path / "r" / store.WRITTEN_LOG).unlink()  # a folder copied from elsewhere, or an older passk's
    assert StoredTrials(tmp_path, "r").has(("t", 0))


def test_questions_are_answered_while_the_run_writes_its_own_part(tmp_path, monkeypatch):
    stored = StoredTrials(tmp_path, "r")
    write_part(rows([0]), tmp_path, "r")
    assert stored.has(("t", 0))
    writing, finish = threading.Event(), threading.Event()
    real_write = store.pq.write_table

    def slow_write(*args, **kwargs):
        writing.set()
        assert finish.wait(10), "the test never let the write finish"
        return real_write(*args, **kwargs)

    monkeypatch.setattr(store.pq, "write_table", slow_write)
    writer = threading.Thread(target=stored.write_part, args=(rows([5, 6]),))
    writer.start()
    assert writing.wait(10)
    answers = []
    asker = threading.Thread(target=lambda: answers.append([stored.has(("t", 0)), stored.has(("t", 5))]))
    asker.start()
    asker.join(5)
    finished_during_the_write = not asker.is_alive()
    finish.set()
    writer.join(10)
    asker.join(10)
    assert finished_during_the_write  # a question never waits for the parquet write and its fsync
    assert answers == [[True, False]]
    assert stored.has(("t", 5)) and stored.has(("t", 6))  # noted from the records, never read back


def test_every_part_write_grows_the_log(tmp_path):
    log = tmp_path / "r" / store.WRITTEN_LOG
    write_part(rows([0]), tmp_path, "r")
    first = log.stat().st_size
    write_part(rows([1]), tmp_path, "r")
    assert log.stat().st_size > first > 0
