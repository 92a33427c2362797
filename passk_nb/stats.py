"""Suite statistics from trial records: :func:`summarize`, :func:`curve`, :func:`compare`, :func:`flips`.

Every function takes a DataFrame of trial records (one row per trial, see
:mod:`passk_nb.records`; the columns ``task``, ``passed`` and ``outcome`` plus any
grouping columns are needed) and works per task: each task keeps its own number of
usable trials n and successes c, the unbiased per-task estimates come from
:mod:`passk_nb.estimators`, and a group's value is the mean over its tasks
(τ-bench's rule). k larger than a task's n makes that task's value NaN; the group
mean then covers fewer tasks, and ``n_tasks_covered`` says how many. k is never
lowered silently.

Intervals answer one of two questions; the columns say which:

- *Population of tasks* ("new tasks like these"): ``*_lo``/``*_hi`` of a group of
  several tasks come from a cluster bootstrap over tasks, resampling task ids with
  replacement and keeping each task's trials intact (percentile interval, ``n_boot``
  resamples). With few tasks this interval is wide by nature and coarse (five tasks
  have few distinct resamples); a group with a single task gets NaN.
- *Fixed task set* ("these tasks, re-rolled"): ``se_fixed`` (pass^k) and
  ``pass@k_se_fixed`` are standard errors from the unbiased per-task variance
  U² − C(c, 2k)/C(n, 2k), summed over tasks and divided by T² (NaN unless every
  covered task has n ≥ 2k). Show it beside the bootstrap interval when tasks are few.

The bootstrap draw depends only on ``seed`` and the number of tasks in a group, so the
same seed gives the same intervals, and a group's interval does not change when other
groups are added to or removed from the frame.

``infra_error`` trials are not agent failures: by default (``infra="exclude"``) they
are left out of n and counted in ``n_infra_excluded``; ``infra="fail"`` counts them as
failures.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from passk_nb.estimators import pass_at_k, pass_hat_k

#: Columns every analysis needs, besides the grouping columns.
ANALYSIS_COLUMNS: tuple[str, ...] = ("task", "passed", "outcome")
#: The metrics, in the order they appear in long frames.
METRICS: tuple[str, ...] = ("pass@k", "pass^k")
INFRA_OUTCOME = "infra_error"
INFRA_MODES: tuple[str, ...] = ("exclude", "fail")
#: Largest number of weights drawn in one bootstrap block.
_BLOCK = 1 << 22


def summarize(
    df: pd.DataFrame,
    *,
    k: int,
    by: str | Sequence[str] = ("task", "model", "prompt_hash"),
    ci: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    infra: str = "exclude",
) -> pd.DataFrame:
    """pass@k and pass^k with intervals, one row per group of ``by``.

    Columns, after the ``by`` columns:

    - ``k``; ``n_tasks`` tasks in the group; ``n_tasks_covered`` tasks with at least k
      usable trials (only those enter the values); ``n_trials`` usable trials;
      ``successes``; ``n_infra_excluded`` infra_error trials left out of n.
    - ``pass@k``, ``pass^k``: mean over covered tasks of the unbiased per-task values.
    - ``pass@k_lo``, ``pass@k_hi``, ``pass^k_lo``, ``pass^k_hi``: the ``ci`` interval.
      For a group of several tasks (``"task"`` not in ``by``) it is the cluster
      bootstrap over tasks ("new tasks like these"). For a per-task row (``"task"`` in
      ``by``) it is the exact Clopper–Pearson interval for the task's success
      probability p mapped through p^k and 1 − (1 − p)^k: an interval for the true
      per-task value. At the edges the unbiased point estimate can sit outside it
      (3 of 4 trials passed: pass^4 = 0, yet p^4 > 0 for sure).
    - ``se_fixed`` (for pass^k) and ``pass@k_se_fixed``: fixed-task-set standard errors
      ("these tasks, re-rolled"); NaN unless every covered task has n ≥ 2k.
    - ``ci_method``: ``"cluster-bootstrap"``, ``"clopper-pearson"`` or ``"none"``.

    ``by=()`` treats the whole frame as one group (a task's trials are pooled across
    whatever ``by`` leaves out). ``ci`` is the interval's level (0.95: the 2.5 % and
    97.5 % percentiles). ``n_boot`` is the number of bootstrap resamples; ``n_boot=0``
    gives point estimates only (interval columns NaN). ``seed`` fixes the draw: the same
    seed gives the same intervals. ``infra`` is ``"exclude"`` or ``"fail"`` (module
    docstring). A group where k exceeds every task's n is NaN with a warning; k above
    every n in the whole frame is a ValueError.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": ["a"] * 4 + ["b"] * 4, "model": "m", "prompt_hash": "p",
    ...                    "passed": [True, True, True, True, True, True, False, False]})
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> out = summarize(df, k=2, by="model")
    >>> out[["model", "n_tasks", "pass@k", "pass^k"]].round(4)
      model  n_tasks  pass@k  pass^k
    0     m        2  0.9167  0.5833
    >>> summarize(df, k=2)[["task", "pass^k", "pass^k_lo", "pass^k_hi"]].round(3)
      task  pass^k  pass^k_lo  pass^k_hi
    0    a   1.000      0.158      1.000
    1    b   0.167      0.005      0.869
    """
    by = _as_columns(by)
    _check_options(ci=ci, n_boot=n_boot, seed=seed)
    _check_k(k)
    table = _task_table(df, by, infra)
    n_max = int(table["n"].max())
    if k > n_max:
        n = f"n={n_max}" if table["n"].eq(n_max).all() else f"n (at most {n_max})"
        raise ValueError(f"k={k} is larger than {n} for every task; run more trials or choose k ≤ {n_max}")
    out = _summary(table, by, k, ci=ci, n_boot=n_boot, seed=seed)
    _warn_coverage(out, by, k)
    return out


def curve(
    df: pd.DataFrame,
    ks: Iterable[int] | None = None,
    *,
    by: str | Sequence[str] = ("model", "prompt_hash"),
    ci: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    infra: str = "exclude",
) -> pd.DataFrame:
    """pass@k and pass^k against k, as a tidy long frame.

    Columns: the ``by`` columns, ``k``, ``metric`` (``"pass@k"`` or ``"pass^k"``),
    ``value``, ``lo``, ``hi`` and ``n_tasks_covered``, with values and intervals as in
    :func:`summarize` (whose docstring says which question each interval answers).
    ``ks`` defaults to 1 .. the largest n of any task. By default one curve per model
    and prompt, over tasks; add ``"task"`` to ``by`` for per-task curves. Where a k
    covers only part of a group's tasks (uneven n) one warning says so.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": ["a"] * 4 + ["b"] * 4, "model": "m", "prompt_hash": "p",
    ...                    "passed": [True, True, True, True, True, True, False, False]})
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> c = curve(df, n_boot=0)
    >>> c[c["metric"] == "pass^k"][["k", "value"]].round(4).to_string(index=False)
    ' k  value\\n 1 0.7500\\n 2 0.5833\\n 3 0.5000\\n 4 0.5000'
    """
    by = _as_columns(by)
    _check_options(ci=ci, n_boot=n_boot, seed=seed)
    table = _task_table(df, by, infra)
    ks = list(range(1, int(table["n"].max()) + 1)) if ks is None else list(ks)
    if not ks:
        raise ValueError("no k to evaluate: every task has 0 usable trials, or ks is empty")
    for k in ks:
        _check_k(k)
    wide = pd.concat([_summary(table, by, k, ci=ci, n_boot=n_boot, seed=seed) for k in ks], ignore_index=True)
    partial = wide["n_tasks_covered"] < wide["n_tasks"]
    if partial.any():
        ks_partial = sorted(set(wide.loc[partial, "k"]))
        warnings.warn(
            f"for k in {ks_partial} some groups have tasks with fewer than k usable trials; "
            "those tasks are left out of the values (see n_tasks_covered)",
            UserWarning,
            stacklevel=2,
        )
    long = [
        wide[[*by, "k"]].assign(
            metric=metric,
            value=wide[metric],
            lo=wide[f"{metric}_lo"],
            hi=wide[f"{metric}_hi"],
            n_tasks_covered=wide["n_tasks_covered"],
        )
        for metric in METRICS
    ]
    out = pd.concat(long, ignore_index=True)
    return out.sort_values([*by, "metric", "k"], kind="stable").reset_index(drop=True)


def compare(
    df: pd.DataFrame,
    *,
    on: str = "prompt_hash",
    a: object,
    b: object,
    k: int,
    by: str | Sequence[str] | None = None,
    ci: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    infra: str = "exclude",
) -> pd.DataFrame:
    """Paired comparison of arm ``b`` against arm ``a`` (values of column ``on``), over tasks.

    Only tasks with at least k usable trials under both arms are paired (a warning says
    how many were left out). For each group of ``by`` and each metric the result holds
    ``n_tasks`` paired tasks, the arm means ``a`` and ``b``, ``diff`` = b − a, its
    ``ci`` interval ``lo``/``hi`` from a cluster bootstrap over tasks that uses the same
    draw of tasks for both arms (the "new tasks like these" question), and ``corr``, the
    correlation of the per-task values between arms (high correlation is what makes
    pairing narrow the interval). ``by`` defaults to whichever of ``model`` and
    ``prompt_hash`` is not ``on`` and takes values shared by both arms (so
    ``on="prompt_name"`` does not also group by the prompt's hash). For one task at a time use :func:`flips`.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": list("aabbcc") * 2, "model": "m", "prompt_hash": ["p1"] * 6 + ["p2"] * 6,
    ...                    "passed": [1, 1, 1, 0, 0, 0] + [1, 1, 1, 1, 1, 0]}).astype({"passed": bool})
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> out = compare(df, a="p1", b="p2", k=2, n_boot=0)
    >>> out[["model", "metric", "n_tasks", "a", "b", "diff"]].round(4)
      model  metric  n_tasks       a       b    diff
    0     m  pass@k        3  0.6667  1.0000  0.3333
    1     m  pass^k        3  0.3333  0.6667  0.3333
    """
    arm_a, arm_b = _arms(df, on, a, b)
    by = _default_by(by, on, arm_a, arm_b)
    if "task" in by or on in by:
        raise ValueError(
            f"by={list(by)} must not contain 'task' or on={on!r}; for per-task differences use flips()"
        )
    _check_options(ci=ci, n_boot=n_boot, seed=seed)
    _check_k(k)
    keys = [*by, "task"]
    tables = _task_table(arm_a, by, infra), _task_table(arm_b, by, infra)
    paired = pd.merge(*tables, on=keys, how="outer", suffixes=("_a", "_b"))
    usable = (paired["n_a"] >= k) & (paired["n_b"] >= k)
    if not usable.all():
        warnings.warn(
            f"{int((~usable).sum())} of {len(paired)} tasks lack {k} usable trials under both "
            f"{on}={a!r} and {on}={b!r} and are left out of the comparison",
            UserWarning,
            stacklevel=2,
        )
    paired = paired[usable].sort_values(keys, kind="stable").reset_index(drop=True)
    if paired.empty:
        raise ValueError(
            f"no task has {k} usable trials under both arms; run more trials or choose a smaller k"
        )
    gid, groups = _group_ids(paired, by)
    n_groups = len(groups)

    def values(arm: str) -> np.ndarray:
        n, c = paired[f"n_{arm}"].to_numpy(), paired[f"c_{arm}"].to_numpy()
        return np.column_stack([pass_at_k(n, c, k), pass_hat_k(n, c, k)])

    va, vb = values("a"), values("b")
    n_tasks = np.bincount(gid, minlength=n_groups)
    mean_a, mean_b = _group_means(gid, va, n_tasks), _group_means(gid, vb, n_tasks)
    lo, hi = _interval_nan(n_groups, len(METRICS))
    if n_boot:
        lo, hi = _cluster_bootstrap(gid, vb - va, n_groups, ci=ci, n_boot=n_boot, seed=seed)
    corr = _group_corr(gid, va, vb, mean_a, mean_b, n_groups)
    long = [
        groups.assign(
            metric=metric,
            k=k,
            n_tasks=n_tasks,
            a=mean_a[:, j],
            b=mean_b[:, j],
            diff=mean_b[:, j] - mean_a[:, j],
            lo=lo[:, j],
            hi=hi[:, j],
            corr=corr[:, j],
        )
        for j, metric in enumerate(METRICS)
    ]
    out = pd.concat(long, ignore_index=True)
    return out.sort_values([*by, "metric"], kind="stable").reset_index(drop=True)


def flips(
    df: pd.DataFrame,
    *,
    on: str = "prompt_hash",
    a: object,
    b: object,
    by: str | Sequence[str] | None = None,
    alpha: float = 0.05,
    infra: str = "exclude",
) -> pd.DataFrame:
    """Per task: did its success rate change between arm ``a`` and arm ``b`` of column ``on``?

    One row per task with usable trials under both arms: ``successes_a``/``trials_a``,
    ``successes_b``/``trials_b``, ``delta`` (success rate b − a), ``p_value`` (Fisher's
    exact test, two-sided), ``q_value`` (Benjamini–Hochberg across the tasks of each
    ``by`` group), ``min_p`` (the smallest p the trial counts allow, reached by a
    complete flip such as 4/4 → 0/4) and ``flip`` (q < ``alpha``). A warning says when
    the trial counts are too small for any task to reach p < ``alpha``: 3 trials per arm
    cannot (smallest p = 0.1), 4 can (p = 0.029). ``by`` defaults to whichever of
    ``model`` and ``prompt_hash`` is not ``on``.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": "t", "model": "m", "prompt_hash": ["p1"] * 4 + ["p2"] * 4,
    ...                    "passed": [True] * 4 + [False] * 4})
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> out = flips(df, a="p1", b="p2")
    >>> out[["task", "successes_a", "trials_a", "successes_b", "trials_b", "flip"]]
      task  successes_a  trials_a  successes_b  trials_b  flip
    0    t            4         4            0         4  True
    >>> round(float(out.loc[0, "p_value"]), 4)
    0.0286
    """
    arm_a, arm_b = _arms(df, on, a, b)
    by = _default_by(by, on, arm_a, arm_b)
    if on in by:
        raise ValueError(f"by={list(by)} must not contain on={on!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1; got alpha={alpha}")
    by = tuple(col for col in by if col != "task")
    keys = [*by, "task"]
    tables = _task_table(arm_a, by, infra), _task_table(arm_b, by, infra)
    paired = pd.merge(*tables, on=keys, suffixes=("_a", "_b"))
    paired = paired[(paired["n_a"] > 0) & (paired["n_b"] > 0)].sort_values(keys, kind="stable")
    if paired.empty:
        raise ValueError(f"no task has usable trials under both {on}={a!r} and {on}={b!r}")
    counts = paired[["c_a", "n_a", "c_b", "n_b"]].to_numpy()
    p_value = np.array([_fisher(*row) for row in counts])
    min_p = np.array([_fisher(n_a, n_a, 0, n_b) for _, n_a, _, n_b in counts])
    out = paired[keys].reset_index(drop=True)
    out["successes_a"], out["trials_a"], out["successes_b"], out["trials_b"] = counts.T
    out["delta"] = counts[:, 2] / counts[:, 3] - counts[:, 0] / counts[:, 1]
    out["p_value"] = p_value
    gid, _ = _group_ids(out, by)
    bh = pd.Series(p_value).groupby(gid).transform(lambda p: sps.false_discovery_control(p, method="bh"))
    out["q_value"] = bh.to_numpy()
    out["min_p"] = min_p
    out["flip"] = out["q_value"] < alpha
    _warn_power(out, alpha)
    return out


def _fisher(c_a: int, n_a: int, c_b: int, n_b: int) -> float:
    table = [[c_a, n_a - c_a], [c_b, n_b - c_b]]
    return float(sps.fisher_exact(table, alternative="two-sided").pvalue)


def _warn_power(out: pd.DataFrame, alpha: float) -> None:
    """Warn when trial counts are too small for some or all tasks to ever be flagged."""
    hopeless = out["min_p"] >= alpha
    if not hopeless.any():
        return
    n_needed = next(n for n in range(1, 100) if _fisher(n, n, 0, n) < alpha)
    smallest = out.loc[hopeless, ["trials_a", "trials_b"]].min(axis=None)
    where = "no task can" if hopeless.all() else f"{int(hopeless.sum())} of {len(out)} tasks cannot"
    warnings.warn(
        f"{where} reach p < {alpha}: with as few as {smallest} trials in an arm, even a complete "
        f"flip has two-sided Fisher p ≥ {out.loc[hopeless, 'min_p'].min():.3g}; "
        f"run at least {n_needed} trials per arm",
        UserWarning,
        stacklevel=3,
    )


def _summary(
    table: pd.DataFrame, by: tuple[str, ...], k: int, *, ci: float, n_boot: int, seed: int
) -> pd.DataFrame:
    """The :func:`summarize` frame for one k from a per-(group, task) table."""
    gid, groups = _group_ids(table, by)
    n_groups = len(groups)
    n, c = table["n"].to_numpy(), table["c"].to_numpy()
    covered = n >= k
    values = np.column_stack([pass_at_k(n, c, k), pass_hat_k(n, c, k)])
    # Var(pass@k estimate) = Var(C(n-c,k)/C(n,k)): the pass^k form applied to failures.
    variances = np.column_stack([_fixed_task_variance(n, n - c, k), _fixed_task_variance(n, c, k)])
    n_covered = np.bincount(gid[covered], minlength=n_groups)
    means = _group_means(gid[covered], values[covered], n_covered)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt(_group_sums(gid[covered], variances[covered], n_groups)) / n_covered[:, None]
    lo, hi = _interval_nan(n_groups, len(METRICS))
    per_task = "task" in by
    if n_boot and per_task:
        lo, hi = _clopper_pearson(n, c, k, ci)
    elif n_boot:
        lo, hi = _cluster_bootstrap(gid[covered], values[covered], n_groups, ci=ci, n_boot=n_boot, seed=seed)
    method = "none" if not n_boot else "clopper-pearson" if per_task else "cluster-bootstrap"
    columns = {
        "k": k,
        "n_tasks": np.bincount(gid, minlength=n_groups),
        "n_tasks_covered": n_covered,
        "n_trials": np.bincount(gid, n, minlength=n_groups).astype(np.int64),
        "successes": np.bincount(gid, c, minlength=n_groups).astype(np.int64),
        "pass@k": means[:, 0],
        "pass^k": means[:, 1],
        "pass@k_lo": lo[:, 0],
        "pass@k_hi": hi[:, 0],
        "pass^k_lo": lo[:, 1],
        "pass^k_hi": hi[:, 1],
        "se_fixed": se[:, 1],
        "pass@k_se_fixed": se[:, 0],
        "n_infra_excluded": np.bincount(gid, table["n_infra"], minlength=n_groups).astype(np.int64),
        "ci_method": method,
    }
    return groups.assign(**columns)


def _fixed_task_variance(n: np.ndarray, c: np.ndarray, k: int) -> np.ndarray:
    """Unbiased estimate of Var(C(c,k)/C(n,k)): U² − C(c,2k)/C(n,2k); NaN where n < 2k."""
    return pass_hat_k(n, c, k) ** 2 - pass_hat_k(n, c, 2 * k)


def _clopper_pearson(n: np.ndarray, c: np.ndarray, k: int, ci: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-task intervals: the exact interval for p mapped through 1 − (1 − p)^k and p^k."""
    tail = (1 - ci) / 2
    with np.errstate(invalid="ignore"):
        p_lo = np.where(c > 0, sps.beta.ppf(tail, c, n - c + 1), 0.0)
        p_hi = np.where(c < n, sps.beta.ppf(1 - tail, c + 1, n - c), 1.0)
    defined = n >= k
    lo = np.column_stack([1 - (1 - p_lo) ** k, p_lo**k])
    hi = np.column_stack([1 - (1 - p_hi) ** k, p_hi**k])
    return np.where(defined[:, None], lo, np.nan), np.where(defined[:, None], hi, np.nan)


