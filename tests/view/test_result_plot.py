"""Plots take results only; a result draws itself (``.plot()``); ``df.passk`` is every statistic."""

from __future__ import annotations

import inspect

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import passk_nb  # noqa: E402
import passk_nb.stats as stats  # noqa: E402
import passk_nb.view as view  # noqa: E402
from passk_nb.stats.accessor import statistics  # noqa: E402
from passk_nb.view.accessor import PLOTS  # noqa: E402


def records() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = [
        {"model": m, "prompt_hash": p, "task": f"t{t}", "trial": i, "passed": bool(rng.random() < rate)}
        for m, rate in (("big", 0.9), ("small", 0.5))
        for p in ("p1", "p2")
        for t in range(6)
        for i in range(4)
    ]
    df = pd.DataFrame(rows)
    df["outcome"] = np.where(df["passed"], "pass", "wrong_state")
    return df


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_every_statistic_of_the_stats_face_is_on_df_passk_with_its_signature() -> None:
    df = records()
    names = statistics()
    assert {"summarize", "curve", "compare", "flips", "rank", "forecast", "plan", "counts"} <= set(names)
    for name, function in names.items():
        method = getattr(df.passk, name)
        expected = list(inspect.signature(function).parameters.values())[1:]  # less the records
        assert list(inspect.signature(method).parameters.values()) == expected, name
        assert method.__doc__ == function.__doc__
    assert set(names) == {
        name
        for name in stats.__all__
        if inspect.isfunction(getattr(stats, name))
        and next(iter(inspect.signature(getattr(stats, name)).parameters), None)
        in {"df", "data", "records", "pilot"}
    }


def test_a_method_of_df_passk_is_its_statistic_on_the_frame() -> None:
    df = records()
    pd.testing.assert_frame_equal(df.passk.rank(k=2, n_boot=20), stats.rank(df, k=2, n_boot=20))
    pd.testing.assert_frame_equal(df.passk.counts(by="model"), stats.counts(df, by="model"))


def test_no_plot_declares_a_keyword_of_a_statistic() -> None:
    keywords = {
        parameter
        for function in statistics().values()
        for parameter in list(inspect.signature(function).parameters)[1:]
    }
    plots = [name for name in view.__all__ if name.startswith("plot_")]
    assert len(plots) == 16
    declared = {
        name: sorted(set(list(inspect.signature(getattr(view, name)).parameters)[1:]) & keywords)
        for name in plots
    }
    assert not {name: found for name, found in declared.items() if found}
    assert set(PLOTS.values()) <= set(plots)


def drawn(ax) -> list[list[float]]:
    return [list(np.asarray(line.get_ydata(), dtype=float)) for line in ax.get_lines()]


@pytest.mark.parametrize(
    ("statistic", "plot"),
    [
        (lambda df: passk_nb.curve(df, by="model", n_boot=0), "plot_curve"),
        (lambda df: passk_nb.summarize(df, k=2, n_boot=0), "plot_summary"),
        (lambda df: passk_nb.flips(df, a="p1", b="p2", by="model"), "plot_flips"),
        (lambda df: passk_nb.counts(df, by="model"), "plot_tasks"),
        (lambda df: passk_nb.rank(df, k=2, n_boot=50), "plot_rank"),
    ],
)
def test_a_result_draws_itself_with_the_plot_of_its_statistic(statistic, plot) -> None:
    result = statistic(records())
    ax = result.plot(title="t")
    assert ax.get_title(loc="left") == "t"
    assert drawn(ax) == drawn(getattr(view, plot)(result, title="t"))
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        t.get_text() for t in getattr(view, plot)(result).get_yticklabels()
    ]


def test_the_accessor_computes_and_the_result_draws() -> None:
    df = records()
    ax = df.passk.curve(by="model", n_boot=0).plot(at_k=2)
    assert ax.get_xlabel() == "k (number of tries)"
    assert drawn(ax) == drawn(view.plot_curve(passk_nb.curve(df, by="model", n_boot=0), at_k=2))


def test_drawing_records_or_a_result_without_a_plot_is_one_clear_error() -> None:
    df = records()
    with pytest.raises(
        TypeError, match=r"passk_nb.view.plot_curve\(passk_nb.curve\(df\)\), or passk_nb.curve"
    ):
        view.plot_curve(df)
    with pytest.raises(
        TypeError, match=r"df.passk.plot\(\) draws a statistic's result; this frame is trial records"
    ):
        df.passk.plot()
    compared = passk_nb.compare(df, a="p1", b="p2", k=2, n_boot=0)
    with pytest.raises(TypeError, match=r"a compare\(\) result, which has no plot"):
        compared.plot()


def test_the_worked_example_of_the_architecture_runs(monkeypatch) -> None:
    import re
    from pathlib import Path

    import passk_nb.view.accessor as accessor

    text = (Path(__file__).parents[2] / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text[text.index("### Worked example") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    example: dict = {}
    exec(compile(code, "architecture.md", "exec"), example)
    monkeypatch.setitem(view.__dict__, "plot_infra_share", example["plot_infra_share"])  # view/__init__.py
    monkeypatch.setitem(accessor.PLOTS, "infra_share", "plot_infra_share")
    df = records()
    df.loc[df.index[:6], ["passed", "outcome"]] = [False, "infra_error"]  # six of big's 48 trials
    result = example["infra_share"](df, by="model")
    assert result["share"].tolist() == [6 / 48, 0.0]
    ax = result.plot(title="t")
    assert [bar.get_width() for bar in ax.patches] == [6 / 48, 0.0]
    with pytest.raises(TypeError, match=r"passk_nb.stats.infra_share\(df\).plot\(\)"):
        example["plot_infra_share"](df)
