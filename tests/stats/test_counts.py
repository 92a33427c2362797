"""counts(): the per (group, task) table, checked against the pandas groupby it replaces."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import passk_nb
from passk_nb.data.records import OUTCOMES, table_from_records
from passk_nb.data.store import load, write_part
from passk_nb.stats.checks import COUNTED_OUTCOMES
from passk_nb.stats.counts import counts
from passk_nb.stats.summary import summarize
from tests.helpers.records import records_from_marks, spy_parquet_reads, synthetic_trials


def groupby_counts(df: pd.DataFrame, by: tuple[str, ...], infra: str) -> pd.DataFrame:
    """The reference: a pandas groupby of per-trial indicator columns (what counts() replaced)."""
    keys = list(dict.fromkeys([*by, "task"]))
    is_infra = (df["outcome"] == "infra_error").to_numpy(dtype=bool, na_value=False)
    excluded = is_infra if infra == "exclude" else np.zeros(len(df), dtype=bool)
    table = (
        df[keys]
        .reset_index(drop=True)
        .assign(
            n=(~excluded).astype(np.int64),
            c=(df["passed"].to_numpy(dtype=bool) & ~is_infra).astype(np.int64),
            n_infra=excluded.astype(np.int64),
        )
    )
    grouped = table.groupby(keys, sort=True, observed=True, dropna=False)
    return grouped[["n", "c", "n_infra"]].sum().reset_index()


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
    expected = groupby_counts(df, ("model", "prompt_hash") if by is None else by, infra)
    got = counts(df, by=by, infra=infra)
    pd.testing.assert_frame_equal(got[list(expected.columns)], expected)


@pytest.mark.parametrize("kind", ["str", "categorical"])
def test_row_order_and_index_do_not_matter(kind: str) -> None:
    """Sorted records (long runs of one value) and shuffled ones with a scrambled index."""
    df = random_frame(7, rows=2_000).sort_values(["model", "prompt_hash", "task"], na_position="first")
    df = (
        df.astype({"model": "str", "prompt_hash": "str", "task": "str"})
        if kind == "str"
        else as_categorical(df)
    )
    shuffled = df.sample(frac=1, random_state=1)
    expected = groupby_counts(df, ("model", "prompt_hash"), "exclude")
    for frame in (df, shuffled):
        got = counts(frame, by=("model", "prompt_hash"))
        pd.testing.assert_frame_equal(got[list(expected.columns)], expected)


@pytest.mark.parametrize("missing", [True, False])
def test_arrow_booleans_unpack_like_pyarrow_at_any_offset(missing: bool) -> None:
    import pyarrow as pa

    from passk_nb.stats._grouping import _bools

    rng = np.random.default_rng(5)
    for _ in range(200):
        values = [
            None if rng.random() < 0.2 else bool(rng.random() < 0.5) for _ in range(rng.integers(0, 40))
        ]
        whole = pa.array(values, type=pa.bool_())
        cuts = sorted(rng.integers(0, len(values) + 1, size=2))
        chunked = pa.chunked_array(
            [whole[: cuts[0]], whole[cuts[0] : cuts[1]], whole[cuts[1] :]], type=pa.bool_()
        )
        expected = [missing if v is None else v for v in values]
        assert _bools(chunked, missing=missing).tolist() == expected
        assert _bools(whole[cuts[0] :], missing=missing).tolist() == expected[cuts[0] :]


def test_string_columns_in_several_arrow_chunks_with_missing_values_count_the_same() -> None:
    """Concatenated frames hold arrow arrays of several chunks, each a slice at an offset: the
    change and equality bitmaps are unpacked chunk by chunk."""
    df = random_frame(3, rows=3_000).sort_values(["model", "prompt_hash", "task"], na_position="last")
    df = df.astype({"model": "str", "prompt_hash": "str", "task": "str", "outcome": "str"})
    df.loc[df.index[::97], "prompt_hash"] = None  # missing keys: a group of their own
    df = df.sort_values(["model", "prompt_hash", "task"], na_position="last")
    pieces = pd.concat([df.iloc[:1001], df.iloc[1001:1003], df.iloc[1003:]])
    assert pieces["model"].array._pa_array.num_chunks == 3
    for by in (("model", "prompt_hash"), ("model",)):
        expected = groupby_counts(df, by, "exclude")
        pd.testing.assert_frame_equal(counts(pieces, by=by)[list(expected.columns)], expected)
    # a missing outcome is no trial passk wrote: refused in every chunk layout
    pieces.loc[pieces.index[1002], "outcome"] = None
    with pytest.raises(ValueError, match="not one of passk's"):
        counts(pieces, by=("model",))


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
    assert list(got.columns[:10]) == [
        "suite",
        "suite_hash",
        "provider",
        "model",
        "prompt_name",
        "prompt_hash",
        "faults",
        "perturbation",
        "config",
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


def test_categorical_with_int8_codes_and_missing_values() -> None:
    """int8 category codes: the missing value's code (the number of categories) must not wrap."""
    rng = np.random.default_rng(1)
    names = [f"m{i:03d}" for i in range(126)]  # the most categories with int8 codes
    model = pd.Series(rng.choice(names, 2_000)).astype(pd.CategoricalDtype(names))
    model[::7] = np.nan
    df = pd.DataFrame({"model": model, "task": rng.choice(["a", "b"], 2_000)})
    df["passed"] = rng.random(2_000) < 0.5
    df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
    assert df["model"].cat.codes.dtype == np.int8
    got = counts(df, by="model")
    pd.testing.assert_frame_equal(
        got[list(groupby_counts(df, ("model",), "exclude").columns)],
        groupby_counts(df, ("model",), "exclude"),
    )


