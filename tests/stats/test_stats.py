"""summarize, curve, compare, flips and the df.passk accessor."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

import passk_nb.stats.accessor  # noqa: F401  (registers df.passk)
from passk_nb.stats.paired import compare, flips
from passk_nb.stats.summary import curve, summarize
from tests.helpers.records import records_from_marks as trials

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


TWO_TASKS = trials({("m", "p", "a"): "1111", ("m", "p", "b"): "1100"})


# summarize ------------------------------------------------------------------------------------


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


def plugin_var(n: int, c: int, k: int) -> float:
    """Var(C(C, k)/C(n, k)) for C ~ Binomial(n, (c + 1/2)/(n + 1)): the new-task intervals' floor."""
    pmf = sps.binom.pmf(np.arange(n + 1), n, (c + 0.5) / (n + 1))
    u = np.array([math.comb(j, k) / math.comb(n, k) for j in range(n + 1)])
    return float(pmf @ u**2 - (pmf @ u) ** 2)


def exact_var(n: int, c: int, k: int) -> float:
    """The largest Var(C(C, k)/C(n, k)) for C ~ Binomial(n, q), summing over the n + 1 outcomes, over
    q on a fine grid of the task's 80 % Jeffreys interval (from 0 at c = 0, to 1 at c = n)."""
    lo = 0.0 if c == 0 else sps.beta.ppf(0.1, c + 0.5, n - c + 0.5)
    hi = 1.0 if c == n else sps.beta.ppf(0.9, c + 0.5, n - c + 0.5)
    u = np.array([math.comb(j, k) / math.comb(n, k) for j in range(n + 1)])
    pmf = sps.binom.pmf(np.arange(n + 1)[None, :], n, np.linspace(lo, hi, 4001)[:, None])
    return float(np.max(pmf @ u**2 - (pmf @ u) ** 2))


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


def test_per_task_rows_get_clopper_pearson_intervals() -> None:
    out = summarize(trials({("m", "p", "t"): "1100"}), k=2, by="task")
    row = out.iloc[0]
    lo, hi = sps.binomtest(2, 4).proportion_ci(0.95, method="exact")
    assert row["ci_method"] == "clopper-pearson"
    assert row["pass^k_lo"] == pytest.approx(lo**2, rel=1e-9)
    assert row["pass^k_hi"] == pytest.approx(hi**2, rel=1e-9)
    assert row["pass@k_lo"] == pytest.approx(1 - (1 - lo) ** 2, rel=1e-9)
    assert row["pass@k_hi"] == pytest.approx(1 - (1 - hi) ** 2, rel=1e-9)
    assert row["pass^k_se_fixed"] == pytest.approx(math.sqrt(exact_var(4, 2, 2)), rel=1e-4)
    edge = summarize(trials({("m", "p", "t"): "1111"}), k=2, by="task").iloc[0]
    assert (edge["pass^k_hi"], edge["pass^k_lo"]) == (1.0, pytest.approx(0.025 ** (2 / 4), rel=1e-9))


def test_fixed_task_interval_is_never_zero_width_and_needs_only_n_at_least_k() -> None:
    # the acceptance case: tasks 1111, 1000, 0000 at k = 2 (the old unbiased estimate was exactly 0)
    df = trials({("m", "p", "a"): "1111", ("m", "p", "b"): "1000", ("m", "p", "c"): "0000"})
    row = summarize(df, k=2, by="model", n_boot=0).iloc[0]
    assert row["pass^k_se_fixed"] > 0.05 and row["pass@k_se_fixed"] > 0.05
    # every (n, c, k) with n >= k: positive; n = k is enough (the old one needed n >= 2k)
    for n in range(1, 9):
        cells = trials({("m", "p", f"c{c}"): "1" * c + "0" * (n - c) for c in range(n + 1)})
        for k in range(1, n + 1):
            per_task = summarize(cells, k=k, by="task", n_boot=0)
            assert (per_task[["pass^k_se_fixed", "pass@k_se_fixed"]] > 0).all(axis=None), (n, k)
            exact = [math.sqrt(exact_var(n, c, k)) for c in range(n + 1)]
            np.testing.assert_allclose(per_task["pass^k_se_fixed"], exact, rtol=1e-4)


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


