"""The confidence sequence: anytime-valid bounds of Σ_t w_t p_t^k from each round's counts.

One confidence region R for every task's success rate, from a per-task mixture e-process and two
pooled e-processes with predictable tilts (:func:`tilts`), α split by :func:`budgets`.
:func:`bound` is the smallest value of the statistic over R (weak duality: each value it tries is
a valid bound) and :func:`interval` gives both ends at once: they hold at every look, however
the trials were allocated and whenever the run stops. The construction, its proof of validity
and the tuning constants' rationale: ``docs/methods/sequential.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps
from scipy.special import betaln, expit

from passk_nb.stats.design.question import Question, as_question

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
#: Range of the dual multiplier μ searched (log scale) and the golden-section steps.
_LOG_MU = (-12.0, 12.0)
_STEPS = 20


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
    """The smallest value of Σ_t w_t p_t^k over the region R (``docs/methods/sequential.md``) and the dual
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
    b_prod, b_tilt = budgets(ci)
    # the search runs on the distinct cells (same counts, weight and tilts: the same term), each
    # cell's minimum then read back in cell order, so that every sum is the one over all cells
    first, inverse = _distinct(n2, c2, w, lams)
    n_u, c_u, w_u, lams_u = n2[first], c2[first], w[first], lams[first]
    total_n, total_c = n_u.sum(axis=1), c_u.sum(axis=1)
    sign = np.sign(w_u)
    coarse = slice(None, None, _COARSE)
    objective = (w_u[:, None] * _GRID[None, coarse] ** k)[None]  # 1 × cells × grid
    log_m = (log_mixture(total_n, total_c)[:, None] - _log_likelihood(total_n, total_c))[None, :, coarse]
    grid = np.broadcast_to(_GRID[None, coarse], (w_u.size, log_m.shape[2]))
    tilt = _tilt(grid, sign, lams_u, n_u, c_u)[None]

    def rays(share: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The best scale along each ray (μ_tilt, μ_prod) = e^x·(share, 1 − share) and the dual there."""
        mixed = share[:, None, None] * tilt + (1 - share)[:, None, None] * log_m
        mixed_budget = share * b_tilt + (1 - share) * b_prod
        h = np.empty_like(mixed)  # reused by every step of the search

        def along(x: np.ndarray) -> np.ndarray:
            scale = np.exp(x)
            np.add(objective, np.multiply(scale[:, None, None], mixed, out=h), out=h)
            return h.min(axis=2)[:, inverse].sum(axis=1) - scale * mixed_budget

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


def _distinct(n: np.ndarray, c: np.ndarray, w: np.ndarray, lams: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a first cell of each distinct term, each cell's distinct term): cells alike in counts per
    round, weight and tilts have the same dual term, so minimising it once serves them all (a
    suite of 1,000 tasks holds a few dozen distinct ones)."""
    key = np.column_stack([n, c, w, np.broadcast_to(lams, n.shape)])
    if not len(key):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort(key.T[::-1])
    starts = np.r_[True, np.any(key[order[1:]] != key[order[:-1]], axis=1)]
    inverse = np.empty(len(key), dtype=np.int64)
    inverse[order] = np.cumsum(starts) - 1
    return order[starts], inverse


def _minimisers(dual: Dual, w: np.ndarray, k: int, n: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Each cell's argmin over p of its dual term (n, c per cell and round): best grid point, then
    golden section between its neighbours (never worse than the grid point); once per distinct term."""
    first, inverse = _distinct(n, c, w, dual.lams)
    if first.size < w.size:
        distinct = Dual(np.broadcast_to(dual.lams, n.shape)[first], dual.mu_tilt, dual.mu_prod, dual.p)
        return _minimisers(distinct, w[first], k, n[first], c[first])[inverse]
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
