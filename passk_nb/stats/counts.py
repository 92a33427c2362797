"""Per-task counts: the table every analysis starts from.

One row per (group, task) with n usable trials, c successes and n_infra
infrastructure errors left out of n, from trial records, a counts table or a folder of parquet
records (:mod:`passk_nb.stats.parquet_counts`, without loading the trials). Every statistic starts
from :func:`as_counts`, the one place that tells those inputs apart: a :class:`Counts` (the table,
its ``by`` and infra policy, where it came from). The counting kernel is
:mod:`passk_nb.stats._grouping`; the argument checks are in :mod:`passk_nb.stats.checks`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from passk_nb.data.records import OUTCOMES
from passk_nb.stats import _grouping
from passk_nb.stats.checks import (
    COUNTED_OUTCOMES,
    as_columns,
    check_cluster,
    check_infra,
    records_by,
    require_columns,
)
from passk_nb.stats.params import CLUSTER, INFRA, default_by, share_docs
from passk_nb.stats.parquet_counts import ENGINES, count_folder
from passk_nb.stats.result import described


@share_docs
def counts(
    df: pd.DataFrame | str | os.PathLike[str],
    by: str | Sequence[str] | None = None,
    infra: str = INFRA,
    *,
    engine: str = ENGINES[0],
) -> pd.DataFrame:
    """Per (group, task) trial counts: the table every analysis is computed from.

    One row per (group, task), sorted by the ``by`` columns then ``task`` (missing group
    values last; categorical columns in category order): the ``by`` columns, ``task``,
    ``n`` usable trials, ``c`` successes, ``n_infra`` infra_error trials left out of n
    (0 with ``infra="fail"``, where they count as failures), and one ``n_<outcome>``
    column per failure outcome of :data:`~passk_nb.stats.checks.COUNTED_OUTCOMES` (trials that
    ended that way).
    Computed in one vectorised pass over the columns' category codes: categorical key columns
    (``df.astype({"model": "category", ...})``) are used as they are, the fastest input; string
    columns are factorised once per run of equal values (records come sorted).

    A folder of parquet records (a path; or one parquet file) is counted without loading it,
    equal to ``counts(load(path), by, infra)``: DuckDB counts with SQL over the files (bounded
    memory, the ``duckdb`` extra), pandas reads only the needed columns (never the transcripts).

    {df_or_folder}
    {by}
    {infra}
    engine: for a path only: "duckdb", "pandas", or "auto" (default: DuckDB when it is installed).

    >>> import pandas as pd
    >>> df = pd.DataFrame({"model": ["m1"] * 3 + ["m2"] * 2, "task": ["a", "a", "b", "a", "a"],
    ...                    "passed": [True, False, True, False, False],
    ...                    "outcome": ["pass", "format_error", "pass", "infra_error", "wrong_state"]})
    >>> counts(df)[["model", "task", "n", "c", "n_infra", "n_format_error", "n_wrong_state"]]
      model task  n  c  n_infra  n_format_error  n_wrong_state
    0    m1    a  2  1        0               1              0
    1    m1    b  1  1        0               0              0
    2    m2    a  1  0        1               0              1
    >>> counts(df, by=(), infra="fail")[["task", "n", "c", "n_infra"]]
      task  n  c  n_infra
    0    a  4  1        0
    1    b  1  1        0
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {list(ENGINES)}; got engine={engine!r}")
    if isinstance(df, str | os.PathLike):
        table = count_folder(df, by=by, infra=infra, engine=engine)
        by = tuple(table.columns[: list(table.columns).index("task")])
    else:
        by = default_by(df, by)
        table = (
            _grouping.regroup(df, by, infra) if is_counts_table(df) else _grouping.count_trials(df, by, infra)
        )
    return described(table, "counts", by=by, infra=infra, records=df)


#: Where a :class:`Counts` came from (``Counts.source``).
SOURCES: tuple[str, ...] = ("records", "counts", "folder")
#: Prefix of the per-round count columns ``n@i``, ``c@i`` (the i-th round of an adaptive run).
ROUND = "@"


