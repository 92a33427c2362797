"""Every outcome has its own fixed colour, told apart from every other, also by colour-blind readers.

A false claim once took pass's green by position (32 passes and 4 false claims read as one green
bar). Distances are CIEDE2000 (Sharma, Wu & Dalal 2005) between the colours as seen with normal
vision and under protanopia, deuteranopia and tritanopia simulated with the matrices of Machado,
Oliveira & Fernandes (2009, severity 1), applied in linear sRGB.
"""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_hex

from passk_nb.data.records import OUTCOMES, frame_from_records
from passk_nb.stats.counts import UNCOUNTED_FAILURE, counts
from passk_nb.view.labels import OUTCOME_COLORS, UNCOUNTED_COLOR
from passk_nb.view.plots import plot_outcomes

MACHADO_2009 = {
    "protanopia": [
        [0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]
    ],
    "deuteranopia": [
        [0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]
    ],
    "tritanopia": [
        [1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]
    ],
}  # fmt: skip
VISIONS = ("normal", *MACHADO_2009)
#: Every pair of outcomes at least this far apart (CIEDE2000) under each vision; pass's pairs farther.
MIN_DISTANCE, MIN_FROM_PASS = 12.0, 17.0

_SRGB_TO_XYZ = np.array(
    [[0.4124564, 0.3575761, 0.1804375], [0.2126729, 0.7151522, 0.0721750], [0.0193339, 0.1191920, 0.9503041]]
)


def lab(color: str, vision: str = "normal") -> np.ndarray:
    """CIELAB (D65) of an sRGB ``#rrggbb`` colour as seen with ``vision``."""
    rgb = np.array([int(color[i : i + 2], 16) / 255 for i in (1, 3, 5)])
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    if vision != "normal":
        linear = np.clip(np.array(MACHADO_2009[vision]) @ linear, 0, 1)
    xyz = (_SRGB_TO_XYZ @ linear) / _SRGB_TO_XYZ.sum(axis=1)
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def ciede2000(lab1: np.ndarray, lab2: np.ndarray) -> float:
    """ΔE00 between two CIELAB colours (Sharma, Wu & Dalal 2005, equations 1-22)."""
    (l1, a1, b1), (l2, a2, b2) = lab1, lab2
    c_mean = (np.hypot(a1, b1) + np.hypot(a2, b2)) / 2
    g = 0.5 * (1 - np.sqrt(c_mean**7 / (c_mean**7 + 25**7)))
    a1, a2 = (1 + g) * a1, (1 + g) * a2
    c1, c2 = np.hypot(a1, b1), np.hypot(a2, b2)
    h1, h2 = np.degrees(np.arctan2(b1, a1)) % 360, np.degrees(np.arctan2(b2, a2)) % 360
    dh = 0.0 if c1 * c2 == 0 else (h2 - h1 + 180) % 360 - 180
    d_l, d_c, d_h = l2 - l1, c2 - c1, 2 * np.sqrt(c1 * c2) * np.sin(np.radians(dh / 2))
    l_mean, c_mean = (l1 + l2) / 2, (c1 + c2) / 2
    if c1 * c2 == 0:
        h_mean = h1 + h2
    elif abs(h1 - h2) <= 180:
        h_mean = (h1 + h2) / 2
    else:
        h_mean = (h1 + h2 + 360) / 2 if h1 + h2 < 360 else (h1 + h2 - 360) / 2
    t = (
        1
        - 0.17 * np.cos(np.radians(h_mean - 30))
        + 0.24 * np.cos(np.radians(2 * h_mean))
        + 0.32 * np.cos(np.radians(3 * h_mean + 6))
        - 0.20 * np.cos(np.radians(4 * h_mean - 63))
    )
    rotation = 30 * np.exp(-(((h_mean - 275) / 25) ** 2))
    r_c = 2 * np.sqrt(c_mean**7 / (c_mean**7 + 25**7))
    s_l = 1 + 0.015 * (l_mean - 50) ** 2 / np.sqrt(20 + (l_mean - 50) ** 2)
    s_c, s_h = 1 + 0.045 * c_mean, 1 + 0.015 * c_mean * t
    r_t = -np.sin(np.radians(2 * rotation)) * r_c
    return float(
        np.sqrt((d_l / s_l) ** 2 + (d_c / s_c) ** 2 + (d_h / s_h) ** 2 + r_t * (d_c / s_c) * (d_h / s_h))
    )


@pytest.mark.parametrize(
    ("lab1", "lab2", "expected"),  # Sharma, Wu & Dalal (2005), table 1: pairs 1, 7, 17 and 24
    [
        ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
        ((50.0, 0.0, 0.0), (50.0, -1.0, 2.0), 2.3669),
        ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
        ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
    ],
)
def test_the_distance_is_ciede2000(lab1, lab2, expected):
    assert ciede2000(np.array(lab1), np.array(lab2)) == pytest.approx(expected, abs=1e-4)


def test_the_simulation_keeps_greys_and_merges_red_and_green_for_a_deuteranope():
    grey = lab("#777777")
    assert all(ciede2000(grey, lab("#777777", v)) < 0.5 for v in VISIONS)
    red_green = ciede2000(lab("#D55E00", "deuteranopia"), lab("#009E73", "deuteranopia"))
    assert red_green < ciede2000(lab("#D55E00"), lab("#009E73")) / 2


def test_every_outcome_has_its_own_colour():
    assert set(OUTCOME_COLORS) == set(OUTCOMES)
    assert len(set(map(str.upper, OUTCOME_COLORS.values()))) == len(OUTCOMES)


@pytest.mark.parametrize("vision", VISIONS)
def test_every_pair_of_outcome_colours_is_told_apart(vision):
    """Also from the pale segment of failures a counts table did not break down."""
    colors = {**OUTCOME_COLORS, UNCOUNTED_FAILURE: UNCOUNTED_COLOR}
    too_close = []
    for a, b in itertools.combinations(colors, 2):
        distance = ciede2000(lab(colors[a], vision), lab(colors[b], vision))
        floor = MIN_FROM_PASS if "pass" in (a, b) else MIN_DISTANCE
        if distance < floor:
            too_close.append((a, b, round(distance, 1)))
    assert not too_close, f"{vision}: {too_close}"


def test_the_outcome_chart_draws_each_outcome_in_its_own_colour():
    """All ten outcomes in one chart: each segment has its outcome's colour, none pass's but pass."""
    df = frame_from_records(
        {"run_id": "r", "suite": "s", "task": f"t{i}", "trial": 0, "model": "m",
         "passed": outcome == "pass", "outcome": outcome}
        for i, outcome in enumerate(OUTCOMES)
    )  # fmt: skip
    ax = plot_outcomes(counts(df, by="model"))
    drawn = {bars.get_label(): to_hex(bars.patches[0].get_facecolor()).upper() for bars in ax.containers}
    assert drawn == {o: OUTCOME_COLORS[o].upper() for o in OUTCOMES}
    plt.close("all")
