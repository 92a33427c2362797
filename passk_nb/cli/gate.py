"""``passk gate``: fail a CI build when pass^k is too low, or significantly worse than a baseline.

    passk gate runs --k 4 --min 0.8
    passk gate runs --k 4 --baseline runs-main --junit gate.xml

Exit status: 0 the gate holds, 1 it does not, 2 bad input (one line on stderr). A short
markdown summary goes to stdout, ready for ``$GITHUB_STEP_SUMMARY`` or a merge-request
comment; ``--junit FILE`` writes JUnit XML with one test case per (configuration, task).

The decision is :func:`passk_nb.gate` (``--interval``, ``--min`` and ``--baseline`` are its
``interval``, ``min`` and ``baseline``; its docstring says which bound each interval reads):
this command only loads the records, prints the result and writes JUnit XML.

In the JUnit XML a task's test case fails when its own pass^k is below ``--min``, or, with
``--baseline``, when it got significantly worse (Fisher's exact test per task, Benjamini–
Hochberg across tasks: :func:`passk_nb.flips`); the failure lists the task's failing trials
with their outcome and error. Every task must have at least k usable trials: a gate that
silently skipped a task would be no gate (exit 2 says which task is short).
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd

from passk_nb.cli.common import CliError, add_cluster, level, positive_int
from passk_nb.cli.terminal import escape_controls
from passk_nb.data.store import load
from passk_nb.stats.gate import GATE_INTERVALS, GateResult, gate
from passk_nb.stats.params import CI, N_BOOT, SEED
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
        choices=GATE_INTERVALS,
        default=GATE_INTERVALS[0],
        help="tasks: interval for new tasks like these (default); fixed: these tasks re-rolled",
    )
    p.add_argument("--ci", type=level, default=CI, help=f"interval level (default {CI})")
    p.add_argument("--n-boot", type=positive_int, default=N_BOOT, help=f"bootstrap draws (default {N_BOOT})")
    p.add_argument("--seed", type=int, default=SEED, help=f"bootstrap seed (default {SEED})")
    add_cluster(p)
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


def gate_lines(result: GateResult) -> list[str]:
    """The markdown summary of a :func:`passk_nb.gate` result: verdict, bounds, comparison.

    >>> import pandas as pd
    >>> from passk_nb.stats.gate import gate
    >>> df = pd.DataFrame({"task": [f"t{i}" for i in range(20) for _ in range(4)], "model": "m",
    ...                    "passed": True, "outcome": "pass", "trial": list(range(4)) * 20})
    >>> lines = gate_lines(gate(df, k=4, min=0.8))
    >>> print(lines[0], lines[-1], sep=chr(10))
    ## passk gate: PASS
    | m | 20/20 | 80/80 pass | 1.000 | 0.832 | pass |
    """
    k, ci = result.k, result.ci
    lines = [f"## passk gate: {'PASS' if result.holds else 'FAIL'}"]
    if result.minimum is not None:
        lines += [
            "",
            f"pass^{k} lower bound ≥ {result.minimum:g}, {ci:.0%} interval "
            + ("for new tasks like these" if result.interval == "tasks" else "for these tasks, re-rolled")
            + ":",
            "",
            f"| configuration | tasks | trials | pass^{k} | lower bound | gate |",
            "|---|---|---|---|---|---|",
        ]
        for row, label in zip(
            result.bounds.to_dict("records"), _labels(result.bounds, result.by), strict=True
        ):
            lines.append(
                f"| {label} | {int(row['n_tasks_covered'])}/{int(row['n_tasks'])} | {int(row['successes'])}/"
                f"{int(row['trials'])} pass | {row['pass^k']:.3f} | {max(row['lo'], 0.0):.3f} | "
                f"{'pass' if row['holds'] else '**FAIL**'} |"
            )
    row = result.comparison
    if row is not None:
        lines += [
            "",
            f"pass^{k} against the baseline, paired by task ({int(row['n_tasks'])} tasks, {ci:.0%} interval "
            "over tasks): fails when the whole interval of the difference is below 0.",
            "",
            "| baseline | current | difference | interval | gate |",
            "|---|---|---|---|---|",
            f"| {row['a']:.3f} | {row['b']:.3f} | {row['diff']:+.3f} | "
            f"[{row['lo']:+.3f}, {row['hi']:+.3f}] | {'pass' if row['holds'] else '**FAIL**'} |",
        ]
    if result.regressed is not None and len(result.regressed):
        lines.append(
            "\nTasks that got significantly worse (Fisher, BH): "
            + ", ".join(
                f"{r.task} {r.successes_a}/{r.trials_a} → {r.successes_b}/{r.trials_b}"
                for r in result.regressed.itertuples()
            )
        )
    if result.n_infra:
        lines.append(f"\n{result.n_infra} infrastructure errors excluded (not counted as failures).")
    return lines


def _labels(frame: pd.DataFrame, by: tuple[str, ...]) -> list[str]:
    return list(group_labels(frame, by)) if by else ["all trials"] * len(frame)


def junit_xml(result: GateResult) -> str:
    """JUnit XML of the gate: one test case per task, failures naming the failing trials.

    >>> import pandas as pd
    >>> from passk_nb.stats.gate import gate
    >>> df = pd.DataFrame({"task": [t for t in "abcde" for _ in range(4)], "model": "m",
    ...                    "passed": [True] * 19 + [False], "trial": list(range(4)) * 5})
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> print(junit_xml(gate(df, k=4, min=0.5)).splitlines()[-4].strip())
    <failure message="pass^4 0.000 from 3/4 passing trials: pass^4 below 0.5" ...>trial 3: ...</failure>
    """
    tasks = result.tasks

    def text(value: object) -> str:  # XML 1.0 admits no control character and no lone surrogate
        return escape_controls(str(value)).encode("utf-8", "backslashreplace").decode("utf-8")

    suite = ET.Element(
        "testsuite", name="passk gate", tests=str(len(tasks)), failures=str(int(tasks["failed"].sum()))
    )
    for case, group in zip(tasks.to_dict("records"), _labels(tasks, result.by), strict=True):
        name = text(f"{case['task']} (pass^{result.k})")
        element = ET.SubElement(suite, "testcase", classname=text(f"passk.{group}"), name=name)
        detail = text("\n".join(case["failing_trials"]) or "every trial passed")
        message = (
            f"pass^{result.k} {case['pass^k']:.3f} from {int(case['successes'])}/{int(case['trials'])} "
            "passing trials"
        )
        if case["failed"]:
            failure = ET.SubElement(
                element, "failure", message=text(f"{message}: {case['reason']}"), type="reliability"
            )
            failure.text = detail
        else:
            ET.SubElement(element, "system-out").text = f"{message}\n{detail}"
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
    if args.minimum is None and args.baseline is None:
        raise CliError("give --min THRESHOLD, --baseline DIR, or both")
    df = _load_filtered(args.path, args)
    baseline = _load_filtered(args.baseline, args) if args.baseline else None
    try:
        result = gate(
            df,
            k=args.k,
            min=args.minimum,
            baseline=baseline,
            interval=args.interval,
            ci=args.ci,
            n_boot=args.n_boot,
            seed=args.seed,
            cluster=args.cluster,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None
    print("\n".join(gate_lines(result)))
    if args.junit:
        args.junit.write_text(junit_xml(result), encoding="utf-8")
    return HOLDS if result.holds else FAILS
