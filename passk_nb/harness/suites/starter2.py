"""``starter2``: the ``starter`` suite's ten tasks under one new rule, a single action ends the trial.

The pilots and the pre-registered grid of ``starter`` (``scripts/make_example_data.py``,
``data/smollm2-starter``) showed SmolLM2-135M either answering at once without acting, or making
the right call and then repeating it until it ran out of turns: 0 of 400 trials passed, though in
97 of them the final state was right. ``starter2`` is a new design, not a re-scoring of those
records: each of the eight action tasks sets ``ends_after`` (the tool of its one action), so the
trial ends as soon as a call of that tool succeeds, no answer asked for, and the task's check
judges the state as in every suite. One shot: a successful call with the wrong order or amount
ends the trial too, and fails it (``wrong_state``); a call the shop refuses (an error) does not
end it. The two refusals still end only with an answer, which must come after a lookup of the
order and must not claim the refused action. The tools, the seeded shop, the requests and the
checks are those of ``starter``; the known-good scripts of the action tasks end with their action.

The prompt experiment's variant, chosen before the first pilot of this suite, is ``act-first``:
the default plus one line (:data:`ACT_FIRST_LINE`) aimed at the other failure, answering without
a tool call.

>>> from passk_nb.harness.suites import get_suite
>>> suite = get_suite("starter2")
>>> len(suite.tasks), list(suite.prompts), sum(t.ends_after is not None for t in suite.tasks)
(10, ['default', 'act-first'], 8)
"""

from __future__ import annotations

from dataclasses import replace

from passk_nb.harness.suites import starter
from passk_nb.harness.suites.base import Task
from passk_nb.harness.suites.build import make_suite
from passk_nb.harness.suites.orders import CLAIMS

#: The one variant of the pre-registered prompt experiment on this suite.
ACT_FIRST_LINE = "4. Your first reply is always a tool call, never an answer."


def _ends_on_its_action(task: Task) -> Task:
    """A ``starter`` action task that ends when its one action succeeds; a refusal as it is."""
    if task.refusal is not None:
        return task
    action = task.script[-2]["tool"]  # starter's scripts: [lookup,] action, answer
    return replace(task, script=task.script[:-1], ends_after=action)


TASKS = tuple(_ends_on_its_action(t) for t in starter.TASKS)

SUITE = make_suite(
    "starter2",
    instructions=starter.INSTRUCTIONS,
    tools=starter.TOOLS,
    initial_state=starter.initial_state,
    tasks=TASKS,
    policy=starter.POLICY,
    variants={"act-first": ACT_FIRST_LINE},
    claims=CLAIMS,
    severity=starter.SEVERITY,
)
