"""``passk gate``: fail a CI build when pass^k is too low, or significantly worse than a baseline.

    passk gate runs --k 4 --min 0.8
    passk gate runs --k 4 --baseline runs-main --junit gate.xml

Exit status: 0 the gate holds, 1 it does not, 2 bad input (one line on stderr). A short
markdown summary goes to stdout, ready for ``$GITHUB_STEP_SUMMARY`` or a merge-request
comment; ``--junit FILE`` writes JUnit XML with one test case per (configuration, task).

Which interval (``--interval``):

- ``tasks`` (default): ``pass^k_lo`` of :func:`passk_nb.summarize`, the interval for "new
  tasks like these" (Korn–Graubard over tasks; declined below five tasks). It asks whether the
  agent is reliable on the kind of work the suite samples: with few tasks it is wide (ten tasks
  that all pass give a lower bound of 0.61), and a gate should rather ask for more tasks than
  pass a flaky agent.
- ``fixed``: pass^k − z·``pass^k_se_fixed`` ("these tasks, re-rolled"): is the agent reliable
  on exactly these tasks? Never zero-width; needs n ≥ k trials per task.

``--baseline DIR0`` compares the run with a baseline, paired by task
(:func:`passk_nb.compare`, a paired interval over tasks of the per-task differences):
the gate fails when the whole interval of pass^k(current) − pass^k(baseline) is below 0.
Each side must hold one configuration (filter with ``--provider``, ``--model``,
``--config``). Given with ``--min``, both conditions must hold.

In the JUnit XML a task's test case fails when its own pass^k is below ``--min``, or, with
``--baseline``, when it got significantly worse (Fisher's exact test per task, Benjamini–
Hochberg across tasks: :func:`passk_nb.flips`); the failure lists the task's failing trials
with their outcome and error. Every task must have at least k usable trials: a gate that
silently skipped a task would be no gate (exit 2 says which task is short).
"""

from __future__ import annotations

import argparse
import math
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from passk_nb.cli.common import CliError, level, positive_int
from passk_nb.data.store import load
from passk_nb.stats.params import CI, N_BOOT, SEED, default_by
from passk_nb.view.labels import group_labels

