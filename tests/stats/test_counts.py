"""counts(): the per (group, task) table, checked against the pandas groupby it replaces."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from passk_nb.data.records import OUTCOMES
from passk_nb.stats.counts import COUNTED_OUTCOMES, counts, task_counts
from tests.helpers.records import records_from_marks


def random_frame(seed: int, rows: int = 400) -> pd.DataFrame:
    """Trials with missing group values, repeated tasks across groups and every outcome."""
    rng = np.random.default_rng(seed)
    models = np.array(["m-b", "m-a", "m-c", None], dtype=object)
    prompts = np.array(["p2", "p1", None], dtype=object)
    outcome = rng.choice(np.array(OUTCOMES), size=rows)
    return pd.DataFrame(
        {
            "model": models[rng.integers(0, len(models), rows)],
            "prompt_hash": prompts[rng.integers(0, len(prompts), rows)],
            "temperature": rng.choice([0.0, 0.7, np.nan], size=rows),
            "task": [f"t{i}" for i in rng.integers(0, 9, rows)],
            "passed": outcome == "pass",
            "outcome": outcome,
        }
    )


def as_categorical(df: pd.DataFrame) -> pd.DataFrame:
    """Categorical columns whose category order is not alphabetical, with unused categories."""
    return df.astype(
        {
            "model": pd.CategoricalDtype(["m-c", "m-a", "unused", "m-b"]),
            "prompt_hash": pd.CategoricalDtype(["p2", "p1"]),
            "task": pd.CategoricalDtype([f"t{i}" for i in reversed(range(12))]),
        }
    )


BYS = [None, ("model",), ("model", "prompt_hash"), ("prompt_hash", "temperature"), (), ("task", "model")]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("by", BYS)
@pytest.mark.parametrize("infra", ["exclude", "fail"])
@pytest.mark.parametrize("kind", ["str", "object", "categorical"])
def test_counts_equal_the_groupby_counts(
    seed: int, by: tuple[str, ...] | None, infra: str, kind: str
) -> None:
    df = random_frame(seed)
    if kind == "str":
        df = df.astype({"model": "str", "prompt_hash": "str", "task": "str", "outcome": "str"})
    elif kind == "categorical":
        df = as_categorical(df)
    expected = task_counts(df, ("model", "prompt_hash") if by is None else by, infra)
    got = counts(df, by=by, infra=infra)
    pd.testing.assert_frame_equal(got[list(expected.columns)], expected)


@pytest.mark.parametrize("seed", range(4))
def test_outcome_columns_count_each_outcome(seed: int) -> None:
    df = random_frame(seed)
    got = counts(df, by=("model",), infra="fail")
    for name in COUNTED_OUTCOMES:
        expected = (
            df.assign(hit=df["outcome"] == name)
            .groupby(["model", "task"], dropna=False)["hit"]
            .sum()
            .to_numpy()
        )
        np.testing.assert_array_equal(got[f"n_{name}"].to_numpy(), expected, err_msg=name)
    # with infra="fail" every trial is usable: n = passes + every failure outcome + infra errors
    infra_errors = df.groupby(["model", "task"], dropna=False)["outcome"].apply(
        lambda s: int((s == "infra_error").sum())
    )
    failures = got[[f"n_{name}" for name in COUNTED_OUTCOMES]].sum(axis=1)
    np.testing.assert_array_equal(got["n"], got["c"] + failures + infra_errors.to_numpy())


def test_default_by_uses_every_identity_column_of_the_records() -> None:
    df = records_from_marks({("m1", "p1", "t1"): "1xi", ("m1", "p1", "t2"): "11", ("m2", "p1", "t1"): "000"})
    got = counts(df)
    assert list(got.columns[:7]) == [
        "suite",
        "provider",
        "model",
        "prompt_name",
        "prompt_hash",
        "run_id",
        "task",
    ]
    assert got[["model", "task", "n", "c", "n_infra"]].values.tolist() == [
        ["m1", "t1", 2, 1, 1],
        ["m1", "t2", 2, 2, 0],
        ["m2", "t1", 3, 0, 0],
    ]


def test_missing_group_values_sort_last_and_stay_apart() -> None:
    df = pd.DataFrame(
        {
            "model": [None, "b", "a", None],
            "task": ["t", "t", "t", "t"],
            "passed": [True, False, True, False],
            "outcome": ["pass", "wrong_state", "pass", "max_turns"],
        }
    )
    got = counts(df, by="model")
    assert got["model"].tolist()[:2] == ["a", "b"] and pd.isna(got["model"].iloc[2])
    assert got[["n", "c", "n_max_turns"]].values.tolist() == [[1, 1, 0], [1, 0, 0], [2, 1, 1]]


def test_many_high_cardinality_keys_do_not_overflow() -> None:
    rng = np.random.default_rng(0)
    rows = 5_000
    df = pd.DataFrame({f"k{i}": rng.integers(0, 1_000_000, rows).astype(str) for i in range(5)})
    df["task"] = rng.integers(0, 3, rows).astype(str)
    df["passed"] = rng.random(rows) < 0.5
    df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
    by = tuple(f"k{i}" for i in range(5))
    pd.testing.assert_frame_equal(
        counts(df, by=by)[[*by, "task", "n", "c", "n_infra"]], task_counts(df, by, "exclude")
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda df: df.drop(columns="outcome"), "lacks columns"),
        (lambda df: df.assign(passed=df["passed"].astype(int)), "must be boolean"),
        (lambda df: df.iloc[:0], "no trial rows"),
    ],
)
def test_bad_frames_say_what_is_wrong(change, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        counts(change(random_frame(0)), by="model")


def test_bad_infra_mode_names_the_choices() -> None:
    with pytest.raises(ValueError, match="infra must be one of"):
        counts(random_frame(0), by="model", infra="drop")
