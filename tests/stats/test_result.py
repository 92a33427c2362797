"""Results that know what they are: every statistic's frame carries statistic, by, k, ci, method, infra."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from passk_nb.stats.cost import cost_summary
from passk_nb.stats.forecast import forecast
from passk_nb.stats.noise import noise_floor
from passk_nb.stats.paired import compare, flips
from passk_nb.stats.predictability import calibration, predictability
from passk_nb.stats.rank import rank
from passk_nb.stats.report import report_frame
from passk_nb.stats.result import KEYS, carry, result_by, result_ci
from passk_nb.stats.robustness import robustness, robustness_tasks
from passk_nb.stats.summary import curve, summarize


def records() -> pd.DataFrame:
    """2 models × 2 prompts × 2 fault plans × 12 tasks × 4 trials."""
    rng = np.random.default_rng(0)
    rows = []
    for model in ("m1", "m2"):
        for prompt in ("p1", "p2"):
            for faults in ("none", "noop:*"):
                for t in range(12):
                    for i in range(4):
                        passed = bool(rng.random() < (0.9 if faults == "none" else 0.6))
                        rows.append(
                            {
                                "run_id": f"{model}-{prompt}-{faults}",
                                "model": model,
                                "prompt_hash": prompt,
                                "faults": faults,
                                "task": f"t{t:02d}",
                                "trial": i,
                                "passed": passed,
                                "outcome": "pass" if passed else "wrong_state",
                                "cost_usd": 0.01,
                                "error": None,
                                "claims": None,
                            }
                        )
    return pd.DataFrame(rows)


DF = records()
NONE = DF[DF["faults"] == "none"]
STATISTICS = {
    "summarize": (
        lambda: summarize(NONE, k=2, by=("model", "prompt_hash"), ci=0.9),
        ("model", "prompt_hash"),
    ),
    "curve": (lambda: curve(NONE, ks=[1, 2], by="model", ci=0.9, n_boot=0), ("model",)),
    "compare": (lambda: compare(NONE, a="p1", b="p2", k=2, by="model", ci=0.9), ("model",)),
    "flips": (lambda: flips(NONE, a="p1", b="p2", by="model"), ("model",)),
    "rank": (lambda: rank(NONE, on="model", k=2, by="prompt_hash", ci=0.9, n_boot=100), ("prompt_hash",)),
    "noise_floor": (lambda: noise_floor(NONE, by="model"), ("model",)),
    "forecast": (lambda: forecast(NONE, ks=(2, 8), by=(), ci=0.9, n_boot=50), ()),
    "robustness": (lambda: robustness(DF, k=2, by="model", ci=0.9), ("model",)),
    "robustness_tasks": (lambda: robustness_tasks(DF, k=2, by="model"), ("model",)),
    "report_frame": (lambda: report_frame(NONE, k=2, by="model", ci=0.9, n_boot=0), ("model",)),
    "cost_summary": (lambda: cost_summary(NONE, k=2, by="model", ci=0.9, n_boot=0), ("model",)),
    "predictability": (
        lambda: predictability(NONE, confidence="agreement", by="model", ci=0.9, n_boot=50),
        ("model",),
    ),
    "calibration": (lambda: calibration(NONE, confidence="agreement", by="model", ci=0.9), ("model",)),
}


@pytest.mark.parametrize("name", list(STATISTICS))
def test_every_statistic_says_what_it_is(name: str) -> None:
    make, by = STATISTICS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = make()
    assert set(KEYS) <= set(out.attrs)
    assert out.attrs["statistic"] == name
    assert result_by(out, name) == by
    assert out.attrs["infra"] == "exclude"
    if name not in ("flips", "noise_floor", "robustness_tasks"):
        assert result_ci(out, None, name) == 0.9


def test_what_a_frame_says_survives_what_the_view_does_to_it() -> None:
    frame = curve(NONE, by="model", ci=0.8, n_boot=0)
    said = {key: frame.attrs[key] for key in KEYS}
    frame["model"] = pd.Categorical(frame["model"], categories=["m2", "m1"], ordered=True)
    kept = [
        frame[frame["k"].isin([1, 2])],
        frame[["model", "k", "metric", "value"]],
        frame.sort_values(["model", "k"]).reset_index(drop=True),
        frame.drop(columns="partial").copy(),
        pd.concat([frame, frame], ignore_index=True),
        frame.assign(extra=1).round(3).head(3),
    ]
    for part in kept:
        assert {key: part.attrs[key] for key in KEYS} == said
    merged = frame.merge(pd.DataFrame({"model": ["m1"], "x": [1]}), on="model")
    assert "by" not in merged.attrs  # pandas drops them in a merge: code that merges carries them
    assert carry(merged, frame).attrs["by"] == ("model",)


def test_a_frame_that_does_not_say_is_a_clear_error() -> None:
    bare = pd.DataFrame(summarize(NONE, k=2, by="model"))  # pd.DataFrame(frame) drops .attrs
    with pytest.raises(
        ValueError,
        match=r"does not say which columns it was grouped by.*pass the frame summarize\(\) returned$",
    ):
        result_by(bare, "summarize()")
    with pytest.raises(ValueError, match=r"does not say its interval level.*give ci="):
        result_ci(bare, None, "summarize()")
    assert result_ci(bare, 0.9, "summarize()") == 0.9
    dropped = summarize(NONE, k=2, by="model").drop(columns="model")
    with pytest.raises(ValueError, match=r"grouped by \['model'\] but has no column \['model'\]"):
        result_by(dropped, "summarize()")
    assert "<table" in dropped._repr_html_()  # the display falls back to the plain table


def test_the_summary_display_reads_by_from_the_frame() -> None:
    out = summarize(NONE, k=2, by="model")
    out.insert(0, "note", ["a", "b"])  # a column before k that is no grouping column
    html = out._repr_html_()
    assert "<th>note</th>" not in html.split("<p")[0]  # the shown columns: model, not note
    assert "pass^2" in html
