"""plot_curve at real leaderboard shapes: a k that covers under half a group's tasks is not drawn.

The shape of issue 47 §4: one model, 20 tasks, 13 run 4-6 times and 7 run 8-10 times. Its pass^k
at k = 4 is a mean over all 20 tasks; at k = 8 it is a mean over the 7 long-run tasks only, which
drawn on the same line reads as the whole curve collapsing (0.377 -> 0.000 in the report).
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from passk_nb.stats.summary import curve  # noqa: E402
from passk_nb.view.plots import plot_curve  # noqa: E402
from tests.helpers.records import records_from_marks as records  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def leaderboard_shape(seed: int = 47):
    """13 tasks with 4-6 trials and 7 with 8-10; each long-run task passes under 8 times."""
    rng = np.random.default_rng(seed)
    spec = {}
    for t in range(20):
        n = int(rng.integers(4, 7)) if t < 13 else int(rng.integers(8, 11))
        marks = "".join("1" if rng.random() < 0.9 else "0" for _ in range(n))
        if t >= 13:
            marks = "000" + marks[3:]  # under 8 passes: pass^8 is 0, the drop the issue reports
        spec[("m", "p", f"t{t:02d}")] = marks
    return records(spec)


def shaped_curve(**kw):
    with pytest.warns(UserWarning, match="can rise"):
        return curve(leaderboard_shape(), ks=[1, 2, 4, 8], by="model", n_boot=0, **kw)


def test_shape_is_the_one_reported():
    c = shaped_curve()
    at8 = c[(c["k"] == 8) & (c["metric"] == "pass^k")].iloc[0]
    at4 = c[(c["k"] == 4) & (c["metric"] == "pass^k")].iloc[0]
    assert (at8["n_tasks"], at8["n_tasks_covered"], at8["value"]) == (20, 7, 0.0)
    assert at4["n_tasks_covered"] == 20 and at4["value"] > 0.2


def test_curve_stops_before_the_first_k_covering_under_half_the_tasks_and_says_so():
    ax = plot_curve(shaped_curve())
    lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
    assert set(lines) == {"all trials — pass@k", "all trials — pass^k"}
    for line in lines.values():
        assert list(line.get_xdata()) == [1, 2, 4]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "all trials (k ≥ 8: under half the tasks, not drawn)" in texts
    for band in ax.collections:  # neither the bands nor the hatched gap reach k = 8
        assert max(path.vertices[:, 0].max() for path in band.get_paths()) <= 4


def test_sparse_draws_those_ks_anyway_hollow():
    ax = plot_curve(shaped_curve(), sparse=True)
    drawn = [line for line in ax.get_lines() if line.get_label() == "all trials — pass^k"]
    assert list(drawn[0].get_xdata()) == [1, 2, 4, 8]
    hollow = [line for line in ax.get_lines() if line.get_label() == "_partial"]
    assert hollow and all(list(line.get_xdata()) == [8] for line in hollow)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "all trials" in texts and not any("not drawn" in t for t in texts)


def test_each_group_stops_at_its_own_k():
    spec = {("short", "p", f"t{t}"): "1111" if t < 3 else "11111111" for t in range(6)}
    spec |= {("long", "p", f"t{t}"): "11111111" for t in range(6)}
    with pytest.warns(UserWarning, match="can rise"):
        c = curve(records(spec), ks=[2, 4, 8], by="model", n_boot=0)
    ax = plot_curve(c, metrics=["pass^k"])
    xs = {line.get_label(): list(line.get_xdata()) for line in ax.get_lines()}
    assert xs["long — pass^k"] == [2, 4, 8]
    assert xs["short — pass^k"] == [2, 4, 8]  # 3 of 6 covered at k = 8: half, still drawn
    spec |= {("short", "p", "t6"): "1111"}  # now 3 of 7: under half
    with pytest.warns(UserWarning, match="can rise"):
        c = curve(records(spec), ks=[2, 4, 8], by="model", n_boot=0)
    ax = plot_curve(c, metrics=["pass^k"])
    xs = {line.get_label(): list(line.get_xdata()) for line in ax.get_lines()}
    assert xs["long — pass^k"] == [2, 4, 8] and xs["short — pass^k"] == [2, 4]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "short (k ≥ 8: under half the tasks, not drawn)" in texts and "long" in texts
