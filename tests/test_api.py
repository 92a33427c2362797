"""The public API: the verbs on the top level, every other name on the face of its layer; every
name resolves, and the package and its faces import quickly."""

import subprocess
import sys

import pandas as pd
import pytest

import passk_nb

FACES = ("data", "stats", "view", "harness", "importers", "exporters")


def test_every_public_name_resolves():
    for name in passk_nb.__all__:
        assert getattr(passk_nb, name) is not None, name
    assert sorted(dir(passk_nb)) == sorted(passk_nb.__all__)


def test_the_top_level_holds_the_verbs_and_each_face_every_name_of_its_layer():
    assert len(passk_nb.__all__) <= 35
    for face in FACES:
        module = getattr(passk_nb, face)  # reachable after `import passk_nb` alone
        assert module.__doc__ and ">>>" in module.__doc__, face
        assert sorted(dir(module)) == sorted(module.__all__), face
        for name in module.__all__:
            value = getattr(module, name)
            assert value is not None and not isinstance(value, type(passk_nb)), (face, name)
            assert getattr(value, "__module__", f"passk_nb.{face}").startswith(f"passk_nb.{face}"), (
                face,
                name,
            )
    internals = {
        "Answer",
        "ToolCall",
        "FormatError",
        "parse_action",
        "Reply",
        "BaseProvider",
        "make_provider",
    }
    assert internals.isdisjoint(passk_nb.__all__)
    assert internals <= set(passk_nb.harness.__all__)


def test_a_faces_name_stays_the_function_when_its_module_of_the_same_name_loads_first():
    code = (
        "import passk_nb.stats.counts, passk_nb.harness.regrade; "
        "from passk_nb.stats import counts; from passk_nb.harness import regrade; "
        "print(callable(counts), callable(regrade), callable(passk_nb.stats.counts))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True", "True"]


def test_importing_a_face_loads_none_of_its_modules():
    code = (
        f"import sys; import {', '.join(f'passk_nb.{face}' for face in FACES)}; "
        "print(sorted(m for m in sys.modules if m.startswith('passk_nb.') and m.count('.') > 1), "
        "'pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] False"


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


def test_a_module_of_ours_that_loads_pandas_first_still_imports_and_registers_the_accessor():
    code = (
        "import passk_nb.data.records as records, pandas as pd; "
        "df = records.frame_from_records([{'run_id': 'r', 'suite': 's', 'task': 't', 'trial': 0, "
        "'passed': True, 'outcome': 'pass'}]); "
        "print(float(df.passk.summarize(k=1, by=(), n_boot=0)['pass^k'].iloc[0]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "1.0"


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
