"""A budget that stops a run: ``run(budget_usd=, prices=)`` starts no trial the budget cannot pay.

:class:`Budget` is asked before each trial starts (:func:`~passk_nb.harness.batch.execute_trials`'s
``gate``) and told of each record as it is kept. A trial costs what :func:`passk_nb.data.prices.trial_cost`
says of its record (its reported tokens at its model's price, else the cost its backend reported);
the run's earlier trials, stored in its folder, count as spent, so the budget is the run's whole
spend and a later call with a higher one resumes where this one stopped. A trial starts only while

    spent + (trials in flight + 1) × expected cost of a trial ≤ budget_usd

where the expected cost is the mean of the trials priced so far; until one is priced, trials start
one at a time. Once a trial is refused the budget is spent: no later trial starts, those in flight
finish and are stored, and :attr:`Budget.stopped` says why. A trial whose cost cannot be known (the
backend reported no usage) stops the run too: the budget could not be kept; an infrastructure error
without usage (a request refused, a trial timed out) is not priced and stops nothing.

With ``run(until=)`` the budget is one more stopping rule (the rounds stop once it has stopped a
trial). The anytime-valid decisions of such a run hold at any stopping time, so at this one too:
the budget reads the spend so far, never whether a trial passed (a failing trial may cost more
turns, and that is allowed: validity does not need the stop to be blind to the data). The
fixed-n intervals of :func:`passk_nb.summarize` assume trials whose number was fixed in advance;
a run cut short by its budget has fewer trials of the tasks it reached last, not selected ones.

>>> import pandas as pd
>>> from passk_nb.data.prices import price_table
>>> budget = Budget(0.05, price_table({"m": (1000.0, 0.0)}))
>>> budget.decide()  # no trial priced yet: one starts
'start'
>>> budget.decide()  # ... and the next waits for its cost
'wait'
>>> budget.finished({"model": "m", "input_tokens": 20, "output_tokens": 0})  # $0.02
>>> [budget.decide(), budget.decide()]  # 0.02 + 2 × 0.02 would pass 0.05
['start', 'stop']
>>> print(budget.stopped)
budget_usd=0.05: spent 0.0200 USD, 1 trial in flight, the next expected to cost 0.0200 USD
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from passk_nb.data.prices import trial_cost
from passk_nb.data.store import append_line

#: The budget's journal in a run's folder (``_`` files are not records): one JSON line per call of
#: ``run`` that the budget stopped, saying why, what was spent and how many trials were not started.
BUDGET_FILE = "_budget.jsonl"


class Budget:
    """The spend of one run against ``limit`` USD at the prices of ``table`` (see the module)."""

    def __init__(self, limit: float, table: pd.DataFrame | None, *, spent: Iterable[float] = ()):
        self.limit, self.table = float(limit), table
        known = [float(cost) for cost in spent if not math.isnan(float(cost))]
        self.spent, self.priced = math.fsum(known), len(known)
        self.in_flight = 0
        self.stopped: str | None = None
        self.refused = 0  # trials not started
        self._lock = threading.Lock()
        if self.spent >= self.limit:
            self.stopped = f"budget_usd={self.limit:g}: the run has spent {self.spent:.4f} USD already"

    def decide(self) -> str:
        """``"start"`` (counted in flight), ``"wait"`` (a trial's cost is still unknown: ask again
        once one ends) or ``"stop"`` (the budget would be passed: no trial starts any more)."""
        with self._lock:
            if self.stopped is None and self.priced:
                expected = self.spent / self.priced
                if self.spent + (self.in_flight + 1) * expected > self.limit:
                    flight = f"{self.in_flight} trial{'s' * (self.in_flight != 1)} in flight"
                    self.stopped = (
                        f"budget_usd={self.limit:g}: spent {self.spent:.4f} USD, {flight}, the next "
                        f"expected to cost {expected:.4f} USD"
                    )
            if self.stopped is not None:
                self.refused += 1
                return "stop"
            if not self.priced and self.in_flight:
                return "wait"
            self.in_flight += 1
            return "start"

    def cancel(self) -> None:
        """A trial counted in flight did not run after all (another process had stored it)."""
        with self._lock:
            self.in_flight = max(0, self.in_flight - 1)

    def finished(self, record: Mapping[str, Any]) -> None:
        """A trial ended: its cost is spent; a cost that cannot be known stops the run."""
        cost = trial_cost(record, self.table)
        with self._lock:
            self.in_flight = max(0, self.in_flight - 1)
            if math.isnan(cost):
                if record.get("outcome") == "infra_error":
                    return
                self.stopped = self.stopped or (
                    f"budget_usd={self.limit:g}: trial {record.get('trial')} of task {record.get('task')!r} "
                    "has no known cost (the backend reported no token usage), so the budget cannot be kept"
                )
                return
            self.spent += cost
            self.priced += 1

    def note(self, run_dir: Path) -> None:
        """Why the run stopped, appended to its folder's :data:`BUDGET_FILE` (when it did)."""
        if self.stopped is None:
            return
        line = {
            "stopped": self.stopped,
            "budget_usd": self.limit,
            "spent_usd": round(self.spent, 6),
            "not_started": self.refused,
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        run_dir.mkdir(parents=True, exist_ok=True)
        append_line(run_dir / BUDGET_FILE, json.dumps(line).encode("utf-8"))
