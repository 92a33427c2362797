"""plot_calibration draws calibration()'s numbers only: each bar is the result's interval."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import passk_nb.view as view  # noqa: E402
from passk_nb.stats.predictability import calibration, predictability  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def records() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    p = np.repeat(rng.beta(0.5, 0.5, 20), 4)
    df = pd.DataFrame(
        {
            "model": np.repeat(["a", "b"], p.size // 2),
            "task": np.tile(np.repeat(np.arange(10), 4), 2).astype(str),
            "confidence": np.round(p**0.5, 2),
            "passed": rng.random(p.size) < p,
        }
    )
    df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
    return df


def test_the_bars_are_the_results_intervals_and_nothing_else() -> None:
    result = calibration(records())
    ax = view.plot_calibration(result, title="t")
    assert ax.get_title(loc="left") == "t"
    assert [c.get_label() for c in ax.containers] == ["a", "b"]
    for container, (_, part) in zip(ax.containers, result.groupby("model"), strict=True):
        part = part.sort_values("bin")
        line, _, (bars,) = container
        assert np.allclose(line.get_xdata(), part["mean_confidence"])
        assert np.allclose(line.get_ydata(), part["pass_rate"])
        segments = bars.get_segments()
        lows = np.array([s[0][1] for s in segments])
        highs = np.array([s[1][1] for s in segments])
        expected_lo = part["lo"].fillna(part["pass_rate"]).to_numpy()  # no interval: no bar
        expected_hi = part["hi"].fillna(part["pass_rate"]).to_numpy()
        assert np.allclose(lows, expected_lo) and np.allclose(highs, expected_hi)


def test_it_draws_only_a_calibration_result() -> None:
    with pytest.raises(TypeError, match=r"plot_calibration draws what calibration\(\) returns"):
        view.plot_calibration(predictability(records(), n_boot=0, min_tasks=2))
