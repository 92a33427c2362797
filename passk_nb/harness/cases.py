"""Rule-based text cases: ``run_eval`` scores an agent once, ``run_cases`` measures it n times.

A case is a dict with an ``input`` for the agent and one way to judge its
output: ``check`` (a function of the output, truthy for a pass) or
``expected`` (a substring the output must contain). When both are present,
``check`` wins. The agent is any function ``input -> output``.

- :func:`run_eval` runs every case once and returns a summary dict: the small
  rule-based harness, with no clock, network or model of its own.
- :func:`run_cases` runs every case ``trials`` times and returns trial records
  (one row per trial, the columns of :mod:`passk_nb.data.records`), so pass@k,
  pass^k, the plots and the notebooks work on text cases as on the built-in suite.
- :func:`load_cases` reads cases from a JSON file or a Python file defining
  ``CASES``; :func:`load_agent` imports ``module:function`` or ``file.py:function``.

>>> summary = run_eval(str.upper, [{"input": "ok", "expected": "OK"}])
>>> summary["passed"], summary["results"][0]["name"]
(1, 'case_0')
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from passk_nb._version import __version__
from passk_nb.data.ids import prompt_hash, spec_hash
from passk_nb.data.records import frame_from_records
from passk_nb.data.store import existing_trials
from passk_nb.data.transcript import cap_text, transcript_entry
from passk_nb.harness.arguments import check_bool, check_positive, check_text, check_trials
from passk_nb.harness.batch import execute_trials, load_trials

__all__ = ["run_eval", "run_cases", "cases_hash"]

Case = Mapping[str, Any]


Agent = Callable[[Any], Any]


#: ``run_cases`` shows a progress bar by default when it runs at least this many trials.
PROGRESS_MIN_TRIALS = 100


def _check_list(cases: Any) -> None:
    if not isinstance(cases, list):
        raise TypeError(f"cases must be a list of dicts, got {type(cases).__name__}; wrap it in list(...)")


def case_name(case: Any, index: int) -> Any:
    return case.get("name", f"case_{index}") if isinstance(case, Mapping) else f"case_{index}"


def _case_problem(case: Any, index: int) -> str | None:
    """What makes ``case`` impossible to run, or None when it is well formed."""
    if not isinstance(case, Mapping):
        kind = type(case).__name__
        return f"case {index} is a {kind}, not a dict; write it as {{'input': ..., 'expected': ...}}"
    name = case_name(case, index)
    if "input" not in case:
        return f"case {name!r} has no 'input' key; add one"
    if "check" not in case and "expected" not in case:
        return f"case {name!r} has neither 'check' nor 'expected'; add one of them"
    return None


def _judge(agent_fn: Agent, case: Case) -> tuple[str, Any, str | None]:
    """Run one well-formed case once: ``(outcome, output, error)``.

    ``outcome`` is ``pass``, ``wrong_output`` (the check was false or raised)
    or ``agent_error`` (the agent raised; ``output`` is then None).
    """
    try:
        output = agent_fn(case["input"])
    except Exception as exc:
        return "agent_error", None, f"agent error: {exc}"
    try:
        if "check" in case:
            passed = bool(case["check"](output))
        else:
            passed = case["expected"] in output
    except Exception as exc:
        return "wrong_output", output, f"check error: {exc}"
    return ("pass" if passed else "wrong_output"), output, None


def run_eval(agent_fn: Agent, cases: list[Case]) -> dict[str, Any]:
    """Run every case once, in order, and return ``{"results", "passed", "total", "pass_rate"}``.

    For case ``i`` (name: ``case["name"]``, default ``"case_<i>"``) the
    agent gets ``case["input"]``. The case passes when ``bool(case["check"](output))``
    is true or, without a ``check``, when ``case["expected"] in output``;
    ``check`` wins when both are present. Each result is
    ``{"name", "passed", "output", "error"}`` with ``error`` None on success:

    - the agent raised: ``output`` None, ``error`` ``"agent error: <str(exc)>"``;
    - the check raised: ``output`` kept, ``error`` ``"check error: <str(exc)>"``;
    - the case is malformed (not a dict, no ``input``, or neither ``check`` nor
      ``expected``): the agent is not called, ``output`` is None and ``error``
      is ``"case error: ..."`` saying what to add.

    A failing or crashing case never stops the run: every case gets a result,
    in case order. ``pass_rate`` is ``passed / total``, 0.0 for no cases.
    Only ``Exception`` is caught, so Ctrl-C still stops the run. ``cases`` must
    be a ``list`` (a tuple or generator is a ``TypeError`` before anything runs).

    >>> def agent(x):
    ...     return {"2+2": "the answer is 4", "cap": "Paris is the capital"}.get(x, "i don't know")
    >>> cases = [
    ...     {"name": "math", "input": "2+2", "expected": "4"},
    ...     {"name": "geo", "input": "cap", "check": lambda o: "Paris" in o},
    ...     {"name": "unknown", "input": "???", "expected": "42"},
    ... ]
    >>> summary = run_eval(agent, cases)
    >>> summary["passed"], summary["total"], round(summary["pass_rate"], 3)
    (2, 3, 0.667)
    >>> [r["passed"] for r in summary["results"]]
    [True, True, False]
    >>> summary["results"][2]["output"]
    "i don't know"
    >>> run_eval(agent, [{"name": "no input", "expected": "4"}])["results"][0]["error"]
    "case error: case 'no input' has no 'input' key; add one"
    """
    _check_list(cases)
    results = []
    for i, case in enumerate(cases):
        name = case_name(case, i)
        problem = _case_problem(case, i)
        if problem is not None:
            results.append({"name": name, "passed": False, "output": None, "error": f"case error: {problem}"})
            continue
        outcome, output, error = _judge(agent_fn, case)
        results.append({"name": name, "passed": outcome == "pass", "output": output, "error": error})
    total = len(cases)
    passed = sum(r["passed"] for r in results)
    pass_rate = passed / total if total else 0.0
    return {"results": results, "passed": passed, "total": total, "pass_rate": pass_rate}


def validate_cases(cases: Any, source: str = "cases") -> list[str]:
    """The case names, after checking every case can run; raise naming the first bad case."""
    _check_list(cases)
    if not cases:
        raise ValueError(f"{source} is empty: add at least one case")
    names = []
    for i, case in enumerate(cases):
        problem = _case_problem(case, i)
        if problem is not None:
            raise ValueError(f"{source}: {problem}")
        name = case_name(case, i)
        if not isinstance(name, str) or not name:
            raise ValueError(f"{source}: case {i} has name {name!r}; names must be non-empty strings")
        check_text(f"{source}: the name of case {i}", name)
        if "check" in case and not callable(case["check"]):
            raise ValueError(f"{source}: case {name!r} has a 'check' that is not a function of the output")
        names.append(name)
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{source}: case names must be unique (each is a task id); repeated: {duplicates}")
    return names


def cases_hash(cases: list[Case]) -> str:
    """Short sha256 of the cases' names, inputs, expected strings and check-function names.

    It is the ``prompt_hash`` of :func:`run_cases` records: change a case and
    the hash (hence the run id) changes. A check function's *code* is not part
    of it, only its name. Inputs that are not JSON are hashed by ``repr``.

    >>> cases_hash([{"input": "2+2", "expected": "4"}]) == cases_hash([{"input": "2+2", "expected": "5"}])
    False
    """
    items = [
        {
            "name": case_name(case, i),
            "input": case.get("input"),
            "expected": case.get("expected"),
            "check": getattr(case["check"], "__qualname__", repr(case["check"])) if "check" in case else None,
        }
        for i, case in enumerate(cases)
    ]
    return prompt_hash(json.dumps(items, sort_keys=True, ensure_ascii=False, default=repr))


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else repr(value)


def _trial_record(agent_fn: Agent, case: Case, name: str, trial: int, base: dict[str, Any]) -> dict[str, Any]:
    started = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    outcome, output, error = _judge(agent_fn, case)
    latency = time.perf_counter() - t0
    answer = _text(output)
    transcript = [transcript_entry("task", "user", _text(case["input"]) or "")]
    if outcome == "agent_error":
        transcript.append(transcript_entry("agent_error", "system", error or ""))
    else:
        transcript.append(transcript_entry("reply", "assistant", answer or ""))
    return {
        **base,
        "task": name,
        "trial": trial,
        "passed": outcome == "pass",
        "outcome": outcome,
        "state_ok": outcome == "pass",
        "n_turns": int(outcome != "agent_error"),
        "attempts": 1,
        "latency_s": latency,
        "started_at": started,
        "final_answer": cap_text(answer),
        "transcript": json.dumps(transcript, ensure_ascii=False),
        "error": cap_text(error),
    }


def run_cases(
    agent_fn: Agent,
    cases: list[Case],
    *,
    trials: int = 3,
    suite: str = "cases",
    model: str | None = None,
    prompt_name: str = "cases",
    concurrency: int = 1,
    out: str | os.PathLike[str] | None = None,
    progress: bool | None = None,
) -> pd.DataFrame:
    """Run every case ``trials`` times and return one trial record per (case, trial).

    The records have the standard columns (:data:`passk_nb.data.records.COLUMNS`),
    so ``summarize``, ``curve``, the plots and the notebooks treat text cases
    like any suite: ``task`` is the case name, ``suite`` is ``suite``,
    ``provider`` is ``"callable"``, ``model`` is ``model`` (default: the
    function's ``__name__``), ``prompt_hash`` is :func:`cases_hash` and
    ``prompt_name`` is ``prompt_name``. Outcomes: ``pass``, ``wrong_output``
    (the check was false or raised, ``error`` then says ``"check error: ..."``)
    and ``agent_error`` (the agent raised); both failures count against the
    agent, as in :func:`run_eval`. ``final_answer`` is the output (``repr``
    when not a string), cut like transcripts to ``MAX_STORED_CHARS``.

    Unlike :func:`run_eval`, every case is checked before anything runs: a
    malformed case, a non-callable ``check``, or repeated or non-string names
    raise ``ValueError`` (a broken case would otherwise count as n failures).

    ``concurrency`` > 1 calls the agent from that many threads (for slow
    agents; the agent must then be thread-safe). With the default 1, calls
    happen one at a time in case order, then trial order, so a seeded agent
    gives the same records every run. Rows are always ordered by case, then trial.

    ``out``: a data folder. Records then go to ``out/<run_id>/`` as parquet,
    and re-running into the same folder runs only the missing trials, like
    :func:`passk_nb.run` (the run id hashes ``suite``, ``model`` and
    :func:`cases_hash`; after editing a check function's code, use a new
    ``out`` or ``suite``). The result then includes those earlier trials.
    Without ``out`` nothing is written and every trial runs.

    ``progress``: show a tqdm bar; by default only for runs of at least
    :data:`PROGRESS_MIN_TRIALS` trials.

    >>> import random
    >>> rng = random.Random(0)
    >>> def flaky(x):
    ...     return x.upper() if rng.random() < 0.5 else "?"
    >>> df = run_cases(flaky, [{"name": "shout", "input": "hi", "expected": "HI"}], trials=4)
    >>> len(df), df["model"].iloc[0], df["passed"].tolist()
    (4, 'flaky', [False, False, True, True])
    """
    names = validate_cases(cases)
    trials = check_trials(trials)
    concurrency = check_positive("concurrency", concurrency)
    if not callable(agent_fn):
        raise TypeError(f"agent_fn must be a function of the case input, got {type(agent_fn).__name__}")
    check_text("suite", suite, allow_none=False, allow_empty=False)
    check_text("model", model)
    check_text("prompt_name", prompt_name, allow_none=False, allow_empty=False)
    if progress is not None:
        check_bool("progress", progress)
    if out is not None and not isinstance(out, str | os.PathLike):
        raise TypeError(f"out must be a folder path or None, got {type(out).__name__} {out!r}")
    model = model or getattr(agent_fn, "__name__", type(agent_fn).__name__)
    case_hash = cases_hash(cases)
    spec = {"suite": suite, "provider": "callable", "model": model, "prompt_hash": case_hash}
    run_id = spec_hash(spec)
    agent_path = f"{getattr(agent_fn, '__module__', '?')}.{getattr(agent_fn, '__qualname__', model)}"
    base = {
        **spec,
        "run_id": run_id,
        "prompt_name": prompt_name,
        "harness_version": __version__,
        "provider_meta": json.dumps({"agent": agent_path}),
    }

    out_dir = None if out is None else Path(out)
    done = set() if out_dir is None else existing_trials(out_dir, run_id)
    todo = [(i, t) for i in range(len(cases)) for t in range(trials) if (names[i], t) not in done]
    show = len(todo) >= PROGRESS_MIN_TRIALS if progress is None else progress
    records = execute_trials(
        lambda i, t: _trial_record(agent_fn, cases[i], names[i], t, base),
        todo,
        concurrency=concurrency,
        out=out_dir,
        run_id=run_id,
        desc=f"{suite}/{model}",
        progress=show,
        trial_key=lambda i, t: (names[i], t),
    )
    order = {name: i for i, name in enumerate(names)}
    if out_dir is None:
        return frame_from_records(sorted(records, key=lambda r: (order[r["task"]], r["trial"])))

    frame = load_trials(out_dir, run_id, names, trials)
    frame = frame.assign(_case=frame["task"].map(order)).sort_values(["_case", "trial"], kind="stable")
    return frame.drop(columns="_case").reset_index(drop=True)
