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

from importlib import import_module
from typing import Any

from passk_nb import accessor as _accessor  # noqa: F401  (registers the df.passk accessor)
from passk_nb._version import __version__
from passk_nb.episode import run_episode
from passk_nb.protocol import Answer, FormatError, ToolCall, parse_action
from passk_nb.providers import BaseProvider, ProviderError, Reply, make_provider
from passk_nb.records import COLUMNS, OUTCOMES, frame_from_records
from passk_nb.runner import prompt_hash, run
from passk_nb.store import load
from passk_nb.suites import get_suite, register_suite

#: Public names imported on first use -> the module that defines them.
_LAZY = {
    "load_cases": "passk_nb.cases",
    "run_cases": "passk_nb.cases",
    "run_eval": "passk_nb.cases",
    "pass_at_k": "passk_nb.estimators",
    "pass_hat_k": "passk_nb.estimators",
    "claimed_unperformed_action": "passk_nb.flags",
    "plot_curve": "passk_nb.plots",
    "plot_flips": "passk_nb.plots",
    "plot_outcomes": "passk_nb.plots",
    "plot_tasks": "passk_nb.plots",
    "compare": "passk_nb.stats",
    "curve": "passk_nb.stats",
    "flips": "passk_nb.stats",
    "summarize": "passk_nb.stats",
    "from_tau_bench": "passk_nb.tau_bench",
    "browse_transcripts": "passk_nb.widgets",
    "explore": "passk_nb.widgets",
    "show_transcript": "passk_nb.widgets",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'passk_nb' has no attribute {name!r}")
    value = getattr(import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "__version__",
    "Answer",
    "BaseProvider",
    "COLUMNS",
    "FormatError",
    "OUTCOMES",
    "ProviderError",
    "Reply",
    "ToolCall",
    "frame_from_records",
    "get_suite",
    "load",
    "make_provider",
    "parse_action",
    "prompt_hash",
    "register_suite",
    "run",
    "run_episode",
    *_LAZY,
]
