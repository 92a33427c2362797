"""Benchmark: forecast() at leaderboard scale against the fit it replaced, same run.

Issue 47's targets (on a quiet machine): forecast of one configuration ≤ 1 s for 80 tasks × 5
trials and ≤ 5 s for 80 tasks with 8–96 trials each; 20 configurations × 1,000 tasks ≤ 20 s
(run here with ``--groups`` configurations, default 4, and scaled linearly: the cost is per group).
All at the default n_boot = 2,000 per model. The baseline is the previous bootstrap refit (EM over
every possible (n, c) pattern at every grid point, kept below as ``old_refits``): timed on the
same drawn suites at ``--old-boot`` replicates (one per 40 with mixed n: there it needs minutes
and gigabytes for 2,000) and scaled to 2,000; the new refits are checked to pick the same grid
point.

    python benchmarks/bench_forecast.py [--groups 4] [--old-boot 40]
"""

from __future__ import annotations

import argparse
import time
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import betaln, gammaln, xlogy

from passk_nb.stats.forecast import GRID_A, GRID_B, Mixture, ReplicateCells, fit_grid, forecast

N_BOOT = 2_000
TRUTH = Mixture(0.3, 0.1, 2.0, 1.0)
_CHUNK = 256


# The previous implementation (passk_nb/stats/forecast.py before issue 47), for the baseline.
@dataclass(frozen=True)
class _Patterns:
    """The distinct (n, c) a group can show; counts are per replicate over these."""

    n: np.ndarray
    c: np.ndarray

    @classmethod
    def for_trials(cls, ns: np.ndarray) -> _Patterns:
        values = np.unique(ns)
        n = np.concatenate([np.full(v + 1, v) for v in values])
        c = np.concatenate([np.arange(v + 1) for v in values])
        return cls(n.astype(np.int64), c.astype(np.int64))

    def index(self, n: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Pattern number of tasks with n trials and c successes (broadcast)."""
        values, first = np.unique(self.n, return_index=True)
        return first[np.searchsorted(values, n)] + c

    def counts(self, n: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Tasks per pattern for each replicate: n (T,), c (R, T) -> (R, U)."""
        idx = self.index(n, c) + self.n.size * np.arange(c.shape[0])[:, None]
        return (
            np.bincount(idx.ravel(), minlength=c.shape[0] * self.n.size).reshape(c.shape[0], -1).astype(float)
        )


def _log_pmf(patterns: _Patterns, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """log beta-binomial pmf, shape (G, U)."""
    n, c = patterns.n[None, :], patterns.c[None, :]
    a, b = alpha[:, None], beta[:, None]
    log_choose = gammaln(n + 1) - gammaln(c + 1) - gammaln(n - c + 1)
    return log_choose + betaln(c + a, n - c + b) - betaln(a, b)


def _profile(
    m: np.ndarray, patterns: _Patterns, alpha: np.ndarray, beta: np.ndarray, always: bool = True
) -> tuple[np.ndarray, ...]:
    """Maximise the likelihood over the three shares for each (replicate, grid point);
    ``always=False`` holds share_always at 0.

    m: counts (R, U). Returns loglik, share_always, share_never, share_flaky, each (R, G).
    """
    f = np.minimum(np.exp(_log_pmf(patterns, alpha, beta)), 1.0)  # (G, U)
    if np.unique(patterns.n).size == 1:
        return _profile_one_n(m, f, always)
    return _profile_em(m, patterns, f, always=always)


def _loglik(m: np.ndarray, f: np.ndarray, is_all: np.ndarray, is_none: np.ndarray, w1, w0, wf) -> np.ndarray:
    dens = w1[..., None] * is_all + w0[..., None] * is_none + wf[..., None] * f[None, :, :]
    with np.errstate(divide="ignore"):
        return xlogy(m[:, None, :], dens).sum(-1)


def _profile_one_n(m: np.ndarray, f: np.ndarray, always: bool = True) -> tuple[np.ndarray, ...]:
    """Closed form when every task has the same n: the best of the concave problem's faces."""
    total = m.sum(1)[:, None]
    m_all, m_none = m[:, -1][:, None], m[:, 0][:, None]
    m_mid = total - m_all - m_none
    f_all, f_none = f[None, :, -1], f[None, :, 0]
    with np.errstate(divide="ignore"):
        mid_term = m[:, 1:-1] @ np.log(f[:, 1:-1]).T if f.shape[1] > 2 else np.zeros((m.shape[0], f.shape[0]))
    q = np.maximum(1.0 - f_all - f_none, 1e-300)
    shape = (m.shape[0], f.shape[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        wf_inner = m_mid / (total * q)
        wf_no_all = np.clip((m_all + m_mid) / (total * np.maximum(1.0 - f_none, 1e-300)), 0.0, 1.0)
        wf_no_none = np.clip((m_none + m_mid) / (total * np.maximum(1.0 - f_all, 1e-300)), 0.0, 1.0)
    zero, one = np.zeros(shape), np.ones(shape)
    candidates = [
        (m_all / total - wf_inner * f_all, m_none / total - wf_inner * f_none, wf_inner * one),
        (zero, 1.0 - wf_no_all, wf_no_all * one),
        (1.0 - wf_no_none, zero, wf_no_none * one),
        (zero, zero, one),
        (m_all / total * one, m_none / total * one, zero),
    ]
    if not always:  # the faces with share_always = 0
        candidates = candidates[1:2] + candidates[3:4]
    best = [np.full(shape, -np.inf), zero, zero, zero]
    for w1, w0, wf in candidates:
        w1, w0, wf = (np.broadcast_to(w, shape) for w in (w1, w0, wf))
        feasible = (w1 >= -1e-12) & (w0 >= -1e-12)
        w1, w0, wf = (np.clip(w, 0.0, 1.0) for w in (w1, w0, wf))
        with np.errstate(divide="ignore", invalid="ignore"):
            ll = xlogy(m_all, w1 + wf * f_all) + xlogy(m_none, w0 + wf * f_none) + xlogy(m_mid, wf)
            ll = np.where(m_mid > 0, ll + mid_term, ll)
        ll = np.where(feasible & ~np.isnan(ll), ll, -np.inf)
        better = ll > best[0]
        best = [
            np.where(better, ll, best[0]),
            *(np.where(better, w, b) for w, b in zip((w1, w0, wf), best[1:], strict=True)),
        ]
    return tuple(best)


def _profile_em(
    m: np.ndarray, patterns: _Patterns, f: np.ndarray, iterations: int = 100, always: bool = True
) -> tuple[np.ndarray, ...]:
    """EM over the shares when tasks have different n (no closed form)."""
    is_all = (patterns.c == patterns.n).astype(float)
    is_none = (patterns.c == 0).astype(float)
    total = m.sum(1)[:, None]
    shape = (m.shape[0], f.shape[0])
    start = 1 / 3 if always else 0.0  # EM's updates keep a zero share at zero
    w1, w0, wf = np.full(shape, start), np.full(shape, (1 - start) / 2), np.full(shape, (1 - start) / 2)
    for _ in range(iterations):
        dens = w1[..., None] * is_all + w0[..., None] * is_none + wf[..., None] * f[None]
        ratio = np.divide(m[:, None, :], dens, out=np.zeros_like(dens), where=dens > 0)
        w1 = w1 * (ratio * is_all).sum(-1) / total
        w0 = w0 * (ratio * is_none).sum(-1) / total
        wf = wf * (ratio * f[None]).sum(-1) / total
    return _loglik(m, f, is_all, is_none, w1, w0, wf), w1, w0, wf


def _old_fit_grid(m: np.ndarray, patterns: _Patterns, always: bool = True) -> np.ndarray:
    """Best grid fit per replicate: array (R, 4) of share_always, share_never, alpha, beta."""
    out = np.empty((m.shape[0], 4))
    for start in range(0, m.shape[0], _CHUNK):
        block = m[start : start + _CHUNK]
        ll, w1, w0, _ = _profile(block, patterns, GRID_A, GRID_B, always)
        best = np.argmax(ll, axis=1)
        rows = np.arange(block.shape[0])
        out[start : start + _CHUNK] = np.column_stack(
            [w1[rows, best], w0[rows, best], GRID_A[best], GRID_B[best]]
        )
    return out


def old_refits(n: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The previous bootstrap refit of suites c (R, T) with the tasks' n."""
    patterns = _Patterns.for_trials(n)
    return _old_fit_grid(patterns.counts(n, c), patterns)


def clock(fn, *args, **kwargs) -> tuple[float, float, object]:
    """Wall and CPU seconds of one call, and its result."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return time.perf_counter() - wall, time.process_time() - cpu, out


def suite(n: np.ndarray, groups: int, rng: np.random.Generator) -> pd.DataFrame:
    n = np.tile(n, groups)
    return pd.DataFrame(
        {
            "g": np.repeat(np.arange(groups), n.size // groups),
            "task": np.arange(n.size),
            "n": n,
            "c": rng.binomial(n, TRUTH.sample((n.size,), rng)),
        }
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=4, help="configurations of 1,000 tasks (default 4)")
    parser.add_argument("--old-boot", type=int, default=40, help="replicates for the old fit (default 40)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(47)
    missed = 0
    shapes = {"80 tasks x 5 trials": np.full(80, 5), "80 tasks x 8-96 trials": rng.integers(8, 97, 80)}
    print(
        f"bootstrap refits (one model), old at {args.old_boot} replicates "
        f"(mixed n: 1 per 40) scaled to {N_BOOT}:"
    )
    for label, n in shapes.items():
        c = rng.binomial(n, TRUTH.sample((N_BOOT, n.size), rng))
        reps = args.old_boot if np.unique(n).size == 1 else max(1, args.old_boot // 40)
        new_wall, new_cpu, new = clock(fit_grid, ReplicateCells.of(n, c))
        old_wall, old_cpu, old = clock(old_refits, n, c[:reps])
        scale = N_BOOT / reps
        same = np.mean(np.all(np.asarray(old)[:, 2:] == np.asarray(new)[:reps, 2:], axis=1))
        print(
            f"  {label}: new {new_wall:.2f} s ({new_cpu:.2f} s CPU), old {old_wall * scale:.1f} s "
            f"({old_cpu * scale:.1f} s CPU), x{old_cpu * scale / max(new_cpu, 1e-9):.0f}; "
            f"same grid point {same:.0%}"
        )
    targets = [("80 tasks x 5 trials", shapes["80 tasks x 5 trials"], 1, 1.0)]
    targets += [("80 tasks x 8-96 trials", shapes["80 tasks x 8-96 trials"], 1, 5.0)]
    targets += [
        (f"{args.groups} x 1,000 tasks x 5 trials", np.full(1000, 5), args.groups, 20.0 * args.groups / 20)
    ]
    print(f"forecast(n_boot={N_BOOT}), both models, intervals and bounds:")
    for label, n, groups, target in targets:
        wall, cpu, _ = clock(forecast, suite(n, groups, rng), by="g", n_boot=N_BOOT)
        ok = cpu <= target
        missed += not ok
        print(f"  {label}: {wall:.2f} s ({cpu:.2f} s CPU), target {target:.1f} s: {'ok' if ok else 'MISSED'}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
