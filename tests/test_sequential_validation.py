"""``benchmarks/sequential_validation.py``: a cell whose fixed design plan_trials refuses is reported
as such (with its message), with and without ``--final``, instead of ending the whole run."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def script(monkeypatch):
    monkeypatch.setattr(sys, "path", [str(BENCHMARKS), *sys.path])  # its `from coverage import ...`
    monkeypatch.delitem(sys.modules, "coverage", raising=False)
    monkeypatch.delitem(sys.modules, "sequential_validation", raising=False)
    return importlib.import_module("sequential_validation")


@pytest.mark.parametrize("final", [True, False])
def test_the_gate_below_one_flaky_task_has_no_fixed_design_and_says_why(script, final):
    flaky = script.TRUTHS.index("one flaky (½) among certain")
    row, note = script.cell((script.TRUTHS[flaky], "gate-below", 10, 2, 0.1, 3, 2026, 2, "anytime", final))
    assert row["fixed n"] == "no fixed design" and row["reps"] == 0
    assert "no fixed design of up to 128 trials per task reaches ± 0.026" in note
    measured, none = script.cell(
        (script.TRUTHS[flaky], "precision", 10, 2, 0.1, 2, 2026, 2, "anytime", final)
    )
    assert none == "" and measured["reps"] == 2 and isinstance(measured["fixed n"], int)
    assert list(row) == list(measured)  # one table: the refused cell has every column, empty


def test_a_difference_is_counted_only_for_a_comparison_and_a_pass_only_for_a_gate(script):
    """A precision question decided is not a difference declared: the column counted every decided
    run of every question, so it read 1.0 for precision cells."""
    truth = script.TRUTHS.index("all p = 0.9")
    rows = {
        kind: script.cell((script.TRUTHS[truth], kind, 10, 2, 0.1, 3, 2026, 2, "anytime", False))[0]
        for kind in ("precision", "gate-above", "compare")
    }
    assert rows["precision"]["decided"] > 0
    assert math.isnan(rows["precision"]["difference declared"]) and math.isnan(
        rows["precision"]["gate passed"]
    )
    assert 0 <= rows["compare"]["difference declared"] <= 1 and math.isnan(rows["compare"]["gate passed"])
    assert 0 <= rows["gate-above"]["gate passed"] <= 1 and math.isnan(
        rows["gate-above"]["difference declared"]
    )
