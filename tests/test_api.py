"""The flat public API: every exported name resolves, and the package imports quickly."""

import subprocess
import sys

import pandas as pd
import pytest

import passk_nb


def test_every_public_name_resolves():
    for name in passk_nb.__all__:
        assert getattr(passk_nb, name) is not None, name
    assert sorted(dir(passk_nb)) == sorted(passk_nb.__all__)


def test_importing_the_package_registers_the_accessor_but_not_the_heavy_modules():
    code = (
        "import sys, pandas as pd, passk_nb; "
        "print(hasattr(pd.DataFrame, 'passk'), "
        "[m for m in ('scipy.stats', 'matplotlib.pyplot', 'ipywidgets') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True []"


def test_accessor_names_missing_columns():
    frame = pd.DataFrame({"task": ["t"], "passed": [True]})
    with pytest.raises(ValueError, match="outcome"):
        frame.passk.summary(k=1)