def test_many_high_cardinality_keys_do_not_overflow() -> None:
    rng = np.random.default_rng(0)
    rows = 5_000
    df = pd.DataFrame({f"k{i}": rng.integers(0, 1_000_000, rows).astype(str) for i in range(5)})
    df["task"] = rng.integers(0, 3, rows).astype(str)
    df["passed"] = rng.random(rows) < 0.5
    df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
    by = tuple(f"k{i}" for i in range(5))
    pd.testing.assert_frame_equal(
        counts(df, by=by)[[*by, "task", "n", "c", "n_infra"]], groupby_counts(df, by, "exclude")
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


# --- counting straight from parquet: DuckDB and pandas give the table counts(load(folder)) gives ---


def write_folder(folder, seed: int = 0) -> None:
    """Parts of three runs, a trial stored twice (infra error, then a real outcome), a trial
    stored twice alike (a merge killed half way), and an old file without the prompt_name column."""
    rng = np.random.default_rng(seed)
    for run, (model, prompt) in enumerate([("m-b", "p1"), ("m-a", "p1"), ("m-a", "p2")]):
        for part in range(2):
            rows = []
            for task in range(4):
                for trial in range(part * 3, part * 3 + 3):
                    outcome = str(rng.choice(OUTCOMES))
                    rows.append(
                        {
                            "run_id": f"r{run}",
                            "suite": "orders",
                            "model": model,
                            "prompt_hash": prompt,
                            "prompt_name": prompt.upper(),
                            "temperature": 0.5 if run else float("nan"),
                            "task": f"t{task}",
                            "trial": trial,
                            "passed": outcome == "pass",
                            "outcome": outcome,
                            "transcript": "x" * 50,
                        }
                    )
            write_part(rows, folder, f"r{run}")
    retry = {"run_id": "r0", "suite": "orders", "model": "m-b", "prompt_hash": "p1", "task": "t0"}
    write_part([{**retry, "trial": 7, "passed": False, "outcome": "infra_error"}], folder, "r0")
    write_part([{**retry, "trial": 7, "passed": True, "outcome": "pass"}], folder, "r0")
    write_part([{**retry, "trial": 8, "passed": False, "outcome": "format_error"}], folder, "r0")
    write_part([{**retry, "trial": 8, "passed": False, "outcome": "format_error"}], folder, "r0")
    old = table_from_records(
        {
            "run_id": "r9",
            "suite": "orders",
            "model": "m-c",
            "task": "t1",
            "trial": i,
            "passed": i == 0,
            "outcome": "pass" if i == 0 else "max_turns",
        }
        for i in range(2)
    ).drop_columns(["prompt_name", "prompt_hash"])  # a file from before these columns existed
    (folder / "r9").mkdir()
    pq.write_table(old, folder / "r9" / "part-old.parquet")
    hidden = folder / "_scratch"
    hidden.mkdir()
    pq.write_table(old, hidden / "ignored.parquet")  # hidden folders are not records


@pytest.fixture
def folder(tmp_path):
    write_folder(tmp_path)
    return tmp_path


@pytest.mark.parametrize("by", [None, ("model",), ("model", "prompt_name"), ("temperature",), ()])
@pytest.mark.parametrize("infra", ["exclude", "fail"])
def test_duckdb_and_pandas_routes_give_the_counts_of_the_loaded_records(folder, by, infra: str) -> None:
    expected = counts(load(folder), by=by, infra=infra)
    for engine in ("duckdb", "pandas"):
        got = counts(folder, by=by, infra=infra, engine=engine)
        pd.testing.assert_frame_equal(got, expected, obj=engine)
    pd.testing.assert_frame_equal(counts(str(folder), by=by, infra=infra), expected)


def test_duplicate_trials_are_counted_once_as_load_keeps_them(folder) -> None:
    got = counts(folder, by="run_id", engine="duckdb").set_index(["run_id", "task"])
    loaded = load(folder)
    kept = loaded[(loaded["run_id"] == "r0") & (loaded["task"] == "t0") & loaded["trial"].isin([7, 8])]
    assert kept["outcome"].tolist() == ["pass", "format_error"]  # a real outcome, and one of two copies
    assert got.loc[("r0", "t0"), "n"] + got.loc[("r0", "t0"), "n_infra"] == 8  # 6 trials + 2 stored twice


@pytest.mark.parametrize("column", ["outcome", "prompt_name", "suite_hash"])
def test_a_trial_stored_twice_unlike_is_refused_by_every_route_never_dropped(folder, column) -> None:
    """Two real rows of one (run_id, task, trial) that differ in what was measured are two trials
    under one run id: load and both counting routes refuse them, naming them, rather than keep one."""
    row = {"run_id": "r0", "suite": "orders", "model": "m-b", "prompt_hash": "p1", "prompt_name": "P1"}
    row |= {"task": "t1", "trial": 9, "passed": False, "outcome": "format_error"}
    other = {"outcome": {"passed": True, "outcome": "pass"}, "prompt_name": {"prompt_name": "P2"}}
    write_part([row], folder, "r0")
    write_part([{**row, **other.get(column, {column: "0123456789ab"})}], folder, "r0")
    message = rf"1 trial is stored more than once with different {column} \(e.g. run r0, task 't1', trial 9"
    with pytest.raises(ValueError, match=message):
        load(folder)
    with pytest.raises(ValueError, match=message):
        load(folder, columns=["model", "task", "passed"])
    for engine in ("duckdb", "pandas"):
        with pytest.raises(ValueError, match=message):
            counts(folder, engine=engine)


def test_one_file_counts_too(folder) -> None:
    file = next((folder / "r1").glob("*.parquet"))
    for engine in ("duckdb", "pandas"):
        got = counts(file, by="model", engine=engine)
        assert got["n"].sum() + got["n_infra"].sum() == 12, engine


def test_without_duckdb_auto_uses_pandas_and_duckdb_says_how_to_install(folder, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "duckdb", None)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    pd.testing.assert_frame_equal(counts(folder), counts(load(folder)))
    with pytest.raises(ImportError, match=r"passk-nb\[duckdb\]"):
        counts(folder, engine="duckdb")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"engine": "spark"}, ValueError, "engine must be one of"),
        ({"by": "colour"}, ValueError, "do not have: \\['colour'\\]"),
        ({"infra": "drop"}, ValueError, "infra must be one of"),
    ],
)
def test_bad_arguments_say_what_is_wrong(folder, kwargs, error, message: str) -> None:
    with pytest.raises(error, match=message):
        counts(folder, **kwargs)