def _cluster_bootstrap(
    gid: np.ndarray, values: np.ndarray, n_groups: int, *, ci: float, n_boot: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of each group's mean over tasks, resampling tasks with replacement.

    ``gid`` (sorted) gives each row's group, ``values`` is (rows, m). Groups with the
    same number of tasks share one draw and one matrix product. Returns lo and hi of
    shape (n_groups, m); NaN for groups with fewer than two tasks.
    """
    m = values.shape[1]
    lo, hi = _interval_nan(n_groups, m)
    sizes = np.bincount(gid, minlength=n_groups)
    for size in np.unique(sizes[sizes >= 2]):
        groups = np.flatnonzero(sizes == size)
        rows = values[np.isin(gid, groups)].reshape(groups.size, size, m)
        block = rows.transpose(1, 0, 2).reshape(size, groups.size * m)
        means = _resampled_means(block, n_boot, seed)
        bounds = np.quantile(means, [(1 - ci) / 2, (1 + ci) / 2], axis=0).reshape(2, groups.size, m)
        lo[groups], hi[groups] = bounds
    return lo, hi


def _resampled_means(block: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """Column means of ``block`` over ``n_boot`` resamples of its rows: shape (n_boot, columns).

    Each resample is a row of multinomial counts (how often each task was drawn), so all
    resamples are one matrix product. The draw depends only on ``seed`` and the row count.
    """
    size = block.shape[0]
    rng = np.random.default_rng([seed, size])
    means = np.empty((n_boot, block.shape[1]))
    step = max(1, _BLOCK // size)
    for start in range(0, n_boot, step):
        rows = min(step, n_boot - start)
        draws = rng.integers(0, size, size=(rows, size)) + size * np.arange(rows)[:, None]
        counts = np.bincount(draws.ravel(), minlength=rows * size).reshape(rows, size)
        means[start : start + rows] = counts @ block / size
    return means


def _group_sums(gid: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Column sums of ``values`` (rows, m) per group: shape (n_groups, m)."""
    return np.column_stack([np.bincount(gid, column, minlength=n_groups) for column in values.T])


def _group_means(gid: np.ndarray, values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return _group_sums(gid, values, counts.size) / counts[:, None]


def _group_corr(
    gid: np.ndarray, va: np.ndarray, vb: np.ndarray, mean_a: np.ndarray, mean_b: np.ndarray, n_groups: int
) -> np.ndarray:
    """Pearson correlation of the per-task values of the two arms, per group and metric."""
    da, db = va - mean_a[gid], vb - mean_b[gid]
    sxy, sxx, syy = (_group_sums(gid, x, n_groups) for x in (da * db, da**2, db**2))
    with np.errstate(invalid="ignore", divide="ignore"):
        return sxy / np.sqrt(sxx * syy)


def _interval_nan(n_groups: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full((n_groups, m), np.nan), np.full((n_groups, m), np.nan)


def _task_table(df: pd.DataFrame, by: tuple[str, ...], infra: str) -> pd.DataFrame:
    """One row per (group, task), sorted: the ``by`` columns, ``task``, and ``n`` usable
    trials, ``c`` successes, ``n_infra`` infra_error trials excluded from n."""
    require_columns(df, (*ANALYSIS_COLUMNS, *by))
    if infra not in INFRA_MODES:
        raise ValueError(f"infra must be one of {list(INFRA_MODES)}; got infra={infra!r}")
    passed = df["passed"]
    if not pd.api.types.is_bool_dtype(passed.dtype) or passed.isna().any():
        raise ValueError(
            f"column 'passed' must be boolean without missing values; got dtype {passed.dtype}. "
            "Build frames with passk_nb.records.frame_from_records"
        )
    if df.empty:
        raise ValueError("the frame has no trial rows")
    is_infra = (df["outcome"] == INFRA_OUTCOME).to_numpy(dtype=bool, na_value=False)
    excluded = is_infra if infra == "exclude" else np.zeros(len(df), dtype=bool)
    keys = list(dict.fromkeys([*by, "task"]))
    counts = (
        df[keys]
        .reset_index(drop=True)
        .assign(
            n=(~excluded).astype(np.int64),
            c=(passed.to_numpy(dtype=bool) & ~is_infra).astype(np.int64),
            n_infra=excluded.astype(np.int64),
        )
    )
    grouped = counts.groupby(keys, sort=True, observed=True, dropna=False)
    return grouped[["n", "c", "n_infra"]].sum().reset_index()


def _group_ids(table: pd.DataFrame, by: tuple[str, ...]) -> tuple[np.ndarray, pd.DataFrame]:
    """Group number of each row of a table sorted by ``by``, and the group keys (one row each)."""
    if not by:
        return np.zeros(len(table), dtype=np.int64), pd.DataFrame(index=range(1))
    gid = table.groupby(list(by), sort=False, dropna=False).ngroup().to_numpy()
    first = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
    return gid, table.iloc[first][list(by)].reset_index(drop=True)


def _arms(df: pd.DataFrame, on: str, a: object, b: object) -> tuple[pd.DataFrame, pd.DataFrame]:
    require_columns(df, (on,))
    if a == b:
        raise ValueError(f"a and b must differ; both are {a!r}")
    present = df[on].unique()
    missing = [arm for arm in (a, b) if arm not in set(present)]
    if missing:
        raise ValueError(
            f"{on}={missing} not in the frame; values of {on!r} present: {sorted(map(str, present))}"
        )
    return df[df[on] == a], df[df[on] == b]


def require_columns(df: pd.DataFrame, columns: Iterable[str]) -> None:
    """Raise ValueError listing the columns ``df`` lacks.

    >>> import pandas as pd
    >>> require_columns(pd.DataFrame({"task": []}), ("task", "passed", "outcome"))
    Traceback (most recent call last):
    ...
    ValueError: the frame lacks columns ['passed', 'outcome']; trial records need at least ['task', 'passed', 'outcome'] plus the grouping columns. Build them with passk_nb.records.frame_from_records
    """  # noqa: E501
    missing = [col for col in dict.fromkeys(columns) if col not in df.columns]
    if missing:
        raise ValueError(
            f"the frame lacks columns {missing}; trial records need at least {list(ANALYSIS_COLUMNS)} "
            "plus the grouping columns. Build them with passk_nb.records.frame_from_records"
        )


def _as_columns(by: str | Sequence[str]) -> tuple[str, ...]:
    columns = (by,) if isinstance(by, str) else tuple(by)
    if len(set(columns)) != len(columns):
        raise ValueError(f"by={list(columns)} repeats a column")
    return columns


def _default_by(
    by: str | Sequence[str] | None, on: str, arm_a: pd.DataFrame, arm_b: pd.DataFrame
) -> tuple[str, ...]:
    """``by`` as columns; by default ``model`` and ``prompt_hash``, except ``on`` and any column whose
    values never overlap between the arms (``prompt_hash`` when comparing by ``prompt_name``):
    grouping by such a column would leave no pair."""
    if by is not None:
        return _as_columns(by)
    return tuple(
        col
        for col in ("model", "prompt_hash")
        if col != on
        and col in arm_a.columns
        and set(arm_a[col].dropna()) & set(arm_b[col].dropna())
    )


def _check_k(k: object) -> None:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a whole number ≥ 1; got k={k!r}")


def _check_options(*, ci: float, n_boot: int, seed: int) -> None:
    if not 0 < ci < 1:
        raise ValueError(f"ci must be between 0 and 1 (e.g. 0.95); got ci={ci}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int | np.integer) or n_boot < 0:
        raise ValueError(f"n_boot must be a whole number ≥ 0 (0: no intervals); got n_boot={n_boot!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a whole number ≥ 0; got seed={seed!r}")


def _warn_coverage(out: pd.DataFrame, by: tuple[str, ...], k: int) -> None:
    """Warn about groups whose value covers only some, or none, of their tasks."""
    none = out["n_tasks_covered"] == 0
    some = ~none & (out["n_tasks_covered"] < out["n_tasks"])
    for mask, what in ((none, "no task has"), (some, "only some tasks have")):
        if mask.any():
            names = [_group_name(out.loc[i], by) for i in np.flatnonzero(mask)[:3]]
            more = f" and {int(mask.sum()) - 3} more" if mask.sum() > 3 else ""
            fix = "NaN" if what == "no task has" else "a mean over the covered tasks (see n_tasks_covered)"
            warnings.warn(
                f"{what} ≥ {k} usable trials in {', '.join(names)}{more}; the value is {fix}. "
                f"Run more trials or choose a smaller k",
                UserWarning,
                stacklevel=3,
            )


def _group_name(row: pd.Series, by: tuple[str, ...]) -> str:
    return " ".join(f"{col}={row[col]!r}" for col in by) or "the frame"
