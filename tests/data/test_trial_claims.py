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
