"""The counting kernel under :func:`passk_nb.stats.counts.counts`: grouping by integer codes.

Private: trial records and counts tables become per-(group, task) counts in one vectorised
pass over the key columns' category codes (pandas' groupby on string keys was the bottleneck),
and analyses number their groups with :func:`group_ids`. The public API is ``counts``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from passk_nb.data.records import OUTCOMES
from passk_nb.stats.checks import (
    ANALYSIS_COLUMNS,
    COUNTED_OUTCOMES,
    INFRA_OUTCOME,
    TRIAL_KEY,
    check_infra,
    refuse_repeated_trials,
    refuse_wrong_outcomes,
    require_columns,
)


def group_sums(gid: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Column sums of ``values`` (rows, m) per group: shape (n_groups, m)."""
    return np.column_stack([np.bincount(gid, column, minlength=n_groups) for column in values.T])


def group_means(gid: np.ndarray, values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return group_sums(gid, values, counts.size) / counts[:, None]


def group_reduce(
    gid: np.ndarray, values: np.ndarray, n_groups: int, reduce: Callable[[np.ndarray], float]
) -> np.ndarray:
    """``reduce`` (any function of one group's values: a median, a quantile) of each group's
    ``values``: one stable sort by group, then one call per group on a contiguous slice, so a new
    statistic needs no pandas groupby; NaN for a group without rows.

    >>> group_reduce(np.array([1, 0, 1, 1]), np.array([5.0, 1.0, 2.0, 9.0]), 3, np.median).tolist()
    [1.0, 5.0, nan]
    """
    order = np.argsort(gid, kind="stable")
    bounds = np.searchsorted(gid[order], np.arange(n_groups + 1))
    ordered = values[order]
    out = np.full(n_groups, np.nan)
    for g in np.flatnonzero(np.diff(bounds)):
        out[g] = reduce(ordered[bounds[g] : bounds[g + 1]])
    return out


def distinct_codes(n: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct pairs of whole counts n ≥ 0, c in 0..max(c), coded n·(max(c) + 1) + c, sorted,
    and each row's index among them; without sorting the rows (a lookup table over the codes) unless
    the codes run past 4 million.

    >>> [x.tolist() for x in distinct_codes(np.array([4, 4, 8, 4]), np.array([1, 0, 1, 1]))]
    [[8, 9, 17], [1, 0, 2, 1]]
    """
    code = n.astype(np.int64) * (int(c.max(initial=0)) + 1) + c
    if code.size and code.max() > 1 << 22:  # a lookup table that large: sort instead
        codes, where = np.unique(code, return_inverse=True)
        return codes, where.ravel()
    present = np.bincount(code)
    codes = np.flatnonzero(present)
    lookup = np.zeros(present.size, dtype=np.int64)
    lookup[codes] = np.arange(codes.size)
    return codes, lookup[code]


def group_ids(table: pd.DataFrame, by: tuple[str, ...]) -> tuple[np.ndarray, pd.DataFrame]:
    """Group number of each row of a table sorted by ``by``, and the group keys (one row each)."""
    if not by:
        return np.zeros(len(table), dtype=np.int64), pd.DataFrame(index=range(1))
    if len(table):
        codes, rows = group_codes(table, list(by))
        first = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
        if first.size == rows.size:  # each group one block of rows: number them in order of appearance
            order = np.empty(rows.size, dtype=np.int64)
            order[codes[first]] = np.arange(rows.size)
            return order[codes], pd.DataFrame({col: table[col].array.take(first) for col in by})
    gid = table.groupby(list(by), sort=False, dropna=False).ngroup().to_numpy()
    first = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
    return gid, table.iloc[first][list(by)].reset_index(drop=True)


def count_trials(
    df: pd.DataFrame,
    by: tuple[str, ...],
    infra: str,
    *,
    outcomes: bool = True,
    categorical_keys: bool = False,
) -> pd.DataFrame:
    """:func:`counts` of trial records: one vectorised pass over the columns' category codes.

    Rows are taken in runs of equal keys (records come sorted, so a run is usually one task's
    trials): the keys are factorised once per run, not once per row. ``outcomes=False`` leaves
    out the ``n_<outcome>`` columns (what :func:`~passk_nb.stats.summary.summarize` needs: n, c,
    n_infra), so the outcome column is only compared with ``infra_error``, never factorised;
    ``categorical_keys``: key columns built from their codes (categorical), not copied."""
    keys = list(dict.fromkeys([*by, "task"]))
    _check_trials(df, keys, infra)
    starts, run_gid, rows, key_codes = _runs(df, keys)
    n_groups = rows.size
    lengths = np.diff(np.r_[starts, len(df)])
    is_infra = _equals(df["outcome"], INFRA_OUTCOME)
    passed = df["passed"].to_numpy(dtype=bool)
    refuse_wrong_outcomes(passed, _equals(df["outcome"], "pass"), _known(df["outcome"]), df["outcome"])
    usable_pass = passed & ~is_infra
    if all(col in df.columns for col in TRIAL_KEY):  # repeated trials would be counted twice
        _refuse_repeats(df, keys, starts, run_gid, by)

    def per_group(mask: np.ndarray) -> np.ndarray:
        if starts.size == len(df):
            return np.bincount(run_gid, weights=mask, minlength=n_groups).astype(np.int64)
        if np.count_nonzero(mask) < len(df) // 16:  # rare (infra errors): find the runs of the few rows
            at = np.searchsorted(starts, np.flatnonzero(mask), side="right") - 1
            return np.bincount(run_gid[at], minlength=n_groups).astype(np.int64)
        per_run = np.add.reduceat(mask.view(np.uint8), starts, dtype=np.int64)
        return np.bincount(run_gid, weights=per_run, minlength=n_groups).astype(np.int64)

    total = np.bincount(run_gid, weights=lengths, minlength=n_groups).astype(np.int64)
    n_infra = per_group(is_infra) if infra == "exclude" else np.zeros(n_groups, dtype=np.int64)
    columns: dict[str, object] = (
        {key: _categorical(*key_codes[key]) for key in keys}
        if categorical_keys
        else {key: df[key].array.take(rows) for key in keys}
    )
    columns["n"] = total - n_infra
    columns["c"] = per_group(usable_pass)
    columns["n_infra"] = n_infra
    if outcomes:
        outcome, values = _codes(df["outcome"], sort=False)
        slots = len(values) + 1  # the last code: a missing outcome
        cell = np.repeat(run_gid * slots, lengths)
        np.add(cell, outcome, out=cell, casting="unsafe")
        by_outcome = np.bincount(cell, minlength=n_groups * slots).reshape(n_groups, slots)
        for name in COUNTED_OUTCOMES:
            at = values.get_indexer([name])[0]
            columns[f"n_{name}"] = by_outcome[:, at] if at >= 0 else np.zeros(n_groups, dtype=np.int64)
    return pd.DataFrame(columns)


def _categorical(codes: np.ndarray, values: pd.Index) -> pd.Categorical:
    """A categorical column from codes in ``values`` (``len(values)``: missing)."""
    return pd.Categorical.from_codes(np.where(codes == len(values), -1, codes), categories=values)


def _refuse_repeats(
    df: pd.DataFrame, keys: list[str], starts: np.ndarray, run_gid: np.ndarray, by: tuple[str, ...]
) -> None:
    """``refuse_repeated_trials`` when some (group, run_id, task, trial) occurs twice, counted
    without sorting the rows. ``starts``, ``run_gid``: the runs of equal ``keys`` and their group
    numbers (:func:`_runs`). A trial key column that comes in runs too (a run_id in sorted
    records) splits those runs further and is coded once per run; the others (the trial number)
    are coded per row."""
    n = len(df)
    if _rising_in_single_runs(df, keys, starts, run_gid):
        return
    per_row, split = [], []
    for col in (c for c in TRIAL_KEY if c not in keys):
        change = _changes(df[col])
        if change is not None and np.count_nonzero(change) <= n // 4:
            split.append(np.flatnonzero(change) + 1)
        else:
            per_row.append(col)
    if split:
        mark = np.zeros(n, dtype=bool)
        for at in (starts, *split):
            mark[at] = True
        runs = np.flatnonzero(mark)
    else:
        runs = starts
    code = run_gid[np.searchsorted(starts, runs, side="right") - 1].astype(np.int64)
    size = int(run_gid.max(initial=-1)) + 1
    for col in (c for c in TRIAL_KEY if c not in keys and c not in per_row):
        codes, values = _codes(pd.Series(df[col].array.take(runs)), sort=False)
        size = _combine(code, size, codes, len(values) + 1)
    size = _renumber(code)
    if size == runs.size and per_row == ["trial"] and _rising(df["trial"], runs):
        return  # each (group, run_id) one run of rows, its trials rising: none repeats
    code = np.repeat(code, np.diff(np.r_[runs, n]))
    small = 8 * n + 1024  # a combined code this size is counted with bincount
    for col in per_row:
        codes, key_size = _row_codes(df[col])
        if size * key_size > small:
            size = _renumber(code)
        size = _combine(code, size, codes, key_size)
    if size <= small:
        repeated = bool(np.bincount(code, minlength=size).max(initial=0) > 1)
    else:
        repeated = pd.unique(code).size < n
    if repeated:
        refuse_repeated_trials(df, by)


def _rising_in_single_runs(
    df: pd.DataFrame, keys: list[str], starts: np.ndarray, run_gid: np.ndarray
) -> bool:
    """Whether no trial can repeat because each group of ``keys`` is one run of rows (as in sorted
    records) along which the trial numbers rise: two rows of one trial would be in one group, so
    in one run, with one trial number. Whatever the run_ids; reads no other column."""
    if "trial" in keys or "trial" not in df.columns or run_gid.size != int(run_gid.max(initial=-1)) + 1:
        return False
    return _rising(df["trial"], starts)


def _rising(trial: pd.Series, runs: np.ndarray) -> bool:
    """Whether the whole-number ``trial`` column rises strictly along each run (runs start at
    ``runs``)."""
    if trial.dtype.kind not in "iu":
        return False
    values = trial.to_numpy()
    rises = values[1:] > values[:-1]
    rises[runs[1:] - 1] = True
    return bool(rises.all())


def _renumber(code: np.ndarray) -> int:
    """Renumber the combined ``code`` in place to 0 .. (distinct codes − 1) (in order of first
    appearance); returns how many there are."""
    codes, uniques = pd.factorize(code)
    code[:] = codes
    return len(uniques)


def _row_codes(column: pd.Series) -> tuple[np.ndarray, int]:
    """Integer codes of a column's values (equal values, equal codes; missing values a code of
    their own) and how many codes there can be; whole numbers in a narrow range (trial numbers)
    are their own codes, without factorising."""
    n = len(column)
    if column.dtype.kind in "iu" and n:
        values = column.to_numpy()
        low, high = int(values.min()), int(values.max())
        if high - low <= 4 * n:
            return values - low, high - low + 1
    codes, values = _codes(column, sort=False)
    return codes, len(values) + 1


#: Count columns summed when a counts table is regrouped (besides the ``n_<outcome>`` columns).
_SUMMED: tuple[str, ...] = ("n", "c", "n_infra")


def regroup(table: pd.DataFrame, by: tuple[str, ...], infra: str) -> pd.DataFrame:
    """``counts`` of a counts table: rows of one (``by``, task) summed (so a table counted by
    model and prompt regroups by model alone), sorted like counts of the trials; with
    ``infra="fail"`` the excluded infra errors ``n_infra`` join n as failures."""
    keys = list(dict.fromkeys([*by, "task"]))
    missing = [col for col in dict.fromkeys([*keys, "n", "c"]) if col not in table.columns]
    if missing:
        raise ValueError(
            f"the counts table lacks columns {missing}; a counts table has the grouping columns, "
            "'task', 'n' (usable trials) and 'c' (successes), optionally 'n_infra'. Build it with "
            "passk_nb.counts(df, by=...)"
        )
    check_infra(infra)
    if table.empty:
        raise ValueError("the counts table has no rows")
    summed = [
        col
        for col in table.columns
        if col in _SUMMED or col[2:] in COUNTED_OUTCOMES and col[:2] == "n_" or _is_round(col)
    ]
    values = {col: _count_column(table, col) for col in summed}
    bad = values["c"] > values["n"]
    if bad.any():
        at = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"c (successes) exceeds n (usable trials) in {int(bad.sum())} rows of the counts table, e.g. "
            f"row {at}: n={values['n'][at]}, c={values['c'][at]}"
        )
    gid, rows = group_codes(table, keys)
    n_groups = rows.size
    columns: dict[str, object] = {key: table[key].array.take(rows) for key in keys}
    sums = {
        col: np.bincount(gid, weights=v, minlength=n_groups).astype(np.int64) for col, v in values.items()
    }
    n_infra = sums.get("n_infra", np.zeros(n_groups, dtype=np.int64))
    if infra == "fail":
        columns["n"], columns["c"], columns["n_infra"] = sums["n"] + n_infra, sums["c"], 0 * n_infra
    else:
        columns["n"], columns["c"], columns["n_infra"] = sums["n"], sums["c"], n_infra
    columns.update({f"n_{name}": sums[f"n_{name}"] for name in COUNTED_OUTCOMES if f"n_{name}" in sums})
    if infra == "exclude":  # per-round cells keep no infra errors apart: "fail" leaves them out
        columns.update({col: sums[col] for col in sums if _is_round(col)})
    return pd.DataFrame(columns)


def _is_round(col: object) -> bool:
    """Whether ``col`` is a per-round count column (``n@i``, ``c@i``)."""
    return isinstance(col, str) and col[:2] in ("n@", "c@")


def _count_column(table: pd.DataFrame, col: str) -> np.ndarray:
    """A count column as int64, or a ValueError naming the column and its bad values."""
    column = table[col]
    if not pd.api.types.is_numeric_dtype(column.dtype) or pd.api.types.is_bool_dtype(column.dtype):
        raise ValueError(
            f"column {col!r} of the counts table must hold whole numbers; got dtype {column.dtype}"
        )
    values = column.to_numpy(dtype=float, na_value=np.nan)
    bad = ~np.isfinite(values) | (values < 0) | (values != np.round(values))
    if bad.any():
        raise ValueError(
            f"column {col!r} of the counts table must hold whole numbers ≥ 0 without missing values; "
            f"got {values[bad][:5].tolist()}"
        )
    return values.astype(np.int64)


def _check_trials(df: pd.DataFrame, keys: list[str], infra: str) -> None:
    require_columns(df, (*ANALYSIS_COLUMNS, *keys))
    check_infra(infra)
    passed = df["passed"]
    if not pd.api.types.is_bool_dtype(passed.dtype) or passed.isna().any():
        raise ValueError(
            f"column 'passed' must be boolean without missing values; got dtype {passed.dtype}. "
            "Build frames with passk_nb.data.records.frame_from_records"
        )
    if df.empty:
        raise ValueError("the frame has no trial rows")


def _codes(column: pd.Series, sort: bool = True) -> tuple[np.ndarray, pd.Index]:
    """Integer codes (of the smallest integer type pandas gives) of a column's values and the
    values they stand for; missing values get the last code. With ``sort``, codes follow
    sorted order (categorical: category order, the categories' codes used as they are)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.cat.codes.to_numpy()
        values = pd.Index(column.cat.categories)
    else:
        codes, values = pd.factorize(column, sort=sort)
    if len(codes) and codes.min() < 0:
        codes = np.where(codes < 0, len(values), codes.astype(np.int64))
    return codes, pd.Index(values)


def _equals(column: pd.Series, value: str) -> np.ndarray:
    """Boolean array: the rows of ``column`` equal to ``value`` (missing values: False), without
    factorising the column."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        at = column.cat.categories.get_indexer([value])[0]
        return column.cat.codes.to_numpy() == at if at >= 0 else np.zeros(len(column), dtype=bool)
    array = _arrow(column)
    if array is not None:
        return _bools(pc.equal(array, value), missing=False)
    return np.asarray(column.eq(value).to_numpy(dtype=bool, na_value=False))


def _known(column: pd.Series) -> np.ndarray:
    """Boolean array: the rows whose outcome is one of :data:`~passk_nb.data.records.OUTCOMES`."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        ok = np.isin(np.asarray(column.cat.categories, dtype=object), OUTCOMES)
        codes = column.cat.codes.to_numpy()
        return np.where(codes >= 0, ok[codes], False) if ok.size else np.zeros(len(column), dtype=bool)
    array = _arrow(column)
    if array is not None:
        return _bools(pc.is_in(array, value_set=pa.array(OUTCOMES)), missing=False)
    return np.asarray(column.isin(OUTCOMES).to_numpy(dtype=bool))


def _bools(values: pa.Array | pa.ChunkedArray, missing: bool) -> np.ndarray:
    """A pyarrow boolean array as numpy booleans, a missing value as ``missing``. The bitmaps are
    unpacked by numpy: pyarrow's own conversion takes ~1 ms per million values, 20× longer.

    >>> _bools(pa.chunked_array([[True, None], [], [False]]), missing=True).tolist()
    [True, True, False]
    """
    parts = []
    for chunk in values.chunks if isinstance(values, pa.ChunkedArray) else [values]:
        n, offset = len(chunk), chunk.offset
        if n == 0:
            continue
        validity, data = chunk.buffers()
        bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8), count=offset + n, bitorder="little")[
            offset:
        ]
        if chunk.null_count:
            valid = np.unpackbits(
                np.frombuffer(validity, dtype=np.uint8), count=offset + n, bitorder="little"
            )
            bits = np.where(valid[offset:].view(bool), bits, np.uint8(missing))
        parts.append(bits.view(bool))
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)


