"""summarize and curve: the headline table and the pass@k / pass^k curve over k."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from passk_nb.stats.paired import compare
from passk_nb.stats.summary import curve, summarize
from tests.helpers.records import records_from_marks as trials
from tests.stats.cases import TWO_TASKS, exact_var

SUMMARY_COLUMNS = [
    "k",
    "n_tasks",
    "n_tasks_covered",
    "trials",
    "successes",
    "pass@k",
    "pass^k",
    "pass@k_lo",
    "pass@k_hi",
    "pass^k_lo",
    "pass^k_hi",
    "pass^k_se_fixed",
    "pass@k_se_fixed",
    "pass@k_fixed_lo",
    "pass@k_fixed_hi",
    "pass^k_fixed_lo",
    "pass^k_fixed_hi",
    "n_infra_excluded",
    "ci_method",
    "pass@k_infra_fail",
    "pass^k_infra_fail",
]


def test_fixed_task_bounds_are_the_shipped_columns():
    table = pd.DataFrame({"model": "m", "task": list("abcde"), "n": 4, "c": [4, 3, 2, 1, 0]})
    out = summarize(table, k=2).iloc[0]
    for metric in ("pass@k", "pass^k"):
        assert 0 <= out[f"{metric}_fixed_lo"] < out[metric] < out[f"{metric}_fixed_hi"] <= 1
    line = curve(table, ks=[2], n_boot=0)
    hat = line[line["metric"] == "pass^k"].iloc[0]
    assert (hat["fixed_lo"], hat["fixed_hi"]) == (out["pass^k_fixed_lo"], out["pass^k_fixed_hi"])


def synthetic(p: np.ndarray, n: int, rng: np.random.Generator) -> pd.DataFrame:
    """Trials of suites: p has shape (suites, tasks); suite s becomes model 's<s>'."""
    suites, tasks = p.shape
    passed = rng.random((suites, tasks, n)) < p[:, :, None]
    return pd.DataFrame(
        {
            "model": np.repeat([f"s{s:03d}" for s in range(suites)], tasks * n),
            "task": np.tile(np.repeat([f"t{t:02d}" for t in range(tasks)], n), suites),
            "passed": passed.ravel(),
            "outcome": np.where(passed.ravel(), "pass", "wrong_state"),
        }
    )


def test_summarize_over_tasks_by_hand() -> None:
    out = summarize(TWO_TASKS, k=2, by=("model", "prompt_hash"), method="bootstrap", min_tasks=2)
    assert list(out.columns) == ["model", "prompt_hash", *SUMMARY_COLUMNS]
    row = out.iloc[0]
    # task a: 4/4, task b: 2/4; pass@2(b) = 1 - C(2,2)/C(4,2) = 5/6, pass^2(b) = 1/6
    assert row["pass@k"] == pytest.approx((1 + 5 / 6) / 2, rel=1e-12)
    assert row["pass^k"] == pytest.approx((1 + 1 / 6) / 2, rel=1e-12)
    assert (row["k"], row["n_tasks"], row["n_tasks_covered"], row["trials"], row["successes"]) == (
        2,
        2,
        2,
        8,
        6,
    )
    assert row["ci_method"] == "bootstrap"
    # two tasks: resamples are {a,a}, {a,b}, {b,b}; the percentile interval spans their range
    assert row["pass^k_lo"] == pytest.approx(1 / 6, rel=1e-12)
    assert row["pass^k_hi"] == pytest.approx(1.0)
    # fixed-task-set SE: the exact variance of C(C,2)/C(4,2) for C ~ Binomial(4, (c + 1/2)/5), by hand
    assert row["pass^k_se_fixed"] == pytest.approx(math.sqrt(exact_var(4, 4, 2) + exact_var(4, 2, 2)) / 2)
    assert row["pass@k_se_fixed"] == pytest.approx(math.sqrt(exact_var(4, 0, 2) + exact_var(4, 2, 2)) / 2)


def test_summarize_group_keys_and_by_forms() -> None:
    df = trials({("m1", "p", "a"): "10", ("m2", "p", "a"): "11", ("m2", "p", "b"): "00"})
    by_model = summarize(df, k=1, by="model", n_boot=0)
    assert by_model["model"].tolist() == ["m1", "m2"]
    assert by_model["pass^k"].tolist() == [0.5, 0.5]
    whole = summarize(df, k=1, by=(), n_boot=0)
    assert list(whole.columns) == SUMMARY_COLUMNS
    # one group: task a pools its trials across models (3 of 4), task b has 0 of 2
    assert (len(whole), whole.loc[0, "n_tasks"], whole.loc[0, "pass^k"]) == (1, 2, pytest.approx(0.375))
    default = summarize(df, k=1, n_boot=0)  # every identity column: never pools models, prompts or runs
    identity = [
        "suite",
        "suite_hash",
        "provider",
        "model",
        "prompt_name",
        "prompt_hash",
        "faults",
        "perturbation",
        "config",
    ]
    assert list(default.columns[:9]) == identity
    assert default["model"].tolist() == ["m1", "m2"] and "task" not in default.columns


def test_uneven_trials_are_handled_per_task_and_coverage_is_reported() -> None:
    df = trials({("m", "p", "a"): "1111", ("m", "p", "b"): "1110", ("m", "p", "c"): "111"})
    with pytest.warns(UserWarning, match="only some tasks have ≥ 4 usable trials"):
        out = summarize(df, k=4, by="model", n_boot=0)
    row = out.iloc[0]
    assert (row["n_tasks"], row["n_tasks_covered"]) == (3, 2)
    assert row["pass^k"] == pytest.approx(0.5)  # mean of a (1) and b (0); c is not covered
    with pytest.warns(UserWarning, match="no task has ≥ 4 usable trials in task='c'"):
        per_task = summarize(df, k=4, by="task", n_boot=0)
    assert per_task["pass^k"].isna().tolist() == [False, False, True]


def test_k_above_every_n_in_a_group_is_nan_with_a_warning() -> None:
    df = trials({("m1", "p", "a"): "1111", ("m2", "p", "a"): "11"})
    with pytest.warns(UserWarning, match="no task has ≥ 3 usable trials in model='m2'"):
        out = summarize(df, k=3, by="model", min_tasks=2)
    assert out.set_index("model").loc["m2", ["pass@k", "pass^k", "pass^k_lo"]].isna().all()


def test_k_above_every_n_in_the_frame_is_an_error() -> None:
    with pytest.raises(
        ValueError, match=r"k=5 is larger than n=4 for every task; run more trials or choose k ≤ 4"
    ):
        summarize(TWO_TASKS, k=5)


def test_infra_errors_are_excluded_by_default_or_counted_as_failures() -> None:
    df = trials({("m", "p", "a"): "11i1", ("m", "p", "b"): "10ii"})
    excluded = summarize(df, k=1, by=(), n_boot=0).iloc[0]
    assert (excluded["trials"], excluded["successes"], excluded["n_infra_excluded"]) == (5, 4, 3)
    assert excluded["pass^k"] == pytest.approx((1 + 0.5) / 2)
    failed = summarize(df, k=1, by=(), n_boot=0, infra="fail").iloc[0]
    assert (failed["trials"], failed["successes"], failed["n_infra_excluded"]) == (8, 4, 0)
    assert failed["pass^k"] == pytest.approx((0.75 + 0.25) / 2)
    with pytest.raises(ValueError, match="infra must be one of"):
        summarize(df, k=1, infra="drop")


def test_n_boot_zero_gives_point_estimates_only() -> None:
    for by in (("model",), ("task",)):
        out = summarize(TWO_TASKS, k=2, by=by, n_boot=0)
        assert out[["pass@k_lo", "pass@k_hi", "pass^k_lo", "pass^k_hi"]].isna().all(axis=None)
        assert (out["ci_method"] == "none").all()
        assert out["pass^k"].notna().all()


def test_same_seed_same_interval_and_groups_do_not_influence_each_other() -> None:
    rng = np.random.default_rng(1)
    df = synthetic(rng.uniform(0.2, 0.9, size=(3, 12)), 6, rng)
    boot = {"by": "model", "method": "bootstrap"}
    first = summarize(df, k=2, seed=7, **boot)
    pd.testing.assert_frame_equal(first, summarize(df, k=2, seed=7, **boot))
    assert not first["pass^k_lo"].equals(summarize(df, k=2, seed=8, **boot)["pass^k_lo"])
    alone = summarize(df[df["model"] == "s001"], k=2, seed=7, **boot)
    pd.testing.assert_frame_equal(alone.reset_index(drop=True), first.iloc[[1]].reset_index(drop=True))


def test_a_declined_interval_is_said_once_short_in_python_keywords() -> None:
    """One warning per call, naming rows only by what tells them apart, in keywords (min_tasks=)."""
    from passk_nb.stats.params import TooFewTasksWarning

    cells = {(m, p, t): "1100" for m in ("m1", "m2") for p in ("p1", "p2") for t in "abc"}
    few = trials(cells)
    for call in (lambda: summarize(few, k=2), lambda: curve(few), lambda: compare(few, a="p1", b="p2", k=2)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        [said] = [w for w in caught if issubclass(w.category, TooFewTasksWarning)]
        text = str(said.message)
        assert len(text) < 200 and "min_tasks=5" in text, text
        assert "--" not in text and "suite=" not in text and "prompt_hash=" not in text
    more = trials({**cells, **{("m1", "p1", t): "1100" for t in "defg"}})
    with pytest.warns(TooFewTasksWarning, match=r"in 3 of 4 rows \(model='m1' prompt_hash='p2', .*\)"):
        summarize(more, k=2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": 0}, "k must be a whole number ≥ 1; got k=0"),
        ({"k": 2.5}, "k must be a whole number"),
        ({"k": 2, "ci": 95}, "ci must be between 0 and 1"),
        ({"k": 2, "n_boot": -1}, "n_boot must be a whole number ≥ 0"),
        ({"k": 2, "seed": None}, "seed must be a whole number"),
        ({"k": 2, "by": ("model", "model")}, "repeats a column"),
        ({"k": 2, "by": ("model", "temperature_x")}, r"lacks columns \['temperature_x'\]"),
    ],
)
def test_summarize_validation_messages(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        summarize(TWO_TASKS, **kwargs)


def test_frames_missing_columns_or_with_bad_passed_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"lacks columns \['passed', 'outcome'\]"):
        summarize(pd.DataFrame({"task": ["a"], "model": ["m"], "prompt_hash": ["p"]}), k=1)
    bad = pd.DataFrame({"task": ["a"], "passed": [1], "outcome": ["pass"]})
    with pytest.raises(ValueError, match="'passed' must be boolean"):
        summarize(bad, k=1, by=())
    with pytest.raises(ValueError, match="no trial rows"):
        summarize(TWO_TASKS.iloc[:0], k=1)


def test_curve_is_tidy_and_agrees_with_summarize() -> None:
    boot = {"by": ("model", "prompt_hash"), "n_boot": 200, "method": "bootstrap", "min_tasks": 2}
    out = curve(TWO_TASKS, **boot)
    assert list(out.columns) == [
        "model",
        "prompt_hash",
        "k",
        "metric",
        "value",
        "lo",
        "hi",
        "se_fixed",
        "fixed_lo",
        "fixed_hi",
        "n_tasks",
        "n_tasks_covered",
        "partial",
        "ci_method",
    ]
    assert out["k"].tolist() == [1, 2, 3, 4] * 2 and out["metric"].tolist() == ["pass@k"] * 4 + ["pass^k"] * 4
    # pass^k of task b (2/4) is 1/2, 1/6, 0, 0; task a is always 1
    hat = out[out["metric"] == "pass^k"]["value"].to_numpy()
    np.testing.assert_allclose(hat, [0.75, 7 / 12, 0.5, 0.5], rtol=1e-12)
    for k in (1, 3):
        s = summarize(TWO_TASKS, k=k, **boot).iloc[0]
        row = out[(out["k"] == k) & (out["metric"] == "pass@k")].iloc[0]
        assert (row["value"], row["lo"], row["hi"]) == (s["pass@k"], s["pass@k_lo"], s["pass@k_hi"])


def test_curve_with_uneven_trials_warns_once_and_explicit_ks() -> None:
    df = trials({("m", "p", "a"): "111", ("m", "p", "b"): "11110"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = curve(df, by="model", n_boot=0)
    assert len(caught) == 1 and "[4, 5]" in str(caught[0].message)
    assert out["k"].max() == 5
    assert out.loc[out["k"] == 5, "n_tasks_covered"].tolist() == [1, 1]
    assert out.loc[out["metric"] == "pass^k", "partial"].tolist() == [False] * 3 + [True] * 2
    assert curve(df, ks=[2], by=(), n_boot=0)["k"].tolist() == [2, 2]
    with pytest.raises(ValueError, match="k must be a whole number"):
        curve(df, ks=[0, 1])


BANDS = ("lo", "hi", "fixed_lo", "fixed_hi")


def bent(line: pd.DataFrame) -> dict[str, bool]:
    """Per metric and band edge of one group's curve: does it move against the truth's direction?"""
    out = {}
    for metric, sign in (("pass@k", 1), ("pass^k", -1)):
        rows = line[line["metric"] == metric].sort_values("k")
        for edge in BANDS:
            out[f"{metric} {edge}"] = bool((np.diff(rows[edge].to_numpy()) * sign < -1e-12).any())
    return out


def test_curve_bands_follow_the_truth_in_k_and_equal_summarize_at_every_k() -> None:
    """Ten tasks at 7, 8, 8, 6, 8, 7, 8, 8, 7, 8 of 8: separate intervals gave pass@1 [0.773, 0.994]
    but pass@4 [0.692, 1.0], though pass@4 ≥ pass@1 on every task."""
    table = pd.DataFrame({"task": range(10), "n": 8, "c": [7, 8, 8, 6, 8, 7, 8, 8, 7, 8]})
    for method in ("korn-graubard", "bootstrap"):
        line = curve(table, method=method, n_boot=300)
        assert not any(bent(line).values()), (method, bent(line))
        at = line[line["metric"] == "pass@k"].set_index("k")
        assert at.loc[4, "lo"] >= at.loc[1, "lo"] > 0.77
        for k in (1, 4, 8):
            s = summarize(table, k=k, method=method, n_boot=300).iloc[0]
            only = curve(table, ks=[k], method=method, n_boot=300)  # the envelope needs no other k asked
            for metric in ("pass@k", "pass^k"):
                row = line[(line["k"] == k) & (line["metric"] == metric)].iloc[0]
                alone = only[only["metric"] == metric].iloc[0]
                for edge in BANDS:
                    column = f"{metric}_{edge}"
                    assert row[edge] == s[column] == alone[edge], (method, k, column)


def test_curve_bands_restart_where_the_covered_tasks_change() -> None:
    """k = 3 leaves the 2-trial task out: the estimand changes, so no bound carries over from k = 2."""
    table = pd.DataFrame({"task": range(6), "n": [2, 32, 32, 32, 32, 32], "c": [0, 32, 32, 32, 31, 32]})
    with pytest.warns(UserWarning, match="left out"):
        line = curve(table, n_boot=0)
    hat = line[line["metric"] == "pass@k"].set_index("k")
    assert hat.loc[2, "fixed_hi"] < hat.loc[3, "fixed_lo"]  # the value rises past the old band
    with pytest.warns(UserWarning, match="only some tasks"):
        alone = summarize(table, k=3, n_boot=0).iloc[0]
    assert hat.loc[3, "fixed_lo"] == alone["pass@k_fixed_lo"]


@pytest.mark.parametrize(("prior", "tasks"), [((5, 1), 10), ((0.5, 0.5), 5)])
def test_curve_bands_are_monotone_and_keep_their_coverage_by_simulation(prior: tuple, tasks: int) -> None:
    """300 suites, n = 8, k = 1..8: every suite's bands are monotone where the truth is, and each
    band covers ≥ 90 % at every k (nominal 95 %; the Monte-Carlo sd at 95 % is 1.3 points)."""
    rng = np.random.default_rng(7)
    suites, n = 300, 8
    p = rng.beta(*prior, size=(suites, tasks))
    table = pd.DataFrame(
        {"sim": np.repeat(np.arange(suites), tasks), "task": np.tile(np.arange(tasks), suites), "n": n}
        | {"c": rng.binomial(n, p).ravel()}
    )
    line = curve(table, by="sim")
    k = np.arange(1, n + 1)
    big = rng.beta(*prior, size=400_000)[:, None]
    population = {"pass@k": 1 - np.mean((1 - big) ** k, 0), "pass^k": np.mean(big**k, 0)}
    these = {"pass@k": 1 - ((1 - p[:, :, None]) ** k).mean(1), "pass^k": (p[:, :, None] ** k).mean(1)}
    for metric in ("pass@k", "pass^k"):
        rows = line[line["metric"] == metric].sort_values(["sim", "k"])
        lo, hi, flo, fhi = (rows[edge].to_numpy().reshape(suites, n) for edge in BANDS)
        sign = 1 if metric == "pass@k" else -1
        for band in (lo, hi, flo, fhi):
            assert (np.diff(band, axis=1) * sign >= -1e-12).all(), metric
        assert ((lo <= population[metric]) & (population[metric] <= hi)).mean(0).min() >= 0.90, metric
        assert ((flo <= these[metric] + 1e-12) & (these[metric] - 1e-12 <= fhi)).mean(0).min() >= 0.90, metric


def test_summarize_puts_the_infra_fail_value_beside_the_headline() -> None:
    # task a: 2 passes and 2 infra errors -> excluded: n=2, c=2 (pass^1 1.0); as failures: 2/4 (0.5)
    df = trials({("m", "p", "a"): "11ii", ("m", "p", "b"): "1100"})
    row = summarize(df, k=1, n_boot=0).iloc[0]
    assert row["n_infra_excluded"] == 2
    assert row["pass^k"] == pytest.approx((1.0 + 0.5) / 2)
    assert row["pass^k_infra_fail"] == pytest.approx((0.5 + 0.5) / 2)
    clean = summarize(trials({("m", "p", "a"): "1100"}), k=1, n_boot=0).iloc[0]
    assert math.isnan(clean["pass^k_infra_fail"])  # nothing excluded: no bound to show


def test_all_infra_errors_say_so_instead_of_asking_for_k_below_one() -> None:
    with pytest.raises(ValueError, match="all 3 trials were infrastructure errors"):
        summarize(trials({("m", "p", "a"): "iii"}), k=1)


def test_a_summary_displays_its_headline_in_a_notebook_and_names_the_rest() -> None:
    """pandas hides the middle of 27 columns behind "…"; the notebook display leads with what
    `passk report` prints and lists every other column by name."""
    table = pd.DataFrame(
        {
            "model": np.repeat(["<b>big</b>", "small"], 6),
            "prompt_hash": "p",
            "task": np.tile(list("abcdef"), 2),
            "n": 4,
            "c": [4, 4, 3, 4, 2, 4, 1, 0, 2, 0, 0, 1],
        }
    )
    out = summarize(table, k=2)
    page = out._repr_html_()
    for _, row in out.iterrows():
        assert f"{row['pass^k']:.3f} [{row['pass^k_lo']:.3f}, {row['pass^k_hi']:.3f}]" in page
        assert f"[{row['pass^k_fixed_lo']:.3f}, {row['pass^k_fixed_hi']:.3f}]" in page
        assert f"{int(row['successes'])}/{int(row['trials'])} pass" in page
    assert "&lt;b&gt;big&lt;/b&gt;" in page and "<b>big" not in page
    assert "prompt_hash</th>" not in page  # the same for every row: not a column
    for hidden in ("pass^k_se_fixed", "n_infra_excluded", "pass@k_infra_fail"):
        assert hidden in page
    assert "…" not in page
    assert pd.DataFrame(out).equals(out) and isinstance(out.head(1), pd.DataFrame)
