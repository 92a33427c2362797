"""A pass@k / pass^k curve drawn once as pixels, with a k marker painted onto a copy.

The explorer shows the curve of a selection as a PNG with a dotted vertical line at the
slider's k. Drawing the figure takes most of a second; moving the line should not. So the
curve is drawn once per selection, without the line, into an RGBA array
(:func:`render_curve`), together with where its axes sit in pixels; a k change paints the
line into a copy of that array and encodes it (:meth:`CurveImage.png`): tens of milliseconds,
no matplotlib drawing. A plain PNG shows the same in JupyterLab, VS Code, a headless nbmake
run and a static viewer.

>>> from passk_nb.data.records import frame_from_records
>>> from passk_nb.stats.summary import curve
>>> df = frame_from_records(
...     {"run_id": "r", "suite": "s", "task": task, "trial": i, "model": "toy", "prompt_hash": "p",
...      "passed": i < c, "outcome": "pass" if i < c else "wrong_state"}
...     for task, c in [("a", 4), ("b", 3), ("c", 1)] for i in range(4))
>>> image = render_curve(curve(df, by="model", n_boot=0))
>>> image.pixels.shape[2], image.png(2)[:4]
(4, b'\\x89PNG')
>>> int((image.with_marker(2) != image.pixels).any(axis=2).any(axis=0).sum())  # one column of pixels
1
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from PIL import Image  # Pillow: a dependency of matplotlib, which encodes its PNGs with it

from passk_nb.view.plots import plot_curve

#: Pixels per inch of the rendered curve (as :func:`passk_nb.view.plots.figure_png`).
DPI = 100
#: The k marker: grey (as ``plot_curve(at_k=...)``'s line), dotted: ``DOT`` pixels on, ``DOT`` off.
MARKER_RGBA = (102, 102, 102, 255)
DOT = 2


@dataclass(frozen=True, eq=False)
class CurveImage:
    """A drawn curve: ``pixels`` (height × width × 4 RGBA, uint8), the pixel column of k = 0
    (``x0``, a float: display coordinates, from the left edge) and of each further unit of k
    (``dx``), and the pixel rows the axes span (``top``, ``bottom``)."""

    pixels: np.ndarray
    x0: float
    dx: float
    top: int
    bottom: int

    def marker_column(self, k: int) -> int | None:
        """The pixel column of the k marker, None when k lies outside the image."""
        column = math.floor(self.x0 + k * self.dx)
        return column if 0 <= column < self.pixels.shape[1] else None

    def with_marker(self, k: int) -> np.ndarray:
        """A copy of ``pixels`` with a dotted vertical line at k across the axes."""
        out = self.pixels.copy()
        column = self.marker_column(k)
        if column is not None:
            rows = np.arange(self.top, self.bottom)
            out[rows[(rows - self.top) // DOT % 2 == 0], column] = MARKER_RGBA
        return out

    def png(self, k: int | None = None) -> bytes:
        """The curve as PNG bytes, with the k marker unless ``k`` is None."""
        pixels = self.pixels if k is None else self.with_marker(k)
        buffer = io.BytesIO()
        Image.fromarray(pixels, "RGBA").save(buffer, format="png", compress_level=1)
        return buffer.getvalue()


def render_curve(curve: pd.DataFrame, *, names: dict[str, str] | None = None) -> CurveImage:
    """Draw ``plot_curve(curve, names=names)`` (no k marker) at :data:`DPI`
    with the Agg renderer, whatever the notebook's backend, and keep its pixels and where
    k maps to on them (from the axes' data-to-pixel transform)."""
    ax = plot_curve(curve, names=names)
    figure = ax.get_figure(root=True)
    assert figure is not None  # an Axes drawn by plot_curve always has one
    plt.close(figure)  # out of pyplot's figure list; it is drawn below and then dropped
    figure.set_dpi(DPI)
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba()).copy()
    (x0, _), (x1, _) = ax.transData.transform([(0.0, 0.0), (1.0, 0.0)])
    height = pixels.shape[0]
    top, bottom = round(height - ax.bbox.y1), round(height - ax.bbox.y0)
    return CurveImage(pixels, float(x0), float(x1 - x0), max(top, 0), min(bottom, height))
