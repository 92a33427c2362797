"""Coverage of passk-nb's intervals, measured by simulation: the table docs/methods/intervals.md quotes.

For each cell (per-task p distribution, T tasks, n trials per task, k) it simulates suites: p_i
from the distribution, c_i ~ Binomial(n, p_i), and checks how often each nominal 95 % interval
contains its target:

- ``kg`` / ``t`` / ``boot``: the "new tasks like these" interval of ``summarize`` (Korn–Graubard,
  the default; Student-t on per-task values; the percentile cluster bootstrap) against the
  population value E[p^k] (pass^k) or E[1 − (1 − p)^k] (pass@k); ``kg_old``: Korn–Graubard as it
  was before issue 49 (T_eff free to fall below T), whose widths the per-cell table puts beside
  the shipped ones;
- ``fixed``: summarize's ``pass^k_fixed_lo``–``pass^k_fixed_hi`` (value ± z·se_fixed, the variance
  the largest over each task's 80 % Jeffreys interval) against these tasks' mean of p_i^k;
- ``fixed_plugin`` / ``fixed_old``: the same with the variance read at p̃ = (c + ½)/(n + 1), or
  the unbiased variance estimate, that it replaced;
- ``paired_kg`` / ``paired_t`` / ``paired_boot``: :func:`passk_nb.stats.paired.compare`'s interval
  (Korn–Graubard on (d + 1)/2, the default; paired t; the bootstrap) of the mean per-task
  difference, arm b's p_i equal to arm a's with probability ½ and otherwise drawn from
  Beta(2, 2), against the population difference; ``paired_kg_fp`` / ``paired_t_fp``: how often
  that interval excludes 0 when arm b's p_i is arm a's with probability ½ and otherwise drawn
  from arm a's own population (equal population values: a false positive, nominal 5 %).

The truths include issue 49's four (hard Beta(0.5, 2); near-certain {0.9: 30 %, 1: 70 %}; two
flaky tasks at 0.75 among certain ones; every task flaky, Uniform(0.7, 1)). After the coverage
table come the mean widths per cell, before and after issue 49, and the lowest coverage of the
fixed interval with its half-width scaled by :data:`FIXED_SCALES` (how far it could narrow).

Population intervals are shown even below the task count where passk-nb declines them (the
``given`` column says whether passk-nb gives it), so the table shows why it declines.

Task families (``cluster=``): ``--families`` adds a clustered truth, families of 3 tasks whose
logits share a family effect (1 + N(0, 1.5²) per family + N(0, 0.5²) per task), and measures the
new-task intervals with and without the family as the sampling unit, and compare's false-positive
rate when a family's lift goes to one arm or the other (equal populations).

    python benchmarks/coverage.py                 # the tables of docs/methods/intervals.md (2–3 minutes)
    python benchmarks/coverage.py --suites 400 --quick
    python benchmarks/coverage.py --families-only --suites 200   # the clustered truth alone
    python benchmarks/coverage.py --gate-only --suites 100000    # the gate's false pass alone

``--gate-only``: how often ``gate(interval="fixed")`` passes a configuration whose these-tasks
pass^k is exactly its threshold (the worst case of a false pass: the lower end of the fixed
interval at or above the tasks' own mean of p^k; promised ≤ 2.5 % at 95 %), with its Monte Carlo
standard error, on every truth here and three more (hard Beta(0.5, 2), Uniform(0.7, 1), two
flaky tasks at 0.75 among certain ones).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps
from scipy.special import betaln

from passk_nb.stats.estimators import pass_at_k, pass_hat_k
from passk_nb.stats.intervals import (
    cell_spread,
    cluster_bootstrap,
    fixed_interval,
    fixed_task_variance,
    korn_graubard,
    korn_graubard_paired,
    plugin_task_variance,
    population_interval,
    student_t,
    unbiased_variance,
)
from passk_nb.stats.paired import compare
from passk_nb.stats.params import MIN_TASKS


@dataclass(frozen=True)
class Prior:
    """Per-task success probabilities: a distribution, or a fixed design of T tasks, with E[p^k]
    and E[(1 − p)^k] over the population (for a design, over its T tasks)."""

    name: str
    draw: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]
    moment: Callable[[int, int], float]  # (k, T) -> E[p^k]
    moment_fail: Callable[[int, int], float]  # (k, T) -> E[(1 - p)^k]


def beta_prior(a: float, b: float, name: str) -> Prior:
    return Prior(
        name,
        lambda rng, shape: rng.beta(a, b, size=shape),
        lambda k, _t: float(np.exp(betaln(a + k, b) - betaln(a, b))),
        lambda k, _t: float(np.exp(betaln(a, b + k) - betaln(a, b))),
    )


def atoms_prior(values: tuple[float, ...], weights: tuple[float, ...], name: str) -> Prior:
    v, w = np.array(values), np.array(weights)
    return Prior(
        name,
        lambda rng, shape: rng.choice(v, p=w, size=shape),
        lambda k, _t: float(np.sum(w * v**k)),
        lambda k, _t: float(np.sum(w * (1 - v) ** k)),
    )


def logit_normal_prior(mu: float, sigma: float, name: str) -> Prior:
    x, w = np.polynomial.hermite_e.hermegauss(80)  # E[f(Z)], Z ~ N(0, 1)
    p, w = 1 / (1 + np.exp(-(mu + sigma * x))), w / w.sum()
    return Prior(
        name,
        lambda rng, shape: 1 / (1 + np.exp(-rng.normal(mu, sigma, size=shape))),
        lambda k, _t: float(np.sum(w * p**k)),
        lambda k, _t: float(np.sum(w * (1 - p) ** k)),
    )


def one_flaky(p_flaky: float, name: str) -> Prior:
    """T − 1 tasks that always pass and one at ``p_flaky``: the suite is its own population."""
    return Prior(
        name,
        lambda rng, shape: np.broadcast_to(np.r_[np.ones(shape[-1] - 1), p_flaky], shape).copy(),
        lambda k, t: (t - 1 + p_flaky**k) / t,
        lambda k, t: (1 - p_flaky) ** k / t,
    )


def some_flaky(count: int, p_flaky: float, name: str) -> Prior:
    """T − ``count`` tasks that always pass and ``count`` at ``p_flaky``: the suite is its own
    population."""
    return Prior(
        name,
        lambda rng, shape: np.broadcast_to(
            np.r_[np.ones(shape[-1] - count), np.full(count, p_flaky)], shape
        ).copy(),
        lambda k, t: (t - count + count * p_flaky**k) / t,
        lambda k, t: count * (1 - p_flaky) ** k / t,
    )


def uniform_prior(a: float, b: float, name: str) -> Prior:
    """p ~ Uniform(a, b): E[p^k] = (b^(k+1) − a^(k+1)) / ((k + 1)(b − a))."""
    return Prior(
        name,
        lambda rng, shape: rng.uniform(a, b, size=shape),
        lambda k, _t: (b ** (k + 1) - a ** (k + 1)) / ((k + 1) * (b - a)),
        lambda k, _t: ((1 - a) ** (k + 1) - (1 - b) ** (k + 1)) / ((k + 1) * (b - a)),
    )


def kg_before_49(
    gid: np.ndarray, values: np.ndarray, floor: np.ndarray, n_groups: int
) -> tuple[np.ndarray, np.ndarray]:
    """Korn–Graubard as shipped before issue 49, for the old-vs-new widths: the same interval
    with the t correction free to take T_eff below T (to T/2 at five tasks)."""
    sizes, means, s2 = cell_spread(gid, np.ones_like(values), values, floor, n_groups)
    t, z = sps.t.ppf(0.975, np.maximum(sizes - 1, 1)), sps.norm.ppf(0.975)
    bern = np.clip(means, 1e-12, 1 - 1e-12) * (1 - np.clip(means, 1e-12, 1 - 1e-12))
    phi = np.clip(s2 / bern, 1e-12, 1.0)
    phi = ((sizes - 1) * phi + 1) / sizes
    t_eff = sizes / phi * (z / t) ** 2
    x = np.clip(means, 0.0, 1.0) * t_eff
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(x > 0, sps.beta.ppf(0.025, x, t_eff - x + 1), 0.0)
        hi = np.where(x < t_eff, sps.beta.ppf(0.975, x + 1, t_eff - x), 1.0)
    return lo, hi


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
        lambda k, t: 0.3 + 0.5 * _B42.moment(k, t),
        lambda k, t: 0.2 + 0.5 * _B42.moment_fail(k, t),
    ),
    one_flaky(0.5, "one flaky (½) among certain"),
    atoms_prior((0.9,), (1.0,), "all p = 0.9"),
    beta_prior(5, 1, "Beta(5,1)"),
    logit_normal_prior(1.0, 1.5, "logit-normal(1, 1.5)"),
    atoms_prior((0.0, 0.6, 0.95), (0.15, 0.5, 0.35), "three-point"),
    beta_prior(0.3, 0.3, "U-shaped Beta(0.3,0.3)"),
    # issue 49's independent check
    beta_prior(0.5, 2, "hard Beta(0.5,2)"),
    atoms_prior((0.9, 1.0), (0.3, 0.7), "near-certain {0.9: 30 %, 1: 70 %}"),
    some_flaky(2, 0.75, "two flaky (0.75) among certain"),
    uniform_prior(0.7, 1.0, "every task flaky, Uniform(0.7,1)"),
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


#: Scales of the fixed interval's half-width measured to show how far it could narrow (issue 49).
FIXED_SCALES = (0.95, 0.9, 0.8)


def cell(prior: Prior, tasks: int, n: int, k: int, suites: int, seed: int, n_boot: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    z = sps.norm.ppf(0.975)
    p = prior.draw(rng, (suites, tasks))
    c = rng.binomial(n, p)
    values = metric_values(n, c, k)  # (suites, tasks, 2)
    floor = fixed_variances(n, c, k, plugin_task_variance)  # the new-task intervals' floor
    gid, flat_values = _flat(suites, tasks, values)
    _, flat_floor = _flat(suites, tasks, floor)
    population = np.array([1 - prior.moment_fail(k, tasks), prior.moment(k, tasks)])
    fixed_truth = np.stack([1 - ((1 - p) ** k).mean(axis=1), (p**k).mean(axis=1)], axis=-1)
    mean = values.mean(axis=1)

    def covers(lo: np.ndarray, hi: np.ndarray, truth: np.ndarray) -> np.ndarray:
        return ((lo <= truth + 1e-12) & (truth - 1e-12 <= hi)).mean(axis=0)  # per metric

    out: dict[str, object] = {}
    lo, hi = korn_graubard(gid, flat_values, flat_floor, suites, ci=0.95)
    out["kg"], out["kg_width"] = covers(lo, hi, population), (hi - lo).mean(axis=0)
    lo, hi = kg_before_49(gid, flat_values, flat_floor, suites)
    out["kg_old"], out["kg_old_width"] = covers(lo, hi, population), (hi - lo).mean(axis=0)
    lo, hi = student_t(gid, flat_values, flat_floor, suites, ci=0.95)
    lo, hi = np.clip(lo, 0, 1), np.clip(hi, 0, 1)
    out["t"], out["t_width"] = covers(lo, hi, population), (hi - lo).mean(axis=0)
    lo, hi = cluster_bootstrap(gid, flat_values, suites, ci=0.95, n_boot=n_boot, seed=seed)
    out["boot"] = covers(lo, hi, population)
    for name, variance in (
        ("fixed", fixed_task_variance),
        ("fixed_plugin", plugin_task_variance),
        ("fixed_old", unbiased_variance),
    ):
        se = np.sqrt(fixed_variances(n, c, k, variance).sum(axis=1)) / tasks
        lo, hi = np.clip(mean - z * se, 0, 1), np.clip(mean + z * se, 0, 1)
        out[name] = covers(lo, hi, fixed_truth) if not np.isnan(se).all() else np.array([np.nan, np.nan])
        out[f"{name}_width"] = (hi - lo).mean(axis=0)
        if name == "fixed":
            out["fixed_zero"] = int((hi - lo <= 0).sum())
            for r in FIXED_SCALES:  # how far the fixed interval could narrow: z·se scaled by r
                lo, hi = np.clip(mean - r * z * se, 0, 1), np.clip(mean + r * z * se, 0, 1)
                out[f"fixed_x{r}"] = covers(lo, hi, fixed_truth)
    # paired: arm b equals arm a with probability 1/2, otherwise an independent Beta(2, 2) task
    same = rng.random((suites, tasks)) < 0.5
    p_b = np.where(same, p, _B22.draw(rng, (suites, tasks)))
    c_a, c_b = rng.binomial(n, p), rng.binomial(n, p_b)
    diff = metric_values(n, c_b, k) - metric_values(n, c_a, k)
    diff_floor = fixed_variances(n, c_a, k) + fixed_variances(n, c_b, k)
    truth_b = 0.5 * population + 0.5 * np.array([1 - _B22.moment_fail(k, tasks), _B22.moment(k, tasks)])
    truth = truth_b - population
    gid, flat_diff = _flat(suites, tasks, diff)
    _, flat_dfloor = _flat(suites, tasks, diff_floor)
    # the null: arm b's task is arm a's with probability 1/2, otherwise one more from arm a's population
    p_null = np.where(rng.random((suites, tasks)) < 0.5, p, prior.draw(rng, (suites, tasks)))
    c_null = rng.binomial(n, p_null)
    _, null_diff = _flat(suites, tasks, metric_values(n, c_null, k) - metric_values(n, c_a, k))
    _, null_floor = _flat(suites, tasks, fixed_variances(n, c_a, k) + fixed_variances(n, c_null, k))
    for key, paired in (("paired_kg", korn_graubard_paired), ("paired_t", student_t)):
        lo, hi = paired(gid, flat_diff, flat_dfloor, suites, ci=0.95)
        lo, hi = np.clip(lo, -1, 1), np.clip(hi, -1, 1)
        out[key], out[f"{key}_width"] = covers(lo, hi, truth), (hi - lo).mean(axis=0)
        lo, hi = paired(gid, null_diff, null_floor, suites, ci=0.95)
        out[f"{key}_fp"] = ((lo > 0) | (hi < 0)).mean(axis=0)
    lo, hi = cluster_bootstrap(gid, flat_diff, suites, ci=0.95, n_boot=n_boot, seed=seed)
    out["paired_boot"] = covers(lo, hi, truth)
    return out


def compare_size(tasks: int, n: int, k: int, suites: int, seed: int) -> tuple[float, float]:
    """How often :func:`~passk_nb.stats.paired.compare`'s fixed-task interval for pass^k excludes 0
    when both arms have p = 0.9 on every task (nominal 5 %), with its variance and with the plug-in's."""
    rng = np.random.default_rng(seed)
    c_a, c_b = rng.binomial(n, 0.9, (suites, tasks)), rng.binomial(n, 0.9, (suites, tasks))
    sim, task = np.repeat(np.arange(suites), tasks), np.tile(np.arange(tasks), suites)
    arms = [
        pd.DataFrame({"sim": sim, "task": task, "n": n, "c": c.ravel(), "arm": arm})
        for c, arm in ((c_a, "a"), (c_b, "b"))
    ]
    out = compare(pd.concat(arms), on="arm", a="a", b="b", k=k, by="sim", n_boot=0)
    rows = out[out["metric"] == "pass^k"]
    shipped = float(((rows["fixed_lo"] > 0) | (rows["fixed_hi"] < 0)).mean())
    nn = np.full(c_a.shape, n)
    se = np.sqrt((plugin_task_variance(nn, c_a, k) + plugin_task_variance(nn, c_b, k)).sum(axis=1)) / tasks
    diff = (pass_hat_k(nn, c_b, k) - pass_hat_k(nn, c_a, k)).mean(axis=1)
    return shipped, float(np.mean(np.abs(diff) > sps.norm.ppf(0.975) * se))


