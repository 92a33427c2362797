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


def grid(seed=1):
    """One model x 4 prompts x 10 tasks x 8 trials: the shape of a prompt sweep."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        [
            {"llm": "m", "variant": p, "case": f"t{t}", "attempt": i, "ok": int(rng.random() < 0.6)}
            for p in ("a", "b", "c", "d")
            for t in range(10)
            for i in range(8)
        ]
    )


def test_a_mapped_prompt_is_part_of_the_key_and_the_run_id_and_gets_a_hash():
    df = passk_nb.from_frame(
        grid(), task="case", trial="attempt", passed="ok", model="llm", columns={"prompt_name": "variant"}
    )
    assert len(df) == 320 and df["run_id"].nunique() == 4
    hashes = df.groupby("prompt_name")["prompt_hash"].unique()
    assert all(len(h) == 1 and len(h[0]) == 12 for h in hashes) and hashes.map(tuple).nunique() == 4
    summary = passk_nb.summarize(df, k=2, n_boot=0)
    assert sorted(summary["prompt_name"]) == ["a", "b", "c", "d"] and (summary["trials"] == 80).all()
    # without a trial column, trials are numbered within each prompt and task
    numbered = passk_nb.from_frame(
        grid(), task="case", passed="ok", model="llm", columns={"prompt_name": "variant"}
    )
    assert numbered["trial"].max() == 7


def test_a_table_per_prompt_concatenated_and_stored_loads_whole(tmp_path):
    import pyarrow as pa

    from passk_nb.data.records import COLUMNS, SCHEMA

    whole = grid()
    parts = [
        passk_nb.from_frame(
            whole[whole["variant"] == p],
            task="case",
            trial="attempt",
            passed="ok",
            model="llm",
            columns={"prompt_name": "variant"},
        )
        for p in "abcd"
    ]
    df = pd.concat(parts, ignore_index=True)
    assert df["run_id"].nunique() == 4 and (df["prompt_hash"] != "").all()
    table = pa.Table.from_pandas(df[list(COLUMNS)], schema=SCHEMA, preserve_index=False)
    passk_nb.data.store.write_part(table, tmp_path, "sweep")
    assert len(passk_nb.load(tmp_path)) == 320


def test_duplicates_name_the_mapped_identity_columns():
    doubled = pd.concat([grid(), grid().assign(ok=0)])
    with pytest.raises(ValueError, match=r"share a \(model, prompt_name, task, trial\).*columns=") as info:
        passk_nb.from_frame(
            doubled,
            task="case",
            trial="attempt",
            passed="ok",
            model="llm",
            columns={"prompt_name": "variant"},
        )
    assert "give the trial column" not in str(info.value)


def test_fewer_trials_are_warned_within_a_configuration_not_across_models():
    two = pd.concat([table(), table(llm="other").iloc[[0, 1, 4, 5]]])  # other: 2 trials of every task
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        passk_nb.from_frame(two, task="case", passed="ok", model="llm")
    with pytest.warns(
        UserWarning, match=r"1 of 4 tasks have fewer trials than the others of their configuration"
    ):
        passk_nb.from_frame(two.iloc[:-1], task="case", passed="ok", model="llm")


def test_mapped_settings_make_the_config_label_so_the_report_keeps_them_apart():
    hot = table().assign(temp=[0.0] * 8)
    both = pd.concat([hot, table().assign(temp=[0.7] * 8)])
    df = passk_nb.from_frame(
        both, task="case", trial="attempt", passed="ok", model="llm", columns={"temperature": "temp"}
    )
    assert df["run_id"].nunique() == 2
    assert sorted(df["config"].unique()) == ["temperature=0.0", "temperature=0.7"]
    assert len(passk_nb.summarize(df, k=2, n_boot=0)) == 2


def test_a_mapped_suite_is_kept_and_a_mapped_provider_refused():
    both = pd.concat([table(bench="x"), table(bench="y")])
    df = passk_nb.from_frame(
        both, task="case", trial="attempt", passed="ok", model="llm", columns={"suite": "bench"}
    )
    assert sorted(df["suite"].unique()) == ["x", "y"] and df["run_id"].nunique() == 2
    with pytest.raises(ValueError, match="columns= maps provider"):
        passk_nb.from_frame(table(), task="case", passed="ok", columns={"provider": "llm"})
