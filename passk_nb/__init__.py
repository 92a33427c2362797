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

from passk_nb._version import __version__


class _PasskAccessor:
    """``df.passk``: the accessor of :mod:`passk_nb.stats.accessor`, imported on first use (so that
    registering it when pandas loads imports nothing of passk_nb's own)."""

    def __new__(cls, df: Any) -> Any:
        from passk_nb.stats.accessor import PasskAccessor

        return PasskAccessor(df)


def _register_accessor(pandas: ModuleType) -> None:
    pandas.api.extensions.register_dataframe_accessor("passk")(_PasskAccessor)


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
                _register_accessor(module)

            setattr(spec.loader, "exec_module", exec_then_register)  # noqa: B010  (this loader only)
        return spec


if "pandas" in sys.modules:
    _register_accessor(sys.modules["pandas"])
else:
    sys.meta_path.insert(0, _AccessorWithPandas())

#: Public names, imported on first use -> the module that defines them. Nothing heavy loads
#: with ``import passk_nb``: the analysis never loads the runner, ``passk tasks`` starts fast.
_LAZY = {
    # data: the records and where they live
    "COLUMNS": "passk_nb.data.records",
    "OUTCOMES": "passk_nb.data.records",
    "frame_from_records": "passk_nb.data.records",
    "load": "passk_nb.data.store",
    "prompt_hash": "passk_nb.data.ids",
    # importers: other runners' trials as records
    "from_tau_bench": "passk_nb.importers.tau_bench",
    "from_frame": "passk_nb.importers.frame",
    "from_inspect": "passk_nb.importers.inspect_ai",
    "from_harbor": "passk_nb.importers.harbor",
    # exporters: records in other tools' formats
    "to_inspect": "passk_nb.exporters.inspect_ai",
    "to_otel": "passk_nb.exporters.otel",
    "log_mlflow": "passk_nb.exporters.mlflow_runs",
    # harness: running trials
    "Answer": "passk_nb.harness.protocol",
    "FormatError": "passk_nb.harness.protocol",
    "ToolCall": "passk_nb.harness.protocol",
    "parse_action": "passk_nb.harness.protocol",
    "run_episode": "passk_nb.harness.episode",
    "run": "passk_nb.harness.runner",
    "Fault": "passk_nb.harness.faults",
    "parse_faults": "passk_nb.harness.faults",
    "parse_perturb": "passk_nb.harness.perturb",
    "regrade": "passk_nb.harness.regrade",
    "probe": "passk_nb.harness.probe",
    "run_eval": "passk_nb.harness.cases",
    "run_cases": "passk_nb.harness.cases",
    "load_cases": "passk_nb.harness.case_files",
    "BaseProvider": "passk_nb.harness.providers",
    "ProviderError": "passk_nb.harness.providers",
    "Reply": "passk_nb.harness.providers",
    "make_provider": "passk_nb.harness.providers",
    "get_suite": "passk_nb.harness.suites",
    "register_suite": "passk_nb.harness.suites",
    # stats: numbers from records
    "pass_at_k": "passk_nb.stats.estimators",
    "pass_hat_k": "passk_nb.stats.estimators",
    "counts": "passk_nb.stats.counts",
    "as_counts": "passk_nb.stats.counts",
    "Counts": "passk_nb.stats.counts",
    "summarize": "passk_nb.stats.summary",
    "curve": "passk_nb.stats.summary",
    "compare": "passk_nb.stats.paired",
    "flips": "passk_nb.stats.paired",
    "robustness": "passk_nb.stats.robustness",
    "robustness_tasks": "passk_nb.stats.robustness",
    "claimed_unperformed_action": "passk_nb.stats.flags",
    "divergence": "passk_nb.stats.divergence",
    "action_tree": "passk_nb.stats.divergence",
    "with_cost": "passk_nb.stats.cost",
    "cost_summary": "passk_nb.stats.cost",
    "forecast": "passk_nb.stats.forecast",
    "plan": "passk_nb.stats.design.planner",
    "plan_trials": "passk_nb.stats.design.planner",
    "noise_floor": "passk_nb.stats.noise",
    "g_pass_at_k": "passk_nb.stats.noise",
    "rank": "passk_nb.stats.rank",
    "gate": "passk_nb.stats.gate",
    "Question": "passk_nb.stats.design.question",
    "decide": "passk_nb.stats.design.decisions",
    "decide_by_round": "passk_nb.stats.design.decisions",
    "consistency": "passk_nb.stats.consistency",
    "consistency_summary": "passk_nb.stats.consistency",
    "trials_by_round": "passk_nb.stats.design.decisions",
    "allocate": "passk_nb.stats.design.allocation",
    "Until": "passk_nb.stats.design.allocation",
    # view: tables, plots, widgets
    "plot_curve": "passk_nb.view.plots",
    "plot_flips": "passk_nb.view.plots",
    "plot_outcomes": "passk_nb.view.plots",
    "plot_summary": "passk_nb.view.plots",
    "plot_tasks": "passk_nb.view.plots",
    "plot_divergence": "passk_nb.view.divergence_plots",
    "plot_cost": "passk_nb.view.cost_plots",
    "plot_forecast": "passk_nb.view.forecast_plots",
    "plot_plan": "passk_nb.view.forecast_plots",
    "plot_rank": "passk_nb.view.forecast_plots",
    "plot_rounds": "passk_nb.view.sequential_plots",
    "plot_round_trials": "passk_nb.view.sequential_plots",
    "plot_robustness": "passk_nb.view.robustness_plots",
    "plot_robustness_tasks": "passk_nb.view.robustness_plots",
    "explore": "passk_nb.view.widgets",
    "browse_transcripts": "passk_nb.view.widgets",
    "show_transcript": "passk_nb.view.widgets",
    "compare_transcripts": "passk_nb.view.widgets",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'passk_nb' has no attribute {name!r}")
    value = getattr(import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = ["__version__", *_LAZY]
