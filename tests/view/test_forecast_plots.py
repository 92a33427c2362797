"""plot_forecast, plot_plan, plot_rank: check what was drawn."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from passk_nb.stats.design.planner import plan  # noqa: E402
from passk_nb.stats.forecast import Mixture, forecast, point_horizon  # noqa: E402
from passk_nb.stats.rank import rank  # noqa: E402
from passk_nb.view.forecast_plots import plot_forecast, plot_plan, plot_rank  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def records(p: np.ndarray, n: int, model: str = "m", seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    passed = rng.random((p.size, n)) < p[:, None]
    return pd.DataFrame(
        {
            "model": model,
            "task": np.repeat([f"t{t:02d}" for t in range(p.size)], n),
            "passed": passed.ravel(),
            "outcome": np.where(passed.ravel(), "pass", "wrong_state"),
        }
    )


def test_plot_forecast_marks_the_extrapolation_and_the_asymptote() -> None:
    p = Mixture(0.3, 0.1, 2.0, 1.0).sample((40,), np.random.default_rng(1))
    frame = forecast(records(p, 4), ks=(1, 2, 4, 16, 64), by=(), n_boot=100)
    ax = plot_forecast(frame, title="t")
    labels = [line.get_label() for line in ax.get_lines()]
    assert any(label.startswith("all trials — forecast") for label in labels)
    assert "all trials — observed" in labels
    texts = [t.get_text() for t in ax.texts]
    assert any("extrapolation" in t for t in texts)
    asymptote = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert asymptote and asymptote[0].get_ydata()[0] == pytest.approx(frame["share_always"].iloc[0])
    assert ax.get_title(loc="left") == "t"


def test_plot_forecast_draws_the_point_only_up_to_the_horizon_and_the_band_beyond() -> None:
    p = Mixture(0.3, 0.1, 2.0, 1.0).sample((40,), np.random.default_rng(1))
    frame = forecast(records(p, 4), ks=(1, 2, 4, 8, 16, 64), by=(), n_boot=100)
    ax = plot_forecast(frame)
    [line] = [line for line in ax.get_lines() if line.get_label().startswith("all trials — forecast")]
    assert max(line.get_xdata()) == point_horizon(4) < 64
    assert "biased beyond" in line.get_label()
    [band] = [c for c in ax.collections if c.get_label() == "all trials — 95% interval"]
    assert band.get_paths()[0].vertices[:, 0].max() == 64
    assert "read the band" in ax.get_title(loc="left")


def test_plot_forecast_says_when_it_declined() -> None:
    with pytest.warns(UserWarning):
        ax = plot_forecast(forecast(records(np.ones(20), 4), by=(), n_boot=10))
    assert "declined" in ax.get_title(loc="left")
    assert not any(line.get_label().endswith("forecast") for line in ax.get_lines())


def test_plot_plan_one_line_per_number_of_tasks() -> None:
    p = np.random.default_rng(2).beta(2, 1, 20)
    ax = plot_plan(plan(records(p, 8), k=2, tasks=[20, 40, 80], trials=[2, 4, 8]), y="power_these")
    assert [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")] == [
        "20 tasks",
        "40 tasks",
        "80 tasks",
    ]
    assert ax.get_ylim() == (0, 1.02)


def test_plot_rank_lists_arms_best_first() -> None:
    p = np.random.default_rng(3).beta(2, 1, 25)
    df = pd.concat([records(p, 4, "good", 1), records(p * 0.2, 4, "bad", 2)], ignore_index=True)
    ax = plot_rank(rank(df, k=1, n_boot=100))
    assert [t.get_text().split()[0] for t in ax.get_yticklabels()] == ["good", "bad"]


def test_each_plot_takes_its_statistic_s_result_only() -> None:
    df = records(np.full(20, 0.8), 4)
    with pytest.raises(TypeError, match=r"plot_plan draws what plan\(\) returns; this is a frame without"):
        plot_plan(df)
    with pytest.raises(
        TypeError, match=r"plot_rank draws what rank\(\) returns; this is what forecast\(\) returned"
    ):
        plot_rank(forecast(df, by=(), n_boot=0))
    with pytest.raises(TypeError, match=r"plot_forecast draws what forecast\(\) returns; this is a dict"):
        plot_forecast({"k": [1]})
