"""Decisions over records: where a question stands, per configuration, after any completed round.

:func:`decide` reads trial records, a counts table or a folder of records, weighs each
(configuration, task) cell for the question's statistic and reports its anytime-valid interval
and verdict (:func:`status` does it on arrays; with ``final=N`` the last look is also the fixed-n
:func:`fixed_look`). :func:`decide_by_round` and :func:`trials_by_round` replay a run with
``until=`` round by round. Why stopping on these keeps the level, and which estimate stays
unbiased after an adaptive run: ``docs/methods/sequential.md``.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from passk_nb.stats._grouping import shared_columns
from passk_nb.stats.checks import COUNTED_OUTCOMES, records_by
from passk_nb.stats.counts import ROUND, Counts, as_counts, counts, is_counts_table
from passk_nb.stats.design.question import Question, as_question
from passk_nb.stats.design.sequence import Dual, Tilts, _interval, _per_round, tilts
from passk_nb.stats.estimators import pass_hat_k
from passk_nb.stats.intervals import fixed_interval, fixed_task_variance
from passk_nb.stats.params import INFRA
from passk_nb.stats.result import described

#: What names a round's count column (``n@0``, ``c@0``, …) in a counts table built from records.
_ROUND = ROUND
#: Columns of a counts table that are counts, not group keys.
_COUNT_COLUMNS = frozenset({"task", "n", "c", "n_infra", *(f"n_{o}" for o in COUNTED_OUTCOMES)})


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
    together at ``ci``, by the union bound), and the run stops there, decided or not. A cell past
    N means the run gave that look up (:func:`~passk_nb.stats.design.allocation.dropped`): its
    looks stay the anytime-valid ones at the first level.

    >>> s = status(np.array([30, 30]), np.array([30, 29]), np.array([0.5, 0.5]), "gate=0.7")
    >>> s.decided, round(s.lo, 3)
    (True, 0.829)
    >>> s = status(np.array([16, 16]), np.array([16, 8]), np.array([0.5, 0.5]), "precision=0.15 final=16")
    >>> s.final, s.verdict
    (True, 'known to ± 0.146: 0.604 – 0.896 (the final look, n = 16)')
    """
    q = as_question(question)
    n2, c2, w = _per_round(n), _per_round(c), np.asarray(w, dtype=float)
    # a look asks decide() and allocate() of the same counts: the second reads the first's status
    key = (q, np.ndim(n), n2.shape, n2.tobytes(), c2.tobytes(), w.tobytes())
    if key in _LOOKS:
        return _LOOKS[key]
    state = _status(n, c, n2, c2, w, q)
    if not state.verdict.startswith("inconsistent"):  # that one warns at every look
        _LOOKS[key] = state
        while len(_LOOKS) > _LOOKS_KEPT:
            del _LOOKS[next(iter(_LOOKS))]
    return state


#: The last few statuses computed, by question and counts (:func:`status`).
_LOOKS: dict[tuple[object, ...], Status] = {}
_LOOKS_KEPT = 8


def _status(
    n: np.ndarray, c: np.ndarray, n2: np.ndarray, c2: np.ndarray, w: np.ndarray, q: Question
) -> Status:
    """:func:`status` computed (n, c as given; n2, c2 per cell and round)."""
    total_n, total_c = n2.sum(axis=1), c2.sum(axis=1)
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
    decided, verdict = decision(q, estimate, lo, hi)
    if final:
        verdict = f"{verdict} (the final look, n = {q.final})"
    elif q.final is not None and np.any(total_n > q.final):  # round_trials() dropped the last look
        verdict = f"{verdict} (past final={q.final}: its last look dropped, {ci_any:.0%} at every look)"
    if crossed:  # only outside the 1 − α event; but a changed agent makes it likely: say so
        decided, verdict = False, f"inconsistent: no success rate per task fits every round at {q.ci:.0%}"
        warnings.warn(
            f"{verdict}: the trials of some task changed between rounds more than chance allows "
            "(did the agent, its prompt or the backend change during the run?); nothing is decided, "
            f"and the interval shown, {lo:.3f} – {hi:.3f}, spans both bounds",
            UserWarning,
            stacklevel=3,
        )
    return Status(estimate, lo, hi, decided, verdict, dual_lo, dual_hi, after, final)


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


def decision(q: Question, estimate: float, lo: float, hi: float) -> tuple[bool, str]:
    """Whether the interval ``lo`` – ``hi`` (around ``estimate``) decides ``q``, and the verdict
    line :func:`decide` shows: a gate passes or fails when the interval clears its threshold, a
    comparison when it excludes 0 (or, with a precision, is that narrow), a precision when it is
    that narrow.

    >>> decision(Question.parse("gate=0.8"), 0.9, 0.82, 0.95)
    (True, 'passes: pass^1 ≥ 0.820 ≥ 0.8')
    """
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
    (the mean unbiased per-task pass^k; NaN while a task has fewer than k trials; see
    ``docs/methods/sequential.md`` on its bias after adaptive allocation), ``lo``/``hi`` (the
    interval, valid at every look: stopping on it keeps the level; with ``final=N``, at N trials
    of every task the last look's, :func:`status`), ``decided`` and ``verdict``.

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
    by = tuple(path.columns[1 : list(path.columns).index("question")])  # after round, before decide()'s own
    return described(path, "decide_by_round", by=by, k=q.k, infra=infra, question=q)


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
    out = pd.concat(blocks, ignore_index=True)
    return described(
        out, "trials_by_round", by=tuple(out.columns[: list(out.columns).index("task")]), infra=infra
    )
