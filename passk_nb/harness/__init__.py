"""harness: running trials. A suite's tasks against a backend, one record per trial; stored
trials judged again. Backends are in :mod:`passk_nb.harness.providers`, suites and what you
write one with in :mod:`passk_nb.harness.suites`.

>>> import tempfile, passk_nb.harness as harness
>>> df = harness.run("scripted", suite="orders", trials=1, out=tempfile.mkdtemp(), progress=False)
>>> len(df), bool(df["passed"].all())
(5, True)
>>> harness.parse_action('{"answer": "Done."}')
Answer(text='Done.')

The names load on first use: ``import passk_nb.harness`` loads no backend.
"""

from passk_nb._lazy import lazy_face

_NAMES = {
    # run a suite, rule-based cases, one episode; judge stored trials again; probe a backend
    "run": "passk_nb.harness.runner",
    "RunConfig": "passk_nb.harness.config",
    "StoppingRule": "passk_nb.harness.config",
    "run_eval": "passk_nb.harness.cases",
    "run_cases": "passk_nb.harness.cases",
    "load_cases": "passk_nb.harness.case_files",
    "load_agent": "passk_nb.harness.case_files",
    "run_episode": "passk_nb.harness.episode",
    "regrade": "passk_nb.harness.regrade",
    "probe": "passk_nb.harness.probe",
    # suites
    "get_suite": "passk_nb.harness.suites",
    "register_suite": "passk_nb.harness.suites",
    # the action protocol: what one model turn parses into
    "parse_action": "passk_nb.harness.protocol",
    "ToolCall": "passk_nb.harness.protocol",
    "Answer": "passk_nb.harness.protocol",
    "FormatError": "passk_nb.harness.protocol",
    # backends
    "make_provider": "passk_nb.harness.providers",
    "BaseProvider": "passk_nb.harness.providers",
    "Reply": "passk_nb.harness.providers",
    "ProviderError": "passk_nb.harness.providers",
    # faults injected into tool results, rewordings of the prompts
    "Fault": "passk_nb.harness.faults",
    "parse_faults": "passk_nb.harness.faults",
    "parse_perturb": "passk_nb.harness.perturb",
}

__all__ = [*_NAMES]
__getattr__ = lazy_face(__name__, _NAMES)
