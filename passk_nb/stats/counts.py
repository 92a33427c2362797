"""Per-task counts: the table every analysis starts from.

One row per (group, task) with n usable trials, c successes and n_infra
infrastructure errors left out of n; plus the argument checks every analysis shares.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

#: Columns every analysis needs, besides the grouping columns.
ANALYSIS_COLUMNS: tuple[str, ...] = ("task", "passed", "outcome")


INFRA_OUTCOME = "infra_error"


INFRA_MODES: tuple[str, ...] = ("exclude", "fail")


def group_sums(gid: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Column sums of ``values`` (rows, m) per group: shape (n_groups, m)."""
    return np.column_stack([np.bincount(gid, column, minlength=n_groups) for column in values.T])


def group_means(gid: np.ndarray, values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return group_sums(gid, values, counts.size) / counts[:, None]


def task_counts(df: pd.DataFrame, by: tuple[str, ...], infra: str) -> pd.DataFrame:
    """One row per (group, task), sorted: the ``by`` columns, ``task``, and ``n`` usable
    trials, ``c`` successes, ``n_infra`` infra_error trials excluded from n."""
    require_columns(df, (*ANALYSIS_COLUMNS, *by))
    if infra not in INFRA_MODES:
        raise ValueError(f"infra must be one of {list(INFRA_MODES)}; got infra={infra!r}")
    passed = df["passed"]
    if not pd.api.types.is_bool_dtype(passed.dtype) or passed.isna().any():
        raise ValueError(
            f"column 'passed' must be boolean without missing values; got dtype {passed.dtype}. "
            "Build frames with passk_nb.data.records.frame_from_records"
        )
    if df.empty:
        raise ValueError("the frame has no trial rows")
    refuse_repeated_trials(df, by)
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


#: The identity of one trial (as in passk_nb.data.records.KEY).
TRIAL_KEY: tuple[str, ...] = ("run_id", "task", "trial")


def refuse_repeated_trials(df: pd.DataFrame, by: Sequence[str] = ()) -> None:
    """Raise when a trial appears twice (same ``run_id``, ``task``, ``trial`` and ``by`` columns):
    it would be counted twice. Frames without those three columns are not checked.

    >>> import pandas as pd
    >>> refuse_repeated_trials(pd.DataFrame({"run_id": ["r", "r"], "task": ["t", "t"], "trial": [0, 0]}))
    Traceback (most recent call last):
    ...
    ValueError: 1 trial appears more than once (same run_id, task, trial; e.g. ('r', 't', 0)), and would be counted twice. Read records with passk_nb.load(folder), which keeps one row per trial, or drop the repeats: df.drop_duplicates(['run_id', 'task', 'trial'])
    """  # noqa: E501
    if not all(col in df.columns for col in TRIAL_KEY):
        return
    repeated = df.duplicated(list(dict.fromkeys([*by, *TRIAL_KEY])), keep="first")
    if repeated.any():
        n = int(repeated.sum())
        example = tuple(
            v.item() if hasattr(v, "item") else v for v in df.loc[repeated, list(TRIAL_KEY)].iloc[0]
        )
        raise ValueError(
            f"{n} trial{' appears' if n == 1 else 's appear'} more than once (same run_id, task, trial; "
            f"e.g. {example}), and would be counted twice. Read records with passk_nb.load(folder), which "
            f"keeps one row per trial, or drop the repeats: df.drop_duplicates({list(TRIAL_KEY)})"
        )


def group_ids(table: pd.DataFrame, by: tuple[str, ...]) -> tuple[np.ndarray, pd.DataFrame]:
    """Group number of each row of a table sorted by ``by``, and the group keys (one row each)."""
    if not by:
        return np.zeros(len(table), dtype=np.int64), pd.DataFrame(index=range(1))
    gid = table.groupby(list(by), sort=False, dropna=False).ngroup().to_numpy()
    first = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
    return gid, table.iloc[first][list(by)].reset_index(drop=True)


def require_columns(df: pd.DataFrame, columns: Iterable[str]) -> None:
    """Raise ValueError listing the columns ``df`` lacks.

    >>> import pandas as pd
    >>> require_columns(pd.DataFrame({"task": []}), ("task", "passed", "outcome"))
    Traceback (most recent call last):
    ...
    ValueError: the frame lacks columns ['passed', 'outcome']; trial records need at least ['task', 'passed', 'outcome'] plus the grouping columns. Build them with passk_nb.data.records.frame_from_records
    """  # noqa: E501
    missing = [col for col in dict.fromkeys(columns) if col not in df.columns]
    if missing:
        raise ValueError(
            f"the frame lacks columns {missing}; trial records need at least {list(ANALYSIS_COLUMNS)} "
            "plus the grouping columns. Build them with passk_nb.data.records.frame_from_records"
        )


def as_columns(by: str | Sequence[str]) -> tuple[str, ...]:
    columns = (by,) if isinstance(by, str) else tuple(by)
    if len(set(columns)) != len(columns):
        raise ValueError(f"by={list(columns)} repeats a column")
    return columns


def check_k(k: object) -> None:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a whole number ≥ 1; got k={k!r}")


def check_options(*, ci: float, n_boot: int, seed: int) -> None:
    if not 0 < ci < 1:
        raise ValueError(f"ci must be between 0 and 1 (e.g. 0.95); got ci={ci}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int | np.integer) or n_boot < 0:
        raise ValueError(f"n_boot must be a whole number ≥ 0 (0: no intervals); got n_boot={n_boot!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a whole number ≥ 0; got seed={seed!r}")
