"""Run until decided: anytime-valid intervals for pass^k, a stopping rule and a trial allocator.

The fixed-n intervals of :func:`~passk_nb.stats.summary.summarize` and
:func:`~passk_nb.stats.paired.compare` hold for a sample size fixed in advance: stopping when one
of them first looks good enough inflates its error rate. The intervals here hold *at every look*,
however the trials were allocated and whenever the run stops, so a run may spend trials only
where the answer is still open and stop as soon as it is known.

What is bounded
---------------
A configuration's tasks t = 1..T have success probabilities p_t; the question is about these
tasks, re-rolled: θ = (1/T) Σ_t p_t^k (pass^k of the suite; its unbiased fixed-n estimate is the
mean of C(c_t, k)/C(n_t, k)). A comparison bounds θ_B − θ_A over the tasks both arms ran. "New
tasks like these" cannot be bought with trials (the spread between tasks does not shrink with
more trials of the same tasks), so a sequential question is always about these tasks.

The construction: one confidence region for all the tasks' p, from two kinds of e-process
-------------------------------------------------------------------------------------------
Per task, Robbins' conjugate mixture (Howard et al. 2021, "Time-uniform, nonparametric,
nonasymptotic confidence sequences", §3): for a task with c successes in n trials and a candidate p,

    M_t(p) = [¼·1{c = n} + ¼·1{c = 0} + ½·B(c + ½, n − c + ½) / B(½, ½)] / [p^c (1 − p)^(n − c)],

the likelihood of its trials under a mixture over the success rate (¼ always pass, ¼ never, ½
Jeffreys Beta(½, ½); the atoms make tasks that always pass or always fail cheap to pin down)
divided by their likelihood under p. Across tasks, one exponential tilt per side with
*predictable* tilts (Waudby-Smith & Ramdas 2023, "Estimating means of bounded random variables by
betting"; made exact for Bernoulli trials): each trial of task t in round r is tilted by a λ_t,r ≥ 0
fixed from the rounds before r only (:func:`tilts`), and

    E(p) = Π_t Π_r exp(λ_t,r s_t c_t,r) / (1 − p_t + p_t e^{λ_t,r s_t})^{n_t,r},

with s_t = ±1 the sign of the task's weight in the statistic (one process for the lower bound,
one with the opposite signs and its own tilts for the upper). The region at level 1 − α is

    R = {p ∈ [0, 1]^T : Σ_t log M_t(p_t) < log(1/α_M) and log E(p) < log(1/α_E) for both sides},

α_M = α/4 and α_E = 3α/8 (:func:`budgets`), and the interval of a statistic Σ_t w_t p_t^k (w_t
= 1/T for a suite, +1/T for arm b's tasks and −1/T for arm a's in a comparison) is its smallest and
largest value over R (:func:`bound`). The product term pins tasks one by one (each pays its own
mixture regret, about ½ log n for a flaky task and log 4 for one that always passed); the tilts
pool the trials of all tasks, each task's tilt in proportion to the statistic's slope in its p
(so that a shift of the tasks the statistic hardly depends on buys no slack), so the interval also
shrinks with the total number of trials as a fixed-n interval does, at the price of a log(1/α_E) ≈
4.0 (95 %) where a fixed-n interval pays z²/2 ≈ 1.9. A tilt chosen from past rounds replaces the
union over a grid of J fixed tilts (which paid log(J/α_E)); it is only as good as the rounds it is
read from, which costs the first rounds something.

Validity at every look, proved. Order all trials as they are decided on: before each trial the
task it runs, I_j, and its tilt are fixed by what was seen before (the allocator and the tilts
look at completed rounds only), and its outcome X_j is Bernoulli(p_{I_j}) independently of
everything before it (trials of one agent are independent given the task; infrastructure errors
are dropped, assumed unrelated to the outcome, as everywhere in passk-nb). At the true p, each of
Π_t M_t(p_t) and the two processes E(p) is then a nonnegative martingale starting at 1: a trial
of task t multiplies the first by P_mix(X_j | t's earlier trials) / P_{p_t}(X_j) and E by
e^{λ s_t X_j} / E[e^{λ s_t X_j}], both of conditional expectation 1 whatever I_j and λ were. By
Ville's inequality the first reaches 1/α_M with probability at most α_M and each E reaches 1/α_E
with probability at most α_E; by the union bound (α_M + 2α_E = α), with probability at least 1 −
α none ever does, i.e. the true p lies in R at every look at once. So the interval (both ends
together, and any statistic of p) covers at every look, whatever the allocation and whenever the
run stops. The processes depend on the trials only through each round's counts (n_t,r, c_t,r):
records carry their round, and a counts table without rounds is one round whose tilt comes from
the question alone (so that it may be read after any trial, in any order). Two rules keep the
argument true in a runner: look at completed rounds only (within a round failures may finish
earlier than passes, and a look at whatever finished first would select on the outcome), and
never drop or re-run a trial because of its outcome.

Computing the bounds. For any μ_E, μ_M ≥ 0, Σ_t min_p [w_t p^k + μ_E log E_t(p) + μ_M log M_t(p)]
− μ_E log(1/α_E) − μ_M log(1/α_M) is at most the minimum over R (weak duality: on R the added
terms are negative; E_t is task t's factor of E), so every value :func:`bound` tries is a valid
bound and it reports the largest. Each task's term is minimised on a logit grid and refined by
golden section (checked by simulation in ``tests/stats/test_sequential.py`` and
``benchmarks/sequential_validation.py``). Counted as one round, no interval is ever zero wide: at
the tasks' c/n every log M_t is negative and every log E_t ≤ 0 (Jensen), strictly inside both
budgets, so R holds a neighbourhood of c/n. With rounds of different tilts log E_t at c/n can be
positive, so an interval can be narrow, or even empty (lo > hi) on data unlikely under every p,
which is one of the events of probability below α.

The price of validity at every look is measured by ``benchmarks/sequential_validation.py``
against the fixed design :func:`passk_nb.plan` recommends (mean trials spent and error rates).

A last fixed-n look: ``final=N``
--------------------------------
Looked at after every round, the region pays log(1/α_E) where a fixed-n interval pays z²/2, so
a question that is decided only near its threshold costs about twice the fixed design's trials.
``final=N`` (N: the fixed design's trials per task, e.g. from :func:`passk_nb.plan`) bounds the
cost by the fixed design's, as a group-sequential design does: no task runs past N trials, the
looks before every task has N are the anytime-valid ones at level 1 − α(1 − s), and the look at N
trials of every task is the fixed-n interval (:func:`fixed_look`) at 1 − α·s (s =
:data:`_FINAL_SHARE`), intersected with the anytime-valid one. Valid by the union bound: the
anytime-valid region misses at some look with probability at most α(1 − s), whatever the
allocation; the fixed-n interval misses with probability α·s (to its own approximation, that of
:func:`summarize`'s *these tasks* interval) because at the last look every task has exactly N
trials, a number fixed in advance, and a task's trials are independent of the order in which the
allocator ran them. (A task run past N would break this, so :func:`status` refuses it.) The run
stops early where the answer comes sooner (gates and comparisons far from their threshold) and
otherwise ends at the fixed design's cost, decided or not.

What stays unbiased after an adaptive run
-----------------------------------------
The per-task estimate C(c, k)/C(n, k) is unbiased given n only when n did not depend on that
task's own outcomes. The allocator gives more trials to tasks that look flaky, so after an
adaptive run a task's n_t depends on its first trials and its estimate (and the suite's mean of
them, as :func:`summarize` reports it) can be biased; the estimate over each task's first-round
trials (a number fixed before any look) stays unbiased, and the anytime-valid interval of
:func:`decide` is the one to report. Records keep the round of each trial, so either can be
recomputed.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps
from scipy.special import betaln, expit

from passk_nb.stats._grouping import shared_columns
from passk_nb.stats.checks import COUNTED_OUTCOMES, check_k, records_by
from passk_nb.stats.counts import ROUND, Counts, as_counts, counts, is_counts_table
from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.intervals import fixed_interval, fixed_task_variance
from passk_nb.stats.params import CI, INFRA

#: The kinds of question :class:`Question` states.
KINDS: tuple[str, ...] = ("precision", "compare", "gate")
#: Keys a question string may carry.
_KEYS: tuple[str, ...] = ("precision", "compare", "gate", "k", "ci", "final")
#: With ``final=N``, the share of α the final fixed-n look spends (the looks before it spend the
#: rest, anytime-valid): most of it, so that the final look is nearly the fixed design's own.
_FINAL_SHARE = 0.8
#: Weights of the per-task mixture: always pass, never pass, Jeffreys Beta(½, ½).
_W_ALWAYS, _W_NEVER, _W_BETA = 0.25, 0.25, 0.5
#: The logit grid each cell's term is minimised on (the endpoints 0 and 1 included).
_GRID = np.concatenate([[0.0], expit(np.linspace(-18.0, 18.0, 399)), [1.0]])
#: The share of α spent on the product constraint (the rest goes to the two sides' tilts).
_ALPHA_PROD = 0.25
#: The range of the rounds' tilts λ, and the deviation τ a first round's tilt is set for (also
#: the least τ of a gate or a difference, so that an estimate at the threshold keeps a tilt).
_LAM_RANGE = (0.0, 8.0)
_TAU_FIRST, _TAU_MIN = 0.1, 0.02
#: The Jeffreys quantile where a side's tilt reads the statistic's slope (:func:`_tilt_for`).
_QUANTILE = 0.005
#: A width is settled by both bounds at once: each side aims this far inside the precision (a
#: gate's one bound aims at the whole distance); measured by ``benchmarks/sequential_validation.py``.
_AIM = 0.6
#: Shares of the tilt in the combined multiplier (μ_tilt, μ_prod) = s·(share, 1 − share) tried.
_SHARES = np.array([0.05, 0.15, 0.3, 0.5, 0.7, 0.85, 0.95, 0.99])
#: Zoom passes of the share search between the best ray's neighbours, and the rays in each.
_ZOOMS, _FAN = 2, 7
#: Every how many grid points the multipliers are searched on (the final minimisation uses all).
_COARSE = 2
#: The share of a cell's rise at its current minimiser counted as gain (:func:`_gains`).
_HELD = 0.2
#: Gains at or below this are no gain: the allocation then spreads evenly.
_FLAT = 1e-12
#: Range of the dual multiplier μ searched (log scale) and the golden-section steps.
_LOG_MU = (-12.0, 12.0)
_STEPS = 20
#: What names a round's count column (``n@0``, ``c@0``, …) in a counts table built from records.
_ROUND = ROUND
#: Columns of a counts table that are counts, not group keys.
_COUNT_COLUMNS = frozenset({"task", "n", "c", "n_infra", *(f"n_{o}" for o in COUNTED_OUTCOMES)})


@dataclass(frozen=True)
class Question:
    """The question a run answers, stated up front; parse one with :meth:`Question.parse`.

    - ``kind="precision"``: pass^k of each configuration to ± ``precision`` (these tasks);
    - ``kind="compare"``: is pass^k of arm ``b`` (a value of column ``on``) different from arm
      ``a``'s, paired by task; decided when the interval of b − a excludes 0, or, with
      ``precision``, when it is known to ± ``precision``;
    - ``kind="gate"``: is pass^k at least ``gate``: decided when the interval is above it (passes)
      or below it (fails).

    ``k`` is k of pass^k, ``ci`` the level that holds at every look. ``final=N`` caps every cell at
    N trials, the fixed design's n: the run then never spends more than the fixed design, and
    once every cell has N trials it takes a last look with the fixed-n interval (:func:`status`;
    α is split, :data:`_FINAL_SHARE` to that look, the rest to the anytime-valid looks before it).

    >>> Question.parse("gate=0.8 k=2")
    Question(kind='gate', k=2, ci=0.95, precision=None, gate=0.8, on=None, a=None, b=None, final=None)
    >>> q = Question.parse("compare=prompt_name:default,strict; precision=0.1")
    >>> q.kind, q.on, q.a, q.b, q.precision
    ('compare', 'prompt_name', 'default', 'strict', 0.1)
    """

    kind: str
    k: int = 1
    ci: float = CI
    precision: float | None = None
    gate: float | None = None
    on: str | None = None
    a: str | None = None
    b: str | None = None
    final: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"a question's kind is one of {list(KINDS)}; got kind={self.kind!r}")
        check_k(self.k)
        if not 0 < self.ci < 1:
            raise ValueError(f"ci must be between 0 and 1 (e.g. 0.95); got ci={self.ci}")
        if self.precision is not None and not 0 < self.precision <= 0.5:
            raise ValueError(
                f"precision is the half-width to reach, between 0 and 0.5 (e.g. 0.05); got {self.precision}"
            )
        if self.kind == "precision" and self.precision is None:
            raise ValueError("a precision question needs the half-width: precision=0.05")
        if self.kind == "gate" and (self.gate is None or not 0 < self.gate < 1):
            raise ValueError(f"a gate needs a threshold strictly between 0 and 1 (gate=0.8); got {self.gate}")
        if self.kind == "compare":
            if not (self.on and self.a and self.b):
                raise ValueError("a comparison names a column and two of its values: compare=prompt_name:a,b")
            if self.a == self.b:
                raise ValueError(f"a comparison needs two different arms; both are {self.a!r}")
        if self.final is not None and (
            isinstance(self.final, bool) or not isinstance(self.final, int) or self.final < self.k
        ):
            raise ValueError(
                f"final is the trials per task of the last, fixed-n look, at least k={self.k} "
                f"(e.g. final=16, the n plan() recommends); got final={self.final!r}"
            )

    @classmethod
    def parse(cls, text: str) -> Question:
        """A question from its string: ``key=value`` items separated by spaces or ``;``.

        Keys: ``precision=H`` (half-width), ``compare=COLUMN:A,B`` (B against A, paired by task;
        with ``precision=`` also decided when the difference is known to ± H), ``gate=M`` (is
        pass^k above M), ``k=K`` (default 1), ``ci=LEVEL`` (default 0.95), ``final=N`` (at most N
        trials per task, with a last fixed-n look there).

        >>> q = Question.parse("precision=0.05 k=4 ci=0.9")
        >>> q.kind, q.k, q.ci, q.precision, q.final
        ('precision', 4, 0.9, 0.05, None)
        >>> Question.parse("gate=0.8 k=2 final=16").final
        16
        >>> Question.parse("gate=high")
        Traceback (most recent call last):
        ...
        ValueError: gate=high: gate is a number (e.g. gate=0.8)
        """
        if not isinstance(text, str) or not text.strip():
            raise ValueError(
                "a question is a string such as 'precision=0.05', 'compare=prompt_name:a,b' or 'gate=0.8'"
            )
        items: dict[str, str] = {}
        for item in re.split(r"[\s;]+", text.strip()):
            key, sep, value = item.partition("=")
            if not sep or not value:
                raise ValueError(f"{item!r} in question {text!r} is not key=value (e.g. precision=0.05)")
            if key not in _KEYS:
                raise ValueError(f"unknown key {key!r} in question {text!r}; the keys are {list(_KEYS)}")
            if key in items:
                raise ValueError(f"question {text!r} gives {key}= twice")
            items[key] = value
        kinds = [kind for kind in ("compare", "gate") if kind in items]
        if len(kinds) > 1:
            raise ValueError(f"question {text!r} asks two things (compare= and gate=); ask one per run")
        if not kinds and "precision" not in items:
            raise ValueError(f"question {text!r} asks nothing: give precision=, compare= or gate=")
        fields: dict[str, object] = {"kind": kinds[0] if kinds else "precision"}
        for key in ("precision", "gate", "ci"):
            if key in items:
                fields[key] = _number(key, items[key], float)
        for key in ("k", "final"):
            if key in items:
                fields[key] = _number(key, items[key], int)
        if "compare" in items:
            column, sep, arms = items["compare"].partition(":")
            values = arms.split(",")
            if not sep or not column or len(values) != 2 or not all(values):
                raise ValueError(
                    f"compare={items['compare']}: name a column and two of its values, "
                    "compare=COLUMN:A,B (e.g. compare=prompt_name:default,strict)"
                )
            fields.update(on=column, a=values[0], b=values[1])
        return cls(**fields)  # type: ignore[arg-type]

    def __str__(self) -> str:
        if self.kind == "precision":
            text = f"pass^{self.k} to ± {self.precision:g}"
        elif self.kind == "gate":
            text = f"pass^{self.k} ≥ {self.gate:g}"
        else:
            text = f"pass^{self.k} of {self.on}={self.b} against {self.a}"
        if self.kind == "compare" and self.precision is not None:
            text += f" (or known to ± {self.precision:g})"
        if self.final is None:
            return f"{text}, {self.ci:.0%} at every look"
        return f"{text}, {self.ci:.0%}: at most {self.final} trials per task, a fixed-n look there"

    def levels(self) -> tuple[float, float | None]:
        """The levels of the anytime-valid looks and of the final fixed-n look (None without
        ``final``): α split, :data:`_FINAL_SHARE` to the final look; by the union bound both hold
        together at ``ci``.

        >>> [round(x, 3) for x in Question.parse("gate=0.8 final=8").levels()]
        [0.99, 0.96]
        """
        if self.final is None:
            return self.ci, None
        alpha = 1 - self.ci
        return 1 - alpha * (1 - _FINAL_SHARE), 1 - alpha * _FINAL_SHARE


def _number(key: str, value: str, kind: type) -> float | int:
    try:
        return kind(value)
    except ValueError:
        raise ValueError(
            f"{key}={value}: {key} is {'a whole number' if kind is int else 'a number'} "
            f"(e.g. {key}={ {'k': 2, 'ci': 0.95, 'gate': 0.8, 'final': 16}.get(key, 0.05) })"
        ) from None


def as_question(question: Question | str) -> Question:
    """``question`` as a :class:`Question` (a string is parsed)."""
    return question if isinstance(question, Question) else Question.parse(question)


def log_mixture(n: np.ndarray, c: np.ndarray) -> np.ndarray:
    """log of the mixture likelihood of each task's trial sequence (the numerator of M_t).

    >>> log_mixture(np.array([0, 2]), np.array([0, 2])).round(4).tolist()  # n = 0: likelihood 1
    [0.0, -0.8267]
    >>> bool(np.isfinite(log_mixture(np.array([5000]), np.array([2500]))[0]))  # no underflow
    True
    """
    n, c = np.asarray(n, dtype=float), np.asarray(c, dtype=float)
    log_beta = math.log(_W_BETA) + betaln(c + 0.5, n - c + 0.5) - betaln(0.5, 0.5)
    log_always = np.where(c == n, math.log(_W_ALWAYS), -np.inf)
    log_never = np.where(c == 0, math.log(_W_NEVER), -np.inf)
    return np.logaddexp(np.logaddexp(log_always, log_never), log_beta)  # in logs: no underflow at large n


def _log_m(p: np.ndarray, n: np.ndarray, c: np.ndarray, mix: np.ndarray) -> np.ndarray:
    """log M_t(p) for cells at points p (broadcast); +inf where p's likelihood is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ll = np.where(c > 0, c * np.log(p), 0.0) + np.where(n - c > 0, (n - c) * np.log1p(-p), 0.0)
    return mix - ll


