"""Paired analyses of two arms (prompts, models): :func:`compare` over tasks, :func:`flips` per task."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from passk_nb.stats.counts import (
    check_k,
    check_options,
    group_ids,
    group_means,
    require_columns,
    task_counts,
)
from passk_nb.stats.estimators import pass_at_k, pass_hat_k
from passk_nb.stats.intervals import (
    cluster_bootstrap,
    group_corr,
    nan_interval,
)
from passk_nb.stats.params import CI, INFRA, N_BOOT, SEED, default_by
from passk_nb.stats.summary import METRICS


def compare(
    df: pd.DataFrame,
    *,
    on: str = "prompt_hash",
    a: object,
    b: object,
    k: int,
    by: str | Sequence[str] | None = None,
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    infra: str = INFRA,
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
    check_options(ci=ci, n_boot=n_boot, seed=seed)
    check_k(k)
    keys = [*by, "task"]
    tables = task_counts(arm_a, by, infra), task_counts(arm_b, by, infra)
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
    gid, groups = group_ids(paired, by)
    n_groups = len(groups)

    def values(arm: str) -> np.ndarray:
        n, c = paired[f"n_{arm}"].to_numpy(), paired[f"c_{arm}"].to_numpy()
        return np.column_stack([pass_at_k(n, c, k), pass_hat_k(n, c, k)])

    va, vb = values("a"), values("b")
    n_tasks = np.bincount(gid, minlength=n_groups)
    mean_a, mean_b = group_means(gid, va, n_tasks), group_means(gid, vb, n_tasks)
    lo, hi = nan_interval(n_groups, len(METRICS))
    if n_boot:
        lo, hi = cluster_bootstrap(gid, vb - va, n_groups, ci=ci, n_boot=n_boot, seed=seed)
    corr = group_corr(gid, va, vb, mean_a, mean_b, n_groups)
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
    infra: str = INFRA,
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
    tables = task_counts(arm_a, by, infra), task_counts(arm_b, by, infra)
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
    gid, _ = group_ids(out, by)
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


def _default_by(
    by: str | Sequence[str] | None, on: str, arm_a: pd.DataFrame, arm_b: pd.DataFrame
) -> tuple[str, ...]:
    """``by`` as columns; by default the identity columns (see :func:`~passk_nb.stats.params.default_by`)
    except ``on`` and any column whose values never overlap between the arms (``prompt_hash`` when
    comparing by ``prompt_name``, ``run_id`` always): grouping by such a column would leave no pair."""
    if by is not None:
        return default_by(arm_a, by)
    return tuple(
        col
        for col in default_by(arm_a, None)
        if col != on and set(arm_a[col].dropna()) & set(arm_b[col].dropna())
    )
