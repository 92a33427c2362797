"""While trials run the collector runs less often; after the run it is as the program left it."""

from __future__ import annotations

import gc

import pytest

import passk_nb
from passk_nb.harness import batch


@pytest.fixture(autouse=True)
def _gc_restored():
    threshold, enabled = gc.get_threshold(), gc.isenabled()
    yield
    gc.set_threshold(*threshold)
    gc.unfreeze()
    (gc.enable if enabled else gc.disable)()


def test_trials_run_with_fewer_collections_and_the_settings_come_back(tmp_path):
    gc.set_threshold(700, 10, 10)
    during = []
    passk_nb.run(
        "scripted",
        trials=2,
        out=tmp_path,
        progress=False,
        on_record=lambda r: during.append((gc.get_threshold(), gc.get_freeze_count() > 0)),
    )
    assert during and all(t == (batch.GC_THRESHOLD, 10, 10) and frozen for t, frozen in during)
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0


@pytest.mark.parametrize("program", ["disabled", "froze", "higher"])
def test_a_program_that_set_the_collector_up_itself_keeps_its_settings(tmp_path, program):
    gc.set_threshold(700, 10, 10)
    if program == "disabled":
        gc.disable()
    elif program == "froze":
        gc.freeze()
    else:
        gc.set_threshold(10 * batch.GC_THRESHOLD, 10, 10)
    before = gc.get_threshold(), gc.get_freeze_count(), gc.isenabled()
    during = []
    passk_nb.run(
        "scripted",
        trials=1,
        out=tmp_path,
        progress=False,
        on_record=lambda r: during.append(gc.get_threshold()),
    )
    assert set(during) == {before[0]}
    assert (gc.get_threshold(), gc.isenabled()) == (before[0], before[2])
    # the program's frozen objects stay frozen and the run froze none of its own: the count can only
    # fall by the frozen objects that died meanwhile (a refcount reaching 0 frees a frozen object too)
    after = gc.get_freeze_count()
    assert (0 < after <= before[1]) if program == "froze" else after == before[1]


def test_runs_at_once_restore_the_settings_when_the_last_ends():
    gc.set_threshold(700, 10, 10)
    with batch._collect_less():
        with batch._collect_less():
            assert gc.get_threshold()[0] == batch.GC_THRESHOLD
        assert gc.get_threshold()[0] == batch.GC_THRESHOLD  # the other run is still running
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0
