"""Coverage of passk-nb's intervals, measured by simulation: the table the README quotes.

For each cell (per-task p distribution, T tasks, n trials per task, k) it simulates suites: p_i
from the distribution, c_i ~ Binomial(n, p_i), and checks how often each nominal 95 % interval
contains its target:

- ``kg`` / ``t`` / ``boot``: the "new tasks like these" interval of ``summarize`` (Korn–Graubard,
  the default; Student-t on per-task values; the percentile cluster bootstrap) against the
  population value E[p^k] (pass^k) or E[1 − (1 − p)^k] (pass@k);
- ``fixed``: value ± z·se_fixed (``pass^k_se_fixed``) against these tasks' mean of p_i^k;
- ``fixed_old``: the same with the unbiased variance estimate it replaced;
- ``paired_t`` / ``paired_boot``: :func:`passk_nb.stats.paired.compare`'s interval (paired t, the
  default, or the bootstrap) of the mean
  per-task difference, arm b's p_i equal to arm a's with probability ½ and otherwise drawn from
  Beta(2, 2), against the population difference.

Population intervals are shown even below the task count where passk-nb declines them (the
``given`` column says whether passk-nb gives it), so the table shows why it declines.

    python benchmarks/coverage.py                 # the README table (about a minute)
    python benchmarks/coverage.py --suites 400 --quick
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps
from scipy.special import betaln

from passk_nb.stats.estimators import pass_at_k, pass_hat_k
from passk_nb.stats.intervals import (
    cluster_bootstrap,
    fixed_task_variance,
    korn_graubard,
    student_t,
    unbiased_variance,
)
from passk_nb.stats.params import MIN_TASKS


@dataclass(frozen=True)
class Prior:
    """A distribution of per-task success probabilities with closed-form E[p^k] and E[(1 − p)^k]."""

    name: str
    draw: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]
    moment: Callable[[int], float]  # E[p^k]
    moment_fail: Callable[[int], float]  # E[(1 - p)^k]


def beta_prior(a: float, b: float, name: str) -> Prior:
    return Prior(
        name,
        lambda rng, shape: rng.beta(a, b, size=shape),
        lambda k: float(np.exp(betaln(a + k, b) - betaln(a, b))),
        lambda k: float(np.exp(betaln(a, b + k) - betaln(a, b))),
    )


def _mixture_draw(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    u = rng.random(shape)
    return np.where(u < 0.3, 1.0, np.where(u < 0.5, 0.0, rng.beta(4, 2, size=shape)))


_B42 = beta_prior(4, 2, "beta(4,2)")
PRIORS = (
    beta_prior(2, 1, "Beta(2,1)"),
    beta_prior(0.5, 0.5, "Beta(½,½)"),
    Prior(
        "mixture",  # 30 % always, 20 % never, 50 % Beta(4, 2)
        _mixture_draw,
        lambda k: 0.3 + 0.5 * _B42.moment(k),
        lambda k: 0.2 + 0.5 * _B42.moment_fail(k),
    ),
)
_B22 = beta_prior(2, 2, "Beta(2,2)")


def metric_values(n: int, c: np.ndarray, k: int) -> np.ndarray:
    """(…, 2): pass@k and pass^k per task."""
    return np.stack([pass_at_k(n, c, k), pass_hat_k(n, c, k)], axis=-1)


def fixed_variances(n: int, c: np.ndarray, k: int, variance=fixed_task_variance) -> np.ndarray:
    nn = np.full(c.shape, n)
    return np.stack([variance(nn, nn - c, k), variance(nn, c, k)], axis=-1)


def _flat(suites: int, tasks: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    gid = np.repeat(np.arange(suites), tasks)
    return gid, x.reshape(suites * tasks, -1)


def cell(prior: Prior, tasks: int, n: int, k: int, suites: int, seed: int, n_boot: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    z = sps.norm.ppf(0.975)
    p = prior.draw(rng, (suites, tasks))
    c = rng.binomial(n, p)
    values = metric_values(n, c, k)  # (suites, tasks, 2)
    floor = fixed_variances(n, c, k)
    gid, flat_values = _flat(suites, tasks, values)
    _, flat_floor = _flat(suites, tasks, floor)
    population = np.array([1 - prior.moment_fail(k), prior.moment(k)])
    fixed_truth = np.stack([1 - ((1 - p) ** k).mean(axis=1), (p**k).mean(axis=1)], axis=-1)
    mean = values.mean(axis=1)

    def covers(lo: np.ndarray, hi: np.ndarray, truth: np.ndarray) -> np.ndarray:
        return ((lo <= truth + 1e-12) & (truth - 1e-12 <= hi)).mean(axis=0)  # per metric

    out: dict[str, object] = {}
    lo, hi = korn_graubard(gid, flat_values, flat_floor, suites, ci=0.95)
    out["kg"], out["kg_width"] = covers(lo, hi, population), (hi - lo).mean(axis=0)
    lo, hi = student_t(gid, flat_values, flat_floor, suites, ci=0.95)
    lo, hi = np.clip(lo, 0, 1), np.clip(hi, 0, 1)
    out["t"], out["t_width"] = covers(lo, hi, population), (hi - lo).mean(axis=0)
    lo, hi = cluster_bootstrap(gid, flat_values, suites, ci=0.95, n_boot=n_boot, seed=seed)
    out["boot"] = covers(lo, hi, population)
    for name, variance in (("fixed", fixed_task_variance), ("fixed_old", unbiased_variance)):
        se = np.sqrt(fixed_variances(n, c, k, variance).sum(axis=1)) / tasks
        lo, hi = np.clip(mean - z * se, 0, 1), np.clip(mean + z * se, 0, 1)
        out[name] = covers(lo, hi, fixed_truth) if not np.isnan(se).all() else np.array([np.nan, np.nan])
        if name == "fixed":
            out["fixed_width"] = (hi - lo).mean(axis=0)
            out["fixed_zero"] = int((hi - lo <= 0).sum())
    # paired: arm b equals arm a with probability 1/2, otherwise an independent Beta(2, 2) task
    same = rng.random((suites, tasks)) < 0.5
    p_b = np.where(same, p, _B22.draw(rng, (suites, tasks)))
    c_a, c_b = rng.binomial(n, p), rng.binomial(n, p_b)
    diff = metric_values(n, c_b, k) - metric_values(n, c_a, k)
    diff_floor = fixed_variances(n, c_a, k) + fixed_variances(n, c_b, k)
    truth_b = 0.5 * population + 0.5 * np.array([1 - _B22.moment_fail(k), _B22.moment(k)])
    truth = truth_b - population
    gid, flat_diff = _flat(suites, tasks, diff)
    _, flat_dfloor = _flat(suites, tasks, diff_floor)
    lo, hi = student_t(gid, flat_diff, flat_dfloor, suites, ci=0.95)
    out["paired_t"] = covers(np.clip(lo, -1, 1), np.clip(hi, -1, 1), truth)
    lo, hi = cluster_bootstrap(gid, flat_diff, suites, ci=0.95, n_boot=n_boot, seed=seed)
    out["paired_boot"] = covers(lo, hi, truth)
    return out


SUMMARY_ROWS = (
    ("kg", "new tasks: Korn–Graubard (summarize's default)", True),
    ("t", "new tasks: Student-t", False),
    ("boot", "new tasks: percentile bootstrap over tasks", False),
    ("fixed", "these tasks: value ± z·se_fixed (new se_fixed)", True),
    ("fixed_old", "these tasks: old se_fixed (unbiased variance)", False),
    ("paired_t", "compare: paired t (default)", True),
    ("paired_boot", "compare: paired bootstrap over tasks", False),
)


def compact(rows: list[tuple[int, int, int, str, dict[str, object]]], tasks: list[int]) -> str:
    """Markdown: per interval and T, the lowest–highest coverage over p, n, k and both metrics."""
    lines = [
        "| nominal 95 % (lowest–highest over p, n, k, pass^k and pass@k) | "
        + " | ".join(f"T = {t}" for t in tasks)
        + " |",
        "|---" * (len(tasks) + 1) + "|",
    ]
    for key, label, shipped in SUMMARY_ROWS:
        cells = []
        for t in tasks:
            values = np.concatenate(
                [np.asarray(res[key], dtype=float) for tt, _, _, _, res in rows if tt == t]
            )
            values = values[~np.isnan(values)]
            if not values.size:
                cells.append("–")
                continue
            text = f"{values.min():.0%}–{values.max():.0%}"
            declined = shipped and key != "fixed" and t < MIN_TASKS
            cells.append(f"({text}, declined)" if declined else text)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suites", type=int, default=1000, help="simulated suites per cell")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--tasks", type=int, nargs="+", default=[3, 5, 10, 20, 50])
    parser.add_argument("--trials", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--ks", type=int, nargs="+", default=[2, 3, 4])
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows = []
    for tasks in args.tasks:
        for n in args.trials:
            for k in args.ks:
                if k > n:
                    continue
                for j, prior in enumerate(PRIORS):
                    seed = args.seed + 1000 * tasks + 100 * n + 10 * k + j
                    res = cell(prior, tasks, n, k, args.suites, seed, args.n_boot)
                    rows.append((tasks, n, k, prior.name, res))
    print(f"{args.suites} suites per cell, nominal 95 %; pass^k coverage (pass@k in brackets)\n")
    print(
        "| T | n | k | p | new tasks: Korn–Graubard | t | bootstrap | width (KG) "
        "| these tasks: fixed | width | old se_fixed | paired t | paired bootstrap |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")

    def pct(x: np.ndarray) -> str:
        return "–" if np.isnan(x[1]) else f"{x[1]:.0%} ({x[0]:.0%})"

    def width(x: np.ndarray) -> str:
        return f"{x[1]:.2f} ({x[0]:.2f})"

    worst: dict[str, float] = {}
    zero: dict[str, int] = {}
    for tasks, n, k, name, res in rows:
        given = tasks >= MIN_TASKS
        mark = "" if given else " declined"
        print(
            f"| {tasks} | {n} | {k} | {name} | {pct(res['kg'])}{mark} | {pct(res['t'])} | "
            f"{pct(res['boot'])} | {width(res['kg_width'])} | {pct(res['fixed'])} | "
            f"{width(res['fixed_width'])} | {pct(res['fixed_old'])} | {pct(res['paired_t'])}{mark} | "
            f"{pct(res['paired_boot'])} |"
        )
        for key in ("fixed",) + (("kg", "paired_t") if given else ()):
            worst[key] = min(worst.get(key, 1.0), float(np.nanmin(res[key])))
            zero[key] = zero.get(key, 0) + int(res.get("fixed_zero", 0)) if key == "fixed" else 0
    print()
    print(compact(rows, args.tasks))
    print()
    print("worst coverage of what passk-nb gives:", ", ".join(f"{k} {v:.1%}" for k, v in worst.items()))
    print(f"zero-width fixed-task intervals: {zero.get('fixed', 0)}")
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0 if min(worst.values()) >= 0.90 else 1


if __name__ == "__main__":
    sys.exit(main())