#: The clustered truth: families of FAMILY_SIZE tasks, logit MU + N(0, SD_FAMILY²) + N(0, SD_TASK²).
FAMILY_SIZE, MU, SD_FAMILY, SD_TASK = 3, 1.0, 1.5, 0.5
CLUSTERED = logit_normal_prior(MU, float(np.hypot(SD_FAMILY, SD_TASK)), "families of 3 (sd 1.5)")


def clustered_cell(tasks: int, n: int, k: int, suites: int, seed: int, n_boot: int) -> dict[str, object]:
    """Coverage of the new-task intervals on the clustered truth, tasks independent (``*_naive``) or
    families the unit (``*_cluster``: the ``unit`` of :mod:`passk_nb.stats.intervals`, what
    ``cluster=`` passes); compare's false-positive rate on two arms with equal population values
    whose difference a family shares (``fp_*``: Korn–Graubard, the default; ``fp_t_*``: paired t)."""
    rng = np.random.default_rng(seed)
    families = tasks // FAMILY_SIZE
    tasks = families * FAMILY_SIZE
    logit = (
        MU
        + rng.normal(0, SD_FAMILY, (suites, families, 1))
        + rng.normal(0, SD_TASK, (suites, families, FAMILY_SIZE))
    )
    p = (1 / (1 + np.exp(-logit))).reshape(suites, tasks)
    c = rng.binomial(n, p)
    gid, values = _flat(suites, tasks, metric_values(n, c, k))
    _, floor = _flat(suites, tasks, fixed_variances(n, c, k, plugin_task_variance))
    unit = np.tile(np.repeat(np.arange(families), FAMILY_SIZE), suites)
    population = np.array([1 - CLUSTERED.moment_fail(k, tasks), CLUSTERED.moment(k, tasks)])
    out: dict[str, object] = {"families": families}
    for method, key in (("korn-graubard", "kg"), ("t", "t"), ("bootstrap", "boot")):
        for name, u in (("naive", None), ("cluster", unit)):
            lo, hi, _ = population_interval(
                gid,
                values,
                floor,
                suites,
                method=method,
                ci=0.95,
                n_boot=n_boot,
                seed=seed,
                min_tasks=2,
                unit=u,
            )
            out[f"{key}_{name}"] = ((lo <= population) & (population <= hi)).mean(axis=0)
    lift = rng.choice([-0.75, 0.75], (suites, families, 1))  # a family's lift to arm a or to arm b
    c_a = rng.binomial(n, (1 / (1 + np.exp(-(logit + lift)))).reshape(suites, tasks))
    c_b = rng.binomial(n, (1 / (1 + np.exp(-(logit - lift)))).reshape(suites, tasks))
    _, diff = _flat(suites, tasks, metric_values(n, c_b, k) - metric_values(n, c_a, k))
    _, dfloor = _flat(suites, tasks, fixed_variances(n, c_a, k) + fixed_variances(n, c_b, k))
    for method, key in (("korn-graubard", "fp"), ("t", "fp_t")):
        for name, u in (("naive", None), ("cluster", unit)):
            lo, hi, _ = population_interval(
                gid,
                diff,
                dfloor,
                suites,
                method=method,
                ci=0.95,
                n_boot=0,
                seed=seed,
                min_tasks=2,
                lower=-1.0,
                unit=u,
            )
            out[f"{key}_{name}"] = ((lo > 0) | (hi < 0)).mean(axis=0)
    return out


