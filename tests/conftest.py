"""Shared test setup: figures drawn off screen and closed after each test."""

import matplotlib
import pytest

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def _close_figures():
    """Every test starts and ends with no open matplotlib figure (no leak across tests)."""
    import matplotlib.pyplot as plt

    yield
    plt.close("all")
