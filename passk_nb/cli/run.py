"""``passk run``: run a suite against a backend, store the trials, print pass@k / pass^k."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from passk_nb.cli.common import (
    CliError,
    add_quiet,
    level,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    prompt_arg,
    show_progress,
)
from passk_nb.harness.pacing import RateLimit
from passk_nb.harness.providers import PROVIDERS
from passk_nb.harness.shards import parse_shard, select_shard
from passk_nb.harness.suites.registry import SUITES

if TYPE_CHECKING:
    from passk_nb.stats.design.allocation import Until

_EPILOG_RUN = """examples:
  passk run --provider scripted --trials 3 --k 2
  passk run --provider ollama --model llama3.1:8b --trials 4 --k 2
  passk run --provider openai --base-url http://127.0.0.1:8080 --model local --prompt strict
  passk run --provider openai --base-url http://vllm:8000 --model m --concurrency 256 --rate-limit 600rpm \
      --shard 1/4 --out /shared/runs     (machine 1 of 4; the others run --shard 2/4 ... 4/4)
  passk run --provider ollama --model llama3.1:8b --protocol native   # the API's own tool calling
  passk run --provider anthropic --model claude-haiku-4-5 --trials 8 --batch   # at the batch price
Records go to OUT/<run_id>/ as parquet; re-running the same spec resumes (only missing trials run)."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``run`` subcommand to ``subparsers`` and return its parser."""
    p = subparsers.add_parser(
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
    p.add_argument(
        "--suite",
        default="orders",
        help=f"task suite: {', '.join(SUITES)}, module:SUITE or path/to/suite.py:SUITE (default: orders)",
    )
    p.add_argument("--tasks", help="comma-separated task ids (default: all; see `passk tasks`)")
    p.add_argument("--trials", type=positive_int, default=3, help="trials per task, n (default: 3)")
    p.add_argument(
        "--k", type=positive_int, help="k for pass@k and pass^k, ≤ trials (default: 2, or 1 with --trials 1)"
    )
    p.add_argument(
        "--prompt",
        default="default",
        help="system prompt: one of the suite's prompt names (`passk tasks --suite SUITE` lists them) "
        "or a text file (default: default)",
    )
    p.add_argument("--prompt-name", help="label for a prompt read from a file (default: the file's stem)")
    p.add_argument(
        "--temperature", type=non_negative_float, help="sampling temperature, ≥ 0 (default: the backend's)"
    )
    p.add_argument("--seed", type=int, default=0, help="base seed; trial i sends seed+i (default: 0)")
    p.add_argument(
        "--concurrency",
        type=positive_int,
        help="trials in flight at once (default: 4; with --batch, every trial)",
    )
    p.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help="run the trials in N worker processes (this process stays the only writer of --out): a "
        "Python agent's past the GIL; an HTTP/1.1 backend's (openai, ollama, anthropic) on an event "
        "loop in each, when one core cannot keep up with --concurrency",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run a Python agent's trials as Ray tasks on the cluster at ADDRESS (e.g. 10.0.0.5:6379, or "
        "'local' to start one here); needs the ray extra",
    )
    p.add_argument(
        "--batch",
        action="store_true",
        help="anthropic, openai: send the model turns through the provider's batch API (half the price, "
        "answers within 24 h): each round of turns is one batch, polled every --batch-poll seconds; a "
        "killed run resumes from the batches it submitted, paying for none twice",
    )
    p.add_argument(
        "--batch-poll",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="with --batch: seconds between looks at a batch's status (default: 30)",
    )
    p.add_argument(
        "--adaptive",
        action="store_true",
        help="network backends: make --concurrency a ceiling and find what the server admits (start "
        "low, grow while replies are clean, halve on 429/503/529); the bar shows requests in flight",
    )
    p.add_argument(
        "--rate-limit",
        type=rate_limit_arg,
        metavar="RATE",
        help="pace model requests across all trials: 600rpm (requests/min), 90000tpm (tokens/min), or "
        "both: 600rpm,90000tpm (default: none; a 429 still pauses every trial)",
    )
    p.add_argument(
        "--shard",
        type=shard_arg,
        metavar="i/N",
        help="run only shard i of N of the tasks (1 ≤ i ≤ N; a stable hash of the task id), to split a run "
        "across N machines; the shards are one run: point them at one --out folder, or load their folders "
        "together",
    )
    p.add_argument("--out", default="runs", help="data folder for the records (default: runs)")
    p.add_argument("--max-turns", type=positive_int, default=10, help="model replies per trial (default: 10)")
    p.add_argument(
        "--max-format-errors",
        type=positive_int,
        default=2,
        help="protocol violations that end a trial as format_error (default: 2)",
    )
    p.add_argument(
        "--json-mode",
        action="store_true",
        help="ask the backend for JSON-constrained output (ollama, openai, llama-cpp; changes what is "
        "measured; recorded)",
    )
    p.add_argument(
        "--protocol",
        choices=("json", "native"),
        default="json",
        help="how the agent calls tools: json (the JSON action protocol, any backend) or native (the "
        "API's own tool calling: openai, anthropic, ollama, scripted); part of the run id (default: json)",
    )
    p.add_argument(
        "--faults",
        metavar="SPEC",
        help="inject tool faults, e.g. 'timeout:get_order,noop:refund_order:p=0.5': kinds timeout, error, "
        "partial, stale, noop, drift, latency; per tool or * (every tool), on the n-th call (n=) or "
        "with a probability (p=); part of the run id (default: none)",
    )
    p.add_argument(
        "--perturb",
        metavar="RULES",
        help="reword each trial's task prompt, keeping its meaning: reorder, synonyms, formal, informal, "
        "typo, distractor, several comma-separated (each trial draws one) or all; part of the run id",
    )
    backend = p.add_argument_group("backend options (network backends; given only when set)")
    backend.add_argument(
        "--json-schema",
        action="store_true",
        help="with --json-mode: constrain replies to the suite's action JSON Schema (ollama; openai in "
        "the llama.cpp server's form)",
    )
    backend.add_argument("--max-tokens", type=positive_int, help="longest reply in tokens (default: 1024)")
    backend.add_argument(
        "--timeout", type=positive_float, help="seconds to wait for one reply (default: 120)"
    )
    backend.add_argument(
        "--max-attempts", type=positive_int, help="requests per reply, retries included (default: 4)"
    )
    backend.add_argument(
        "--api-key-env", help="environment variable holding the API key (default: the backend's own)"
    )
    backend.add_argument(
        "--claude-path",
        metavar="PATH",
        help="the claude CLI to run (claude-code only; default: $PASSK_CLAUDE_EXECUTABLE, "
        "else claude on PATH)",
    )
    p.add_argument(
        "--trial-timeout",
        type=positive_float,
        default=None,
        help="seconds one trial may take; a trial still running then is an infra_error (default: none)",
    )
    p.add_argument(
        "--until",
        metavar="QUESTION",
        help="run in rounds until the question is answered, anytime-valid: 'precision=0.05' "
        "(pass^k to ± 0.05), 'gate=0.8' (is pass^k above 0.8), with k= and ci= (e.g. 'gate=0.8 k=2'), "
        "and final=N to spend at most N trials per task (the fixed design's n) with a fixed-n last look "
        "there; --trials is then the first round per task (default: none, a fixed run)",
    )
    p.add_argument(
        "--max-trials",
        type=positive_int,
        help="with --until: the most trials the run spends (default: no cap)",
    )
    p.add_argument(
        "--budget-usd",
        type=positive_float,
        help="start no trial the budget cannot pay (US dollars; the run's stored trials count as spent): "
        "trials in flight finish, and a later run with a higher budget resumes (needs --prices unless "
        "the backend reports its cost)",
    )
    p.add_argument(
        "--prices",
        type=Path,
        metavar="CSV",
        help="with --budget-usd: token prices, a CSV with columns model,price_in,price_out (USD per "
        "million tokens)",
    )
    p.add_argument("--ci", type=level, default=0.95, help="interval level (default: 0.95)")
    p.add_argument(
        "--n-boot", type=non_negative_int, default=2000, help="bootstrap draws for intervals, 0 for none"
    )
    p.add_argument(
        "--no-progress", action="store_true", help="hide the progress bar (hidden anyway when not a terminal)"
    )
    add_quiet(p)
    p.set_defaults(func=_cmd_run)
    return p