def _arrow(column: pd.Series) -> pa.ChunkedArray | pa.Array | None:
    """The pyarrow array behind an arrow-backed string column (None for any other column)."""
    dtype = column.dtype
    arrow_string = isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow"
    if arrow_string or (isinstance(dtype, pd.ArrowDtype) and pa.types.is_string(dtype.pyarrow_dtype)):
        return pa.chunked_array(pa.array(column.array))
    return None


def _changes(column: pd.Series) -> np.ndarray | None:
    """Boolean array of length len(column) − 1: True where a row's value differs from the row
    before (or may: a missing value always counts as a change, which only splits a run). None
    when the column cannot be compared cheaply (e.g. Python objects)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.cat.codes.to_numpy()
        return codes[1:] != codes[:-1]
    array = _arrow(column)
    if array is not None:
        return _bools(pc.not_equal(array[1:], array[:-1]), missing=True)
    if column.dtype.kind in "biuf":  # NaN != NaN: a change, harmless
        values = column.to_numpy()
        return values[1:] != values[:-1]
    return None


class Runs(NamedTuple):
    """The rows split into runs of equal key values (see :func:`_runs`)."""

    starts: np.ndarray  # the first row of each run
    run_gid: np.ndarray  # each run's group number
    rows: np.ndarray  # one row of each group
    codes: dict[str, tuple[np.ndarray, pd.Index]]  # per key: each group's code, and the values


def _runs(df: pd.DataFrame, keys: list[str]) -> Runs:
    """Split the rows into runs of equal key values: the first row of each run, each run's group
    number (groups numbered in sorted key order, missing values last; only groups that occur),
    one row of each group, and per key each group's code in the key's sorted values (missing:
    ``len(values)``).

    Records come sorted (by run, task, trial), so the keys hold long runs of one value: each key is
    factorised at the first row of each of its own runs only (a model: a handful of rows), several
    times faster than factorising every row.
    When the runs are short (shuffled rows) every row is its own run."""
    n_rows = len(df)
    starts: np.ndarray | None = None
    own: dict[str, np.ndarray] = {}  # each key's own runs: where that key changes
    if n_rows > 1 and keys:
        changed = np.zeros(n_rows - 1, dtype=bool)
        for key in keys:
            change = _changes(df[key])
            if change is None:
                break
            own[key] = change
            changed |= change
            if np.count_nonzero(changed) > n_rows // 4:  # short runs: factorise every row
                break
        else:
            starts = np.flatnonzero(np.r_[True, changed])
    if starts is None:
        starts = np.arange(n_rows)
    code, size = np.zeros(starts.size, dtype=np.int64), 1
    run_codes: dict[str, tuple[np.ndarray, pd.Index]] = {}
    for key in keys:
        column = df[key]
        if starts.size == n_rows:
            codes, values = _codes(column)
        elif isinstance(column.dtype, pd.CategoricalDtype):
            codes, values = _codes(column)
            codes = codes[starts]
        else:  # factorise the first value of each of the key's own runs, spread to the runs of all keys
            firsts = np.flatnonzero(np.r_[True, own[key]])
            codes, values = _codes(pd.Series(column.array.take(firsts)))
            if firsts.size < starts.size:
                codes = codes[np.searchsorted(firsts, starts, side="right") - 1]
        run_codes[key] = codes, values
        size = _combine(code, size, codes, len(values) + 1)
    if size <= 4 * starts.size + 1024:
        present = np.bincount(code, minlength=size) > 0
        run_gid = (np.cumsum(present) - 1)[code]
        n_groups = int(present.sum())
    else:
        _, run_gid = np.unique(code, return_inverse=True)
        run_gid = run_gid.ravel()
        n_groups = int(run_gid.max()) + 1 if run_gid.size else 0
    first_run = np.empty(n_groups, dtype=np.int64)
    first_run[run_gid] = np.arange(starts.size)  # any run of a group holds its key values
    return Runs(
        starts,
        run_gid,
        starts[first_run],
        {key: (codes[first_run], values) for key, (codes, values) in run_codes.items()},
    )


def _combine(code: np.ndarray, size: int, codes: np.ndarray, key_size: int) -> int:
    """Append a key's ``codes`` (``key_size`` possible values) to the combined ``code`` in place,
    keeping it within int64 (renumbering the distinct combined codes when it would overflow);
    returns the combined code's new size."""
    if size > 2**62 // key_size:
        _, inverse = np.unique(code, return_inverse=True)
        code[:] = inverse.ravel()
        size = int(code.max()) + 1
    np.multiply(code, key_size, out=code)
    np.add(code, codes, out=code, casting="unsafe")  # codes may be int8: no copy to int64
    return size * key_size


def group_codes(df: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Group number of every row (groups numbered in sorted key order, only groups that
    occur) and one row of each group."""
    starts, run_gid, rows, _ = _runs(df, keys)
    if starts.size == len(df):
        return run_gid, rows
    return np.repeat(run_gid, np.diff(np.r_[starts, len(df)])), rows


def shared_columns(columns: Iterable[str], arms: Sequence[pd.DataFrame]) -> list[str]:
    """The ``columns`` some value of which every arm has: the ones a paired analysis may group by.
    A column whose values never overlap between the arms (``prompt_hash`` when the arms are prompt
    names, ``run_id``) names the arm again; grouping by it would leave no pair.

    >>> a = pd.DataFrame({"model": ["m"], "prompt_hash": ["p1"]})
    >>> shared_columns(["model", "prompt_hash"], [a, a.assign(prompt_hash="p2")])
    ['model']
    """
    shared = []
    for col in columns:
        common = set(arms[0][col].dropna().unique())
        for arm in arms[1:]:
            common &= set(arm[col].dropna().unique())
        if common:
            shared.append(col)
    return shared