def _per_round(x: np.ndarray) -> np.ndarray:
    """Counts as cells × rounds (a 1-D array of counts: one round)."""
    x = np.asarray(x, dtype=float)
    return x[:, None] if x.ndim == 1 else x


def _tilt(p: np.ndarray, sign: np.ndarray, lams: np.ndarray, n: np.ndarray, c: np.ndarray) -> np.ndarray:
    """log E(p) of each cell: Σ over its rounds r of λ_r s c_r − n_r log(1 − p + p·e^{λ_r s}).

    p: one point per cell (cells,) or points per cell (cells × points); sign: s per cell; lams, n,
    c: the cells' tilts λ_r and counts per round (cells × rounds)."""
    grow = np.expm1(sign[:, None] * lams)  # cells × rounds
    fixed = sign * np.sum(c * lams, axis=1)
    if p.ndim == 1:
        return fixed - np.sum(n * np.log1p(p[:, None] * grow), axis=1)
    return fixed[:, None] - np.einsum("tgr,tr->tg", np.log1p(p[:, :, None] * grow[:, None, :]), n)


def _tilt_for(n: np.ndarray, c: np.ndarray, w: np.ndarray, q: Question, side: float) -> np.ndarray:
    """Each cell's tilt for the next round's trials of one side (+1 the lower bound, −1 the upper)
    from the counts ``n``, ``c`` of the rounds before it (all zero for the first round):
    λ_t = a·τ·g_t / Σ_s g_s² p̃_s(1 − p̃_s), with p̃ the Jeffreys estimate (½ before any trial),
    g_t the statistic's slope in p_t from p̃_t to where that side's bound moves it (a 0.5 % or
    99.5 % Jeffreys quantile q: |w_t| (p̃^k − q^k)/(p̃ − q)), τ how far the bound must come to the
    estimate (the precision; a gate's distance to the estimate; a difference's to 0, or the
    precision) and a = 1 for a gate, _AIM otherwise: for equal n the tilts that settle a deviation
    a·τ soonest (sub-Gaussian approximation). Any rule works (the proof needs only λ fixed before
    the round's outcomes); this one aims at where the run stops."""
    shape = (c + 0.5, n - c + 0.5)
    p = shape[0] / (n + 1.0)
    down = side * np.sign(w) > 0  # the side's bound lowers these cells' p
    end = np.where(down, sps.beta.ppf(_QUANTILE, *shape), sps.beta.ppf(1 - _QUANTILE, *shape))
    slope = np.abs(w) * np.abs(p**q.k - end**q.k) / np.maximum(np.abs(p - end), 1e-12)
    spread = float(np.sum(slope**2 * p * (1 - p)))
    est = math.nan if n.sum() == 0 else float(np.sum(w * p**q.k))
    far = _TAU_FIRST if math.isnan(est) else None
    if q.kind == "precision":
        assert q.precision is not None
        tau = q.precision
    elif q.kind == "gate":
        assert q.gate is not None
        tau = far if far is not None else max(abs(est - q.gate), _TAU_MIN)
    else:
        tau = far if far is not None else max(abs(est), _TAU_MIN)
        tau = tau if q.precision is None else max(tau, q.precision)
    aim = 1.0 if q.kind == "gate" else _AIM
    return np.clip(aim * tau * slope / max(spread, 1e-12), *_LAM_RANGE)


