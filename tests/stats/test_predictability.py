"""predictability() and calibration() by simulation: agents whose calibration is built in
(perfectly calibrated, overconfident, uninformative) on two shapes of task success, against the
truth of the population of tasks they were drawn from."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import passk_nb.stats as stats
from passk_nb.stats.predictability import MIN_TASKS, agreement_confidence, calibration, predictability


def _benchmark():
    """``benchmarks/predictability_coverage.py``: the simulated agents, task shapes and suites this
    file checks, the benchmark's own code."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "predictability_coverage.py"
    spec = importlib.util.spec_from_file_location("predictability_coverage", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_BENCH = _benchmark()
#: Task success rates p ~ Beta(a, b) (U-shaped, mostly easy); each agent's stated confidence from
#: its task's true p (calibrated, overconfident, uninformative); the bins of the ECE.
SHAPES, AGENTS, BINS = _BENCH.SHAPES, _BENCH.AGENTS, _BENCH.BINS
#: The population's Brier score, ECE and AUROC; simulated suites; pairs of suites of two agents.
truth, suites, paired_suites = _BENCH.truth, _BENCH.suites, _BENCH.paired_suites


def values(out: pd.DataFrame) -> dict[str, float]:
    return dict(zip(out["metric"], out["value"], strict=True))


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_statistics_recover_the_calibration_built_in(shape: str) -> None:
    """One large suite per agent (400 tasks): each statistic lands on its population value, ECE
    ~0 for the calibrated agent and large for the overconfident one, AUROC ~0.5 for the
    uninformative one and well above for the informative ones."""
    got = {
        agent: values(
            predictability(suites(shape, agent, reps=1, tasks=400, trials=5, seed=1), by=(), n_boot=0)
        )
        for agent in AGENTS
    }
    for agent in AGENTS:
        true = truth(shape, agent)
        assert got[agent]["brier"] == pytest.approx(true["brier"], abs=0.02), agent
        assert got[agent]["auroc"] == pytest.approx(true["auroc"], abs=0.04), agent
        assert got[agent]["ece"] == pytest.approx(true["ece"], abs=0.03), agent
    p_mean = SHAPES[shape][0] / sum(SHAPES[shape])
    a, b = SHAPES[shape]
    assert truth(shape, "calibrated")["brier"] == pytest.approx(a * b / ((a + b) * (a + b + 1)), abs=1e-3)
    assert got["calibrated"]["ece"] < 0.02
    assert got["overconfident"]["ece"] > 0.1
    assert got["uninformative"]["auroc"] == pytest.approx(0.5, abs=0.04)
    assert min(got["calibrated"]["auroc"], got["overconfident"]["auroc"]) > 0.7
    assert got["uninformative"]["brier"] > got["calibrated"]["brier"] + 0.1
    assert 0 < p_mean < 1


@pytest.mark.parametrize("agent", list(AGENTS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_intervals_cover_the_truth(shape: str, agent: str) -> None:
    """120 simulated suites of 30 tasks × 5 trials: each 95 % interval (a bootstrap over tasks)
    covers the population's value in at least 87 % of them (measured 89–99 % over 200 suites),
    and none is zero-width."""
    true = truth(shape, agent)
    df = suites(shape, agent, reps=120, tasks=30, trials=5, seed=7)
    out = predictability(df, by="config", n_boot=300)
    assert out["lo"].notna().all()
    assert (out["hi"] > out["lo"]).all()
    for metric in ("brier", "ece", "auroc"):
        rows = out[out["metric"] == metric]
        covered = ((rows["lo"] <= true[metric] + 1e-9) & (rows["hi"] >= true[metric] - 1e-9)).mean()
        assert covered >= 0.87, (metric, covered, true[metric])


@pytest.mark.parametrize("agent", ["calibrated", "overconfident"])
def test_the_reliability_diagram_covers_each_bins_pass_rate(agent: str) -> None:
    """Per bin, the pass rate's interval covers the population's pass rate of the bin."""
    rng = np.random.default_rng(5)
    p = rng.beta(0.5, 0.5, 2_000_000)
    b = np.minimum((AGENTS[agent](p, rng) * BINS).astype(int), BINS - 1)
    true = np.bincount(b, weights=p, minlength=BINS) / np.maximum(np.bincount(b, minlength=BINS), 1)
    out = calibration(suites("u-shaped", agent, reps=100, tasks=30, trials=5, seed=3), by="config")
    drawn = out[out["lo"].notna()]
    assert len(drawn) > 0.7 * len(out)
    at = true[drawn["bin"].to_numpy()]
    assert ((drawn["lo"] <= at) & (drawn["hi"] >= at)).mean() >= 0.9
    assert (drawn["hi"] > drawn["lo"]).all()
    assert set(out["ci_method"][out["lo"].isna()]) <= {
        "declined: the bin holds one task's trials, which tell nothing of other tasks"
    }
    if agent == "overconfident":  # its points lie below the diagonal
        assert (drawn["pass_rate"] < drawn["mean_confidence"]).mean() > 0.8


def test_agreement_is_the_pass_rate_of_the_tasks_other_trials() -> None:
    df = pd.DataFrame(
        {
            "model": ["m"] * 5 + ["n"] * 2,
            "task": ["a", "a", "a", "a", "b", "a", "a"],
            "passed": [True, True, False, True, True, False, False],
            "outcome": ["pass", "pass", "wrong_state", "infra_error", "pass", "wrong_state", "wrong_state"],
        }
    )
    df.loc[3, "passed"] = False
    got = agreement_confidence(df)
    assert got.tolist()[:3] == [0.5, 0.5, 1.0]  # the infra error left out of m's task a
    assert np.isnan(got.iloc[3]) and np.isnan(got.iloc[4])  # infra; b's only trial
    assert got.tolist()[5:] == [0.0, 0.0]  # n's trials are not m's
    with_failures = agreement_confidence(df, infra="fail")
    assert with_failures.tolist()[:4] == [
        pytest.approx(1 / 3),
        pytest.approx(1 / 3),
        pytest.approx(2 / 3),
        2 / 3,
    ]


def test_agreement_needs_no_stated_confidence_and_its_brier_is_the_within_task_variance() -> None:
    """Its Brier score is E[p(1 − p)]·n/(n − 1); it discriminates as far as tasks differ."""
    df = suites("u-shaped", "calibrated", reps=1, tasks=400, trials=5, seed=4).drop(columns="confidence")
    got = values(predictability(df, confidence="agreement", by=(), n_boot=0))
    assert got["brier"] == pytest.approx(0.125 * 5 / 4, abs=0.015)
    assert got["auroc"] > 0.75
    out = predictability(
        df.assign(config=np.repeat(["a", "b"], len(df) // 2)), confidence="agreement", n_boot=100
    )
    assert out["lo"].notna().all() and (out["source"] == "agreement").all()


def test_without_a_stated_confidence_it_says_how_to_get_one() -> None:
    df = suites("u-shaped", "calibrated", reps=1, tasks=20, trials=3, seed=0)
    with pytest.raises(ValueError, match=r"prompt='default\+confidence'.*confidence='agreement'"):
        predictability(df.drop(columns="confidence"))
    with pytest.raises(ValueError, match=r"'\+confidence' prompt"):
        predictability(df.assign(confidence=np.nan))
    with pytest.raises(ValueError, match=r"outside \[0, 1\].*0.8, not 80"):
        predictability(df.assign(confidence=df["confidence"] * 100))
    with pytest.raises(ValueError, match="confidence must be one of"):
        predictability(df, confidence="logprobs")
    with pytest.raises(ValueError, match="records that passk never writes"):
        predictability(df.assign(outcome="pass"))  # failures marked as passes
    with pytest.raises(TypeError, match="needs trial records"):
        predictability(stats.counts(df, by=()))


def test_a_configuration_without_confidence_or_too_few_tasks_is_declined_never_zero_width() -> None:
    df = pd.concat(
        [
            suites("u-shaped", "calibrated", reps=1, tasks=30, trials=4, seed=1).assign(config="asked"),
            suites("u-shaped", "calibrated", reps=1, tasks=30, trials=4, seed=2).assign(config="silent"),
            suites("u-shaped", "calibrated", reps=1, tasks=MIN_TASKS - 1, trials=4, seed=3).assign(
                config="few"
            ),
        ]
    )
    df.loc[df["config"] == "silent", "confidence"] = np.nan
    with pytest.warns(UserWarning, match="predictability declined 6 of 9 intervals"):
        out = predictability(df, n_boot=200)
    by = {config: part for config, part in out.groupby("config")}
    assert by["asked"]["lo"].notna().all()
    assert by["silent"][["value", "lo", "hi"]].isna().all().all()
    assert by["silent"]["ci_method"].str.contains(r"'\+confidence' prompt").all()
    assert by["few"]["value"].notna().all() and by["few"][["lo", "hi"]].isna().all().all()
    assert by["few"]["ci_method"].str.contains(f"fewer than min_tasks={MIN_TASKS}").all()


def test_one_outcome_or_one_confidence_declines_the_auroc() -> None:
    df = suites("mostly-easy", "calibrated", reps=1, tasks=30, trials=4, seed=1)
    all_pass = df.assign(passed=True, outcome="pass")
    with pytest.warns(UserWarning):
        out = predictability(all_pass, by=(), n_boot=200).set_index("metric")
    assert np.isnan(out.loc["auroc", "value"]) and np.isnan(out.loc["auroc", "lo"])
    assert "every trial passed" in out.loc["auroc", "ci_method"]
    assert out.loc["brier", "hi"] > out.loc["brier", "lo"]
    constant = df.assign(confidence=0.7)
    with pytest.warns(UserWarning):
        out = predictability(constant, by=(), n_boot=200).set_index("metric")
    assert out.loc["auroc", "value"] == 0.5 and np.isnan(out.loc["auroc", "lo"])
    assert "same confidence" in out.loc["auroc", "ci_method"]
    perfect = df.assign(confidence=df["passed"].astype(float))  # Brier 0 in every resample
    with pytest.warns(UserWarning, match="an interval without width"):
        out = predictability(perfect, by=(), n_boot=200).set_index("metric")
    assert out.loc["brier", "value"] == 0 and np.isnan(out.loc["brier", "lo"])


def test_the_result_says_what_it_is_and_draws_its_reliability_diagram() -> None:
    df = suites("u-shaped", "overconfident", reps=2, tasks=20, trials=3, seed=1)
    out = stats.predictability(df, n_boot=50)
    assert out.attrs["statistic"] == "predictability" and out.attrs["by"] == ("config",)
    assert list(out["metric"]) == ["brier", "ece", "auroc"] * 2
    bins = df.passk.calibration()
    assert bins.attrs["statistic"] == "calibration" and bins.attrs["source"] == "stated"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        ax = bins.plot()
        assert ax.get_xlabel() == "stated confidence"
        assert len(ax.containers) == 2  # one errorbar container per configuration
        plt.close("all")


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_paired_brier_difference_covers_the_populations(shape: str) -> None:
    """200 simulated pairs of suites (a calibrated and an overconfident agent on the same 30 tasks ×
    5 trials): the paired 95 % interval of the Brier difference b − a covers the population's in
    at least 90 % of them (measured: see docs/methods/predictability.md), and none is zero wide."""
    true = truth(shape, "overconfident")["brier"] - truth(shape, "calibrated")["brier"]
    df = paired_suites(shape, reps=200, tasks=30, trials=5, seed=17)
    got = []
    for _, suite in df.groupby("config"):
        out = stats.predictability_difference(
            suite, on="agent", a="calibrated", b="overconfident", n_boot=300
        ).set_index("metric")
        got.append(out.loc["brier", ["diff", "lo", "hi"]].to_numpy(float))
    diff, lo, hi = np.array(got).T
    assert (hi > lo).all()
    covered = ((lo <= true + 1e-9) & (hi >= true - 1e-9)).mean()
    assert covered >= 0.90, (covered, true)
    assert np.mean(diff) == pytest.approx(true, abs=0.01)


def test_the_same_trials_under_two_names_differ_by_nothing() -> None:
    """One agent's trials under two names: every difference is 0, and the interval is declined
    (every resample gives 0: never a zero-width interval) with a note saying why. Two runs of
    the same agent (outcomes drawn apart) differ by about 0, inside the paired interval."""
    one = suites("u-shaped", "calibrated", reps=1, tasks=30, trials=5, seed=3)
    twice = pd.concat([one.assign(agent="first"), one.assign(agent="second")], ignore_index=True)
    out = stats.predictability_difference(twice, on="agent", a="first", b="second", n_boot=300)
    assert (out["diff"] == 0).all()
    assert out[["lo", "hi"]].isna().all().all()
    assert out.loc[out["metric"] == "brier", "ci_method"].iloc[0].startswith("declined: every resample")
    runs = paired_suites("u-shaped", reps=1, tasks=30, trials=5, seed=3)
    runs = runs[runs["agent"] == "calibrated"]
    rerun = runs.assign(agent="again", passed=np.random.default_rng(4).random(len(runs)) < runs["confidence"])
    rerun["outcome"] = np.where(rerun["passed"], "pass", "wrong_state")
    both = pd.concat([runs, rerun], ignore_index=True)  # the same agent on the same tasks, run twice
    out = stats.predictability_difference(both, on="agent", a="calibrated", b="again", n_boot=300)
    for metric in ("brier", "auroc"):
        row = out.set_index("metric").loc[metric]
        assert row["lo"] < row["diff"] < row["hi"] and row["lo"] < 0 < row["hi"], (metric, row)


def test_the_paired_difference_declines_below_min_tasks_and_for_the_ece() -> None:
    df = paired_suites("u-shaped", reps=1, tasks=MIN_TASKS - 1, trials=5, seed=5)
    out = stats.predictability_difference(df, on="agent", a="calibrated", b="overconfident", n_boot=200)
    assert out[["lo", "hi"]].isna().all().all() and out["diff"].notna().all()
    assert (
        out.loc[out["metric"] == "brier", "ci_method"].iloc[0].startswith(f"declined: {MIN_TASKS - 1} shared")
    )
    df = paired_suites("u-shaped", reps=1, tasks=30, trials=5, seed=5)
    # a task only one arm ran is left out of the pairing
    extra = df[df["agent"] == "calibrated"].head(5).assign(task="only-a")
    out = stats.predictability_difference(
        pd.concat([df, extra], ignore_index=True), on="agent", a="calibrated", b="overconfident", n_boot=200
    ).set_index("metric")
    assert (out["n_tasks"] == 30).all()
    assert out.loc["brier", "lo"] < out.loc["brier", "hi"]
    assert np.isnan(out.loc["ece", "lo"]) and "no paired interval for the ECE" in out.loc["ece", "ci_method"]
    with pytest.raises(ValueError, match="needs trials with agent = 'calibrated'"):
        stats.predictability_difference(df, on="agent", a="calibrated", b="nobody")