def families_table(args: argparse.Namespace) -> None:
    """Print the clustered truth's table (``--families``)."""
    print(f"\nTask families: {CLUSTERED.name}; pass^k (pass@k in brackets), nominal 95 %\n")
    print(
        "| T | families | n | k | KG tasks | KG families | t tasks | t families | bootstrap tasks "
        "| bootstrap families | compare false positives: tasks | families | paired t: tasks | families |"
    )
    print("|---" * 14 + "|")
    for tasks in [t for t in args.tasks if t >= 2 * FAMILY_SIZE]:
        for n in args.trials:
            for k in [k for k in args.ks if k <= n]:
                res = clustered_cell(tasks, n, k, args.suites, args.seed + 7 * tasks + n + k, args.n_boot)
                cells = [
                    f"{res[key][1]:.0%} ({res[key][0]:.0%})"  # type: ignore[index]
                    for key in (
                        "kg_naive",
                        "kg_cluster",
                        "t_naive",
                        "t_cluster",
                        "boot_naive",
                        "boot_cluster",
                    )
                ]
                fp = [
                    f"{res[key][1]:.1%}"  # type: ignore[index]
                    for key in ("fp_naive", "fp_cluster", "fp_t_naive", "fp_t_cluster")
                ]
                print(f"| {tasks} | {res['families']} | {n} | {k} | " + " | ".join(cells + fp) + " |")


