"""The ``passk`` command: run the suite, report saved records.

    passk run --provider scripted --trials 3 --k 2
    passk report runs --k 2
    passk tasks

Every command has ``--help``. Bad input exits with status 2 and one line that
says what to fix, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from passk_nb.providers import PROVIDERS
from passk_nb.store import load
from passk_nb.suites import SUITES, get_suite

_EPILOG_RUN = """examples:
  passk run --provider scripted --trials 3 --k 2
  passk run --provider ollama --model llama3.1:8b --trials 4 --k 2
  passk run --provider openai --base-url http://127.0.0.1:8080 --model local --prompt strict
Records go to OUT/<run_id>/ as parquet; re-running the same spec resumes (only missing trials run)."""


class CliError(Exception):
    """A usage problem: printed as one line, exit status 2."""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be ≥ 1, got {value}")
    return value


def _prompt_arg(text: str) -> tuple[str, str | None]:
    """A prompt name, or a file holding the prompt text: (prompt, name)."""
    path = Path(text)
    if path.suffix or "/" in text or path.is_file():
        if not path.is_file():
            raise CliError(f"prompt file {text!r} does not exist; give a prompt name or an existing file")
        return path.read_text(encoding="utf-8"), path.stem
    return text, None


def summary_table(df: pd.DataFrame, k: int, n_boot: int = 2000) -> str:
    """The CLI's table: one line per provider/model/prompt with pass@k, pass^k and trial counts."""
    from passk_nb.stats import summarize

    if df.empty:
        raise CliError("no trial records to report")
    infra = df["outcome"] == "infra_error"
    if infra.all():
        raise CliError(
            f"all {len(df)} trials ended in infrastructure errors, so there is nothing to estimate "
            f"(first: {df.loc[infra, 'error'].iloc[0]}). Check the backend (is it running? --base-url? "
            "the API key?), then run the same command again: trials that ended in infra errors are "
            "run again"
        )
    if k > int(df.groupby(["run_id", "task"]).size().max()):
        raise CliError(f"--k {k} is larger than the number of trials per task; use --k ≤ trials or run more")
    table = summarize(df, k=k, by=("provider", "model", "prompt_name", "prompt_hash"), n_boot=n_boot)
    lines = []
    for row in table.to_dict("records"):
        passed = int(row["successes"])
        total = int(row["n_trials"]) + int(row["n_infra_excluded"])
        infra = f", {int(row['n_infra_excluded'])} infra errors excluded" if row["n_infra_excluded"] else ""
        if row["n_tasks_covered"] < row["n_tasks"]:
            infra += f"; k={k} covers {int(row['n_tasks_covered'])}/{int(row['n_tasks'])} tasks"
        se = row["se_fixed"]
        lines.append(
            {
                "provider/model": f"{row['provider']}/{row['model']}",
                "prompt": f"{row['prompt_name']} ({row['prompt_hash']})",
                f"pass@{k}": _with_ci(row, "pass@k"),
                f"pass^{k}": _with_ci(row, "pass^k"),
                "± fixed tasks": "n/a (n < 2k)" if pd.isna(se) else f"± {1.96 * se:.3f}",
                "trials": f"{passed}/{total} pass{infra}",
            }
        )
    frame = pd.DataFrame(lines)
    widths = [max(len(c), *(len(str(v)) for v in frame[c])) for c in frame.columns]
    rows = [list(frame.columns), *frame.astype(str).values.tolist()]
    out = [" | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    out.insert(1, "-+-".join("-" * w for w in widths))
    notes = [f"pass@{k} / pass^{k}: mean over tasks of unbiased per-task estimates."]
    if n_boot:
        notes.append(
            "[95% interval]: bootstrap over tasks, for new tasks like these (coarse with few tasks)."
        )
    notes.append(f"± fixed tasks: 95% half-width of pass^{k} for these same tasks re-run (needs n ≥ 2k).")
    return "\n".join(out + notes)


def _with_ci(row: dict, metric: str) -> str:
    value = row[metric]
    text = "n/a" if pd.isna(value) else f"{value:.3f}"
    lo, hi = row.get(f"{metric}_lo"), row.get(f"{metric}_hi")
    if lo is not None and not pd.isna(lo):
        text += f" [{lo:.3f}, {hi:.3f}]"
    return text


def _cmd_run(args: argparse.Namespace) -> int:
    from passk_nb.runner import run

    if args.k > args.trials:
        raise CliError(
            f"--k {args.k} is larger than --trials {args.trials}: pass^k needs at least k trials "
            "per task; raise --trials or lower --k"
        )
    prompt, prompt_name = _prompt_arg(args.prompt)
    backend_flags = {
        "base_url": args.base_url,
        "json_schema": args.json_schema or None,
        "max_tokens": args.max_tokens,
        "timeout": args.timeout,
        "max_attempts": args.max_attempts,
        "api_key_env": args.api_key_env,
    }
    options = {name: value for name, value in backend_flags.items() if value is not None}
    if args.provider == "callable":
        raise CliError(
            "the callable provider takes a Python function: use passk_nb.run(provider=fn) in Python"
        )
    df = run(
        provider=args.provider,
        model=args.model,
        suite=args.suite,
        tasks=args.tasks.split(",") if args.tasks else None,
        trials=args.trials,
        prompt=prompt,
        prompt_name=args.prompt_name or prompt_name,
        temperature=args.temperature,
        seed=args.seed,
        concurrency=args.concurrency,
        out=args.out,
        max_turns=args.max_turns,
        max_format_errors=args.max_format_errors,
        json_mode=args.json_mode,
        progress=not args.no_progress,
        trial_timeout=args.trial_timeout,
        **options,
    )
    print(summary_table(df, args.k, n_boot=args.n_boot))
    run_ids = sorted(df["run_id"].unique())
    print(
        f"records: {', '.join(str(Path(args.out) / r) for r in run_ids)} "
        f"({len(df)} trials; open with passk_nb.load({str(args.out)!r}))"
    )
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    df = load(args.path, strict=not args.skip_bad_files)
    if args.provider:
        df = df[df["provider"] == args.provider]
    if args.model:
        df = df[df["model"] == args.model]
    print(summary_table(df, args.k, n_boot=args.n_boot))
    print(f"{len(df)} trials from {args.path}")
    return 0


def _cmd_tasks(args: argparse.Namespace) -> int:
    suite = get_suite(args.suite)
    if args.prompt:
        print(
            suite.prompts[args.prompt]
            if args.prompt in suite.prompts
            else f"unknown prompt {args.prompt!r}; choose from {sorted(suite.prompts)}"
        )
        return 0 if args.prompt in suite.prompts else 2
    print(f"suite {suite.name!r}: {len(suite.tasks)} tasks; prompts: {', '.join(suite.prompts)}")
    for task in suite.tasks:
        print(f"  {task.id:<24} {task.tests}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="passk",
        description="Measure how reliably a tool-calling agent does its job: pass@k (can it ever?) and "
        "pass^k (does it every time?) on a state-verified task suite.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "run",
        help="run the suite against a backend and print pass@k / pass^k",
        description="Run every task --trials times, store one parquet row per trial, "
        "print pass@k and pass^k.",
        epilog=_EPILOG_RUN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--provider",
        default="scripted",
        help=f"backend: {', '.join(sorted(PROVIDERS))} (default: scripted, no model needed)",
    )
    p.add_argument("--model", help="model name as the backend knows it")
    p.add_argument("--base-url", help="backend URL, e.g. http://127.0.0.1:11434 (default: the backend's own)")
    p.add_argument("--suite", default="orders", help=f"task suite: {', '.join(SUITES)} (default: orders)")
    p.add_argument("--tasks", help="comma-separated task ids (default: all; see `passk tasks`)")
    p.add_argument("--trials", type=_positive_int, default=3, help="trials per task, n (default: 3)")
    p.add_argument(
        "--k", type=_positive_int, default=2, help="k for pass@k and pass^k, ≤ trials (default: 2)"
    )
    p.add_argument(
        "--prompt",
        default="default",
        help="system prompt: a name of the suite (default, strict) or a text file (default: default)",
    )
    p.add_argument("--prompt-name", help="label for a prompt read from a file (default: the file's stem)")
    p.add_argument("--temperature", type=float, help="sampling temperature (default: the backend's)")
    p.add_argument("--seed", type=int, default=0, help="base seed; trial i sends seed+i (default: 0)")
    p.add_argument(
        "--concurrency", type=_positive_int, default=4, help="trials in flight at once (default: 4)"
    )
    p.add_argument("--out", default="runs", help="data folder for the records (default: runs)")
    p.add_argument(
        "--max-turns", type=_positive_int, default=10, help="model replies per trial (default: 10)"
    )
    p.add_argument(
        "--max-format-errors",
        type=_positive_int,
        default=2,
        help="protocol violations that end a trial as format_error (default: 2)",
    )
    p.add_argument(
        "--json-mode",
        action="store_true",
        help="ask the backend for JSON-constrained output (changes what is measured; recorded)",
    )
    backend = p.add_argument_group("backend options (network backends; given only when set)")
    backend.add_argument(
        "--json-schema",
        action="store_true",
        help="with --json-mode: constrain replies to the action protocol's JSON Schema (ollama, openai)",
    )
    backend.add_argument("--max-tokens", type=_positive_int, help="longest reply in tokens (default: 1024)")
    backend.add_argument("--timeout", type=float, help="seconds to wait for one reply (default: 120)")
    backend.add_argument(
        "--max-attempts", type=_positive_int, help="requests per reply, retries included (default: 4)"
    )
    backend.add_argument(
        "--api-key-env", help="environment variable holding the API key (default: the backend's own)"
    )
    p.add_argument(
        "--trial-timeout",
        type=float,
        default=None,
        help="seconds one trial may take; a trial still running then is an infra_error (default: none)",
    )
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap draws for intervals, 0 for none")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser(
        "report",
        help="print pass@k / pass^k from saved records",
        description="Summarise every run stored under PATH (a folder or a parquet file).",
    )
    p.add_argument("path", help="data folder (or one parquet file) written by `passk run`")
    p.add_argument("--k", type=_positive_int, default=2, help="k for pass@k and pass^k (default: 2)")
    p.add_argument("--provider", help="only this provider")
    p.add_argument("--model", help="only this model")
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap draws for intervals, 0 for none")
    p.add_argument("--skip-bad-files", action="store_true", help="skip unreadable files with a warning")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("tasks", help="list the tasks of a suite, or print one of its prompts")
    p.add_argument("--suite", default="orders", help="task suite (default: orders)")
    p.add_argument("--prompt", help="print this system prompt (e.g. default, strict)")
    p.set_defaults(func=_cmd_tasks)

    from passk_nb.cli_cases import add_cases_parser  # here, not at the top: cli_cases imports cli

    add_cases_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``passk`` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (CliError, ValueError, TypeError, FileNotFoundError, OSError) as exc:
        print(f"passk: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "passk: interrupted; completed trials are saved, re-run the same command to resume",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
