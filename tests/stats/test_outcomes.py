"""Frames whose ``passed`` and ``outcome`` disagree, or whose outcomes passk never writes, are
refused by every count (issue 29 §12): counting them would report a number no trial had."""

from __future__ import annotations

import pandas as pd
import pytest

import passk_nb

DTYPES = [object, "category", "string[pyarrow]"]


def frame(outcomes: list[str], passed: list[bool], dtype: object) -> pd.DataFrame:
    df = pd.DataFrame({"task": list("abcde") * 2, "passed": passed, "outcome": outcomes})
    return df.astype({"outcome": dtype})


@pytest.mark.parametrize("dtype", DTYPES)
def test_passed_that_disagrees_with_the_outcome_is_refused(dtype: object) -> None:
    df = frame(["pass"] * 9 + ["wrong_state"], [True] * 10, dtype)
    for count in (passk_nb.counts, lambda d: passk_nb.summarize(d, k=1, n_boot=0)):
        with pytest.raises(ValueError, match=r"passed=True with outcome 'wrong_state' \(first: row 9"):
            count(df)


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_outcome_passk_never_writes_is_refused_and_the_fix_is_named(dtype: object) -> None:
    df = frame(["PASS!"] + ["pass"] * 9, [True] * 10, dtype)
    with pytest.raises(ValueError, match="not one of passk's.*'PASS!'.*frame_from_records") as err:
        passk_nb.compare(
            pd.concat([df.assign(arm="a"), df.assign(arm="b")]), on="arm", a="a", b="b", k=1, n_boot=0
        )
    assert "passk_nb.data.records.OUTCOMES" in str(err.value)


@pytest.mark.parametrize("dtype", DTYPES)
def test_consistent_records_of_every_dtype_are_counted(dtype: object) -> None:
    df = frame(["pass"] * 9 + ["wrong_state"], [True] * 9 + [False], dtype)
    out = passk_nb.counts(df)
    assert out["c"].sum() == 9 and out["n"].sum() == 10


@pytest.mark.parametrize("engine", ["pandas", "duckdb"])
@pytest.mark.parametrize(("column", "value"), [("outcome", "PASS!"), ("passed", False)])
def test_a_folder_with_such_records_is_refused_by_either_engine(tmp_path, engine, column, value) -> None:
    import pyarrow as pa

    from passk_nb.data.records import SCHEMA
    from passk_nb.data.store import write_part
    from passk_nb.stats.parquet_counts import count_folder
    from tests.helpers.records import records_from_marks

    df = records_from_marks({("m", "p", t): "1101" for t in "abcde"})
    df.loc[3, column] = value  # trial 3 of task a passed
    write_part(pa.Table.from_pandas(df, schema=SCHEMA, preserve_index=False), tmp_path, "r")
    with pytest.raises(ValueError, match=r"records that passk never writes: 1 row .*row 3"):
        count_folder(tmp_path, engine=engine)


def test_outcome_counts_can_give_the_total_a_table_shows() -> None:
    df = frame(["pass"] * 9 + ["wrong_state"], [True] * 9 + [False], object).assign(model="m")
    from passk_nb.stats.counts import outcome_counts

    table = outcome_counts(df, by="model", total=True)
    assert table.to_dict("records") == [{"model": "m", "pass": 9, "wrong_state": 1, "all trials": 10}]