SUMMARY_ROWS = (
    ("kg", "new tasks: Korn–Graubard (summarize's default)", True),
    ("kg_old", "new tasks: Korn–Graubard before issue 49 (T_eff below T)", False),
    ("t", "new tasks: Student-t", False),
    ("boot", "new tasks: percentile bootstrap over tasks", False),
    ("fixed", "these tasks: fixed_lo–fixed_hi (summarize's)", True),
    ("fixed_plugin", "these tasks: plug-in variance at p̃ = (c + ½)/(n + 1)", False),
    ("fixed_old", "these tasks: unbiased variance", False),
    ("paired_kg", "compare: Korn–Graubard (default)", True),
    ("paired_t", "compare: paired t", False),
    ("paired_boot", "compare: paired bootstrap over tasks", False),
    ("paired_kg_fp", "compare, equal arms: Korn–Graubard excludes 0 (false positives)", True),
    ("paired_t_fp", "compare, equal arms: paired t excludes 0", False),
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


def width_table(rows: list[tuple[int, int, int, str, dict[str, object]]], tasks: list[int]) -> str:
    """Markdown: per truth, n and k, the mean pass^k width of each interval at each T, before and
    after issue 49 with their ratio, and the new-task interval's lowest coverage (pass^k, pass@k)."""
    head = "| p | n | k | " + " | ".join(
        f"T = {t}: new tasks, before → after (ratio); coverage | these tasks" for t in tasks
    )
    lines = [head + " |", "|---|---|---" + "|---|---" * len(tasks) + "|"]
    by_cell = {(t, n, k, name): res for t, n, k, name, res in rows}
    for name in dict.fromkeys(name for *_, name, _ in rows):
        for n, k in dict.fromkeys((n, k) for _, n, k, nm, _ in rows if nm == name):
            cells = []
            for t in tasks:
                res = by_cell[(t, n, k, name)]
                old, new = float(res["kg_old_width"][1]), float(res["kg_width"][1])  # type: ignore[index]
                low = float(np.min(res["kg"]))  # type: ignore[call-overload]
                fixed = float(res["fixed_width"][1])  # type: ignore[index]
                cells += [f"{old:.2f} → {new:.2f} ({new / old:.2f}); {low:.1%}", f"{fixed:.2f} (1.00)"]
            lines.append(f"| {name} | {n} | {k} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


GATE_TRUTHS: dict[str, Callable[[np.random.Generator, tuple[int, int]], np.ndarray]] = {
    "hard, Beta(0.5, 2)": lambda rng, shape: rng.beta(0.5, 2, shape),
    "Uniform(0.7, 1)": lambda rng, shape: rng.uniform(0.7, 1, shape),
    "two flaky (0.75) among certain": lambda rng, shape: np.broadcast_to(
        np.r_[np.ones(shape[1] - 2), 0.75, 0.75], shape
    ).copy(),
}


def gate_table(args: argparse.Namespace) -> None:
    """The gate's false pass on the fixed interval (see the module's docstring): the same
    estimate, variance and interval as summarize's ``pass^k_fixed_lo``, which ``gate`` reads."""
    rng = np.random.default_rng(args.seed)
    truths = {p.name: p.draw for p in PRIORS} | GATE_TRUTHS
    print(
        f"gate(interval='fixed') at the truth: false pass, {args.suites} suites per cell (≤ 2.5 % promised)\n"
    )
    print(
        "| truth | "
        + " | ".join(
            f"T = {t}, n = {n}, k = {k}" for t in args.tasks for n in args.trials for k in args.ks if k <= n
        )
        + " |"
    )
    print("|---|" + "---|" * sum(k <= n for _ in args.tasks for n in args.trials for k in args.ks))
    worst = 0.0
    for name, draw in truths.items():
        cells = []
        for tasks in args.tasks:
            for n in args.trials:
                for k in args.ks:
                    if k > n:
                        continue
                    p = draw(rng, (args.suites, tasks))
                    c = rng.binomial(n, p)
                    value = np.asarray(pass_hat_k(n, c, k), dtype=float).mean(axis=1)
                    se = np.sqrt(fixed_task_variance(np.full_like(c, n), c, k).sum(axis=1)) / tasks
                    lo, _ = fixed_interval(value, se, 0.95)
                    f = float(np.mean(lo >= (p**k).mean(axis=1) - 1e-12))
                    worst = max(worst, f)
                    cells.append(f"{f:.2%} ± {np.sqrt(f * (1 - f) / args.suites):.2%}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"\nworst false pass: {worst:.2%}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suites", type=int, default=1000, help="simulated suites per cell")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--tasks", type=int, nargs="+", default=[3, 5, 10, 30])
    parser.add_argument("--trials", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--families", action="store_true", help="also the clustered truth (cluster=)")
    parser.add_argument("--families-only", action="store_true", help="only the clustered truth")
    parser.add_argument(
        "--gate-only", action="store_true", help="only the gate's false pass (fixed interval)"
    )
    args = parser.parse_args(argv)
    if args.gate_only:
        gate_table(args)
        return 0
    if args.families_only:
        families_table(args)
        return 0
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
        "| these tasks: fixed | width | plug-in | unbiased | paired KG | paired t | paired bootstrap "
        "| equal arms flagged: KG | t |"
    )
    print("|---" * 17 + "|")

    def pct(x: np.ndarray) -> str:
        return "–" if np.isnan(x[1]) else f"{x[1]:.0%} ({x[0]:.0%})"

    def width(x: np.ndarray) -> str:
        return f"{x[1]:.2f} ({x[0]:.2f})"

    worst: dict[str, float] = {}
    most: dict[str, float] = {}
    zero: dict[str, int] = {}
    for tasks, n, k, name, res in rows:
        given = tasks >= MIN_TASKS
        mark = "" if given else " declined"
        print(
            f"| {tasks} | {n} | {k} | {name} | {pct(res['kg'])}{mark} | {pct(res['t'])} | "
            f"{pct(res['boot'])} | {width(res['kg_width'])} | {pct(res['fixed'])} | "
            f"{width(res['fixed_width'])} | {pct(res['fixed_plugin'])} | {pct(res['fixed_old'])} | "
            f"{pct(res['paired_kg'])}{mark} | {pct(res['paired_t'])} | "
            f"{pct(res['paired_boot'])} | {pct(res['paired_kg_fp'])} | {pct(res['paired_t_fp'])} |"
        )
        for key in ("fixed",) + (("kg", "paired_kg") if given else ()):
            worst[key] = min(worst.get(key, 1.0), float(np.nanmin(res[key])))
        if given:
            for key in ("paired_kg_fp", "paired_t_fp"):
                most[key] = max(most.get(key, 0.0), float(np.nanmax(res[key])))
            zero[key] = zero.get(key, 0) + int(res.get("fixed_zero", 0)) if key == "fixed" else 0
    print()
    print(compact(rows, args.tasks))
    print()
    print(width_table(rows, [t for t in args.tasks if t >= MIN_TASKS]))
    print()
    for r in FIXED_SCALES:
        low = min(
            ((float(np.nanmin(res[f"fixed_x{r}"])), (tasks, n, k, name)) for tasks, n, k, name, res in rows),
            key=lambda x: x[0],
        )
        print(
            f"fixed interval with its half-width × {r}: lowest coverage {low[0]:.1%} (T, n, k, p = {low[1]})"
        )
    print()
    widths = (("kg_width", "new tasks"), ("fixed_width", "these tasks"), ("fixed_plugin_width", "plugin"))
    widths += (("paired_kg_width", "compare, Korn–Graubard"), ("paired_t_width", "compare, paired t"))
    for key, label in widths:
        means = {t: np.mean([res[key][1] for tt, _, _, _, res in rows if tt == t]) for t in args.tasks}
        print(f"mean pass^k width, {label}: " + ", ".join(f"T={t} {m:.2f}" for t, m in means.items()))
    sizes = [compare_size(t, n, 4, args.suites, args.seed + t + n) for t in (5, 10, 30) for n in (4, 8)]
    print(
        "compare, both arms p = 0.9 on every task, pass^4 (T = 5, 10, 30; n = 4, 8): the fixed-task "
        f"interval excludes 0 in {min(a for a, _ in sizes):.1%}–{max(a for a, _ in sizes):.1%} of suites "
        f"(plug-in variance: {min(b for _, b in sizes):.1%}–{max(b for _, b in sizes):.1%}; nominal 5 %)"
    )
    print("worst coverage of what passk-nb gives:", ", ".join(f"{k} {v:.1%}" for k, v in worst.items()))
    print("most false positives from T = 5 up:", ", ".join(f"{k} {v:.1%}" for k, v in most.items()))
    print(f"zero-width fixed-task intervals: {zero.get('fixed', 0)}")
    if args.families:
        families_table(args)
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0 if worst["fixed"] >= 0.93 and min(worst.values()) >= 0.90 else 1


if __name__ == "__main__":
    sys.exit(main())
