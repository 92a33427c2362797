"""from_frame: any table of trials, validated, into records the analysis reads."""

import pandas as pd
import pytest

import passk_nb


def table(**overrides):
    data = {
        "case": ["a"] * 4 + ["b"] * 4,
        "attempt": [1, 2, 3, 4] * 2,
        "ok": [1, 1, 1, 1, 1, 1, 0, 0],
        "llm": "m",
    }
    data.update(overrides)
    return pd.DataFrame(data)


def test_a_mapped_table_gives_the_same_numbers_as_the_counts_say():
    df = passk_nb.from_frame(table(), task="case", trial="attempt", passed="ok", model="llm")
    assert df["trial"].tolist() == [0, 1, 2, 3] * 2  # renumbered from 0
    out = passk_nb.summarize(df, k=2, n_boot=0)
    # task a: 4/4 -> pass^2 = 1; task b: 2/4 -> C(2,2)/C(4,2) = 1/6; mean 7/12
    assert out["pass^k"].iloc[0] == pytest.approx(7 / 12)
    assert out["model"].tolist() == ["m"]


def test_success_words_and_inspect_scores_are_read():
    df = passk_nb.from_frame(table(ok=["C", "I"] * 4), task="case", trial="attempt", passed="ok", model="llm")
    assert df["passed"].tolist() == [True, False] * 4


def test_two_models_are_two_runs_never_pooled():
    both = pd.concat([table(), table(llm="other")])
    df = passk_nb.from_frame(both, task="case", trial="attempt", passed="ok", model="llm")
    assert df["run_id"].nunique() == 2
    assert len(passk_nb.summarize(df, k=2, n_boot=0)) == 2


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"ok": [1, 1, 1, 1, 1, 1, 0, 0.5]}, r"row 7: ok holds 0.5, not a success"),
        ({"ok": [1, 1, 1, 1, 1, 1, 0, None]}, r"row 7: ok holds nan, a missing success"),
        ({"attempt": [1, 1, 3, 4, 1, 2, 3, 4]}, "share a \\(model, task, trial\\)"),
        ({"attempt": [1, 2, 3, 4.5, 1, 2, 3, 4]}, r"row 3: attempt holds 4.5, not a whole number"),
        ({"ok": ["yes", "no", "maybe", "no"] * 2}, "maybe"),
    ],
)
def test_bad_tables_say_what_is_wrong(overrides, message):
    with pytest.raises(ValueError, match=message):
        passk_nb.from_frame(table(**overrides), task="case", trial="attempt", passed="ok", model="llm")


def test_missing_columns_are_named_and_uneven_trials_warned():
    with pytest.raises(ValueError, match=r"columns \['nope'\] are not in the table"):
        passk_nb.from_frame(table(), task="nope", passed="ok")
    uneven = table().iloc[:-1]
    with pytest.warns(UserWarning, match="fewer trials than the others"):
        passk_nb.from_frame(uneven, task="case", passed="ok", model="fixed-name")
