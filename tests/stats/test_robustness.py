"""robustness(): each arm paired with the base by task, the intervals of compare, the tasks that break."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from passk_nb.data.records import frame_from_records, table_from_records
from passk_nb.data.store import write_part
from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.paired import compare
from passk_nb.stats.robustness import robustness, robustness_tasks


def simulate(rates: dict[tuple[str, str], dict[str, float]], n: int, seed: int) -> pd.DataFrame:
    """Records drawn as Bernoulli(rate) trials: ``rates[(model, faults)][task]``."""
    rng = np.random.default_rng(seed)
    rows = []
    for (model, faults), by_task in rates.items():
        for task, rate in by_task.items():
            for trial, ok in enumerate(rng.random(n) < rate):
                rows.append(
                    {
                        "run_id": f"{model}-{faults}",
                        "suite": "s",
                        "task": task,
                        "trial": trial,
                        "model": model,
                        "faults": faults,
                        "passed": bool(ok),
                        "outcome": "pass" if ok else "wrong_state",
                    }
                )
    return frame_from_records(rows)


TASKS = [f"t{i}" for i in range(8)]


def _suite(rng: np.random.Generator) -> dict[str, float]:
    return {t: float(p) for t, p in zip(TASKS, rng.uniform(0.3, 0.95, len(TASKS)), strict=True)}


def test_each_arm_is_the_paired_difference_compare_gives_against_the_base():
    rng = np.random.default_rng(1)
    clean = _suite(rng)
    rates = {
        ("m", "none"): clean,
        ("m", "timeout:*"): {t: p * 0.8 for t, p in clean.items()},
        ("m", "noop:refund_order"): {t: p * 0.5 for t, p in clean.items()},
    }
    df = simulate(rates, n=6, seed=2)
    out = robustness(df, k=2, n_boot=200, seed=3)
    assert sorted(set(out["faults"])) == ["noop:refund_order", "timeout:*"]
    for arm in ("timeout:*", "noop:refund_order"):
        mine = out[out["faults"] == arm].reset_index(drop=True)
        theirs = compare(df, on="faults", a="none", b=arm, k=2, n_boot=200, seed=3)
        pd.testing.assert_frame_equal(mine[theirs.columns], theirs)
    classes = dict(zip(out["faults"], out["fault_class"], strict=True))
    assert classes == {"timeout:*": "explicit transient", "noop:refund_order": "implicit permanent"}


def test_the_tasks_that_break_are_those_whose_pass_hat_k_fell():
    clean = dict.fromkeys(TASKS, 1.0)
    faulted = {**clean, "t2": 0.0, "t5": 0.5}
    df = simulate({("m", "none"): clean, ("m", "error:*"): faulted}, n=4, seed=0)
    tasks = robustness_tasks(df, k=2)
    # t2 always fails under the fault; t5 passes half its trials, so its pass^2 fell unless it
    # happened to pass every one of them: the tasks that break are exactly those whose estimate fell
    fell = tasks.loc[tasks["pass^k"] < tasks["pass^k_base"], "task"].tolist()
    assert tasks.loc[tasks["breaks"], "task"].tolist() == fell and "t2" in fell
    assert set(fell) <= {"t2", "t5"}
    n, c = tasks["n"].to_numpy(), tasks["c"].to_numpy()
    np.testing.assert_allclose(tasks["pass^k"], pass_hat_k(n, c, 2))
    np.testing.assert_allclose(tasks["delta"], tasks["pass^k"] - tasks["pass^k_base"])
    out = robustness(df, k=2, n_boot=0).set_index("metric")
    assert out.loc["pass^k", "broken"] == ", ".join(tasks.loc[tasks["breaks"], "task"])
    assert out.loc["pass^k", "n_broken"] == tasks["breaks"].sum()


def test_an_arm_with_no_effect_covers_zero_about_as_often_as_the_level_says():
    covered = []
    for rep in range(40):
        rng = np.random.default_rng(100 + rep)
        clean = _suite(rng)
        df = simulate({("m", "none"): clean, ("m", "latency:*"): clean}, n=5, seed=rep)
        row = robustness(df, k=2, seed=rep).set_index("metric").loc["pass^k"]
        covered.append(row["lo"] <= 0 <= row["hi"])
    assert np.mean(covered) >= 0.85  # the paired interval of compare, nominal 95 %


def test_groups_are_kept_apart_and_a_missing_base_is_named():
    rng = np.random.default_rng(5)
    a, b = _suite(rng), TASKS
    rates = {
        ("m1", "none"): a,
        ("m1", "noop:*"): {t: 0.0 for t in a},
        ("m2", "none"): dict.fromkeys(b, 1.0),
        ("m2", "noop:*"): dict.fromkeys(b, 1.0),
    }
    df = simulate(rates, n=4, seed=6)
    out = robustness(df, k=1, n_boot=0).set_index(["model", "metric"])
    assert out.loc[("m1", "pass^k"), "b"] == 0.0 and out.loc[("m1", "pass^k"), "n_broken"] == len(TASKS)
    assert out.loc[("m2", "pass^k"), "diff"] == 0.0 and out.loc[("m2", "pass^k"), "broken"] == ""
    with pytest.raises(ValueError, match=r"the base arm faults='clean' is not in the frame"):
        robustness(df, k=1, base="clean")
    with pytest.raises(ValueError, match=r"holds only faults='none'"):
        robustness(df[df["faults"] == "none"], k=1)
    with pytest.raises(ValueError, match=r"on must be one of \['faults', 'perturbation'\]"):
        robustness(df, k=1, on="model")


def test_a_folder_gives_what_its_records_give(tmp_path):
    rng = np.random.default_rng(7)
    clean = _suite(rng)
    df = simulate({("m", "none"): clean, ("m", "stale:*"): {t: p / 2 for t, p in clean.items()}}, n=4, seed=8)
    for run_id, part in df.groupby("run_id"):
        records = [{k: v for k, v in r.items() if pd.notna(v)} for r in part.to_dict("records")]
        write_part(table_from_records(records), tmp_path, str(run_id))
    from_folder = robustness(tmp_path, k=2, n_boot=100, by=["model"])
    from_frame = robustness(df, k=2, n_boot=100, by=["model"])
    pd.testing.assert_frame_equal(from_folder, from_frame, check_dtype=False)
