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


def test_importing_the_package_first_loads_no_pandas_and_still_registers_the_accessor():
    code = (
        "import sys, passk_nb; print('pandas' in sys.modules, 'numpy' in sys.modules); "
        "import pandas as pd; print(hasattr(pd.DataFrame, 'passk'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "True"]


def test_accessor_on_an_unsuitable_frame_is_an_attribute_error_naming_the_columns():
    frame = pd.DataFrame({"task": ["t"], "passed": [True]})
    with pytest.raises(AttributeError, match="outcome"):
        frame.passk.summarize(k=1)
    assert not hasattr(frame, "passk")  # pandas' rule: an unsuitable frame has no such accessor


@pytest.mark.parametrize(
    ("module", "absent"),
    [
        ("passk_nb.stats.summary", ("passk_nb.harness", "tqdm")),
        ("passk_nb.importers.tau_bench", ("passk_nb.harness", "tqdm")),
        ("passk_nb.view.plots", ("passk_nb.harness",)),
        ("passk_nb.exporters.inspect_ai", ("passk_nb.harness", "passk_nb.importers", "inspect_ai")),
        ("passk_nb.exporters.otel", ("passk_nb.harness", "opentelemetry")),
        ("passk_nb.exporters.mlflow_runs", ("passk_nb.harness", "mlflow", "matplotlib")),
        ("passk_nb.harness.runner", ("passk_nb.stats.summary", "passk_nb.view", "scipy")),
    ],
)
def test_a_layer_loads_without_the_layers_it_must_not_use(module, absent):
    code = f"import sys, {module}; print(sorted({{m for m in sys.modules if m.startswith({absent!r})}}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