Tilts = tuple[np.ndarray, np.ndarray]
"""The tilts of the lower bound's and of the upper bound's e-process (each cells × rounds, or one
value per cell for a next round)."""


def tilts(n: np.ndarray, c: np.ndarray, w: np.ndarray, question: Question | str) -> tuple[Tilts, Tilts]:
    """The tilts of each round's trials and of the next round's, per side (lower, upper):
    predictable, each from the rounds before it only (:func:`_tilt_for`). n, c: counts per cell,
    or per cell and round (columns: rounds in order); 1-D counts are one round, tilted as a first
    round is (from the question alone, so that looking at them after any trial keeps the level),
    and so are later trials.

    >>> n, c = np.array([[2, 2], [2, 2]]), np.array([[2, 2], [2, 0]])  # two tasks, two rounds
    >>> (lo, hi), after = tilts(n, c, np.array([0.5, 0.5]), "precision=0.1")
    >>> lo.round(3).tolist(), after[0].round(3).tolist()  # round 1's tilt read off round 0
    ([[0.24, 0.432], [0.24, 0.432]], [0.353, 0.353])
    """
    q = as_question(question)
    n2, c2, w = _per_round(n), _per_round(c), np.asarray(w, dtype=float)
    rounds = n2.shape[1] + (np.ndim(n) != 1)  # with rounds, the next round's tilt too
    before_n = np.cumsum(np.hstack([np.zeros((w.size, 1)), n2]), axis=1)[:, :rounds]
    before_c = np.cumsum(np.hstack([np.zeros((w.size, 1)), c2]), axis=1)[:, :rounds]
    sides = [
        np.stack([_tilt_for(before_n[:, r], before_c[:, r], w, q, side) for r in range(rounds)], axis=1)
        for side in (1.0, -1.0)
    ]
    if np.ndim(n) == 1:
        return (sides[0], sides[1]), (sides[0][:, 0], sides[1][:, 0])
    return (sides[0][:, :-1], sides[1][:, :-1]), (sides[0][:, -1], sides[1][:, -1])


