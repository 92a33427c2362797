"""The per-trial claims of a run live in their own module (not beside the answer-claims engine)."""

from __future__ import annotations

from pathlib import Path

from passk_nb.data import store
from passk_nb.data.trial_claims import TrialClaims


def test_a_claimed_trial_is_refused_to_another_holder_until_released(tmp_path: Path) -> None:
    first, second = TrialClaims(tmp_path, "r1"), TrialClaims(tmp_path, "r1")
    try:
        assert first.try_claim(("t", 0))
        assert not second.try_claim(("t", 0))
        assert second.try_claim(("t", 1))  # another trial is free
        first.release([("t", 0)])
        assert second.try_claim(("t", 0))
    finally:
        first.close()
        second.close()
    assert (tmp_path / "r1" / "_claims.lock").exists()


def test_the_store_no_longer_holds_the_trial_claims() -> None:
    assert not hasattr(store, "TrialClaims")
    assert "TrialClaims" not in store.__all__


def test_a_lease_claims_runs_of_trials_in_one_call_and_leaves_what_another_holds(
    tmp_path: Path, monkeypatch
) -> None:
    first, second = TrialClaims(tmp_path, "r1"), TrialClaims(tmp_path, "r1")
    calls: list[int] = []
    real = TrialClaims._fcntl

    def counted(self, kind, offset, wait, length=1):
        calls.append(length)
        return real(self, kind, offset, wait, length)

    monkeypatch.setattr(TrialClaims, "_fcntl", counted)
    try:
        keys = [("t", i) for i in range(10)] + [("u", 3), ("u", 4)]
        assert first.try_claim_many(keys) == [True] * 12
        assert sorted(calls) == [2, 10]  # one call per run of consecutive trials of a task
        first.release([("t", 2), ("t", 3), ("u", 4)])
        calls.clear()
        # the other holder gets exactly the trials released, one by one where the run is held in part
        assert second.try_claim_many([("t", i) for i in range(6)] + [("u", 4)]) == [
            *[False, False, True, True, False, False],
            True,
        ]
        assert not first.try_claim_many([("t", 2)])[0] and first.try_claim_many([("t", 11)]) == [True]
        # a trial number past a task's block still gets a byte of its own
        assert second.try_claim_many([("t", 2**24), ("t", 2**24 + 1)]) == [True, True]
        assert not first.try_claim(("t", 2**24))
        second.release([("t", 2**24)])
        assert first.try_claim(("t", 2**24))
    finally:
        first.close()
        second.close()


def test_a_tasks_name_is_hashed_once_for_all_the_claims_and_releases_of_its_trials(
    tmp_path: Path, monkeypatch
) -> None:
    """Issue 50: a claim's byte comes from the task's hashed name; hashing it at each claim and
    release of each trial cost three SHA-256 per trial."""
    import hashlib

    from passk_nb.data import trial_claims

    calls, sha256 = [], hashlib.sha256

    def counted(data: bytes):
        calls.append(data)
        return sha256(data)

    monkeypatch.setattr(trial_claims.hashlib, "sha256", counted)
    claims = TrialClaims(tmp_path, "r1")
    keys = [("a task hashed once, issue 50", trial) for trial in range(64)]
    assert claims.try_claim_many(keys) == [True] * 64
    assert not TrialClaims(tmp_path, "r1").try_claim(keys[7])  # still one byte per trial
    claims.release(keys)
    assert TrialClaims(tmp_path, "r1").try_claim(keys[7])
    claims.close()
    assert len(calls) == 1