def test_missing_or_empty_folders_say_so(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="passk run --out"):
        counts(tmp_path / "nope")
    with pytest.raises(ValueError, match="no parquet files"):
        counts(tmp_path)


def test_load_reads_only_the_columns_asked_for(folder, monkeypatch) -> None:
    columns = ["model", "task", "passed", "outcome"]
    full = load(folder)
    read = spy_parquet_reads(monkeypatch)
    got = load(folder, columns=columns)
    pd.testing.assert_frame_equal(got, full[columns])
    assert read and all(cols is not None and "transcript" not in cols for cols in read)
    with pytest.raises(ValueError, match="record columns"):
        load(folder, columns=["model", "colour"])


def test_a_column_no_file_has_gets_loads_default_in_both_routes(tmp_path) -> None:
    old = table_from_records(
        {
            "run_id": "r",
            "suite": "s",
            "model": "m",
            "task": "t",
            "trial": i,
            "passed": i == 0,
            "outcome": "pass" if i == 0 else "wrong_state",
        }
        for i in range(2)
    ).drop_columns(["prompt_name"])
    pq.write_table(old, tmp_path / "old.parquet")
    expected = counts(load(tmp_path), by=("model", "prompt_name"))
    assert expected["prompt_name"].eq("").all()  # an older file: load() fills the column's default
    for engine in ("duckdb", "pandas"):
        got = counts(tmp_path, by=("model", "prompt_name"), engine=engine)
        pd.testing.assert_frame_equal(got, expected, obj=engine)


