"""The cost of tool-fault injection per tool call (issue 33: ≤ 5 % of the function-agent benchmark's turn).

Runs the orders suite's episodes in this process (``run_episode`` with the scripted agent: no
sleep, no I/O, so the harness's own cost is all there is) without faults and under several fault
plans, and reports the extra time per tool call of each plan. The function-agent benchmark
(``bench_runner.py --callable``) spends 20 ms per turn; the target is that a plan adds ≤ 5 % of
that per tool call (1 ms). The ratio to the bare scripted turn is reported too: what injection
costs when the agent itself costs nothing.

    python benchmarks/bench_faults.py [--episodes 2000]
"""

from __future__ import annotations

import argparse
import time

from passk_nb.harness.episode import run_episode
from passk_nb.harness.faults import parse_faults
from passk_nb.harness.providers.scripted import ScriptedProvider
from passk_nb.harness.suites import get_suite

SUITE = get_suite("orders")
#: The function-agent benchmark's time per turn (``bench_runner.py --callable``: 20 ms of sleep).
FUNCTION_AGENT_TURN_S = 0.020
PLANS = (
    "timeout:*:p=0.3",  # a draw per call, an error on some
    "noop:*",  # a copy of the state per call
    "stale:*",  # the call run twice, once on a copy of the initial state
    "partial:*,drift:*",  # lists cut and every key renamed
)


def timed(episodes: int, plan: str | None) -> tuple[float, int, int]:
    """Seconds, tool calls and turns of ``episodes`` episodes under ``plan`` (None: no faults)."""
    agent = ScriptedProvider(suite=SUITE)
    faults = None if plan is None else parse_faults(plan)
    prompt = SUITE.prompts["default"]
    calls = turns = 0
    start = time.perf_counter()
    for i in range(episodes):
        task = SUITE.tasks[i % len(SUITE.tasks)]
        result = run_episode(
            SUITE, task, agent, system_prompt=prompt, faults=faults, trial_key=f"{task.id}:{i}"
        )
        calls += result["n_tool_calls"]
        turns += result["n_turns"]
    return time.perf_counter() - start, calls, turns


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=2000, help="episodes per plan (default 2000)")
    args = parser.parse_args()
    timed(200, None)  # warm up
    best = {plan: min(timed(args.episodes, plan) for _ in range(3)) for plan in (None, *PLANS)}
    clean_s, clean_calls, clean_turns = best[None]
    per_turn = clean_s / clean_turns
    print(f"{args.episodes} episodes per plan, best of 3; no faults: {per_turn * 1e6:.1f} µs per turn")
    print(f"{'plan':<22} {'µs/call extra':>14} {'vs 20 ms turn':>14} {'vs bare turn':>13}")
    ok = True
    for plan in PLANS:
        seconds, calls, _ = best[plan]
        extra = (seconds - clean_s) / calls
        share = extra / FUNCTION_AGENT_TURN_S
        ok &= share <= 0.05
        print(f"{plan:<22} {extra * 1e6:>14.1f} {share:>13.3%} {extra / per_turn:>12.1%}")
    print("target ≤ 5 % of the function agent's turn:", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