def test_bootstrap_interval_is_the_percentile_interval_of_task_resamples() -> None:
    # Two tasks (pass^2 = 1 and 1/6): resampled means are 1/6, 7/12, 1 with probability 1/4, 1/2, 1/4.
    boot = {"by": "model", "method": "bootstrap", "min_tasks": 2}
    narrow = summarize(TWO_TASKS, k=2, ci=0.4, **boot).iloc[0]  # 30% and 70% quantiles
    assert (narrow["pass^k_lo"], narrow["pass^k_hi"]) == (pytest.approx(7 / 12), pytest.approx(7 / 12))
    wide = summarize(TWO_TASKS, k=2, ci=0.6, **boot).iloc[0]  # 20% and 80% quantiles
    assert (wide["pass^k_lo"], wide["pass^k_hi"]) == (pytest.approx(1 / 6), pytest.approx(1.0))


def test_population_interval_is_declined_below_min_tasks_with_a_warning() -> None:
    four = trials({("m", "p", t): "1100" for t in "abcd"})
    with pytest.warns(
        UserWarning, match=r"no interval for new tasks: fewer than min_tasks=5 tasks.*fixed-task"
    ):
        row = summarize(four, k=2, by="model").iloc[0]
    assert math.isnan(row["pass^k_lo"]) and row["ci_method"] == "declined: too few tasks"
    assert row["pass^k_se_fixed"] > 0  # the fixed-task interval is always given
    five = trials(
        {
            ("m", "p", t): marks
            for t, marks in zip("abcde", ["1111", "1100", "1100", "1000", "0000"], strict=True)
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        given = summarize(five, k=2, by="model").iloc[0]
    assert given["ci_method"] == "korn-graubard"
    assert 0 <= given["pass^k_lo"] < given["pass^k"] < given["pass^k_hi"] <= 1
    assert summarize(four, k=2, by="model", min_tasks=4)["ci_method"].iloc[0] == "korn-graubard"
    with pytest.raises(ValueError, match="method must be one of"):
        summarize(five, k=2, method="percentile")


def test_no_interval_is_zero_width_when_every_task_has_n_at_least_k() -> None:
    # identical tasks, all-pass and all-fail suites: the old bootstrap and se_fixed were points here
    for marks in ("1111", "0000", "1100"):
        same = trials({("m", "p", t): marks for t in "abcdef"})
        for k in (1, 2, 4):
            row = summarize(same, k=k, by="model").iloc[0]
            for metric in ("pass@k", "pass^k"):
                assert row[f"{metric}_hi"] - row[f"{metric}_lo"] > 0.01, (marks, k, metric)
                assert row[f"{metric}_se_fixed"] > 0, (marks, k, metric)
            per_task = summarize(same, k=k, by="task")
            assert (per_task["pass^k_hi"] > per_task["pass^k_lo"]).all()
        arms = pd.concat([same, same.assign(prompt_hash="q")])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            diff = compare(arms, a="p", b="q", k=2, by="model")
        assert ((diff["hi"] - diff["lo"]) > 0.01).all() and (diff["se_fixed"] > 0).all()


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


# curve ----------------------------------------------------------------------------------------


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
    but pass@4 [0.612, 1.0], though pass@4 ≥ pass@1 on every task."""
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


# compare --------------------------------------------------------------------------------------

PROMPTS = trials(
    {
        **{("m", "p1", t): marks for t, marks in zip("abcd", ["1111", "1100", "1000", "0000"], strict=True)},
        **{("m", "p2", t): marks for t, marks in zip("abcd", ["1111", "1110", "1100", "1000"], strict=True)},
    }
)


def test_compare_paired_difference_by_hand() -> None:
    out = compare(PROMPTS, a="p1", b="p2", k=2, by="model", n_boot=2000, min_tasks=4)
    assert list(out.columns) == [
        *["model", "metric", "k", "n_tasks", "a", "b", "diff", "lo", "hi", "se_fixed"],
        *["fixed_lo", "fixed_hi", "corr", "ci_method"],
    ]
    hat = out[out["metric"] == "pass^k"].iloc[0]
    va, vb = np.array([1, 1 / 6, 0, 0]), np.array([1, 1 / 2, 1 / 6, 0])
    assert (hat["a"], hat["b"]) == (pytest.approx(va.mean()), pytest.approx(vb.mean()))
    assert hat["diff"] == pytest.approx((vb - va).mean())
    assert hat["corr"] == pytest.approx(np.corrcoef(va, vb)[0, 1], rel=1e-12)
    # paired t on the per-task differences, their variance floored at both arms' fixed-task variance
    d = vb - va
    pairs = list(zip([4, 2, 1, 0], [4, 3, 2, 1], strict=True))
    floor = np.mean([exact_var(4, ca, 2) + exact_var(4, cb, 2) for ca, cb in pairs])
    half = sps.t.ppf(0.975, 3) * math.sqrt(max(d.var(ddof=1), floor) / 4)
    assert (hat["lo"], hat["hi"]) == (pytest.approx(d.mean() - half), pytest.approx(d.mean() + half))
    # these tasks: both arms' fixed-task variances, diff ± z·se_fixed
    se = math.sqrt(sum(exact_var(4, ca, 2) + exact_var(4, cb, 2) for ca, cb in pairs)) / 4
    assert hat["se_fixed"] == pytest.approx(se, rel=1e-4)
    z = sps.norm.ppf(0.975)
    assert hat["fixed_lo"] == pytest.approx(max(d.mean() - z * hat["se_fixed"], -1.0))
    assert hat["fixed_hi"] == pytest.approx(min(d.mean() + z * hat["se_fixed"], 1.0))
    assert hat["ci_method"] == "t"


def test_compare_uses_the_same_draw_for_both_arms() -> None:
    same = pd.concat([PROMPTS[PROMPTS["prompt_hash"] == "p1"].assign(prompt_hash=h) for h in ("x", "y")])
    out = compare(same, a="x", b="y", k=2, method="bootstrap", min_tasks=2)
    assert (out["diff"] == 0).all() and (out["lo"] == 0).all() and (out["hi"] == 0).all()
    assert out["corr"].tolist() == [pytest.approx(1.0), pytest.approx(1.0)]


def test_compare_leaves_out_unpaired_tasks_and_validates() -> None:
    df = pd.concat([PROMPTS, trials({("m", "p1", "e"): "1111", ("m", "p2", "f"): "1"})])
    with pytest.warns(UserWarning, match="2 of 6 tasks lack 2 usable trials under both"):
        out = compare(df, a="p1", b="p2", k=2, n_boot=0)
    assert out["n_tasks"].tolist() == [4, 4]
    with pytest.raises(ValueError, match=r"prompt_hash=\['p9'\] not in the frame; values .* \['p1', 'p2'\]"):
        compare(PROMPTS, a="p1", b="p9", k=1)
    with pytest.raises(ValueError, match="use flips"):
        compare(PROMPTS, a="p1", b="p2", k=1, by=("task",))
    with pytest.raises(ValueError, match="a and b must differ"):
        compare(PROMPTS, a="p1", b="p1", k=1)


def test_compare_on_model_groups_by_prompt() -> None:
    df = PROMPTS.assign(model=PROMPTS["prompt_hash"].map({"p1": "small", "p2": "large"}), prompt_hash="p")
    out = compare(df, on="model", a="small", b="large", k=2, n_boot=0)
    assert out["prompt_hash"].tolist() == ["p", "p"]
    assert out["diff"].tolist() == pytest.approx(
        compare(PROMPTS, a="p1", b="p2", k=2, n_boot=0)["diff"].tolist()
    )


# flips ----------------------------------------------------------------------------------------


def test_flips_four_of_four_to_zero_of_four() -> None:
    df = trials({("m", "p1", "t"): "1111", ("m", "p2", "t"): "0000"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = flips(df, a="p1", b="p2")
    row = out.iloc[0]
    assert row["p_value"] == pytest.approx(2 / 70, rel=1e-9)  # two-sided: 2 / C(8, 4) = 0.029
    assert row["q_value"] == pytest.approx(2 / 70, rel=1e-9)
    assert (row["successes_a"], row["trials_a"], row["successes_b"], row["trials_b"]) == (4, 4, 0, 4)
    assert (row["rate_a"], row["rate_b"]) == (1.0, 0.0)  # what plot_flips draws, computed here
    assert row["delta"] == -1.0 and bool(row["flip"])


def test_flips_three_of_three_warns_that_no_flip_can_be_significant() -> None:
    df = trials({("m", "p1", "t"): "111", ("m", "p2", "t"): "000"})
    with pytest.warns(UserWarning, match=r"no task can reach p < 0.05.*run at least 4 trials per arm"):
        out = flips(df, a="p1", b="p2")
    assert out.loc[0, "p_value"] == pytest.approx(0.1, rel=1e-9)
    assert out.loc[0, "min_p"] == pytest.approx(0.1, rel=1e-9)
    assert not out.loc[0, "flip"]


def test_flips_benjamini_hochberg_across_tasks_per_group() -> None:
    spec = {"t1": ("11111111", "00000000"), "t2": ("11111111", "11000000"), "t3": ("1111", "1110")}
    df = trials({("m", arm, t): marks[i] for t, marks in spec.items() for i, arm in enumerate(("p1", "p2"))})
    other = trials({("m2", arm, "t1"): marks for arm, marks in (("p1", "11111111"), ("p2", "00000000"))})
    out = flips(pd.concat([df, other]), a="p1", b="p2", family="all")
    assert out[["model", "task"]].values.tolist() == [["m", "t1"], ["m", "t2"], ["m", "t3"], ["m2", "t1"]]
    p = np.array(
        [
            sps.fisher_exact([[a, len(ma) - a], [b, len(mb) - b]]).pvalue
            for ma, mb in spec.values()
            for a, b in [(ma.count("1"), mb.count("1"))]
        ]
    )
    order = np.argsort(p)
    ranked = p[order] * len(p) / np.arange(1, len(p) + 1)
    bh = np.empty_like(p)
    bh[order] = np.minimum.accumulate(ranked[::-1])[::-1].clip(max=1)
    np.testing.assert_allclose(out["p_value"].to_numpy()[:3], p, rtol=1e-12)
    np.testing.assert_allclose(out["q_value"].to_numpy()[:3], bh, rtol=1e-12)
    assert out["q_value"].iloc[3] == pytest.approx(out["p_value"].iloc[3])  # its own family of one
    assert out["flip"].tolist() == [True, True, False, True]


def five_tasks_one_flip(n: int = 4) -> pd.DataFrame:
    steady = {("m", arm, t): "1" * n for arm in ("p1", "p2") for t in ("t2", "t3", "t4", "t5")}
    return trials({("m", "p1", "t1"): "1" * n, ("m", "p2", "t1"): "0" * n, **steady})


def test_flips_tarone_family_flags_a_lone_complete_flip_among_five_tasks() -> None:
    df = five_tasks_one_flip()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = flips(df, a="p1", b="p2")
    assert out["tested"].tolist() == [True, False, False, False, False]  # steady tasks cannot flip
    assert out.loc[0, "q_value"] == pytest.approx(2 / 70) and out["flip"].tolist() == [True] + [False] * 4
    assert out["q_value"].iloc[1:].isna().all()
    # plain BH over all five: q = 5 * 0.029 = 0.143, and a warning says a lone flip cannot be flagged
    with pytest.warns(
        UserWarning, match=r"across 5 tasks cannot flag a single flip.*at least 5 trials per arm"
    ):
        plain = flips(df, a="p1", b="p2", family="all")
    assert plain.loc[0, "q_value"] == pytest.approx(5 * 2 / 70) and not plain["flip"].any()


def test_flips_warns_from_what_the_tarone_family_can_reach() -> None:
    # five tasks whose margins could each reach p = 0.029: all testable, but BH across five needs
    # p <= 0.05/5 for a lone flip, which four trials per arm cannot give
    spec = {("m", "p1", t): "1100" for t in "abcde"} | {("m", "p2", t): "1001" for t in "abcde"}
    with pytest.warns(UserWarning, match=r"Benjamini–Hochberg across 5 tasks cannot flag a single flip"):
        out = flips(trials(spec), a="p1", b="p2")
    assert out["tested"].all() and not out["flip"].any()


def test_flips_four_complete_flips_among_six_tasks_are_all_flagged() -> None:
    # the two unchanged tasks (4/4 and 4/4) can never be significant and leave the family;
    # BH over the four flips: every q = 0.029
    spec = {("m", "p1", t): "1111" for t in "abcdef"}
    spec |= {("m", "p2", t): ("0000" if t in "abcd" else "1111") for t in "abcdef"}
    out = flips(trials(spec), a="p1", b="p2")
    assert out["tested"].tolist() == [True] * 4 + [False] * 2
    assert out["flip"].tolist() == [True] * 4 + [False] * 2
    assert out["q_value"].iloc[:4].tolist() == pytest.approx([2 / 70] * 4)


def test_flips_boschloo_option() -> None:
    df = five_tasks_one_flip()
    out = flips(df, a="p1", b="p2", test="boschloo", family="all")
    assert out.loc[0, "p_value"] == pytest.approx(2 / 256, abs=1e-6)  # 2·½⁸: the worst rate is ½
    assert out.loc[0, "p_value"] < 0.01  # 0.0078: even plain BH over five tasks flags it
    assert out["flip"].tolist() == [True] + [False] * 4
    with pytest.raises(ValueError, match="test must be one of"):
        flips(df, a="p1", b="p2", test="chi2")


def test_flips_warns_when_some_tasks_are_underpowered() -> None:
    df = trials(
        {
            ("m", "p1", "t1"): "1111",
            ("m", "p2", "t1"): "0000",
            ("m", "p1", "t2"): "11",
            ("m", "p2", "t2"): "1",
        }
    )
    with pytest.warns(UserWarning, match="1 of 2 tasks cannot reach p < 0.05"):
        flips(df, a="p1", b="p2")


# accessor and layering ------------------------------------------------------------------------


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


def test_compare_and_flips_by_prompt_name_do_not_also_split_by_prompt_hash():
    spec = {
        ("m", "aaa", "t1"): "1111",
        ("m", "aaa", "t2"): "1111",
        ("m", "bbb", "t1"): "0000",
        ("m", "bbb", "t2"): "1111",
    }
    df = trials(spec, prompt_names={"aaa": "default", "bbb": "strict"})
    diff = compare(df, on="prompt_name", a="default", b="strict", k=2, n_boot=200)
    assert list(diff["n_tasks"]) == [2, 2]
    assert diff.loc[diff["metric"] == "pass^k", "diff"].iloc[0] == pytest.approx(-0.5)
    table = flips(df, on="prompt_name", a="default", b="strict").set_index("task")
    assert table.loc["t1", "p_value"] == pytest.approx(2 / 70)
    assert "prompt_hash" not in table.columns


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