def sorted_records(runs: int = 3, tasks: int = 4, trials: int = 3) -> pd.DataFrame:
    """Records laid out as load() returns them: by run, task, trial; two runs share a model."""
    rows = [
        {
            "model": f"m{r % 2}",
            "run_id": f"run{r}",
            "task": f"t{t}",
            "trial": i,
            "passed": bool((r + t + i) % 2),
        }
        for r in range(runs)
        for t in range(tasks)
        for i in range(trials)
    ]
    df = pd.DataFrame(rows).astype({"model": "str", "run_id": "str", "task": "str"})
    return df.assign(outcome=np.where(df["passed"], "pass", "wrong_state")).astype({"outcome": "str"})


def _shuffled(df: pd.DataFrame) -> pd.DataFrame:
    return df.sample(frac=1.0, random_state=1).reset_index(drop=True)


def _resumed(df: pd.DataFrame) -> pd.DataFrame:
    """run0 written in two blocks (a resumed run), other runs between them; trials stay distinct."""
    first = (df["run_id"] == "run0") & (df["trial"] < 2)
    return pd.concat(
        [df[first], df[~first & (df["run_id"] != "run0")], df[~first & (df["run_id"] == "run0")]]
    )


@pytest.mark.parametrize(
    "layout",
    {
        "sorted": lambda df: df,
        "shuffled": _shuffled,
        "trials in falling order": lambda df: df.iloc[::-1].reset_index(drop=True),
        "a run resumed in two blocks": _resumed,
        "a repeat next to its trial": lambda df: pd.concat([df.iloc[:5], df.iloc[4:]]),
        "repeats at the end": lambda df: pd.concat([df, df.iloc[7:9]]),
        "a run repeated as a block": lambda df: pd.concat([df, df[df["run_id"] == "run1"]]),
        "repeats shuffled in": lambda df: _shuffled(pd.concat([df, df.iloc[[3]]])),
        "repeated trial numbers, other tasks": lambda df: df.assign(task="t0"),
    }.items(),
    ids=lambda item: item[0] if isinstance(item, tuple) else "",
)
@pytest.mark.parametrize("by", [("model",), ("model", "run_id")])
def test_repeated_trials_are_refused_exactly_when_some_trial_repeats(layout, by) -> None:
    """The cheap paths of the check (runs of run_id, rising trial numbers) agree with a plain
    duplicated() on every layout: sorted, shuffled, resumed, repeats near and far."""
    _, make = layout
    df = make(sorted_records())
    repeats = df.duplicated(list(dict.fromkeys([*by, "run_id", "task", "trial"]))).any()
    if repeats:
        with pytest.raises(ValueError, match="more than once"):
            counts(df, by=by)
        with pytest.raises(ValueError, match="more than once"):
            summarize(df, k=1, by=by, n_boot=0)
    else:
        table = counts(df, by=by)
        assert table["n"].sum() == len(df)
        assert summarize(df, k=1, by=by, n_boot=0)["trials"].sum() == len(df)


