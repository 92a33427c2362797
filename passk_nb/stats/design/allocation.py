"""Allocation: which (configuration, task) cells get the next round's trials, and when to stop.

:func:`allocate` scores each cell by how far ``step`` more trials are expected to move the bounds
that decide the question (:func:`gains`) and spreads the round's trials by those scores
(:func:`spread`, :func:`round_trials`; never past ``final=N``); it returns nothing once every
question is decided. :class:`Until` is the object a runner's ``until=`` asks between rounds. The
allocation may use anything seen so far and the intervals stay valid:
``docs/methods/sequential.md``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from passk_nb.stats.design.decisions import (
    Status,
    _cells,
    _groups,
    _round_counts,
    _table,
    decide,
    status,
)
from passk_nb.stats.design.question import Question, as_question
from passk_nb.stats.design.sequence import Dual, _minimisers, _per_round, tilts
from passk_nb.stats.params import INFRA

#: The share of a cell's rise at its current minimiser counted as gain (:func:`_gains`).
_HELD = 0.2
#: Gains at or below this are no gain: the allocation then spreads evenly.
_FLAT = 1e-12


def gains(
    n: np.ndarray, c: np.ndarray, w: np.ndarray, question: Question | str, state: Status, step: int
) -> np.ndarray:
    """Per cell, the expected movement per trial of the bounds that decide ``question`` from
    ``step`` more trials of it (the allocator's score; see :func:`allocate`); +inf for cells with
    fewer than k trials. n, c as in :func:`status`. While no cell moves the bounds (they are still
    at their trivial ends), every cell gets the same small gain, so that the round is spread evenly.

    >>> n, c, w = np.array([20, 20, 20]), np.array([20, 10, 0]), np.full(3, 1 / 3)
    >>> g = gains(n, c, w, "precision=0.05", status(n, c, w, "precision=0.05"), 1)
    >>> int(g.argmax())  # the flaky task moves the interval most
    1
    """
    q = as_question(question)
    n2, c2, w = _per_round(n), _per_round(c), np.asarray(w, dtype=float)
    after = state.next_tilt if state.next_tilt is not None else tilts(n, c, w, q)[1]
    total = np.zeros(w.size)
    for sign in _sides(q, state):
        dual = state.dual_lo if sign > 0 else state.dual_hi
        total += _gains(n2, c2, sign * w, q.k, dual, step, after[0] if sign > 0 else after[1])
    if not np.any(total > _FLAT):
        # the bounds are still at their trivial ends (few trials: the best multipliers are ~0 and
        # no single cell moves them): every cell alike, spread evenly by :func:`spread`
        total = np.full(w.size, _FLAT * step)
    return np.where(n2.sum(axis=1) < q.k, np.inf, total / step)


def _gains(
    n: np.ndarray, c: np.ndarray, w: np.ndarray, k: int, dual: Dual, step: int, after: np.ndarray
) -> np.ndarray:
    """Expected rise of each cell's term of the dual bound after ``step`` more trials in a next
    round of tilt ``after``, at the same μ (a rise the bound gets at least, since any μ gives a
    valid bound), the outcomes drawn from the task's Jeffreys posterior predictive."""
    later_dual = Dual(np.hstack([dual.lams, after[:, None]]), dual.mu_tilt, dual.mu_prod, dual.p)
    zero = np.zeros((w.size, 1))

    def term(extra_n: float, extra_c: float, at: np.ndarray | None = None) -> np.ndarray:
        n_, c_ = np.hstack([n, zero + extra_n]), np.hstack([c, zero + extra_c])
        return later_dual.terms(w, k, n_, c_, _minimisers(later_dual, w, k, n_, c_) if at is None else at)

    total_n, total_c = n.sum(axis=1), c.sum(axis=1)
    p_now = _minimisers(later_dual, w, k, np.hstack([n, zero]), np.hstack([c, zero]))
    now = term(0.0, 0.0, p_now)
    later, held = np.zeros_like(now), np.zeros_like(now)
    for extra in range(step + 1):
        chance = sps.betabinom.pmf(extra, step, total_c + 0.5, total_n - total_c + 0.5)
        moved = term(step, extra)
        at_point = term(step, extra, p_now)
        later += chance * moved
        # an outcome the point cannot give (a failure of a task that sits at p = 1) refutes it
        # outright, an unbounded rise there: count what the bound does get, the term re-minimised
        held += chance * np.where(np.isfinite(at_point), at_point, moved)
    # a term whose minimum is tied between two far points (w p^k concave: the dual's gap) rises
    # little at fixed μ though the trials refute the point it sits at; a share of the rise at
    # that point keeps such cells in the allocation
    stuck = (w < 0) & (k > 1) & (later - now <= _FLAT)  # w p^k concave: the dual's gap
    return np.maximum(np.where(stuck, _HELD * (held - now), later - now), 0.0)


def allocate(
    df: pd.DataFrame | str | os.PathLike[str],
    question: Question | str,
    *,
    trials: int | None = None,
    step: int | None = None,
    infra: str = INFRA,
) -> pd.DataFrame:
    """Which (configuration, task) pairs get the next round's trials: where they move the open
    questions' bounds most, in expectation.

    df, question, infra: as in :func:`decide`.
    trials: the round's trials (default: one step for every task of an open question, as many as
    a round that ran them all, concentrated where they move the bounds most).
    step: the unit of allocation (default k trials); a pair may get several steps in a round.

    Each cell's gain is the expected rise of its term in the dual bound
    (:func:`~passk_nb.stats.design.sequence.bound`) after
    ``step`` more trials, drawn from its Jeffreys posterior predictive (the rise the bound gets at
    least; a cell whose term cannot rise at fixed μ because its minimum is tied between two far
    points, as the dual of an upper bound of p^k can be, counts a share of the rise at the point
    it sits at). Which bound: both for a precision (the width), the lower for a gate whose estimate is
    above the threshold and the upper otherwise, the one on the far side of 0 from the estimate
    for a comparison (both with a precision). While any cell has fewer than k trials the
    allocation only tops those up to k (a first round). A cell's j-th step is worth its first
    step's gain discounted as its n grows (:func:`spread`). With ``final=N`` in the question no pair
    goes past N trials and every pair below N keeps a little gain, so that the run reaches its last
    look (:func:`round_trials`), unless the trials that filling every pair to N would cost are
    expected to decide the question spent past N where they move the bounds: then that
    configuration's last look is given up and its run goes on as one without ``final=`` does,
    at the anytime level (:func:`dropped`). Returns
    the key columns, ``task``, ``trials``, ``gain`` (per trial) and ``reason``, best first; empty
    when every question is decided (the stopping rule: stop when it is empty, or the budget is
    spent).

    >>> import pandas as pd
    >>> table = pd.DataFrame({"task": ["sure", "flaky", "never"], "n": 20, "c": [20, 10, 0]})
    >>> allocate(table, "precision=0.05", trials=2, step=2)[["task", "trials"]].values.tolist()
    [['flaky', 2]]
    """
    q = as_question(question)
    step_ = q.k if step is None else step
    if isinstance(step_, bool) or not isinstance(step_, int | np.integer) or step_ < 1:
        raise ValueError(f"step must be a whole number of trials ≥ 1; got step={step!r}")
    if trials is not None and (
        isinstance(trials, bool) or not isinstance(trials, int | np.integer) or trials < 1
    ):
        raise ValueError(f"trials must be a whole number ≥ 1 (the round's trials); got trials={trials!r}")
    table = _table(df, infra)
    cells = _cells(table, q)
    columns = [*cells.keys, "task", "trials", "gain", "reason"]
    short = cells.group[cells.group["n"] < q.k]
    if len(short):  # a first round: k trials of every task before any bound is read
        top_up = (q.k - short["n"]).astype(int)
        return short.assign(trials=top_up, gain=np.inf, reason=f"fewer than k={q.k} trials")[
            columns
        ].reset_index(drop=True)
    chosen = []
    open_cells = 0
    for _, part in _groups(cells):
        (n, c), w = _round_counts(part), part["w"].to_numpy(dtype=float)
        state = status(n, c, w, q)
        if state.decided or state.final:
            continue
        open_cells += len(part)
        gain = gains(n, c, w, q, state, step_)
        give_up = q.final is not None and dropped(
            gain, part["n"].to_numpy(), len(part) * step_, q.final, shrink(q, state)
        )
        limit = math.inf if q.final is None or give_up else float(q.final)
        chosen.append(
            part[[*cells.keys, "task", "n"]].assign(gain=gain, cap=limit, reason=_REASONS[q.kind](state, q))
        )
    if not chosen:
        return pd.DataFrame(columns=columns)
    budget = open_cells * step_ if trials is None else trials
    pool = pd.concat(chosen, ignore_index=True)
    steps = max(1, budget // step_)
    caps = None if q.final is None else pool["cap"].to_numpy(dtype=float)  # per configuration
    trials_ = round_trials(pool["gain"].to_numpy(), pool["n"].to_numpy(), steps, step_, caps)
    pool = pool.assign(trials=trials_)[trials_ > 0]
    pool = pool.sort_values("gain", ascending=False, kind="stable")
    return pool[columns].reset_index(drop=True)


def spread(
    gain: np.ndarray, n: np.ndarray, steps: int, step: int, limit: np.ndarray | None = None
) -> np.ndarray:
    """How many steps of ``step`` trials each cell gets out of ``steps``: the largest marginal
    gains, a cell's j-th step worth its first step's gain × (n / (n + (j − 1)·step))^1.5 (an
    interval's end moves like n^−½ to n^−1, so its rate of change falls like n^−1.5 to n^−2).
    Cells with no gain get nothing; a cell short of k trials (infinite gain) gets one step, first;
    no cell gets more than its ``limit`` of steps (default: no limit).

    >>> spread(np.array([0.0, 1.0, 0.5]), np.array([10, 10, 10]), 4, 2).tolist()
    [0, 3, 1]
    >>> spread(np.array([np.inf, 1.0, 0.5]), np.array([0, 10, 10]), 4, 2).tolist()
    [1, 3, 0]
    """
    gain, n = np.asarray(gain, dtype=float), np.maximum(np.asarray(n, dtype=float), 1.0)
    j = np.arange(steps)[None, :]
    short = np.isinf(gain)[:, None]
    finite = np.where(np.isinf(gain), 0.0, gain)[:, None]
    marginal = np.where(
        short, np.where(j == 0, np.inf, -np.inf), finite * (n[:, None] / (n[:, None] + j * step)) ** 1.5
    )
    if limit is not None:
        marginal = np.where(j < np.asarray(limit)[:, None], marginal, -np.inf)
    flat = np.where(np.isfinite(marginal) & (marginal <= 0), -np.inf, marginal).ravel()
    # the `steps` largest, ties in cell order: only the values at or above the steps-th largest
    # are sorted (a round of one step per cell would otherwise sort cells² values)
    top = (
        np.flatnonzero(flat >= np.partition(flat, flat.size - steps)[flat.size - steps])
        if steps < flat.size
        else np.arange(flat.size)
    )
    order = top[np.argsort(-flat[top], kind="stable")][:steps]
    order = order[flat[order] > -np.inf]
    return np.bincount(order // steps, minlength=gain.size)


def round_trials(
    gain: np.ndarray,
    n: np.ndarray,
    steps: int,
    step: int,
    final: int | np.ndarray | None = None,
    needed: float | None = None,
) -> np.ndarray:
    """Trials per cell in a round of ``steps`` steps of ``step`` trials (:func:`spread` by
    ``gain``). With ``final`` (a question's final=N) no cell goes past N trials, and every cell
    below N keeps a little gain, so that a run whose bounds stop moving still reaches its final
    look; with ``needed`` too (how much of their distance the deciding bounds must still close,
    :func:`shrink`) the run gives that look up when the trials that would fill every cell to N,
    spent instead past N where they move the bounds most, are expected to decide the question
    (:func:`dropped`). ``final`` per
    cell (inf: no cap) is taken as it is (:func:`allocate` decides per configuration).

    >>> round_trials(np.array([0.0, 1.0, 0.5]), np.array([10, 10, 10]), 4, 2).tolist()
    [0, 6, 2]
    >>> round_trials(np.array([0.0, 1.0, 0.5]), np.array([10, 10, 11]), 4, 2, final=12).tolist()
    [2, 2, 1]
    >>> round_trials(np.array([0.0, 0.1, 0.0]), np.array([2, 12, 2]), 4, 2, final=12, needed=0.2).tolist()
    [0, 8, 0]
    """
    gain, n = np.asarray(gain, dtype=float), np.asarray(n, dtype=float)
    if final is None or (
        np.ndim(final) == 0 and needed is not None and dropped(gain, n, steps * step, int(final), needed)
    ):
        return spread(gain, n, steps, step) * step
    left = np.maximum(np.asarray(final, dtype=float) - n, 0.0)
    gain = np.where(left > 0, np.maximum(gain, _FLAT), 0.0)
    chosen = spread(gain, n, steps, step, limit=np.ceil(left / step)) * step
    return np.minimum(chosen, left).astype(int)


def dropped(gain: np.ndarray, n: np.ndarray, trials: int, final: int, needed: float) -> bool:
    """Whether a run asked with ``final=N`` gives up its final look before a round of ``trials``:
    once it has (a cell is past N), or now, when filling every cell up to N costs F trials, more
    than the round, the cells whose trials move the bounds most are at N (a run without the cap
    would spend its next trials there), and F trials spent on them are expected to settle the
    question: their bounds' distance to the estimate, shrinking like √(S/(S + F)) with the S
    trials they have, shrinks by the share still ``needed`` (:func:`shrink`). Filling would
    then buy the last look at a price the run without the cap does not pay (two flaky tasks among
    eight certain ones, below a gate: with the cap the run cost 0.60× the fixed design and decided
    83 % of the time, without it 0.36× and always). Valid whatever the rule: the anytime looks
    hold at their level at every look, and a look given up cannot miss.

    >>> dropped(np.array([0.0, 0.1]), np.array([2, 12]), 4, final=12, needed=0.2)  # 10 to fill
    True
    >>> dropped(np.array([0.0, 0.1]), np.array([2, 12]), 4, final=12, needed=0.8)  # out of reach
    False
    """
    gain, n = np.asarray(gain, dtype=float), np.asarray(n, dtype=float)
    if np.any(n > final):
        return True
    fill = float(np.sum(final - n))
    at_cap = (n >= final) & (gain > _FLAT) & np.isfinite(gain)
    if fill <= trials or not np.any(at_cap) or np.max(gain[~at_cap], initial=0.0) >= np.max(gain[at_cap]):
        return False
    spent = float(np.sum(n[at_cap]))
    return bool(1 - math.sqrt(spent / (spent + fill)) >= needed)


def shrink(q: Question, state: Status) -> float:
    """The share by which the distance of the bounds that decide ``q`` from the estimate must
    still shrink for the question to be settled: a gate's bound to the threshold, a precision's
    width to twice the precision, a comparison's bound to 0 (with a precision, the nearer of that
    and the width to reach); 1 (all of it) where that is not known.

    >>> s = status(np.array([20, 20]), np.array([20, 10]), np.array([0.5, 0.5]), "gate=0.9")
    >>> round(shrink(Question.parse("gate=0.9"), s), 3) == round((s.hi - 0.9) / (s.hi - s.estimate), 3)
    True
    """
    est = state.estimate

    def share(need: float, reach: float) -> float:
        return 1.0 if not reach > 0 else float(np.clip(need / reach, 0.0, 1.0))

    width = share(state.hi - state.lo - 2 * (q.precision or 0.0), state.hi - state.lo)
    if math.isnan(est):
        return 1.0
    if q.kind == "precision":
        return width
    if q.kind == "gate":
        assert q.gate is not None
        if est >= q.gate:
            return share(q.gate - state.lo, est - state.lo)
        return share(state.hi - q.gate, state.hi - est)
    zero = share(-state.lo, est - state.lo) if est > 0 else share(state.hi, state.hi - est)
    return zero if q.precision is None else min(zero, width)


def _sides(q: Question, state: Status) -> tuple[float, ...]:
    """Signs of the weights whose bound the next trials should move: +1 the lower, −1 the upper."""
    est = state.estimate if not math.isnan(state.estimate) else (state.lo + state.hi) / 2
    if q.kind == "gate":
        assert q.gate is not None
        return (1.0,) if est >= q.gate else (-1.0,)
    if q.kind == "compare" and q.precision is None:
        return (1.0,) if est > 0 else (-1.0,)
    return (1.0, -1.0)


_REASONS = {
    "precision": lambda s, q: f"narrow ± {(s.hi - s.lo) / 2:.3f} toward ± {q.precision:g}",
    "gate": lambda s, q: f"settle {s.lo:.3f} – {s.hi:.3f} against {q.gate:g}",
    "compare": lambda s, q: f"settle b − a in {s.lo:+.3f} – {s.hi:+.3f} against 0",
}


@dataclass(frozen=True)
class Until:
    """What a runner asks between rounds: the next round's allocation, or None to stop.

    The object a runner's ``until=`` takes (it satisfies the harness's ``StoppingRule`` protocol
    structurally; harness and stats never import each other): after every completed round the
    runner passes the records so far, runs the allocation it gets back, and stops on None, when
    the question is decided or, with ``final=N``, every task has N trials (the last look, decided
    or not). Before the first round it calls :meth:`check` with the first round's trials per task.
    The budget is the runner's (``run(max_trials=)``), kept there alone.

    question: a :class:`Question` or its string.
    step, trials: as in :func:`allocate` (the unit and the size of a round).

    >>> import pandas as pd
    >>> until = Until("gate=0.5")
    >>> table = pd.DataFrame({"task": ["a", "b"], "n": 30, "c": 30})
    >>> until.next_round(table) is None, until.progress(table)
    (True, 'passes: pass^1 ≥ 0.893 ≥ 0.5 after 60 trials')
    >>> until.next_round(table.assign(n=1, c=1))[["task", "trials"]].values.tolist()
    [['a', 1], ['b', 1]]
    """

    question: Question | str
    step: int | None = None
    trials: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "question", as_question(self.question))

    def check(self, trials: int) -> None:
        """Refuse a first round of ``trials`` per task past the question's ``final`` (its last look
        needs every task at exactly N trials; a first round short of k is topped up by
        :func:`allocate`).

        >>> Until("gate=0.8 k=2 final=8").check(10)
        Traceback (most recent call last):
        ...
        ValueError: a first round of 10 trials per task passes final=8: give trials ≤ 8 or a larger final=
        """
        q = as_question(self.question)
        if q.final is not None and trials > q.final:
            raise ValueError(
                f"a first round of {trials} trials per task passes final={q.final}: give trials ≤ "
                f"{q.final} or a larger final="
            )

    def next_round(self, records: pd.DataFrame | str | os.PathLike[str]) -> pd.DataFrame | None:
        """The next round's cells and trials (as :func:`allocate`), or None: decided or (with
        ``final=N``) every task at N trials."""
        table = _table(records, INFRA)
        allocation = allocate(table, self.question, trials=self.trials, step=self.step)
        return None if allocation.empty else allocation.reset_index(drop=True)

    def progress(self, records: pd.DataFrame | str | os.PathLike[str]) -> str:
        """One line for a progress display: where the question stands and the trials spent."""
        table = _table(records, INFRA)
        spent = int(table["n"].sum())
        if (table["n"] < as_question(self.question).k).any():
            return f"first round: {spent} trials"
        rows = decide(table, self.question)
        return "; ".join(rows["verdict"]) + f" after {spent} trials"