@dataclass(frozen=True, eq=False)
class Counts:
    """Per-(group, task) counts, grouped once: the one input every statistic starts from
    (:func:`as_counts` builds it; a statistic handed one uses it as it is).

    table: one row per (group, task), sorted as :func:`counts` sorts: the ``by`` columns (from
        trial records categorical, so no string is copied and grouping compares integer codes),
        ``task``, ``n`` usable trials, ``c`` successes, ``n_infra`` (and the ``n_<outcome>``
        columns where the input had them); where the records have rounds (``run(until=)``), each
        round's cells ``n@i``, ``c@i`` (i-th round in order, records without a round first).
    by: the columns it was grouped by (besides ``task``).
    infra: how infra errors were counted ("exclude": kept apart in ``n_infra``; "fail": in n).
    source: "records", "counts" (a counts table) or "folder" (parquet records, not loaded).
    key_dtypes: the dtypes the key columns had in the input; :meth:`restore` gives results them.
    cluster: the column naming each task's family (a column of the table, not a grouping column;
        :meth:`units` numbers the families), or None: each task on its own.
    """

    table: pd.DataFrame
    by: tuple[str, ...]
    infra: str
    source: str
    key_dtypes: Mapping[str, Any] = field(default_factory=dict)
    cluster: str | None = None

    def units(self) -> np.ndarray | None:
        """Each row's family code (:func:`unit_codes` of the ``cluster`` column), None without one:
        what the intervals for new tasks resample."""
        return None if self.cluster is None else unit_codes(self.table[self.cluster])

    @property
    def rounds(self) -> int:
        """How many rounds the per-round cells hold (0: none)."""
        return len(round_columns(self.table)) // 2

    def restore(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` (a few rows of key columns, e.g. a statistic's groups) with the dtypes its key
        columns had in the input."""
        changed = {
            col: dtype
            for col, dtype in self.key_dtypes.items()
            if col in frame.columns and frame[col].dtype != dtype
        }
        return frame.astype(changed) if changed else frame

    def groups(self, by: Sequence[str] | None = None) -> tuple[np.ndarray, pd.DataFrame]:
        """The group number of each row of the table and the groups (one row each, the input's
        dtypes), grouped by ``by`` (default: :attr:`by`; a subset of it)."""
        gid, keys = _grouping.group_ids(self.table, self.by if by is None else tuple(by))
        return gid, self.restore(keys)

    def frame(self) -> pd.DataFrame:
        """The table with the input's key dtypes (for code that hands the table on)."""
        return self.restore(self.table)


@share_docs
def as_counts(
    data: Counts | pd.DataFrame | str | os.PathLike[str],
    *,
    by: str | Sequence[str] | None = None,
    infra: str = INFRA,
    on: str | None = None,
    outcomes: bool = False,
    cluster: str | None = CLUSTER,
) -> Counts:
    """The :class:`Counts` of ``data``: the only code that tells trial records, a counts table and a
    run folder apart. Every statistic starts from it.

    data: trial records, a counts table, the path of a folder of parquet records (counted without
        loading them), or a :class:`Counts`, returned as it is when ``by`` and ``infra`` match it
        (else regrouped).
    {by}
    {infra}
    on: a column the counts are also grouped by (a paired analysis's arms).
    outcomes: from trial records, also the ``n_<outcome>`` columns, with the key columns' own dtypes
        (for a result that shows the table's rows); a counts table or a folder keeps what it has.
    {cluster} The table keeps it as a column (counted as one more key, so it is grouped once, here),
        and a task with two families is an error.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"model": ["m1", "m1", "m2"], "task": ["a", "a", "a"],
    ...                    "passed": [True, False, False], "outcome": ["pass", "wrong_state", "infra_error"]})
    >>> c = as_counts(df)
    >>> c.by, c.infra, c.source, c.table[["model", "task", "n", "c", "n_infra"]].values.tolist()
    (('model',), 'exclude', 'records', [['m1', 'a', 2, 1, 0], ['m2', 'a', 0, 0, 1]])
    >>> as_counts(c) is c, as_counts(c, infra="fail").table["n"].tolist()
    (True, [2, 1])
    """
    check_infra(infra)
    if isinstance(data, Counts):
        return _one_family_per_task(_regrouped(data, by, infra, on, cluster))
    if isinstance(data, str | os.PathLike):
        keys = tuple(dict.fromkeys([*records_by(by), *_also(on)]))
        check_cluster(cluster, keys)
        table = count_folder(data, by=(*keys, *_also(cluster)), infra=infra)
        return _one_family_per_task(Counts(table, keys, infra, "folder", cluster=cluster))
    if not isinstance(data, pd.DataFrame):
        raise TypeError(
            "expected trial records, a counts table, a folder of records or a Counts; "
            f"got {type(data).__name__}"
        )
    keys = tuple(dict.fromkeys([*default_by(data, by), *_also(on)]))
    check_cluster(cluster, keys)
    if cluster is not None:
        require_columns(data, (cluster,))
    counted = (*keys, *_also(cluster))
    if is_counts_table(data):
        return _one_family_per_task(
            Counts(counts(data, by=counted, infra=infra), keys, infra, "counts", cluster=cluster)
        )
    table = _grouping.count_trials(data, counted, infra, outcomes=outcomes, categorical_keys=not outcomes)
    dtypes = {col: data[col].dtype for col in dict.fromkeys([*counted, "task"])}
    table = _with_rounds(table, data, counted, infra)
    return _one_family_per_task(Counts(table, keys, infra, "records", dtypes, cluster))


def unit_codes(column: pd.Series) -> np.ndarray:
    """Integer codes of a family column, one per row: equal values share a code, and a missing or
    empty value ("" is the default of ``task_family``) is a family of its own.

    >>> unit_codes(pd.Series(["a", "", "a", None, "b"])).tolist()
    [0, 3, 0, 4, 2]
    """
    codes, _ = pd.factorize(column, use_na_sentinel=True)
    alone = (codes < 0) | (column.astype(object) == "").to_numpy()
    codes = codes.astype(np.int64)
    codes[alone] = codes.max(initial=-1) + 1 + np.arange(int(alone.sum()))
    return codes


def _one_family_per_task(counted: Counts) -> Counts:
    """``counted``, after checking that no task of a group has two families (it would be counted
    twice, once per family)."""
    if counted.cluster is None:
        return counted
    twice = counted.table.duplicated([*counted.by, "task"], keep=False)
    if twice.any():
        task = counted.table.loc[twice, "task"].iloc[0]
        families = sorted(
            map(str, counted.table.loc[twice & (counted.table["task"] == task), counted.cluster])
        )
        raise ValueError(
            f"task {task!r} has more than one {counted.cluster!r} ({families}); a task belongs to one "
            f"family: give every trial of a task the same {counted.cluster!r}"
        )
    return counted


def round_columns(table: pd.DataFrame) -> list[str]:
    """The per-round count columns (``n@i``, ``c@i``) of a counts table."""
    return [col for col in table.columns if isinstance(col, str) and col[:2] in (f"n{ROUND}", f"c{ROUND}")]


def _also(on: str | None) -> tuple[str, ...]:
    return () if on is None else (on,)


def _regrouped(
    data: Counts, by: str | Sequence[str] | None, infra: str, on: str | None, cluster: str | None = None
) -> Counts:
    """A :class:`Counts` grouped by ``by`` (and ``on``) with ``infra`` and families ``cluster``:
    ``data`` itself when it is."""
    if by is None:
        if on is not None and on not in data.by:
            raise ValueError(
                f"these counts are grouped by {list(data.by)}, without on={on!r}; count them with it: "
                f"as_counts(df, by=[..., {on!r}])"
            )
        keys = data.by
    else:
        keys = tuple(dict.fromkeys([*as_columns(by), *_also(on)]))
    check_cluster(cluster, keys)
    if keys == data.by and infra == data.infra and cluster == data.cluster:
        return data
    if data.infra == "fail" and infra == "exclude":
        raise ValueError(
            "these counts were made with infra='fail' (infra errors counted as failures), so they "
            "cannot be separated again: pass infra='fail', or count the records again"
        )
    has = (*data.by, *_also(data.cluster))
    missing = [col for col in (*keys, *_also(cluster)) if col not in has]
    if missing:
        raise ValueError(
            f"these counts are grouped by {list(has)} and cannot be grouped by {missing}; "
            "count the records again with them"
        )
    table = _grouping.regroup(data.table, (*keys, *_also(cluster)), infra)
    return Counts(table, keys, infra, data.source, data.key_dtypes, cluster)


def _with_rounds(table: pd.DataFrame, df: pd.DataFrame, keys: tuple[str, ...], infra: str) -> pd.DataFrame:
    """``table`` with each round's cells (columns ``n@i``, ``c@i``) when the records ``df`` have
    rounds (a run with ``until=``), so that each round's trials can be told apart; else ``table``."""
    if "round" not in df.columns or table.empty:
        return table
    rounds = pd.to_numeric(df["round"], errors="coerce")
    if rounds.isna().all():
        return table
    cells = list(dict.fromkeys([*keys, "task"]))
    # one count with the round as a key (its rank: records without a round first); each round's
    # n and c then joined to the table's cells (a merge matches missing key values, as counts do)
    rank = rounds.fillna(-1.0).rank(method="dense").astype(int) - 1
    per_round = _grouping.count_trials(df.assign(**{ROUND: rank}), (*keys, ROUND), infra, outcomes=False)
    columns = {}
    left = table[cells].astype(object)
    for i, part in per_round.groupby(ROUND, sort=True):
        merged = left.merge(
            part[[*cells, "n", "c"]].astype({col: object for col in cells}), on=cells, how="left"
        )
        columns[f"n{ROUND}{i}"] = merged["n"].fillna(0).to_numpy()
        columns[f"c{ROUND}{i}"] = merged["c"].fillna(0).to_numpy()
    return table.assign(**columns)


def is_counts_table(df: object) -> bool:
    """Whether ``df`` is a counts table (columns ``task``, ``n``, ``c``; no ``passed``) rather than
    trial records.

    >>> import pandas as pd
    >>> is_counts_table(pd.DataFrame({"task": ["a"], "n": [4], "c": [3]}))
    True
    >>> is_counts_table(pd.DataFrame({"task": ["a"], "passed": [True], "outcome": ["pass"]}))
    False
    """
    return isinstance(df, pd.DataFrame) and "passed" not in df.columns and {"n", "c"} <= set(df.columns)


#: The outcome of a counts table's failures that no ``n_<outcome>`` column accounts for.
UNCOUNTED_FAILURE = "failed (outcome not counted)"


@share_docs
def outcome_counts(
    df: pd.DataFrame, by: str | Sequence[str] | None = None, *, total: bool = False
) -> pd.DataFrame:
    """How the trials of each group of ``by`` ended: one row per group, one column per outcome.

    {df}
    {by}
    total: also an ``all trials`` column, the group's number of trials (for tables).

    Rows are sorted by the ``by`` values (as in :func:`counts`), followed by one column per outcome
    that occurs, in :data:`passk_nb.data.records.OUTCOMES` order, infrastructure errors included.
    From a counts table: ``c`` passes, ``n_infra`` infra errors, ``n_<outcome>`` each failure
    outcome, and the failures no ``n_<outcome>`` column accounts for as ``failed (outcome not
    counted)`` (a table from elsewhere with only ``n`` and ``c``).

    >>> df = pd.DataFrame({"model": ["a", "a", "b"], "task": "t", "passed": [True, False, False],
    ...                    "outcome": ["pass", "format_error", "infra_error"]})
    >>> outcome_counts(df, by="model")
      model  pass  format_error  infra_error
    0     a     1             1            0
    1     b     0             0            1
    """
    by = default_by(df, by)
    from_counts = is_counts_table(df)
    require_columns(df, (*by, *(("n", "c") if from_counts else ("outcome",))))
    if df.empty:
        raise ValueError("the frame has no trial rows")
    per_row = _outcomes_of_counts(df) if from_counts else pd.get_dummies(df["outcome"], dtype=np.int64)
    if by:
        keys = [df[col] for col in by]
        table = per_row.groupby(keys, sort=True, dropna=False, observed=True).sum().reset_index()
    else:
        table = per_row.sum().to_frame().T
    outcomes = table.columns[len(by) :]
    occurring = [col for col in outcomes if table[col].sum() > 0]
    ordered = [o for o in OUTCOMES if o in occurring] + [o for o in occurring if o not in OUTCOMES]
    table = table[[*by, *ordered]]
    return table.assign(**{"all trials": table[ordered].sum(axis=1)}) if total else table


def _outcomes_of_counts(table: pd.DataFrame) -> pd.DataFrame:
    """Trials per outcome of each row of a counts table (see :func:`outcome_counts`)."""
    columns = {"pass": table["c"].to_numpy()}
    if "n_infra" in table.columns:
        columns["infra_error"] = table["n_infra"].to_numpy()
    counted = [o for o in COUNTED_OUTCOMES if f"n_{o}" in table.columns]
    columns.update({o: table[f"n_{o}"].to_numpy() for o in counted})
    rest = table["n"].to_numpy() - table["c"].to_numpy() - sum((columns[o] for o in counted), start=0)
    if np.any(rest < 0):
        raise ValueError(
            "the counts table's outcome columns add up to more than its failures (n - c); "
            "build it with passk_nb.counts(df)"
        )
    columns[UNCOUNTED_FAILURE] = rest
    return pd.DataFrame(columns, index=table.index).astype(np.int64)
