"""``passk export``: stored runs in another tool's format.

passk export runs --to inspect --out logs      (inspect_ai eval logs: `INSPECT_LOG_DIR=logs inspect view`)
passk export runs --to otel --endpoint http://127.0.0.1:4318   (OTLP/HTTP to a collector)
passk export runs --to mlflow --k 4 --tracking-uri http://127.0.0.1:5000   (one MLflow run per configuration)

The records are loaded from the data folder (``--where`` keeps matching trials, as in
``passk report``) and handed to the library exporter (:mod:`passk_nb.exporters`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from passk_nb.cli.common import CliError, add_quiet, positive_int, status
from passk_nb.cli.report import apply_where, parse_where
from passk_nb.data.store import load
from passk_nb.stats.params import N_BOOT

#: What ``--to`` accepts.
TARGETS: tuple[str, ...] = ("inspect", "otel", "mlflow")

_EPILOG = """examples:
  passk export runs --to inspect --out logs                (one inspect_ai .eval log per configuration)
  passk export runs --to inspect --out logs --where model=llama3.1:8b
  passk export runs --to otel --endpoint http://127.0.0.1:4318  (spans + gen_ai.evaluation.result events)
  passk export runs --to mlflow --k 4 --tracking-uri sqlite:///mlflow.db  (pass@4 / pass^4, curve, report)
  then: INSPECT_LOG_DIR=logs inspect view
--where COLUMN=VALUE keeps the trials whose COLUMN is VALUE (repeatable, as in passk report)."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``export`` subcommand to ``subparsers`` and return its parser."""
    p = subparsers.add_parser(
        "export",
        help="write stored runs in another tool's format (inspect_ai logs, OpenTelemetry, MLflow)",
        description="Load the trial records under PATH and write them for another tool: --to inspect "
        "writes one inspect_ai eval log per configuration into --out; --to otel sends spans and "
        "gen_ai.evaluation.result events over OTLP/HTTP to --endpoint; --to mlflow logs one MLflow run "
        "per configuration (pass@k, pass^k and their intervals at --k, the curve and the HTML report).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", help="data folder (or one parquet file) written by `passk run` or `passk import`")
    p.add_argument("--to", dest="target", choices=TARGETS, required=True, help="the format to write")
    p.add_argument("--out", help="inspect: the folder to write the logs into")
    p.add_argument("--endpoint", help="otel: the collector's OTLP/HTTP address, e.g. http://127.0.0.1:4318")
    p.add_argument("--k", type=positive_int, help="mlflow: the k of pass@k / pass^k logged")
    p.add_argument("--tracking-uri", help="mlflow: where to log (default: MLflow's own, MLFLOW_TRACKING_URI)")
    p.add_argument("--experiment", default="passk-nb", help="mlflow: the experiment name (default: passk-nb)")
    p.add_argument(
        "--n-boot", type=positive_int, default=N_BOOT, help=f"mlflow: bootstrap draws (default {N_BOOT})"
    )
    p.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="COLUMN=VALUE",
        help="keep only trials whose COLUMN is VALUE (repeatable)",
    )
    add_quiet(p)
    p.set_defaults(func=_cmd_export)
    return p


def _cmd_export(args: argparse.Namespace) -> int:
    if not Path(args.path).exists():
        raise CliError(f"{args.path} does not exist; give the data folder `passk run --out` wrote")
    df = load(args.path)
    if df.empty:
        raise CliError(f"{args.path} holds no trial records")
    df = apply_where(df, parse_where(args.where, df))
    if args.target == "inspect":
        if not args.out:
            raise CliError("--to inspect writes log files: give the folder with --out (e.g. --out logs)")
        from passk_nb.exporters.inspect_ai import to_inspect

        files = to_inspect(df, args.out)
        for file in files:
            status(args, f"wrote {file}")
        if not args.quiet:
            print(
                f"{len(files)} inspect_ai logs ({len(df)} trials) in {args.out}; see them with: "
                f"INSPECT_LOG_DIR={args.out} inspect view"
            )
    elif args.target == "otel":
        if not args.endpoint:
            raise CliError(
                "--to otel sends to a collector: give its address with --endpoint (http://HOST:4318)"
            )
        if not args.endpoint.startswith(("http://", "https://")):
            raise CliError(
                f"--endpoint {args.endpoint}: give the collector's address as http://HOST:PORT "
                "(OTLP/HTTP, usually port 4318)"
            )
        from passk_nb.exporters.otel import to_otel

        n = to_otel(df, endpoint=args.endpoint)
        if not args.quiet:
            print(f"{n} trials sent to {args.endpoint} (spans and gen_ai.evaluation.result events)")
    elif args.target == "mlflow":
        if args.k is None:
            raise CliError("--to mlflow logs pass@k and pass^k at one k: give it with --k (e.g. --k 2)")
        from passk_nb.exporters.mlflow_runs import log_mlflow

        run_ids = log_mlflow(
            df, k=args.k, tracking_uri=args.tracking_uri, experiment=args.experiment, n_boot=args.n_boot
        )
        for run_id in run_ids:
            status(args, f"logged MLflow run {run_id}")
        if not args.quiet:
            print(f"{len(run_ids)} MLflow runs logged in experiment {args.experiment!r}")
    return 0
