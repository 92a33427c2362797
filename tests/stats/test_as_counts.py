"""One input type: as_counts tells records, a counts table and a folder apart; a Counts passes through."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from passk_nb.data.store import write_part
from passk_nb.stats import _grouping
from passk_nb.stats.counts import Counts, as_counts, counts

BY = ("model", "prompt_hash")


def records(seed: int = 0, *, rounds: bool = False) -> pd.DataFrame:
    """2 models × 2 prompts × 6 tasks × 5 trials, some infra errors; with ``rounds`` the trials of
    an adaptive run (rounds 0, 1, 2) and a few without a round."""
    rng = np.random.default_rng(seed)
    rows = []
    for model in ("m1", "m2"):
        for prompt in ("p1", "p2"):
            for t in range(6):
                for i in range(5):
                    roll = rng.random()
                    outcome = "infra_error" if roll < 0.1 else ("pass" if roll < 0.6 else "wrong_state")
                    rows.append(
                        {
                            "run_id": f"{model}-{prompt}",
                            "suite": "s",
                            "model": model,
                            "prompt_hash": prompt,
                            "task": f"t{t}",
                            "trial": i,
                            "passed": outcome == "pass",
                            "outcome": outcome,
                            "round": (None if i == 4 else min(i, 2)) if rounds else None,
                        }
                    )
    return pd.DataFrame(rows).astype({"round": "Int64"})


def same_counts(a: pd.DataFrame, b: pd.DataFrame, by: tuple[str, ...]) -> None:
    columns = [*by, "task", "n", "c", "n_infra"]
    pd.testing.assert_frame_equal(
        pd.DataFrame(a[columns].astype({col: object for col in (*by, "task")}).reset_index(drop=True)),
        pd.DataFrame(b[columns].astype({col: object for col in (*by, "task")}).reset_index(drop=True)),
    )


@pytest.mark.parametrize("infra", ["exclude", "fail"])
def test_records_counts_table_and_folder_give_the_same_counts(tmp_path, infra: str) -> None:
    df = records()
    _ = write_part(df.to_dict("records"), tmp_path, "r")
    expected = counts(df, by=BY, infra=infra)
    for data, source in ((df, "records"), (counts(df, by=BY), "counts"), (tmp_path, "folder")):
        got = as_counts(data, by=BY, infra=infra)
        assert isinstance(got, Counts)
        assert (got.by, got.infra, got.source) == (BY, infra, source)
        same_counts(got.table, expected, BY)


def test_records_are_grouped_by_the_identity_columns_and_on() -> None:
    df = records()
    assert as_counts(df).by == ("suite", "model", "prompt_hash", "run_id")
    assert as_counts(df, by="model", on="prompt_hash").by == ("model", "prompt_hash")


def test_keys_are_categorical_and_restored_to_the_input_dtypes() -> None:
    df = records()
    got = as_counts(df, by=BY)
    assert isinstance(got.table["model"].dtype, pd.CategoricalDtype)  # no string copies
    gid, groups = got.groups()
    assert groups["model"].dtype == df["model"].dtype
    assert got.frame()["task"].dtype == df["task"].dtype
    assert gid.max() + 1 == len(groups) == 4


def test_a_counts_passes_through_unchanged_and_regroups_when_asked() -> None:
    df = records()
    got = as_counts(df, by=BY)
    assert as_counts(got) is got
    assert as_counts(got, by=BY) is got
    assert as_counts(got, by=["model"], on="prompt_hash") is got
    by_model = as_counts(got, by="model")
    assert by_model.by == ("model",) and by_model.key_dtypes == got.key_dtypes
    same_counts(by_model.table, counts(df, by="model"), ("model",))
    failed = as_counts(got, infra="fail")
    same_counts(failed.table, counts(df, by=BY, infra="fail"), BY)
    with pytest.raises(ValueError, match="infra='fail'.*cannot be separated"):
        as_counts(failed, infra="exclude")
    with pytest.raises(ValueError, match="cannot be grouped by \\['suite'\\]"):
        as_counts(got, by="suite")
    with pytest.raises(ValueError, match="without on='run_id'"):
        as_counts(got, on="run_id")


def test_rounds_are_kept_where_records_have_them() -> None:
    plain = as_counts(records(), by=BY)
    assert plain.rounds == 0 and not any("@" in str(col) for col in plain.table.columns)
    df = records(rounds=True)
    got = as_counts(df, by=BY)
    assert got.rounds == 4  # no round first, then rounds 0, 1, 2
    table = got.table
    n = table[[f"n@{i}" for i in range(4)]].to_numpy()
    c = table[[f"c@{i}" for i in range(4)]].to_numpy()
    assert (n.sum(axis=1) == table["n"]).all() and (c.sum(axis=1) == table["c"]).all()
    first = df[df["round"].isna()]
    expected = counts(first, by=BY)
    assert table["n@0"].tolist() == expected["n"].tolist()
    # regrouping sums the rounds too
    pooled = as_counts(got, by="model")
    assert pooled.rounds == 4 and pooled.table["n@2"].sum() == table["n@2"].sum()


def test_anything_else_is_refused_clearly() -> None:
    with pytest.raises(TypeError, match="trial records, a counts table, a folder of records or a Counts"):
        as_counts([1, 2, 3])  # type: ignore[arg-type]


def test_group_reduce_is_any_statistic_per_group_without_pandas() -> None:
    rng = np.random.default_rng(3)
    gid = rng.integers(0, 5, 200)
    values = rng.random(200)
    expected = pd.Series(values).groupby(gid).quantile(0.9).reindex(range(6)).to_numpy()
    got = _grouping.group_reduce(gid, values, 6, lambda v: float(np.quantile(v, 0.9)))
    np.testing.assert_allclose(got, expected)  # group 5 has no row: NaN on both sides