ANALYSES = {
    "summarize": lambda src, infra: summarize(src, k=2, n_boot=200, infra=infra),
    "summarize by model": lambda src, infra: summarize(src, k=1, by="model", n_boot=200, infra=infra),
    "summarize per task": lambda src, infra: summarize(src, k=1, by=("model", "task"), infra=infra),
    "curve": lambda src, infra: passk_nb.curve(
        src, ks=[1, 2, 3], n_boot=200, method="bootstrap", infra=infra
    ),
    "compare": lambda src, infra: passk_nb.compare(src, on="prompt_hash", a=P0, b=P1, k=1, infra=infra),
    "flips": lambda src, infra: passk_nb.flips(src, on="prompt_hash", a=P0, b=P1, infra=infra),
    "rank": lambda src, infra: passk_nb.rank(src, on="model", k=1, n_boot=200, infra=infra),
    "noise_floor": lambda src, infra: passk_nb.noise_floor(src, k=1, infra=infra),
    "forecast": lambda src, infra: passk_nb.forecast(src, ks=[1, 4], n_boot=50, infra=infra),
}
P0, P1 = f"{0:012x}", f"{1:012x}"


@pytest.fixture(scope="module")
def arms_folder(tmp_path_factory):
    """Three models × two prompts × six tasks × four trials, one run each, with infra errors."""
    folder = tmp_path_factory.mktemp("arms")
    df = synthetic_trials(models=3, prompts=2, tasks=6, trials=4, seed=3).assign(suite="orders")
    infra = np.random.default_rng(3).random(len(df)) < 0.1
    df.loc[infra, ["passed", "outcome"]] = [False, "infra_error"]
    for run_id, rows in df.groupby("run_id"):
        write_part(rows.to_dict("records"), folder, str(run_id))
    return folder


@pytest.mark.filterwarnings("ignore")  # six tasks, four trials: low power, wide intervals
@pytest.mark.parametrize("analysis", sorted(ANALYSES))
@pytest.mark.parametrize("infra", ["exclude", "fail"])
def test_every_analysis_reads_a_folder_path_as_it_reads_the_loaded_records(
    arms_folder, analysis, infra
) -> None:
    """summarize("runs/", k=...) counts the parquet files without loading them (issue 15), and so
    does every analysis built on the counts: the same table as from load(folder)."""
    run = ANALYSES[analysis]
    expected = run(load(arms_folder), infra)
    assert len(expected)
    for src in (str(arms_folder), arms_folder):
        pd.testing.assert_frame_equal(run(src, infra), expected)


def test_outcome_counts_of_a_counts_table_equal_those_of_its_trials() -> None:
    from passk_nb.stats.counts import outcome_counts

    df = pd.DataFrame(
        {
            "model": ["a", "a", "a", "b", "b", None],
            "task": ["t", "t", "u", "t", "t", "t"],
            "passed": [True, False, False, False, True, True],
            "outcome": ["pass", "format_error", "infra_error", "wrong_state", "pass", "pass"],
        }
    )
    of_trials = outcome_counts(df, by="model")
    assert of_trials["model"].tolist()[:2] == ["a", "b"] and pd.isna(of_trials["model"].iloc[2])
    assert list(of_trials.columns) == ["model", "pass", "wrong_state", "format_error", "infra_error"]
    assert of_trials.drop(columns="model").to_numpy().tolist() == [[1, 0, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]]
    pd.testing.assert_frame_equal(outcome_counts(counts(df, by="model"), by="model"), of_trials)
    bare = counts(df, by="model")[["model", "task", "n", "c"]]  # from elsewhere: failures not broken down
    assert outcome_counts(bare, by=()).to_dict("records") == [{"pass": 3, "failed (outcome not counted)": 2}]