def _first_tilts(n: np.ndarray, w: np.ndarray, k: int) -> np.ndarray:
    """The tilts :func:`bound` uses when given none: a first round's (of the lower bound of
    Σ w p^k), for every round."""
    q = Question(kind="precision", k=k, precision=_TAU_FIRST)
    first = _tilt_for(np.zeros(len(w)), np.zeros(len(w)), w, q, 1.0)
    return np.repeat(first[:, None], _per_round(n).shape[1], axis=1)


@dataclass(frozen=True)
class Dual:
    """The dual certificate of one bound: the rounds' tilts λ_r, the multipliers μ of the tilt and
    of the product constraint, and the cells' minimising p."""

    lams: np.ndarray
    mu_tilt: float
    mu_prod: float
    p: np.ndarray

    def terms(
        self,
        w: np.ndarray,
        k: int,
        n: np.ndarray,
        c: np.ndarray,
        p: np.ndarray,
        mix: np.ndarray | None = None,
    ) -> np.ndarray:
        """Each cell's term w p^k + μ_tilt log E(p) + μ_prod log M(p) at p (one point per cell, or
        cells × points); n, c per cell and round; ``mix``: the cells' :func:`log_mixture`."""
        total_n, total_c = n.sum(axis=1), c.sum(axis=1)
        mix = log_mixture(total_n, total_c) if mix is None else mix
        col = (slice(None), None) if p.ndim == 2 else (slice(None),)
        out = w[col] * p**k + self.mu_prod * _log_m(p, total_n[col], total_c[col], mix[col])
        return out + self.mu_tilt * _tilt(p, np.sign(w), self.lams, n, c) if self.mu_tilt > 0 else out


def _golden(
    f: Callable[[np.ndarray], np.ndarray], size: int, steps: int = _STEPS
) -> tuple[np.ndarray, np.ndarray]:
    """Maximise ``size`` concave functions of log μ at once (``f`` maps an array of log μ to the
    values) by golden section on ``_LOG_MU``: (argmax, max)."""
    lo, hi = np.full(size, _LOG_MU[0]), np.full(size, _LOG_MU[1])
    ratio = (math.sqrt(5) - 1) / 2
    x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    f1, f2 = f(x1), f(x2)
    for _ in range(steps):
        right = f1 < f2  # the maximum is right of x1
        lo, hi = np.where(right, x1, lo), np.where(right, hi, x2)
        x1_new = np.where(right, x2, hi - ratio * (hi - lo))
        x2_new = np.where(right, lo + ratio * (hi - lo), x1)
        fresh = f(np.where(right, x2_new, x1_new))
        f1, f2 = np.where(right, f2, fresh), np.where(right, fresh, f1)
        x1, x2 = x1_new, x2_new
    return np.where(f1 >= f2, x1, x2), np.maximum(f1, f2)


def budgets(ci: float) -> tuple[float, float]:
    """The budgets (log(1/α_prod), log(1/α_tilt)) of the product and of each side's tilt at level
    ``ci``: α split as _ALPHA_PROD to the product and the rest halved between the two sides."""
    alpha = 1 - ci
    return math.log(1 / (_ALPHA_PROD * alpha)), math.log(2 / ((1 - _ALPHA_PROD) * alpha))


