"""The numbers a report shows: :func:`~passk_nb.stats.summary.summarize` and the counts beside it.

:func:`report_frame` is what ``passk report``, ``passk run`` and the HTML report print; the view
only formats its columns (:mod:`passk_nb.view.tables`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import pandas as pd

from passk_nb.data.records import claims_checked
from passk_nb.stats.flags import claimed_unperformed_action
from passk_nb.stats.params import CI, CLUSTER, INFRA, N_BOOT, SEED, default_by, share_docs
from passk_nb.stats.result import carry
from passk_nb.stats.summary import summarize


@share_docs
def report_frame(
    df: pd.DataFrame,
    *,
    k: int,
    by: str | Sequence[str] | None = None,
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    infra: str = INFRA,
    cluster: str | None = CLUSTER,
) -> pd.DataFrame:
    """:func:`~passk_nb.stats.summary.summarize` with the counts a report shows beside the trials.

    Adds ``n_claimed_unperformed`` (final answers that claim an action the final state does
    not show, :func:`passk_nb.stats.flags.claimed_unperformed_action`), ``n_claims_checked``
    (trials whose claims were checked; 0 for imported ones: "n/a") and ``n_agent_errors``
    (trials whose outcome is ``agent_error``). A group whose every trial was an infrastructure
    error gets NaN values and a warning that says so; when every trial of the frame was one,
    a ValueError says what to check.

    {df}
    {k}
    {by}
    {ci}
    {n_boot}
    {seed}
    {infra}
    {cluster}

    >>> from passk_nb.data.records import frame_from_records
    >>> df = frame_from_records([{"run_id": "r", "suite": "s", "task": "t", "trial": i, "model": "m",
    ...     "passed": i < 3, "outcome": "pass" if i < 3 else "agent_error"} for i in range(4)])
    >>> report_frame(df, k=2, n_boot=0)[["model", "pass^k", "n_agent_errors", "n_claimed_unperformed"]]
      model  pass^k  n_agent_errors  n_claimed_unperformed
    0     m     0.5               1                      0
    """
    if df.empty:
        raise ValueError("no trial records to report: the folder holds none, or the filters match none")
    by = default_by(df, by)
    infra_rows = df["outcome"] == "infra_error"
    if infra_rows.all():
        first = df.loc[infra_rows, "error"].dropna()
        every = "the only trial was" if len(df) == 1 else f"all {len(df)} trials were"
        raise ValueError(
            f"{every} infrastructure errors, which are excluded, so there is nothing to estimate "
            f"(first error: {first.iloc[0] if len(first) else 'not recorded'}). Check that the backend "
            "runs and answers (base URL, model name, API key), then run the same run command again: "
            "trials that ended in infrastructure errors run again"
        )
    extras = df.assign(
        _claimed=claimed_unperformed_action(df).to_numpy(),
        _checked=claims_checked(df).to_numpy(),
        _agent_error=(df["outcome"] == "agent_error").to_numpy(),
        _usable=(~infra_rows).to_numpy() if infra == "exclude" else True,
    )
    keys = list(by) if by else [pd.Series(0, index=df.index)]
    counts = extras.groupby(keys, sort=False, dropna=False)[
        ["_claimed", "_checked", "_agent_error", "_usable"]
    ].sum()
    dead = counts.index[counts["_usable"] == 0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = summarize(df, k=k, by=by, ci=ci, n_boot=n_boot, seed=seed, infra=infra, cluster=cluster)
    for w in caught:  # a group with no usable trial at all is said better below
        if not (len(dead) and str(w.message).startswith("no task has")):
            warnings.warn(w.message, w.category, stacklevel=2)
    for key in dead:
        values = key if isinstance(key, tuple) else (key,)
        name = ", ".join(f"{col}={val}" for col, val in zip(by, values, strict=True)) or "the frame"
        warnings.warn(
            f"every trial of {name} was an infrastructure error, so all are excluded and its row is "
            "empty; check its backend (base URL, model name, API key) and run it again",
            UserWarning,
            stacklevel=2,
        )
    if len(dead):
        alive = counts.loc[counts["_usable"] > 0].index
        starved = out.set_index(list(by)).index.isin(alive) & (out["n_tasks_covered"] == 0).to_numpy()
        for i in starved.nonzero()[0]:
            name = ", ".join(f"{col}={out.loc[i, col]}" for col in by)
            warnings.warn(
                f"no task has ≥ {k} usable trials in {name}; the value is NaN. "
                "Run more trials or choose a smaller k",
                UserWarning,
                stacklevel=2,
            )
    flagged = (
        counts[["_claimed", "_checked", "_agent_error"]]
        .astype("int64")
        .rename(
            columns={
                "_claimed": "n_claimed_unperformed",
                "_checked": "n_claims_checked",
                "_agent_error": "n_agent_errors",
            }
        )
    )
    if by:
        return carry(out.merge(flagged.reset_index(), on=list(by), how="left"), out, statistic="report_frame")
    return carry(
        out.assign(**{c: int(flagged[c].iloc[0]) for c in flagged.columns}), out, statistic="report_frame"
    )


def newest_suite_versions(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``df`` cut to the newest version of each suite, and what it left out.

    A suite's versions are its ``suite_hash`` values (an edited task, check, tool or prompt is a
    new one; ``""``: unknown, e.g. records older than the column, counted as one version). The
    newest is the one whose latest trial started last; versions whose trials have no start time,
    or tied for last, are all kept. The second frame has one row per version left out: ``suite``,
    ``suite_hash``, its ``trials`` and ``shown``, the version kept in its place. A frame without
    ``suite_hash`` or ``started_at`` comes back whole.

    >>> from passk_nb.data.records import frame_from_records
    >>> df = frame_from_records([{"run_id": v, "suite": "s", "suite_hash": v, "task": "t", "trial": 0,
    ...     "passed": True, "outcome": "pass", "started_at": pd.Timestamp(f"2026-01-0{d}", tz="UTC")}
    ...     for v, d in [("a1", 1), ("b2", 2)]])
    >>> kept, left_out = newest_suite_versions(df)
    >>> kept["suite_hash"].tolist(), left_out[["suite_hash", "trials", "shown"]].values.tolist()
    (['b2'], [['a1', 1, 'b2']])
    """
    columns = ["suite", "suite_hash", "trials", "shown"]
    if not {"suite", "suite_hash", "started_at"} <= set(df.columns) or df.empty:
        return df, pd.DataFrame(columns=columns)
    versions = (
        df.groupby(["suite", "suite_hash"], sort=True, dropna=False)
        .agg(trials=("started_at", "size"), last=("started_at", "max"))
        .reset_index()
    )
    dropped: list[dict[str, object]] = []
    for _, of_suite in versions.groupby("suite", sort=True, dropna=False):
        timed = of_suite.dropna(subset=["last"])
        if len(of_suite) < 2 or timed.empty:
            continue
        newest = timed["last"].max()
        shown = ", ".join(str(v) for v in timed.loc[timed["last"] == newest, "suite_hash"])
        older = timed[timed["last"] < newest]
        dropped.extend(
            {"suite": row.suite, "suite_hash": row.suite_hash, "trials": int(row.trials), "shown": shown}
            for row in older.itertuples()
        )
    left_out = pd.DataFrame(dropped, columns=columns)
    if left_out.empty:
        return df, left_out
    gone = pd.MultiIndex.from_frame(left_out[["suite", "suite_hash"]].astype(str))
    pairs = pd.MultiIndex.from_arrays([df["suite"].astype(str), df["suite_hash"].astype(str)])
    return df[~pairs.isin(gone)], left_out
