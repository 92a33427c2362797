"""``passk probe``: is the backend deterministic? Same request, again and again.

    passk probe --provider openai --base-url http://127.0.0.1:8080 --repeats 20 --concurrency 1,8

Sends the first turn of each task and one fixed multi-turn prefix ``--repeats`` times at
temperature 0 with a fixed seed, one at a time and with several requests in flight, then
checks the seed at a temperature above 0 (see :mod:`passk_nb.harness.probe`). Prints, per
request and concurrency, the share of identical replies, the number of distinct replies,
where they first differ and latency percentiles, then one line per concurrency and the
seed verdict. Every reply is kept as parquet under ``OUT/_probes/<probe_id>/``.
"""

from __future__ import annotations

import argparse

from passk_nb.cli.common import CliError, non_negative_int, positive_int


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``probe`` subcommand to ``subparsers`` and return its parser."""
    p = subparsers.add_parser(
        "probe",
        help="measure whether a backend gives the same reply to the same request",
        description="Send identical requests (temperature 0, fixed seed) sequentially and concurrently, "
        "and report how often the replies agree, where they differ, whether the seed is honoured, "
        "and latency percentiles. Tells a flaky prompt from a nondeterministic server.",
    )
    p.add_argument("--provider", required=True, help="backend name, as for `passk run`")
    p.add_argument("--model", help="model name as the backend knows it")
    p.add_argument("--base-url", help="backend URL (default: the backend's own)")
    p.add_argument("--suite", default="orders", help="suite whose task prompts are sent (default: orders)")
    p.add_argument("--tasks", help="comma-separated task ids (default: all)")
    p.add_argument(
        "--repeats",
        type=positive_int,
        default=20,
        help="requests per request and level, 2 to 10,000 (default 20)",
    )
    p.add_argument(
        "--concurrency",
        type=_levels,
        default=(1, 8),
        help="comma-separated requests in flight (default: 1,8)",
    )
    p.add_argument("--temperature", type=float, default=0.0, help="temperature of the main probe (default 0)")
    p.add_argument("--seed", type=int, default=0, help="the fixed seed (default 0)")
    p.add_argument(
        "--seed-temperature", type=float, default=0.8, help="temperature of the seed check (default 0.8)"
    )
    p.add_argument(
        "--seed-repeats",
        type=non_negative_int,
        default=5,
        help="requests per seed-check phase, 0 to skip (default 5)",
    )
    p.add_argument(
        "--max-tokens", type=positive_int, help="longest reply in tokens (backend default if unset)"
    )
    p.add_argument("--timeout", type=float, help="seconds to wait for one reply")
    p.add_argument("--max-attempts", type=positive_int, help="tries per request, retries included")
    p.add_argument("--out", default="runs", help="data folder; replies go to OUT/_probes/ (default: runs)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=_cmd_probe)
    return p


def _levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected whole numbers separated by commas, got {text!r}"
        ) from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError(f"concurrency levels must be ≥ 1, got {text!r}")
    return levels


def _cmd_probe(args: argparse.Namespace) -> int:
    from passk_nb.harness.probe import probe

    options = {
        name: value
        for name, value in (
            ("base_url", args.base_url),
            ("max_tokens", args.max_tokens),
            ("timeout", args.timeout),
            ("max_attempts", args.max_attempts),
        )
        if value is not None
    }
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    if args.repeats < 2:
        raise CliError("--repeats must be at least 2 to compare replies")
    result = probe(
        args.provider,
        args.model,
        suite=args.suite,
        tasks=tasks,
        repeats=args.repeats,
        concurrency=args.concurrency,
        temperature=args.temperature,
        seed=args.seed,
        seed_temperature=args.seed_temperature,
        seed_repeats=args.seed_repeats,
        out=args.out,
        progress=not args.no_progress,
        **options,
    )
    errors = result.replies["error"].dropna()
    if len(errors) == len(result.replies):
        raise CliError(
            f"all {len(errors)} requests failed (first: {errors.iloc[0]}); is the backend running, "
            "and are --provider, --base-url and --model right?"
        )
    summary = result.summary
    columns = [
        "request",
        "phase",
        "concurrency",
        "n",
        "n_errors",
        "n_distinct",
        "share_identical",
        "first_divergence",
        "latency_p50",
        "latency_p90",
        "latency_p99",
    ]
    print(summary[columns].to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    main = summary[summary["phase"] == "temperature0"]
    for level, part in main.groupby("concurrency"):
        varied = int((~part["deterministic"]).sum())
        verdict = (
            "deterministic: every request got one reply"
            if not varied
            else f"NOT deterministic: {varied} of {len(part)} requests got different replies"
        )
        print(f"concurrency {level}: {verdict}")
    print(f"seed: {result.seed_verdict}")
    print(f"replies: {result.path}")
    return 0