def bound(
    n: np.ndarray, c: np.ndarray, w: np.ndarray, k: int, ci: float, lams: np.ndarray | None = None
) -> tuple[float, Dual]:
    """The smallest value of Σ_t w_t p_t^k over the region R (see the module) and the dual
    certificate that proves it.

    n, c: counts per cell, or per cell and round (columns: rounds in order); lams: each round's
    tilt (default: a first round's, see :func:`tilts`). For any μ_tilt, μ_prod ≥ 0,
    Σ_t min_p [w_t p^k + μ_tilt·log E_t(p) + μ_prod·log M_t(p)] − μ_tilt·b_tilt − μ_prod·b_prod
    is at most the minimum over R (weak duality); the bound is the largest such value found (by
    golden section on the scale of μ along rays of fixed share: the dual is concave in μ), each
    cell's term minimised on a logit grid and refined by golden section around the best point.

    >>> lo, _ = bound(np.array([20]), np.array([20]), np.array([1.0]), 1, 0.95)
    >>> round(lo, 3)  # 20 of 20: p ≥ 0.758 at every look, 95 %
    0.758
    """
    n2, c2, w = _per_round(n), _per_round(c), np.asarray(w, dtype=float)
    lams = (
        _first_tilts(n2, w, k) if lams is None else np.broadcast_to(np.asarray(lams, dtype=float), n2.shape)
    )
    total_n, total_c = n2.sum(axis=1), c2.sum(axis=1)
    b_prod, b_tilt = budgets(ci)
    sign = np.sign(w)
    coarse = slice(None, None, _COARSE)
    objective = (w[:, None] * _GRID[None, coarse] ** k)[None]  # 1 × cells × grid
    log_m = (log_mixture(total_n, total_c)[:, None] - _log_likelihood(total_n, total_c))[None, :, coarse]
    grid = np.broadcast_to(_GRID[None, coarse], (w.size, log_m.shape[2]))
    tilt = _tilt(grid, sign, lams, n2, c2)[None]

    def rays(share: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The best scale along each ray (μ_tilt, μ_prod) = e^x·(share, 1 − share) and the dual there."""
        mixed = share[:, None, None] * tilt + (1 - share)[:, None, None] * log_m
        mixed_budget = share * b_tilt + (1 - share) * b_prod

        def along(x: np.ndarray) -> np.ndarray:
            scale = np.exp(x)
            h = objective + scale[:, None, None] * mixed
            return h.min(axis=2).sum(axis=1) - scale * mixed_budget

        return _golden(along, share.size)

    # the best share is searched on a coarse fan of rays, then twice between the best ray's
    # neighbours (the best value over rays is unimodal in the share: the dual is concave)
    share = np.r_[0.0, _SHARES]  # first: the product constraint alone (never the tilt alone: 0·∞)
    x_ray, values = rays(share)
    j = int(np.argmax(values))
    best_share, best_x, best_value = float(share[j]), float(x_ray[j]), float(values[j])
    for _ in range(_ZOOMS):
        top = share[j + 1] if j + 1 < share.size else (1 + share[j]) / 2
        share = np.linspace(share[max(j - 1, 0)], top, _FAN)
        x_ray, values = rays(share)
        j = int(np.argmax(values))
        if values[j] > best_value:
            best_share, best_x, best_value = float(share[j]), float(x_ray[j]), float(values[j])
    scale = math.exp(best_x)
    best = Dual(lams, scale * best_share, scale * (1 - best_share), np.empty(0))
    p = _minimisers(best, w, k, n2, c2)
    value = float(best.terms(w, k, n2, c2, p).sum() - best.mu_tilt * b_tilt - best.mu_prod * b_prod)
    return value, Dual(lams, best.mu_tilt, best.mu_prod, p)


#: log p and log(1 − p) on the grid (−inf at the ends).
with np.errstate(divide="ignore"):
    _LOG_P, _LOG_Q = np.log(_GRID), np.log1p(-_GRID)


def _log_likelihood(n: np.ndarray, c: np.ndarray) -> np.ndarray:
    """log p^c (1 − p)^(n − c) of each cell (rows) on the grid (columns); 0·log 0 = 0."""
    c_, f_ = c[:, None], (n - c)[:, None]
    with np.errstate(invalid="ignore"):
        return np.where(c_ > 0, c_ * _LOG_P, 0.0) + np.where(f_ > 0, f_ * _LOG_Q, 0.0)


def _minimisers(dual: Dual, w: np.ndarray, k: int, n: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Each cell's argmin over p of its dual term (n, c per cell and round): best grid point, then
    golden section between its neighbours (never worse than the grid point)."""
    mix = log_mixture(n.sum(axis=1), c.sum(axis=1))
    values = dual.terms(w, k, n, c, np.broadcast_to(_GRID[None, :], (w.size, _GRID.size)), mix)
    best = values.argmin(axis=1)
    rows = np.arange(w.size)
    a = _GRID[np.maximum(best - 1, 0)]
    b = _GRID[np.minimum(best + 1, _GRID.size - 1)]
    ratio = (math.sqrt(5) - 1) / 2
    x1, x2 = b - ratio * (b - a), a + ratio * (b - a)
    f1, f2 = dual.terms(w, k, n, c, x1, mix), dual.terms(w, k, n, c, x2, mix)
    for _ in range(24):
        left = f1 < f2  # the minimum is left of x2
        a, b = np.where(left, a, x1), np.where(left, x2, b)
        x1_new = np.where(left, b - ratio * (b - a), x2)
        x2_new = np.where(left, x1, a + ratio * (b - a))
        fresh = dual.terms(w, k, n, c, np.where(left, x1_new, x2_new), mix)
        f1, f2 = np.where(left, fresh, f2), np.where(left, f1, fresh)
        x1, x2 = x1_new, x2_new
    refined = np.where(f1 < f2, x1, x2)
    better = np.minimum(f1, f2) < values[rows, best]
    return np.where(better, refined, _GRID[best])


def interval(
    n: np.ndarray, c: np.ndarray, w: np.ndarray, k: int, ci: float, lams: Tilts | None = None
) -> tuple[float, float]:
    """The anytime-valid ``ci`` interval of Σ_t w_t p_t^k from counts (n_t, c_t) (per cell, or
    per cell and round with ``lams`` the rounds' tilts of each side, as :func:`tilts`): both ends from the one
    region R, so they hold together at every look.

    >>> lo, hi = interval(np.array([8, 8]), np.array([8, 4]), np.array([0.5, 0.5]), 1, 0.95)
    >>> 0 < lo < 0.75 < hi <= 1
    True
    """
    n2, c2, w_ = _per_round(n), _per_round(c), np.asarray(w, dtype=float)
    pair = (_first_tilts(n2, w_, k), _first_tilts(n2, -w_, k)) if lams is None else lams
    lo, hi, *_ = _interval(n2, c2, w_, k, ci, pair)
    return lo, hi


def _interval(
    n: np.ndarray, c: np.ndarray, w: np.ndarray, k: int, ci: float, lams: Tilts
) -> tuple[float, float, Dual, Dual, bool]:
    """(lo, hi, the lower bound's certificate, the upper bound's, whether the bounds crossed). Where
    the two bounds cross (the
    region is empty: no fixed p fits every round's trials), both ends in order: the ends cross only
    outside the event of probability 1 − α that the proof needs, so coverage is unchanged
    (:func:`status` says so and decides nothing)."""
    lo, dual_lo = bound(n, c, w, k, ci, lams[0])
    neg, dual_hi = bound(n, c, -w, k, ci, lams[1])
    total = float(np.sum(np.maximum(w, 0)))
    floor = -float(np.sum(np.maximum(-w, 0)))
    crossed = bool(lo > -neg)
    lo, hi = float(np.clip(lo, floor, total)), float(np.clip(-neg, floor, total))
    return min(lo, hi), max(lo, hi), dual_lo, dual_hi, crossed


@dataclass(frozen=True)
class Status:
    """Where one configuration's question stands (the numbers of a row of :func:`decide`), with
    the certificates of its bounds and the tilt the next round's trials get."""

    estimate: float
    lo: float
    hi: float
    decided: bool
    verdict: str
    dual_lo: Dual
    dual_hi: Dual
    next_tilt: Tilts | None = None
    final: bool = False  # the last, fixed-n look of a question with final=N


def fixed_look(n: np.ndarray, c: np.ndarray, w: np.ndarray, k: int, ci: float) -> tuple[float, float, float]:
    """The estimate and fixed-n ``ci`` interval of Σ_t w_t pass^k from each cell's counts: the
    mean unbiased estimate ± z·se, se² = Σ_t w_t² · :func:`~passk_nb.stats.intervals.fixed_task_variance`,
    through :func:`~passk_nb.stats.intervals.fixed_interval` (summarize's *these tasks* interval for
    a suite, w = 1/T; compare's fixed-task interval for a difference, w = ±1/T). Valid only for n
    fixed in advance: the last look of a question with ``final=N``, or a fixed design.

    >>> est, lo, hi = fixed_look(np.array([8, 8]), np.array([8, 4]), np.array([0.5, 0.5]), 1, 0.95)
    >>> est, round(lo, 3), round(hi, 3)
    (0.75, 0.537, 0.963)
    """
    est = float(np.sum(w * np.asarray(pass_hat_k(n, c, k), dtype=float)))
    se = math.sqrt(float(np.sum(w**2 * fixed_task_variance(n, c, k))))
    lo, hi = fixed_interval(np.array(est), np.array(se), ci, lower=-1.0 if np.any(w < 0) else 0.0)
    return est, float(lo), float(hi)


def status(n: np.ndarray, c: np.ndarray, w: np.ndarray, question: Question | str) -> Status:
    """The state of ``question`` for cells with counts ``n``, ``c`` (per cell, or per cell and
    round: columns in round order) and weights ``w`` (1/T per task of a suite; +1/T for arm b's and
    −1/T for arm a's tasks of a comparison): the numbers behind :func:`decide`, on arrays.

    With ``final=N`` the looks before every cell has N trials are anytime-valid at the first of
    :meth:`Question.levels`; once every cell has N, the last look's interval is the fixed-n one
    (:func:`fixed_look`) at the second level, intersected with the anytime-valid one (both hold
    together at ``ci``, by the union bound), and the run stops there, decided or not.

    >>> s = status(np.array([30, 30]), np.array([30, 29]), np.array([0.5, 0.5]), "gate=0.7")
    >>> s.decided, round(s.lo, 3)
    (True, 0.829)
    >>> s = status(np.array([16, 16]), np.array([16, 8]), np.array([0.5, 0.5]), "precision=0.15 final=16")
    >>> s.final, s.verdict
    (True, 'known to ± 0.146: 0.604 – 0.896 (the final look, n = 16)')
    """
    q = as_question(question)
    n2, c2, w = _per_round(n), _per_round(c), np.asarray(w, dtype=float)
    total_n, total_c = n2.sum(axis=1), c2.sum(axis=1)
    if q.final is not None and np.any(total_n > q.final):
        raise ValueError(
            f"a cell has {int(total_n.max())} usable trials, more than final={q.final}: the final "
            "look's fixed-n interval needs n fixed in advance, so no task may run past it. Ask the "
            "question with final= from the run's start (allocate() never goes past it), or drop final="
        )
    ci_any, ci_final = q.levels()
    lams, after = tilts(n, c, w, q)
    lo, hi, dual_lo, dual_hi, crossed = _interval(n2, c2, w, q.k, ci_any, lams)
    estimate = (
        math.nan
        if np.any(total_n < q.k)
        else float(np.sum(w * np.asarray(pass_hat_k(total_n, total_c, q.k), dtype=float)))
    )
    final = ci_final is not None and bool(np.all(total_n == q.final))
    if final and not crossed:
        assert ci_final is not None
        _, fixed_lo, fixed_hi = fixed_look(total_n, total_c, w, q.k, ci_final)
        # a miss of either is an event of its own α: where they miss each other the fixed one is shown
        both = max(lo, fixed_lo), min(hi, fixed_hi)
        lo, hi = both if both[0] <= both[1] else (fixed_lo, fixed_hi)
    decided, verdict = _verdict(q, estimate, lo, hi)
    if final:
        verdict = f"{verdict} (the final look, n = {q.final})"
    if crossed:  # only outside the 1 − α event; but a changed agent makes it likely: say so
        decided, verdict = False, f"inconsistent: no success rate per task fits every round at {q.ci:.0%}"
        warnings.warn(
            f"{verdict}: the trials of some task changed between rounds more than chance allows "
            "(did the agent, its prompt or the backend change during the run?); nothing is decided, "
            f"and the interval shown, {lo:.3f} – {hi:.3f}, spans both bounds",
            UserWarning,
            stacklevel=2,
        )
    return Status(estimate, lo, hi, decided, verdict, dual_lo, dual_hi, after, final)


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
        later += chance * term(step, extra)
        held += chance * term(step, extra, p_now)
    # a term whose minimum is tied between two far points (w p^k concave: the dual's gap) rises
    # little at fixed μ though the trials refute the point it sits at; a share of the rise at
    # that point keeps such cells in the allocation
    stuck = (w < 0) & (k > 1) & (later - now <= _FLAT)  # w p^k concave: the dual's gap
    return np.maximum(np.where(stuck, _HELD * (held - now), later - now), 0.0)


def _table(df: Counts | pd.DataFrame | str | os.PathLike[str], infra: str) -> pd.DataFrame:
    """The counts table of ``df`` (:func:`~passk_nb.stats.counts.as_counts`); for records with
    rounds (a run with ``until=``; a folder is loaded), also each round's cells ``n@i``, ``c@i``, so
    that each round's trials get their own predictable tilt (:func:`tilts`). A counts table is read
    as it is: each of its columns that is not a count is a key."""
    if isinstance(df, str | os.PathLike):
        df = _load_rounds(df)
    if is_counts_table(df):
        return df
    return as_counts(df, infra=infra, outcomes=True).frame()


def _load_rounds(folder: str | os.PathLike[str]) -> pd.DataFrame:
    """The records of a folder with what the counts and the rounds need (never the transcripts: a
    folder may be large)."""
    from passk_nb.data.store import load

    return load(folder, columns=[*records_by(None), "task", "trial", "passed", "outcome", "round"])


def _round_counts(part: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The cells' counts per round (cells × rounds) when ``part`` has them, else per cell."""
    n_cols = [col for col in part.columns if col.startswith(f"n{_ROUND}")]
    if not n_cols:
        return part["n"].to_numpy(dtype=float), part["c"].to_numpy(dtype=float)
    c_cols = [f"c{col[1:]}" for col in n_cols]
    return part[n_cols].to_numpy(dtype=float), part[c_cols].to_numpy(dtype=float)


def _keys(table: pd.DataFrame, exclude: Sequence[str] = ()) -> list[str]:
    return [
        col
        for col in table.columns
        if col not in _COUNT_COLUMNS and col not in exclude and _ROUND not in str(col)
    ]


@dataclass(frozen=True)
class _Cells:
    """The (configuration, task) cells of one question's statistic, with their weights."""

    group: pd.DataFrame  # one row per (group, cell): the key columns, task, n, c, w
    keys: list[str]


def _cells(table: pd.DataFrame, q: Question) -> _Cells:
    for col in ("task", "n", "c"):
        if col not in table.columns:
            raise ValueError(f"a counts table needs columns task, n and c; it lacks {col!r}")
    if q.kind != "compare":
        keys = _keys(table)
        sizes = (
            table.groupby(keys, dropna=False, observed=True)["task"].transform("size") if keys else len(table)
        )
        return _Cells(table.assign(w=1.0 / np.asarray(sizes, dtype=float)), keys)
    assert q.on is not None
    if q.on not in table.columns:
        raise ValueError(
            f"the comparison's column {q.on!r} is not in the counts; columns: {list(table.columns)}. "
            f"Count with it: passk_nb.counts(df, by=[..., {q.on!r}])"
        )
    values = table[q.on].astype(str)
    missing = [arm for arm in (q.a, q.b) if arm not in set(values)]
    if missing:
        raise ValueError(f"{q.on}={missing} not in the counts; values present: {sorted(set(values))}")
    arms = table[values.isin([q.a, q.b])].assign(_arm=values[values.isin([q.a, q.b])])
    in_a, in_b = arms[arms["_arm"] == q.a], arms[arms["_arm"] == q.b]
    # as compare(): a column whose values never overlap between the arms (prompt_hash when
    # comparing prompt names, run_id) names the arm again and is not a group
    keys = shared_columns(_keys(table, (q.on,)), [in_a, in_b])
    pair_keys = [*keys, "task"]
    both = arms.groupby(pair_keys, dropna=False, observed=True)["_arm"].transform("nunique") == 2
    dropped = arms.loc[~both, "task"].unique()
    if len(dropped):
        raise ValueError(
            f"{len(dropped)} task(s) ran under only one arm (e.g. {dropped[0]!r}); a paired comparison "
            "needs every task under both: run them, or drop them from the counts"
        )
    arms = arms[both]
    sizes = arms.groupby(keys, dropna=False, observed=True)["task"].transform("nunique") if keys else None
    t = np.asarray(sizes if sizes is not None else arms["task"].nunique(), dtype=float)
    sign = np.where(arms["_arm"] == q.b, 1.0, -1.0)
    return _Cells(arms.drop(columns="_arm").assign(w=sign / t), keys)


def _groups(cells: _Cells) -> list[tuple[dict[str, object], pd.DataFrame]]:
    if not cells.keys:
        return [({}, cells.group)]
    out = []
    for key, part in cells.group.groupby(cells.keys, dropna=False, observed=True, sort=True):
        key_ = key if isinstance(key, tuple) else (key,)
        out.append((dict(zip(cells.keys, key_, strict=True)), part))
    return out


def _verdict(q: Question, estimate: float, lo: float, hi: float) -> tuple[bool, str]:
    if q.kind == "gate":
        assert q.gate is not None
        if lo >= q.gate:
            return True, f"passes: pass^{q.k} ≥ {lo:.3f} ≥ {q.gate:g}"
        if hi < q.gate:
            return True, f"fails: pass^{q.k} ≤ {hi:.3f} < {q.gate:g}"
        return False, f"open: {lo:.3f} – {hi:.3f} contains {q.gate:g}"
    if q.kind == "compare":
        if lo > 0:
            return True, f"{q.b} better than {q.a}: b − a in {lo:+.3f} – {hi:+.3f}"
        if hi < 0:
            return True, f"{q.b} worse than {q.a}: b − a in {lo:+.3f} – {hi:+.3f}"
        if q.precision is not None and (hi - lo) / 2 <= q.precision:
            return True, f"no difference beyond ± {q.precision:g}: b − a in {lo:+.3f} – {hi:+.3f}"
        return False, f"open: b − a in {lo:+.3f} – {hi:+.3f} contains 0"
    assert q.precision is not None
    if (hi - lo) / 2 <= q.precision:
        return True, f"known to ± {(hi - lo) / 2:.3f}: {lo:.3f} – {hi:.3f}"
    return False, f"open: ± {(hi - lo) / 2:.3f} > {q.precision:g}"


def decide(
    df: pd.DataFrame | str | os.PathLike[str], question: Question | str, *, infra: str = INFRA
) -> pd.DataFrame:
    """Where the question stands: its anytime-valid interval and whether it is decided.

    df: trial records, a counts table (:func:`passk_nb.counts`) or a folder of records. Every
    column besides task and the counts is a group key: one row per configuration (for a
    comparison, per group of the columns other than ``on``), each interval valid at every look
    on its own.
    question: a :class:`Question` or its string ("precision=0.05", "compare=prompt_name:a,b",
    "gate=0.8", with k= and ci=).
    infra: as in :func:`summarize` ("exclude" leaves infrastructure errors out of n).

    Returns the key columns, ``question``, ``k``, ``n_tasks``, ``trials`` (usable), ``estimate``
    (the mean unbiased per-task pass^k; NaN while a task has fewer than k trials; see the module
    on its bias after adaptive allocation), ``lo``/``hi`` (the interval, valid at every look:
    stopping on it keeps the level; with ``final=N``, at N trials of every task the last look's,
    :func:`status`), ``decided`` and ``verdict``.

    >>> import pandas as pd
    >>> table = pd.DataFrame({"task": list("abcdefgh"), "n": 30, "c": [30] * 7 + [0]})
    >>> row = decide(table, "gate=0.6").iloc[0]
    >>> bool(row["decided"]), row["verdict"]
    (True, 'passes: pass^1 ≥ 0.824 ≥ 0.6')
    >>> row = decide(table, "precision=0.02").iloc[0]
    >>> bool(row["decided"]), round(float(row["estimate"]), 3), round(float(row["hi"] - row["lo"]) / 2, 3)
    (False, 0.875, 0.051)
    """
    q = as_question(question)
    table = _table(df, infra)
    if table.empty:
        raise ValueError("no trials to decide on: the counts table is empty")
    cells = _cells(table, q)
    short = cells.group[cells.group["n"] < q.k]
    if len(short):
        names = ", ".join(f"{t} ({n})" for t, n in list(zip(short["task"], short["n"], strict=True))[:5])
        raise ValueError(
            f"k={q.k} needs {q.k} usable trials of every task; these have fewer: {names}. Run a first "
            "round of k trials per task (allocate() tops them up), or lower k"
        )
    rows = []
    for key, part in _groups(cells):
        (n, c), w = _round_counts(part), part["w"].to_numpy()
        state = status(n, c, w, q)
        rows.append(
            {
                **key,
                "question": str(q),
                "k": q.k,
                "n_tasks": int(part["task"].nunique()),
                "trials": int(n.sum()),
                "estimate": state.estimate,
                "lo": state.lo,
                "hi": state.hi,
                "decided": state.decided,
                "verdict": state.verdict,
            }
        )
    return pd.DataFrame(rows)


def _rounds(records: pd.DataFrame | str | os.PathLike[str]) -> tuple[pd.DataFrame, pd.Series]:
    """Trial records (a folder is loaded) and their ``round`` as numbers; a clear error without it."""
    if isinstance(records, str | os.PathLike):
        records = _load_rounds(records)
    if not isinstance(records, pd.DataFrame) or "round" not in records.columns or is_counts_table(records):
        raise ValueError(
            "these are not trial records of a run with until=: a by-round view needs the records' "
            "round column (run(..., until=Until(...)) writes it)"
        )
    rounds = pd.to_numeric(records["round"], errors="coerce")
    if rounds.isna().all():
        raise ValueError("no record has a round: the run did not use until=, so it has no rounds to show")
    return records, rounds


def decide_by_round(
    records: pd.DataFrame | str | os.PathLike[str], question: Question | str, *, infra: str = INFRA
) -> pd.DataFrame:
    """Where the question stood after each completed round of a run with ``until=``: :func:`decide`
    on the trials of rounds 0..r, one block of rows per round r (a ``round`` column first).

    The intervals are the anytime-valid ones, so the whole path holds at once: reading it round by
    round (as the runner did) keeps the level.

    >>> import pandas as pd
    >>> rows = [{"task": t, "trial": i, "round": 0 if i < 2 else 1, "passed": True, "outcome": "pass"}
    ...         for t in "abcdef" for i in range(2 if t in "ab" else 6)]
    >>> path = decide_by_round(pd.DataFrame(rows), "gate=0.6")
    >>> path[["round", "trials", "decided"]].values.tolist()
    [[0, 12, False], [1, 28, True]]
    """
    q = as_question(question)
    records, rounds = _rounds(records)
    blocks = []
    for r in sorted(rounds.dropna().unique()):
        block = decide(records[rounds <= r], q, infra=infra)
        block.insert(0, "round", int(r))
        blocks.append(block)
    path = pd.concat(blocks, ignore_index=True)
    path.attrs["question"] = q  # for plot_rounds(path=path)
    return path


def trials_by_round(records: pd.DataFrame | str | os.PathLike[str], *, infra: str = INFRA) -> pd.DataFrame:
    """Where a run with ``until=`` spent its trials: usable trials per task and round (the
    configuration's key columns, ``task``, ``round``, ``trials``), as counted for its decisions.

    >>> import pandas as pd
    >>> rows = [{"task": t, "trial": i, "round": min(i, 1), "passed": True, "outcome": "pass"}
    ...         for t, n in (("a", 1), ("b", 3)) for i in range(n)]
    >>> trials_by_round(pd.DataFrame(rows)).values.tolist()
    [['a', 0, 1], ['b', 0, 1], ['b', 1, 2]]
    """
    records, rounds = _rounds(records)
    blocks = []
    for r in sorted(rounds.dropna().unique()):
        table = counts(records[rounds == r], infra=infra)
        keys = _keys(table, exclude=("task",))
        block = table[[*keys, "task"]].assign(round=int(r), trials=table["n"].astype(int))
        blocks.append(block[block["trials"] > 0])
    return pd.concat(blocks, ignore_index=True)


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

    Each cell's gain is the expected rise of its term in the dual bound (:func:`bound`) after
    ``step`` more trials, drawn from its Jeffreys posterior predictive (the rise the bound gets at
    least; a cell whose term cannot rise at fixed μ because its minimum is tied between two far
    points, as the dual of an upper bound of p^k can be, counts a share of the rise at the point
    it sits at). Which bound: both for a precision (the width), the lower for a gate whose estimate is
    above the threshold and the upper otherwise, the one on the far side of 0 from the estimate
    for a comparison (both with a precision). While any cell has fewer than k trials the
    allocation only tops those up to k (a first round). A cell's j-th step is worth its first
    step's gain discounted as its n grows (:func:`spread`). With ``final=N`` in the question no pair
    goes past N trials and every pair below N keeps a little gain, so that the run reaches its last
    look (:func:`round_trials`). Returns
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
        chosen.append(part[[*cells.keys, "task", "n"]].assign(gain=gain, reason=_REASONS[q.kind](state, q)))
    if not chosen:
        return pd.DataFrame(columns=columns)
    budget = open_cells * step_ if trials is None else trials
    pool = pd.concat(chosen, ignore_index=True)
    steps = max(1, budget // step_)
    trials_ = round_trials(pool["gain"].to_numpy(), pool["n"].to_numpy(), steps, step_, q.final)
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
    order = np.argsort(-flat, kind="stable")[:steps]
    order = order[flat[order] > -np.inf]
    return np.bincount(order // steps, minlength=gain.size)


def round_trials(
    gain: np.ndarray, n: np.ndarray, steps: int, step: int, final: int | None = None
) -> np.ndarray:
    """Trials per cell in a round of ``steps`` steps of ``step`` trials (:func:`spread` by
    ``gain``). With ``final`` (a question's final=N) no cell goes past N trials, and every cell
    below N keeps a little gain, so that a run whose bounds stop moving still reaches its final
    look.

    >>> round_trials(np.array([0.0, 1.0, 0.5]), np.array([10, 10, 10]), 4, 2).tolist()
    [0, 6, 2]
    >>> round_trials(np.array([0.0, 1.0, 0.5]), np.array([10, 10, 11]), 4, 2, final=12).tolist()
    [2, 2, 1]
    """
    gain, n = np.asarray(gain, dtype=float), np.asarray(n, dtype=float)
    if final is None:
        return spread(gain, n, steps, step) * step
    left = np.maximum(final - n, 0.0)
    gain = np.where(left > 0, np.maximum(gain, _FLAT), 0.0)
    chosen = spread(gain, n, steps, step, limit=np.ceil(left / step)) * step
    return np.minimum(chosen, left).astype(int)


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

    The object a runner's ``until=`` takes (the harness duck-types :meth:`next_round` and never
    imports ``stats``): after every completed round it passes the records so far, runs the
    allocation it gets back, and stops on None, when the question is decided, ``max_trials``
    usable trials are spent (the round is cut to what is left of the budget) or, with ``final=N``,
    every task has N trials (the last look, decided or not). Before the first round it calls
    :meth:`check` with the first round's trials per task, when the object has it.

    question: a :class:`Question` or its string.
    max_trials: the budget of usable trials over every cell (None: no budget).
    step, trials: as in :func:`allocate` (the unit and the size of a round).

    >>> import pandas as pd
    >>> until = Until("gate=0.5", max_trials=100)
    >>> table = pd.DataFrame({"task": ["a", "b"], "n": 30, "c": 30})
    >>> until.next_round(table) is None, until.progress(table)
    (True, 'passes: pass^1 ≥ 0.893 ≥ 0.5 after 60 trials')
    >>> until.next_round(table.assign(n=1, c=1))[["task", "trials"]].values.tolist()
    [['a', 1], ['b', 1]]
    """

    question: Question | str
    max_trials: int | None = None
    step: int | None = None
    trials: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "question", as_question(self.question))
        if self.max_trials is not None and (
            isinstance(self.max_trials, bool) or not isinstance(self.max_trials, int) or self.max_trials < 1
        ):
            raise ValueError(f"max_trials must be a whole number ≥ 1 (or None); got {self.max_trials!r}")

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
        """The next round's cells and trials (as :func:`allocate`), or None: decided, spent, or (with
        ``final=N``) every task at N trials."""
        table = _table(records, INFRA)
        spent = int(table["n"].sum())
        left = None if self.max_trials is None else self.max_trials - spent
        if left is not None and left <= 0:
            return None
        allocation = allocate(table, self.question, trials=self.trials, step=self.step)
        if allocation.empty:
            return None
        if left is not None and allocation["trials"].sum() > left:
            kept = allocation["trials"].cumsum() <= left
            allocation = allocation[kept] if kept.any() else allocation.head(1).assign(trials=left)
        return allocation.reset_index(drop=True)

    def progress(self, records: pd.DataFrame | str | os.PathLike[str]) -> str:
        """One line for a progress display: where the question stands and the trials spent."""
        table = _table(records, INFRA)
        spent = int(table["n"].sum())
        if (table["n"] < as_question(self.question).k).any():
            return f"first round: {spent} trials"
        rows = decide(table, self.question)
        return "; ".join(rows["verdict"]) + f" after {spent} trials"
