"""The df.passk accessor: the same results as the functions, and clear errors."""

from __future__ import annotations

import pandas as pd
import pytest

import passk_nb.stats.accessor  # noqa: F401  (registers df.passk)
from passk_nb.stats.paired import compare, flips
from passk_nb.stats.summary import curve, summarize
from tests.stats.cases import PROMPTS, TWO_TASKS


def test_accessor_matches_the_functions() -> None:
    pd.testing.assert_frame_equal(TWO_TASKS.passk.summarize(k=2), summarize(TWO_TASKS, k=2))
    pd.testing.assert_frame_equal(TWO_TASKS.passk.curve(n_boot=10), curve(TWO_TASKS, n_boot=10))
    pd.testing.assert_frame_equal(
        PROMPTS.passk.compare(a="p1", b="p2", k=2), compare(PROMPTS, a="p1", b="p2", k=2)
    )
    pd.testing.assert_frame_equal(PROMPTS.passk.flips(a="p1", b="p2"), flips(PROMPTS, a="p1", b="p2"))


def test_accessor_names_missing_columns() -> None:
    with pytest.raises(AttributeError, match=r"lacks columns \['passed', 'outcome'\]"):
        pd.DataFrame({"task": ["a"], "model": ["m"]}).passk.summarize(k=1)