#: Exit statuses.
HOLDS, FAILS = 0, 1


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``gate`` subcommand to ``subparsers`` and return its parser."""
    p = subparsers.add_parser(
        "gate",
        help="exit 1 when pass^k is too low or worse than a baseline (for CI)",
        description="Gate a CI build on reliability: exit 0 when the lower bound of pass^k's interval "
        "is at least --min (and, with --baseline, pass^k is not significantly worse than the "
        "baseline's, paired by task), 1 otherwise, 2 on bad input. Prints a markdown summary.",
    )
    p.add_argument("path", help="data folder (or one parquet file) written by `passk run`")
    p.add_argument("--k", type=positive_int, required=True, help="k of pass^k")
    p.add_argument("--min", type=_unit, dest="minimum", help="threshold for the lower bound of pass^k (0..1)")
    p.add_argument("--baseline", help="data folder of the baseline run: fail on a paired regression")
    p.add_argument(
        "--interval",
        choices=("tasks", "fixed"),
        default="tasks",
        help="tasks: interval for new tasks like these (default); fixed: these tasks re-rolled, "
        "pass^k - z * fixed-task SE",
    )
    p.add_argument("--ci", type=level, default=CI, help=f"interval level (default {CI})")
    p.add_argument("--n-boot", type=positive_int, default=N_BOOT, help=f"bootstrap draws (default {N_BOOT})")
    p.add_argument("--seed", type=int, default=SEED, help=f"bootstrap seed (default {SEED})")
    p.add_argument("--provider", help="only this provider")
    p.add_argument("--model", help="only this model")
    p.add_argument("--config", help="only this configuration label (the records' config column)")
    p.add_argument("--junit", type=Path, help="also write JUnit XML here: one test case per task")
    p.set_defaults(func=_cmd_gate)
    return p


def _unit(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return value


@dataclass
class TaskCase:
    """One JUnit test case: a task of one configuration."""

    group: str
    task: str
    value: float
    failed: bool
    message: str
    failing_trials: list[str] = field(default_factory=list)


@dataclass
class GateResult:
    """What the gate decided, and the lines that say why."""

    holds: bool
    lines: list[str]
    cases: list[TaskCase]


def gate(
    df: pd.DataFrame,
    *,
    k: int,
    minimum: float | None = None,
    baseline: pd.DataFrame | None = None,
    interval: str = "tasks",
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> GateResult:
    """Decide the gate on trial records (see the module docstring for the rules).

    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": [f"t{i}" for i in range(20) for _ in range(4)], "model": "m",
    ...                    "passed": True, "outcome": "pass", "trial": list(range(4)) * 20})
    >>> result = gate(df, k=4, minimum=0.8)
    >>> result.holds, result.lines[0]
    (True, '## passk gate: PASS')
    """
    from scipy import stats as sps  # here: keeps `passk tasks` fast

    from passk_nb.stats.summary import summarize

    if minimum is None and baseline is None:
        raise CliError("give --min THRESHOLD, --baseline DIR, or both")
    if df.empty:
        raise CliError("no trial records to gate on: the folder is empty or the filters left nothing")
    if (df["outcome"] == "infra_error").all():
        raise CliError(f"all {len(df)} trials ended in infrastructure errors; fix the backend and run again")
    by = default_by(df, None)
    holds = True
    lines: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            summary = summarize(df, k=k, ci=ci, n_boot=n_boot, seed=seed)
            per_task = summarize(df, k=k, by=(*by, "task"), n_boot=0)
        except ValueError as exc:
            raise CliError(str(exc)) from None
    short = per_task[per_task["trials"] < k]
    if len(short):
        names = ", ".join(f"{t} ({n})" for t, n in list(zip(short["task"], short["trials"], strict=True))[:5])
        raise CliError(
            f"k={k} needs {k} usable trials of every task; these have fewer (infra errors excluded): "
            f"{names}. Run more trials (re-running the same `passk run` resumes) or lower --k"
        )
    labels = group_labels(summary, by) if by else pd.Series("all trials", index=summary.index)
    per_task_labels = group_labels(per_task, by) if by else pd.Series("all trials", index=per_task.index)
    failed_tasks: set[tuple[str, str]] = set()
    if minimum is not None:
        z = float(sps.norm.ppf((1 + ci) / 2))
        lines += [
            "",
            f"pass^{k} lower bound ≥ {minimum:g}, {ci:.0%} interval "
            + ("for new tasks like these" if interval == "tasks" else "for these tasks (fixed-task SE)")
            + ":",
            "",
            f"| configuration | tasks | trials | pass^{k} | lower bound | gate |",
            "|---|---|---|---|---|---|",
        ]
        for (_, row), label in zip(summary.iterrows(), labels, strict=True):
            value = float(row["pass^k"])
            lo = float(row["pass^k_lo"]) if interval == "tasks" else value - z * float(row["pass^k_se_fixed"])
            if math.isnan(lo):
                why = (
                    "too few tasks for an interval over tasks (declined below five); use --interval fixed "
                    "or run more tasks"
                    if interval == "tasks"
                    else f"a task has fewer than k={k} usable trials; run more"
                )
                raise CliError(f"no lower bound for {label}: {why}")
            ok = lo >= minimum - 1e-12
            holds &= ok
            trials = int(row["trials"]) + int(row["n_infra_excluded"])
            lines.append(
                f"| {label} | {int(row['n_tasks_covered'])}/{int(row['n_tasks'])} | {int(row['successes'])}/"
                f"{trials} pass | {value:.3f} | {max(lo, 0.0):.3f} | {'pass' if ok else '**FAIL**'} |"
            )
        below = per_task["pass^k"] < minimum
        failed_tasks |= {
            (lab, str(t)) for lab, t, b in zip(per_task_labels, per_task["task"], below, strict=True) if b
        }
    if baseline is not None:
        base_ok, base_lines, regressed = _against_baseline(df, baseline, k=k, ci=ci, n_boot=n_boot, seed=seed)
        holds &= base_ok
        lines += base_lines
        failed_tasks |= {(lab, t) for lab in set(per_task_labels) for t in regressed}
    infra = int((df["outcome"] == "infra_error").sum())
    if infra:
        lines.append(f"\n{infra} infrastructure errors excluded (not counted as failures).")
    lines.insert(0, f"## passk gate: {'PASS' if holds else 'FAIL'}")
    cases = _cases(df, per_task, per_task_labels, by, failed_tasks)
    return GateResult(holds, lines, cases)


def _against_baseline(
    df: pd.DataFrame, baseline: pd.DataFrame, *, k: int, ci: float, n_boot: int, seed: int
) -> tuple[bool, list[str], set[str]]:
    from passk_nb.stats.paired import compare, flips

    for name, frame in (("the run", df), ("the baseline", baseline)):
        configs = frame.groupby(list(default_by(frame, None)), dropna=False).ngroups if len(frame) else 0
        if configs > 1:
            raise CliError(
                f"{name} holds {configs} configurations; a baseline comparison needs one on each side: "
                "filter with --provider, --model or --config"
            )
    if baseline.empty:
        raise CliError("the baseline has no trial records (empty folder, or the filters left nothing)")
    arms = pd.concat([baseline.assign(arm="baseline"), df.assign(arm="current")], ignore_index=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = compare(
                arms, on="arm", a="baseline", b="current", k=k, by=(), ci=ci, n_boot=n_boot, seed=seed
            )
            per_task = flips(arms, on="arm", a="baseline", b="current", by=())
        except ValueError as exc:
            raise CliError(f"cannot compare with the baseline: {exc}") from None
    row = result[result["metric"] == "pass^k"].iloc[0]
    if math.isnan(row["hi"]):
        raise CliError("the comparison has a single paired task: no interval over tasks; run more tasks")
    ok = bool(row["hi"] >= 0)
    lines = [
        "",
        f"pass^{k} against the baseline, paired by task ({int(row['n_tasks'])} tasks, {ci:.0%} interval "
        "over tasks): fails when the whole interval of the difference is below 0.",
        "",
        "| baseline | current | difference | interval | gate |",
        "|---|---|---|---|---|",
        f"| {row['a']:.3f} | {row['b']:.3f} | {row['diff']:+.3f} | [{row['lo']:+.3f}, {row['hi']:+.3f}] | "
        f"{'pass' if ok else '**FAIL**'} |",
    ]
    regressed = per_task[per_task["flip"] & (per_task["delta"] < 0)]
    if len(regressed):
        lines.append(
            "\nTasks that got significantly worse (Fisher, BH): "
            + ", ".join(
                f"{r.task} {r.successes_a}/{r.trials_a} → {r.successes_b}/{r.trials_b}"
                for r in regressed.itertuples()
            )
        )
    return ok, lines, {str(t) for t in regressed["task"]}


def _cases(
    df: pd.DataFrame,
    per_task: pd.DataFrame,
    labels: pd.Series,
    by: tuple[str, ...],
    failed_tasks: set[tuple[str, str]],
) -> list[TaskCase]:
    cases = []
    keys = [*by, "task"]
    grouped = {_as_tuple(key): part for key, part in df.groupby(keys, dropna=False, sort=False)}
    for (_, row), label in zip(per_task.iterrows(), labels, strict=True):
        key = tuple(row[c] for c in keys)
        trials = grouped.get(key, df.iloc[:0])
        bad = trials[~trials["passed"].astype(bool) & (trials["outcome"] != "infra_error")]
        failing = [
            f"trial {int(t.trial)}"
            + (f" (run {t.run_id})" if "run_id" in bad.columns else "")
            + f": {t.outcome}"
            + (f" — {t.error}" if isinstance(getattr(t, "error", None), str) and t.error else "")
            for t in bad.sort_values("trial").itertuples()
        ]
        failed = (label, str(row["task"])) in failed_tasks
        message = (
            f"pass^k {row['pass^k']:.3f} from {int(row['successes'])}/{int(row['trials'])} passing trials"
        )
        cases.append(TaskCase(label, str(row["task"]), float(row["pass^k"]), failed, message, failing))
    return cases


def _as_tuple(key: object) -> tuple[object, ...]:
    return key if isinstance(key, tuple) else (key,)


def junit_xml(result: GateResult, k: int) -> str:
    """JUnit XML of the gate: one test case per task, failures naming the failing trials.

    >>> case = TaskCase("m", "a", 0.0, True, "pass^k 0.000 from 3/4 passing trials", ["trial 2: wrong_state"])
    >>> print(junit_xml(GateResult(False, [], [case]), 4).splitlines()[3].strip())
    <testcase classname="passk.m" name="a (pass^4)">
    """
    suite = ET.Element(
        "testsuite",
        name="passk gate",
        tests=str(len(result.cases)),
        failures=str(sum(c.failed for c in result.cases)),
    )
    for case in result.cases:
        element = ET.SubElement(
            suite, "testcase", classname=f"passk.{case.group}", name=f"{case.task} (pass^{k})"
        )
        detail = "\n".join(case.failing_trials) or "every trial passed"
        if case.failed:
            failure = ET.SubElement(element, "failure", message=case.message, type="reliability")
            failure.text = detail
        else:
            ET.SubElement(element, "system-out").text = f"{case.message}\n{detail}"
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _load_filtered(path: str, args: argparse.Namespace) -> pd.DataFrame:
    if not Path(path).exists():
        raise CliError(f"{path} does not exist; give the data folder `passk run --out` wrote")
    df = load(path)
    for column in ("provider", "model", "config"):
        value = getattr(args, column)
        if value is not None and column in df.columns:
            df = df[df[column] == value]
    return df


def _cmd_gate(args: argparse.Namespace) -> int:
    df = _load_filtered(args.path, args)
    baseline = _load_filtered(args.baseline, args) if args.baseline else None
    result = gate(
        df,
        k=args.k,
        minimum=args.minimum,
        baseline=baseline,
        interval=args.interval,
        ci=args.ci,
        n_boot=args.n_boot,
        seed=args.seed,
    )
    print("\n".join(result.lines))
    if args.junit:
        args.junit.write_text(junit_xml(result, args.k), encoding="utf-8")
    return HOLDS if result.holds else FAILS
