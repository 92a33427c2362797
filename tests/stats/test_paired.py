"""compare (paired differences between two arms) and flips (per-task significant changes)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from passk_nb.stats.paired import compare, flips
from tests.helpers.records import records_from_marks as trials
from tests.stats.cases import PROMPTS, exact_var


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
    # Korn–Graubard on u = (d + 1)/2: Clopper–Pearson at T_eff = m(1 − m)/(s²/4/T)·(z/t)² with
    # m = (T·u + ½)/(T + 1), the differences' variance s² floored at both arms' fixed-task
    # variance; no pseudo-task
    d = vb - va
    pairs = list(zip([4, 2, 1, 0], [4, 3, 2, 1], strict=True))
    floor = np.mean([exact_var(4, ca, 2) + exact_var(4, cb, 2) for ca, cb in pairs])
    u, s2 = (d.mean() + 1) / 2, max(d.var(ddof=1), floor)
    m = (4 * u + 0.5) / 5
    t_eff = 4 * m * (1 - m) / (s2 / 4) * (sps.norm.ppf(0.975) / sps.t.ppf(0.975, 3)) ** 2
    x = u * t_eff
    lo, hi = sps.beta.ppf(0.025, x, t_eff - x + 1), sps.beta.ppf(0.975, x + 1, t_eff - x)
    assert (hat["lo"], hat["hi"]) == (pytest.approx(2 * lo - 1), pytest.approx(2 * hi - 1))
    # these tasks: both arms' fixed-task variances, diff ± z·se_fixed
    se = math.sqrt(sum(exact_var(4, ca, 2) + exact_var(4, cb, 2) for ca, cb in pairs)) / 4
    assert hat["se_fixed"] == pytest.approx(se, rel=1e-4)
    z = sps.norm.ppf(0.975)
    assert hat["fixed_lo"] == pytest.approx(max(d.mean() - z * hat["se_fixed"], -1.0))
    assert hat["fixed_hi"] == pytest.approx(min(d.mean() + z * hat["se_fixed"], 1.0))
    assert hat["ci_method"] == "korn-graubard"


@pytest.mark.parametrize("broken", [5, 6])
def test_compare_finds_a_regression_when_five_or_six_of_six_tasks_broke(broken: int) -> None:
    """Korn–Graubard reads the Bernoulli variance of (d + 1)/2 at (T·u + ½)/(T + 1): at u = 0
    (every task went from 4/4 to 0/4) u(1 − u) = 0 would count the six tasks as T·(z/t)² = 3.5
    effective ones and the interval would reach +0.3."""
    marks = {("m", "p1", t): "1111" for t in "abcdef"}
    marks |= {("m", "p2", t): "0000" if i < broken else "1111" for i, t in enumerate("abcdef")}
    out = compare(trials(marks), a="p1", b="p2", k=2)
    hat = out[out["metric"] == "pass^k"].iloc[0]
    assert hat["ci_method"] == "korn-graubard" and hat["hi"] < 0, hat


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
