"""passk-nb: how reliably does a tool-calling agent do its job?

Run a state-verified task suite against any chat backend, keep one parquet row
per trial, and turn the rows into pass@k (can it ever?) and pass^k (does it
every time?) with honest intervals.

>>> import tempfile, passk_nb
>>> df = passk_nb.run("scripted", trials=2, out=tempfile.mkdtemp(), progress=False)
>>> df.groupby("task")["passed"].sum().tolist()
[2, 2, 2, 2, 2]
>>> float(passk_nb.summarize(df, k=2, by=(), n_boot=0)["pass^k"].iloc[0])
1.0

The analysis, plotting and widget functions are imported on first use, so the
``passk`` command starts quickly.
"""

import importlib.abc
import importlib.util
import sys
from importlib import import_module
from types import ModuleType
from typing import Any

from passk_nb._lazy import lazy_face
from passk_nb._version import __version__


def _register_accessor() -> None:
    """Registers ``df.passk``. Its class loads on the first ``df.passk``, not here: pandas may be
    loading for a module of ours that is half imported (``passk_nb.data.records``), which the
    class's own imports need."""
    import pandas as pd

    def passk(df: Any) -> Any:
        return import_module("passk_nb.view.accessor").PasskAccessor(df)

    passk.__doc__ = (
        "The statistics as methods of trial records, and .plot() of a result (passk_nb.view.accessor)."
    )
    pd.api.extensions.register_dataframe_accessor("passk")(passk)


class _AccessorWithPandas(importlib.abc.MetaPathFinder):
    """Registers the ``df.passk`` accessor as soon as pandas has loaded, so that ``import passk_nb``
    registers it without loading pandas itself (``passk --version`` stays instant)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "pandas":
            return None
        sys.meta_path.remove(self)  # the real finders find pandas; this one runs once
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            loader_exec = spec.loader.exec_module

            def exec_then_register(module: ModuleType) -> None:
                loader_exec(module)
                _register_accessor()

            setattr(spec.loader, "exec_module", exec_then_register)  # noqa: B010  (this loader only)
        return spec


if "pandas" in sys.modules:
    _register_accessor()
else:
    sys.meta_path.insert(0, _AccessorWithPandas())

#: The verbs a notebook calls, imported on first use -> the module that defines them. Nothing
#: heavy loads with ``import passk_nb``: the analysis never loads the runner, ``passk tasks``
#: starts fast. Everything else is on the face of its layer: ``passk_nb.stats``, ``.view``,
#: ``.harness`` (and ``.harness.providers``, ``.harness.suites``), ``.data``, ``.importers``,
#: ``.exporters``.
_LAZY = {
    # run trials, and judge stored ones again
    "run": "passk_nb.harness.runner",
    "run_eval": "passk_nb.harness.cases",
    "run_cases": "passk_nb.harness.cases",
    "get_suite": "passk_nb.harness.suites",
    "regrade": "passk_nb.harness.regrade",
    "probe": "passk_nb.harness.probe",
    # read trials: stored runs, other runners' results
    "load": "passk_nb.data.store",
    "from_tau_bench": "passk_nb.importers.tau_bench",
    "from_inspect": "passk_nb.importers.inspect_ai",
    "from_harbor": "passk_nb.importers.harbor",
    "from_frame": "passk_nb.importers.frame",
    # numbers from trials
    "counts": "passk_nb.stats.counts",
    "as_counts": "passk_nb.stats.counts",
    "summarize": "passk_nb.stats.summary",
    "curve": "passk_nb.stats.summary",
    "compare": "passk_nb.stats.paired",
    "flips": "passk_nb.stats.paired",
    "rank": "passk_nb.stats.rank",
    "gate": "passk_nb.stats.gate",
    "forecast": "passk_nb.stats.forecast",
    "noise_floor": "passk_nb.stats.noise",
    "plan": "passk_nb.stats.design.planner",
    "decide": "passk_nb.stats.design.decisions",
    "Until": "passk_nb.stats.design.allocation",
    "robustness": "passk_nb.stats.robustness",
    "divergence": "passk_nb.stats.divergence",
    "with_cost": "passk_nb.stats.cost",
    # look at them
    "explore": "passk_nb.view.widgets",
    # write them for other tools
    "to_inspect": "passk_nb.exporters.inspect_ai",
    "to_otel": "passk_nb.exporters.otel",
    "log_mlflow": "passk_nb.exporters.mlflow_runs",
}

#: The faces of the layers, each reachable as ``passk_nb.stats`` after ``import passk_nb``.
_FACES = ("data", "stats", "view", "harness", "importers", "exporters")

__all__ = ["__version__", *_LAZY]
__getattr__ = lazy_face(__name__, _LAZY, _FACES)
