"""passk-nb: how reliably does a tool-calling agent do its job?

Run a state-verified task suite against any chat backend, keep one parquet row
per trial, and turn the rows into pass@k (can it ever?) and pass^k (does it
every time?) with honest intervals.

>>> import tempfile, passk_nb
>>> df = passk_nb.run("scripted", trials=2, out=tempfile.mkdtemp(), progress=False)
>>> df.groupby("task")["passed"].sum().tolist()
[2, 2, 2, 2, 2]
"""

from passk_nb import accessor as _accessor  # noqa: F401  (registers the df.passk accessor)
from passk_nb._version import __version__
from passk_nb.cases import load_cases, run_cases, run_eval
from passk_nb.episode import run_episode
from passk_nb.estimators import pass_at_k, pass_hat_k
from passk_nb.protocol import Answer, FormatError, ToolCall, parse_action
from passk_nb.providers import BaseProvider, ProviderError, Reply, make_provider
from passk_nb.records import COLUMNS, OUTCOMES, frame_from_records
from passk_nb.runner import prompt_hash, run
from passk_nb.stats import compare, curve, flips, summarize
from passk_nb.store import load
from passk_nb.suites import get_suite, register_suite
from passk_nb.tau_bench import from_tau_bench

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
    "compare",
    "curve",
    "flips",
    "frame_from_records",
    "from_tau_bench",
    "get_suite",
    "load",
    "load_cases",
    "make_provider",
    "parse_action",
    "pass_at_k",
    "pass_hat_k",
    "prompt_hash",
    "register_suite",
    "run",
    "run_cases",
    "run_episode",
    "run_eval",
    "summarize",
]