def rate_limit_arg(text: str) -> RateLimit:
    """``--rate-limit``: a :class:`~passk_nb.harness.pacing.RateLimit` (``600rpm``, ``90000tpm``, both)."""
    try:
        return RateLimit.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def shard_arg(text: str) -> tuple[int, int]:
    """``--shard i/N``: ``(i, N)`` with ``1 ≤ i ≤ N``.

    >>> shard_arg("2/4")
    (2, 4)
    """
    try:
        return parse_shard(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def check_json_flags(provider: str, json_mode: bool, json_schema: bool) -> None:
    """Refuse JSON flags that would measure nothing or be ignored."""
    if provider == "scripted" and (json_mode or json_schema):
        raise CliError(
            "the scripted provider replays fixed scripts, so --json-mode and --json-schema would change "
            "nothing it measures; drop them, or choose a model backend with --provider"
        )
    if json_schema and not json_mode:
        raise CliError("--json-schema constrains JSON mode: pass --json-mode too")


def resume_line(record: logging.LogRecord, total: int) -> str | None:
    """The runner's "trials already in" log record as the line a resumed run prints; else None.

    >>> record = logging.LogRecord("passk_nb", logging.INFO, "", 0,
    ...     "run %s: %d trials already in %s, %d to run", ("3f2a", 15, "runs", 10), None)
    >>> resume_line(record, total=25)
    'resuming run 3f2a: 15 of 25 trials already recorded, running 10'
    """
    args = record.args
    if not (isinstance(args, tuple) and len(args) == 4 and "trials already in" in str(record.msg)):
        return None
    run_id, _, _, todo = args
    if not todo:
        return f"run {run_id} is complete: all {total} trials already recorded, running none"
    return (
        f"resuming run {run_id}: {total - int(str(todo))} of {total} trials already recorded, running {todo}"
    )


def _until(args: argparse.Namespace) -> Until | None:
    """``--until`` as the object the runner asks between rounds (None without it; stats is imported
    here, so that `passk tasks` stays fast). The run's configuration checks the rest (``--trials``
    against the question's ``final=``, ``--max-trials`` without ``--until``)."""
    if args.until is None:
        return None
    from passk_nb.stats.design import Question, Until

    try:
        question = Question.parse(args.until)
    except ValueError as exc:
        raise CliError(f"--until: {exc}") from None
    if question.kind == "compare":
        raise CliError(
            "--until compare=... needs both arms run in rounds together; `passk run` runs one configuration: "
            "ask 'precision=' or 'gate=' of each, or compare them in Python with passk_nb.decide"
        )
    if question.k > args.trials:
        raise CliError(f"--until asks pass^{question.k}: the first round needs --trials ≥ {question.k}")
    return Until(question)


def _cmd_run(args: argparse.Namespace) -> int:
    from passk_nb.cli.report import read_prices
    from passk_nb.harness.config import RunConfig
    from passk_nb.harness.runner import run
    from passk_nb.harness.suites import get_suite
    from passk_nb.stats.report import report_frame  # here: keeps `passk tasks` fast
    from passk_nb.stats.result import result_by
    from passk_nb.view.tables import report_table

    k = args.k if args.k is not None else min(2, args.trials)
    if k > args.trials:
        raise CliError(
            f"--k {k} is larger than --trials {args.trials}: pass^k needs at least k trials "
            "per task; raise --trials or lower --k"
        )
    if args.provider == "callable":
        raise CliError(
            "the callable provider takes a Python function: use passk_nb.run(provider=fn) in Python"
        )
    check_json_flags(args.provider, args.json_mode, args.json_schema)
    until = _until(args)
    prompt, prompt_name = prompt_arg(args.prompt)
    backend_flags = {
        "base_url": args.base_url,
        "max_tokens": args.max_tokens,
        "timeout": args.timeout,
        "max_attempts": args.max_attempts,
        "api_key_env": args.api_key_env,
        "executable": args.claude_path,
    }
    options = {name: value for name, value in backend_flags.items() if value is not None}
    tasks = [t.strip() for t in args.tasks.split(",")] if args.tasks else None
    task_ids = tasks if tasks is not None else get_suite(args.suite).task_ids
    n_tasks = len(task_ids if args.shard is None else select_shard(task_ids, args.shard))
    handler = getattr(args, "log_handler", None)  # set by main(): says a resumed run's progress
    if handler is not None:
        handler.rewrite = lambda record: resume_line(record, n_tasks * args.trials)
    config = RunConfig(  # the checks of run(): its messages name the flags (cli_message)
        provider=args.provider,
        model=args.model,
        provider_options=options,
        suite=args.suite,
        tasks=tasks,
        trials=args.trials,
        prompt=prompt,
        prompt_name=args.prompt_name or prompt_name,
        temperature=args.temperature,
        backend_seed=args.seed,
        concurrency=args.concurrency,
        adaptive=args.adaptive,
        batch=args.batch,
        batch_poll=args.batch_poll,
        workers=args.workers,
        executor="ray" if args.ray else "threads",
        ray_address=None if args.ray in (None, "local") else args.ray,
        out=args.out,
        max_turns=args.max_turns,
        max_format_errors=args.max_format_errors,
        json_mode="schema" if args.json_schema else "json" if args.json_mode else "off",
        protocol=args.protocol,
        faults=args.faults,
        perturb=args.perturb,
        progress=show_progress(args),
        trial_timeout=args.trial_timeout,
        rate_limit=args.rate_limit,
        shard=args.shard,
        until=until,
        max_trials=args.max_trials,
        budget_usd=args.budget_usd,
        prices=None if args.prices is None else read_prices(args.prices, None),
    )
    df = run(config=config)
    if df.empty and args.shard is not None:
        print(f"shard {args.shard[0]}/{args.shard[1]} holds none of the {len(task_ids)} tasks: nothing ran")
        return 0
    if until is not None:
        print(f"{until.question}: {until.progress(df)}")
    if "stopped" in df.attrs:
        print(f"stopped: {df.attrs['stopped']}; run again with a higher --budget-usd to go on")
    if handler is not None:  # the table's notes say where an interval was declined
        handler.notes_explain_declined = True
    report = report_frame(df, k=k, ci=args.ci, n_boot=args.n_boot)
    by = list(result_by(report, "report_frame()"))
    print(report_table(report, by=by, ci=args.ci, notes=not args.quiet))
    if not args.quiet:
        run_ids = sorted(df["run_id"].unique())
        where = ", ".join(str(Path(args.out) / r) for r in run_ids)
        print(f"records: {where} ({len(df)} trials; `passk report {args.out}` reports them again)")
    sys.stdout.flush()
    return 0
