"""Rule-based text cases and two toy agents, for ``passk cases`` and ``passk_nb.run_cases``.

passk cases examples/cases_example.py --agent examples/cases_example.py:flaky_agent --trials 4 --k 2
"""

import random

ANSWERS = {"2+2": "the answer is 4", "cap": "Paris is the capital"}

CASES = [
    {"name": "math", "input": "2+2", "expected": "4"},
    {"name": "geo", "input": "cap", "check": lambda output: "Paris" in output},
    {"name": "unknown", "input": "???", "expected": "42"},
]


def agent(question: str) -> str:
    """Always the same answer: passes math and geo, fails unknown."""
    return ANSWERS.get(question, "i don't know")


_rng = random.Random(0)


def flaky_agent(question: str) -> str:
    """Like ``agent``, but forgets what it knows one time in three (seeded: same results every run)."""
    return ANSWERS.get(question, "i don't know") if _rng.random() > 1 / 3 else "hmm, not sure"
