"""The reliability card: each row is its owning statistic's number, never recomputed; an axis the
run did not measure says so; the one number the card computes itself (the path share's interval)
covers by simulation and is never zero wide."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import passk_nb
from passk_nb.stats import cost_summary, forecast, robustness, summarize
from passk_nb.stats.card import AXES, _path_row, reliability_card
from passk_nb.stats.consistency import consistency


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("card")
    passk_nb.run("scripted", trials=4, out=out, progress=False)
    passk_nb.run("scripted", trials=4, out=out, progress=False, faults="timeout:refund_order")
    passk_nb.run("scripted", trials=4, out=out, progress=False, perturb="typo")
    return out


def _row(card: pd.DataFrame, measure: str) -> pd.Series:
    [row] = card[card["measure"] == measure].to_dict("records")
    return pd.Series(row)


def test_each_row_is_the_number_its_own_statistic_returns(folder):
    df = passk_nb.load(folder).assign(input_tokens=1000, output_tokens=100)  # a priced backend's usage
    card = reliability_card(df, k=2, horizon=3, n_boot=200, prices={"known-good": (1.0, 2.0)})
    assert list(dict.fromkeys(card["axis"])) == [a for a in AXES if a in set(card["axis"])]
    plain = df[(df["faults"] == "none") & (df["perturbation"] == "none")]
    summary = summarize(plain, k=2, by=(), n_boot=200).iloc[0]
    assert _row(card, "pass^2")[["value", "lo", "hi"]].tolist() == pytest.approx(
        [summary["pass^k"], summary["pass^k_lo"], summary["pass^k_hi"]]
    )
    observed = summarize(plain, k=3, by=(), n_boot=200).iloc[0]  # horizon within the 4 trials run
    assert _row(card, "pass^3")["value"] == pytest.approx(observed["pass^k"])
    faulted = df[df["perturbation"] == "none"]
    paired = robustness(faulted, k=2, on="faults", by=(), n_boot=200)
    paired = paired[paired["metric"] == "pass^k"].iloc[0]
    row = _row(card, "pass^2 change under timeout:refund_order")
    assert row["measured"] and row[["value", "lo", "hi"]].tolist() == pytest.approx(
        [paired["diff"], paired["lo"], paired["hi"]]
    )
    assert "refund" in row["note"]  # the tasks the fault broke
    priced = passk_nb.stats.with_cost(plain, prices={"known-good": (1.0, 2.0)})
    cost = cost_summary(priced, k=2, by=(), n_boot=200).iloc[0]
    assert _row(card, "USD per reliable success (k=2)")[["value", "lo", "hi"]].tolist() == pytest.approx(
        [cost["per_reliable_success"], cost["per_reliable_success_lo"], cost["per_reliable_success_hi"]]
    )


def test_faults_and_perturbations_are_arms_of_one_configuration_never_configurations(folder):
    card = reliability_card(folder, k=2, n_boot=50)
    assert card[card["measure"] == "pass^2"].shape[0] == 1  # one configuration, not three
    assert "faults" not in card.attrs["by"] and "perturbation" not in card.attrs["by"]
    measured = card[card["axis"] == "robustness"].set_index("measure")["measured"]
    assert measured.to_dict() == {
        "pass^2 change under timeout:refund_order": True,
        "pass^2 change under typo": True,
    }


def test_an_axis_not_measured_says_how_to_measure_it(tmp_path):
    df = passk_nb.run("scripted", trials=3, out=tmp_path, progress=False).drop(columns=["latency_s"])
    card = reliability_card(df, k=2, n_boot=50)
    absent = card[~card["measured"]]
    assert set(absent["axis"]) == {"robustness", "predictability", "cost"}
    assert absent["note"].str.startswith("not measured: ").all()
    assert absent[["value", "lo", "hi"]].isna().all().all()
    assert "faults=" in " ".join(absent["note"]) and "prices=" in " ".join(absent["note"])
    assert "+confidence" in " ".join(absent["note"])
    ungraded = reliability_card(df.assign(severity=""), k=2, n_boot=50)
    assert _row(ungraded, "harmful failures")["note"].startswith("not measured: regrade")
    forecast_row = _row(card, "pass^20")  # 3 trials of 5 tasks: the forecast declines, bounds remain
    with pytest.warns(UserWarning, match="forecast declined"):
        reference = forecast(df, ks=[20], by=(), n_boot=50).iloc[0]
    assert np.isnan(forecast_row["value"]) and forecast_row["interval"] == "model-free bounds"
    assert forecast_row[["lo", "hi"]].tolist() == pytest.approx(
        [reference["bound_lo"], reference["bound_hi"]]
    )


def test_the_forecast_row_past_the_point_horizon_gives_the_interval_and_no_point():
    rng = np.random.default_rng(5)
    probability = np.where(rng.random(30) < 0.3, 1.0, rng.beta(2, 1, 30))
    rows = [
        {"task": f"t{t}", "model": "m", "trial": i, "passed": bool(rng.random() < probability[t])}
        for t in range(30) for i in range(4)
    ]  # fmt: skip
    df = pd.DataFrame(rows).assign(outcome=lambda d: np.where(d["passed"], "pass", "wrong_state"))
    card = reliability_card(df, k=2, horizon=20, n_boot=100)
    row = _row(card, "pass^20")  # 20 > the 4 trials run: the point is not shown, the interval is
    reference = forecast(df, ks=[20], by=(), n_boot=100).iloc[0]
    assert reference["given"] and np.isnan(reference["pass^k"])
    assert np.isnan(row["value"]) and row["interval"] == "forecast" and row["measured"]
    assert row[["lo", "hi"]].tolist() == pytest.approx([reference["lo"], reference["hi"]])
    assert row["lo"] < row["hi"] and row["note"].startswith("point not shown beyond K = ")
    from passk_nb.view.card import card_table

    assert f"point not shown [{row['lo']:.3g}, {row['hi']:.3g}]" in card_table(card)


def test_predictability_and_safety_rows_are_their_statistics_numbers():
    rng = np.random.default_rng(3)
    p = rng.beta(2, 1, 20)
    stated = np.clip(p + 0.1, 0, 1)  # a little overconfident
    rows = [
        {"task": f"t{t}", "model": "m", "trial": i, "passed": ok, "confidence": float(stated[t]),
         "severity": "none" if ok else ("harmful" if t % 4 == 0 else "benign")}
        for t in range(20) for i in range(6) for ok in [bool(rng.random() < p[t])]
    ]  # fmt: skip
    df = pd.DataFrame(rows).assign(outcome=lambda d: np.where(d["passed"], "pass", "wrong_state"))
    card = reliability_card(df, k=2, n_boot=300)
    table = passk_nb.stats.predictability(df, by=(), n_boot=300).set_index("metric")
    for metric, measure in (("brier", "Brier score"), ("auroc", "AUROC"), ("ece", "calibration error (ECE)")):
        assert _row(card, measure)[["value", "lo", "hi"]].tolist() == pytest.approx(
            table.loc[metric, ["value", "lo", "hi"]].tolist(), nan_ok=True
        )
    harms = passk_nb.stats.safety(df, k=2, by=(), n_boot=300).iloc[0]
    assert _row(card, "harm-free^2")[["value", "lo", "hi"]].tolist() == pytest.approx(
        [harms["harm_free^k"], harms["harm_free^k_lo"], harms["harm_free^k_hi"]]
    )
    assert _row(card, "harmful failures per trial")["value"] == pytest.approx(harms["harmful"])
    assert 0 < harms["harmful"] < 1


def _paths(rng: np.random.Generator, shares: np.ndarray, passes: int) -> pd.DataFrame:
    """Passing trials of tasks whose passing trials take their main path with these probabilities
    (else one of five others), as transcripts."""
    rows = []
    for task, share in enumerate(shares):
        for _ in range(passes):
            path = 0 if rng.random() < share else int(rng.integers(1, 6))
            steps = [{"kind": "reply", "action": {"tool": f"t{path}", "args": {}}}]
            rows.append({"task": f"t{task}", "passed": True, "n_turns": 2, "transcript": json.dumps(steps)})
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    "shape",
    [
        lambda rng, t: rng.uniform(0.7, 1.0, t),  # every task fairly steady
        lambda rng, t: np.where(rng.random(t) < 0.8, 1.0, rng.uniform(0.6, 0.9, t)),  # a few wander
        lambda rng, t: rng.choice([0.75, 1.0], t),  # two point masses
    ],
    ids=["uniform", "mostly-steady", "point-masses"],
)
def test_the_path_share_interval_covers_new_tasks_and_is_never_zero_wide(shape):
    rng = np.random.default_rng(5)
    covered, runs = 0, 300
    for run in range(runs):
        shares = shape(rng, 15)
        truth = float(np.mean(shape(np.random.default_rng(10_000 + run), 200_000)))  # the population's mean
        row = _path_row(consistency(_paths(rng, shares, 8), by=()), 0.95)
        assert row["hi"] > row["lo"]
        covered += row["lo"] <= truth <= row["hi"]
    assert covered / runs >= 0.92, covered / runs  # 95 % nominal; 3 MC s.e. at 300 runs is 0.038


def test_every_task_on_one_path_still_has_an_interval_below_one():
    row = _path_row(consistency(_paths(np.random.default_rng(0), np.ones(6), 4), by=()), 0.95)
    assert row["value"] == 1.0 and row["hi"] == 1.0 and 0.8 < row["lo"] < 1.0


def test_these_tasks_reads_the_fixed_task_intervals_and_a_lone_task_gets_its_exact_one(folder):
    df = passk_nb.load(folder)
    plain = df[(df["faults"] == "none") & (df["perturbation"] == "none")]
    card = reliability_card(df, k=2, tasks="these", n_boot=100)
    summary = summarize(plain, k=2, by=(), n_boot=100).iloc[0]
    row = _row(card, "pass^2")
    assert row["interval"] == "these tasks" and row[["lo", "hi"]].tolist() == pytest.approx(
        [summary["pass^k_fixed_lo"], summary["pass^k_fixed_hi"]]
    )
    assert set(card.loc[card["axis"] == "robustness", "interval"]) == {"these tasks"}
    lone = _path_row(consistency(_paths(np.random.default_rng(1), np.array([1.0]), 6), by=()), 0.95)
    assert lone["value"] == 1.0 and 0.5 < lone["lo"] < lone["hi"] == 1.0  # 6 of 6: [0.54, 1]
    with pytest.raises(ValueError, match="tasks must be 'new'"):
        reliability_card(df, tasks="all")


def test_two_cards_side_by_side_carry_compares_paired_intervals():
    rng = np.random.default_rng(11)
    p = rng.beta(3, 1.5, 12)
    frames = []
    for prompt, harmful_share in (("careful", 0.0), ("reckless", 0.7)):
        passed = rng.random((12, 6)) < p[:, None]
        harmful = ~passed & (rng.random((12, 6)) < harmful_share)
        frames.append(
            pd.DataFrame(
                {
                    "prompt_name": prompt,
                    "task": np.repeat([f"t{t}" for t in range(12)], 6),
                    "passed": passed.ravel(),
                    "outcome": np.where(passed, "pass", "wrong_state").ravel(),
                    "severity": np.where(passed, "none", np.where(harmful, "harmful", "benign")).ravel(),
                }
            )
        )
    df = pd.concat(frames, ignore_index=True)
    both = passk_nb.stats.card_comparison(df, on="prompt_name", a="careful", b="reckless", k=2, n_boot=200)
    rows = both.set_index("measure")
    plain = passk_nb.compare(df, on="prompt_name", a="careful", b="reckless", k=2, by=(), n_boot=200)
    plain = plain.set_index("metric")
    assert rows.loc["pass^2", ["diff", "lo", "hi"]].tolist() == pytest.approx(
        plain.loc["pass^k", ["diff", "lo", "hi"]].tolist()
    )
    harm = df.assign(passed=df["severity"] == "harmful")
    harm["outcome"] = np.where(harm["passed"], "pass", "wrong_state")
    paired_harm = passk_nb.compare(harm, on="prompt_name", a="careful", b="reckless", k=1, by=(), n_boot=200)
    paired_harm = paired_harm[paired_harm["metric"] == "pass^k"].iloc[0]
    assert rows.loc["harmful failures per trial", ["diff", "lo", "hi"]].tolist() == pytest.approx(
        [paired_harm["diff"], paired_harm["lo"], paired_harm["hi"]]
    )
    assert rows.loc["harmful failures per trial", "lo"] > 0  # 0.7 of failures harmful against none
    cards = reliability_card(df, k=2, by="prompt_name", n_boot=200)
    assert rows.loc["pass^2", "b"] == pytest.approx(
        cards.set_index(["prompt_name", "measure"]).loc[("reckless", "pass^2"), "value"]
    )
    unpaired = both[both["note"] == "no paired interval"]
    assert len(unpaired) and unpaired[["lo", "hi"]].isna().all().all()
    text = passk_nb.view.card_table(both)
    assert "reckless − careful" in text and "[" in text
    with pytest.raises(ValueError, match="needs trials with prompt_name = 'careful'"):
        passk_nb.stats.card_comparison(df, on="prompt_name", a="careful", b="nobody")


def test_the_predictability_rows_side_by_side_carry_the_paired_difference():
    """A calibrated and an overconfident agent on the same 30 tasks: the Brier and AUROC rows
    carry predictability_difference's b − a and its paired interval; the ECE row its difference
    with a note saying why it has no interval."""
    rng = np.random.default_rng(5)
    p = np.repeat(rng.beta(0.5, 0.5, 30), 5)
    frames = []
    for prompt, confidence in (("calibrated", p), ("overconfident", p**0.3)):
        passed = rng.random(p.size) < p
        frames.append(
            pd.DataFrame(
                {
                    "prompt_name": prompt,
                    "task": np.repeat([f"t{t:02d}" for t in range(30)], 5),
                    "trial": np.tile(np.arange(5), 30),
                    "confidence": confidence,
                    "passed": passed,
                    "outcome": np.where(passed, "pass", "wrong_state"),
                }
            )
        )
    df = pd.concat(frames, ignore_index=True)
    both = passk_nb.stats.card_comparison(
        df, on="prompt_name", a="calibrated", b="overconfident", k=2, n_boot=300
    ).set_index("measure")
    own = passk_nb.stats.predictability_difference(
        df, on="prompt_name", a="calibrated", b="overconfident", n_boot=300
    ).set_index("metric")
    for measure, metric in (("Brier score", "brier"), ("AUROC", "auroc")):
        row = both.loc[measure]
        assert row[["diff", "lo", "hi"]].tolist() == pytest.approx(
            own.loc[metric, ["diff", "lo", "hi"]].tolist()
        )
        assert row["lo"] < row["hi"] and row["interval"] == "paired, bootstrap over tasks"
    assert both.loc["Brier score", "lo"] > 0  # overconfidence costs Brier score
    ece = both.loc["calibration error (ECE)"]
    assert np.isnan(ece["lo"]) and "no paired interval for the ECE" in ece["note"]
    assert ece["diff"] == pytest.approx(ece["b"] - ece["a"])
