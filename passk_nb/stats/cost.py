"""The cost of reliability: :func:`with_cost` prices trials, :func:`cost_summary` sets cost beside pass^k.

Trials record the token counts their backend reported (``input_tokens``,
``output_tokens``); a price is applied at analysis time, never stored and never
invented: a trial whose tokens were not reported, or whose model has no price, costs NaN
(and is counted as unpriced), not 0. A cost the backend itself reported (the claude-code
provider's ``cost_usd`` in ``provider_meta``) is used where no price is given.

One *reliable* success is a task done right k times in a row. Runs of k trials succeed
all k times with probability pass^k, so the expected spend until the first all-k success
is ``k × cost per trial / pass^k`` (:func:`cost_summary`'s ``per_reliable_success``;
infinite when pass^k is 0). For a local model, pass ``measure="latency_s"`` to put wall
time in the place of money.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from passk_nb.data.prices import Prices, price_table, reported_cost
from passk_nb.stats.checks import require_columns
from passk_nb.stats.params import CI, INFRA, N_BOOT, SEED, default_by, share_docs
from passk_nb.stats.result import carry
from passk_nb.stats.summary import summarize

__all__ = ["Prices", "cost_summary", "price_table", "with_cost", "with_cost_columns"]


def with_cost(
    df: pd.DataFrame,
    *,
    price_in: float | None = None,
    price_out: float | None = None,
    prices: Prices = None,
) -> pd.DataFrame:
    """``df`` with a ``cost_usd`` column: each trial's tokens at the given prices.

    ``price_in``/``price_out`` (USD per million tokens) price every trial; ``prices``
    gives them per model instead, as ``{model: (price_in, price_out)}`` or a frame with
    columns ``model``, ``price_in``, ``price_out``. Without any price, the cost a backend
    reported in ``provider_meta`` (``cost_usd``) is used. Trials with unknown tokens or an
    unpriced model get NaN.

    >>> df = pd.DataFrame({"model": ["a", "a", "b"], "input_tokens": [1000, 2000, 1000],
    ...                    "output_tokens": [100, None, 100]})
    >>> with_cost(df, price_in=3, price_out=15)["cost_usd"].tolist()
    [0.0045, nan, 0.0045]
    >>> with_cost(df, prices={"a": (1, 2)})["cost_usd"].round(6).tolist()
    [0.0012, nan, nan]
    >>> reported = pd.DataFrame({"provider_meta": ['{"cost_usd": 0.002}', '{}', None]})
    >>> with_cost(reported)["cost_usd"].tolist()
    [0.002, nan, nan]
    """
    out = df.copy()
    given = price_in is not None or price_out is not None
    if given and prices is not None:
        raise ValueError(
            "give price_in/price_out (one price for every trial) or prices= (per model), not both"
        )
    if given:
        if price_in is None or price_out is None:
            raise ValueError("give both price_in and price_out (USD per million tokens; 0 is a price)")
        p_in = pd.Series(float(price_in), index=df.index)
        p_out = pd.Series(float(price_out), index=df.index)
    elif prices is not None:
        require_columns(df, ("model",))
        table = price_table(prices)
        p_in = df["model"].map(table["price_in"]).astype(float)
        p_out = df["model"].map(table["price_out"]).astype(float)
    else:
        meta = df["provider_meta"] if "provider_meta" in df.columns else [None] * len(df)
        out["cost_usd"] = np.array([reported_cost(text) for text in meta], dtype=float)
        return out
    for name, series in (("price_in", p_in), ("price_out", p_out)):
        if (series.dropna() < 0).any():
            raise ValueError(f"{name} must be ≥ 0 USD per million tokens")
    require_columns(df, ("input_tokens", "output_tokens"))
    tokens_in = pd.to_numeric(df["input_tokens"], errors="coerce").astype(float)
    tokens_out = pd.to_numeric(df["output_tokens"], errors="coerce").astype(float)
    out["cost_usd"] = ((tokens_in * p_in + tokens_out * p_out) / 1e6).to_numpy(dtype=float)
    return out


@share_docs
def cost_summary(
    df: pd.DataFrame,
    *,
    k: int,
    by: str | Sequence[str] | None = None,
    measure: str = "cost_usd",
    ci: float = CI,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    infra: str = INFRA,
) -> pd.DataFrame:
    """pass^k beside what a trial costs, per configuration: the cost of one reliable success.

    ``measure`` is a per-trial column: ``cost_usd`` (add it with :func:`with_cost`) or
    ``latency_s`` (wall time, for local models). Columns: the ``by`` columns, ``k``,
    ``pass^k``, ``pass^k_lo``, ``pass^k_hi`` (as :func:`passk_nb.summarize`), ``trials``,
    ``n_measured`` (trials whose measure is known), ``per_trial`` (mean of the measure over
    those trials, infra errors included: they were paid for), ``total``, and
    ``per_reliable_success`` = k × per_trial / pass^k with ``per_reliable_success_lo``/``_hi``
    from the pass^k interval (the cost taken as known). A group without any measured trial
    gets NaN.

    {df}
    {k}
    {by}
    {ci}
    {n_boot}
    {seed}
    {infra}

    >>> df = pd.DataFrame({"task": list("aabb") * 2, "model": ["cheap"] * 4 + ["dear"] * 4,
    ...                    "passed": [True, False, True, True] + [True] * 4,
    ...                    "input_tokens": 1000, "output_tokens": 100})
    >>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
    >>> priced = with_cost(df, prices={"cheap": (0.1, 0.4), "dear": (3.0, 15.0)})
    >>> cost_summary(priced, k=2, n_boot=0)[["model", "pass^k", "per_trial", "per_reliable_success"]]
       model  pass^k  per_trial  per_reliable_success
    0  cheap     0.5    0.00014               0.00056
    1   dear     1.0    0.00450               0.00900

    Never passing all k times costs without end; an unpriced model has no cost at all:

    >>> never = df.assign(passed=False, outcome="wrong_state")
    >>> cost_summary(with_cost(never, prices={"dear": (3.0, 15.0)}), k=2, n_boot=0)[
    ...     ["model", "n_measured", "per_trial", "per_reliable_success"]]
       model  n_measured  per_trial  per_reliable_success
    0  cheap           0        NaN                   NaN
    1   dear           4     0.0045                   inf
    """
    require_columns(df, (measure,))
    by = default_by(df, by)
    summary = summarize(df, k=k, by=by, ci=ci, n_boot=n_boot, seed=seed, infra=infra)
    keep = [*by, "k", "pass^k", "pass^k_lo", "pass^k_hi", "trials"]
    return carry(
        with_cost_columns(summary[keep], df, k=k, by=by, measure=measure),
        summary,
        statistic="cost_summary",
        measure=measure,
    )


def with_cost_columns(
    summary: pd.DataFrame,
    df: pd.DataFrame,
    *,
    k: int,
    by: Sequence[str],
    measure: str = "cost_usd",
) -> pd.DataFrame:
    """``summary`` (one row per group of ``by``, with ``pass^k`` and its interval) with the cost
    columns of :func:`cost_summary` computed from the trials ``df``.

    For a table that already holds pass^k (a report), so the intervals are not computed twice.

    >>> df = pd.DataFrame({"model": ["a", "a", "b", "b"], "cost_usd": [0.01, 0.03, None, None]})
    >>> summary = pd.DataFrame({"model": ["a", "b"], "pass^k": [0.5, 1.0], "pass^k_lo": [0.25, 0.5],
    ...                         "pass^k_hi": [1.0, 1.0]})
    >>> with_cost_columns(summary, df, k=2, by=["model"])[
    ...     ["model", "n_measured", "per_trial", "per_reliable_success", "per_reliable_success_hi"]]
      model  n_measured  per_trial  per_reliable_success  per_reliable_success_hi
    0     a           2       0.02                  0.08                     0.16
    1     b           0        NaN                   NaN                      NaN
    """
    require_columns(df, (measure,))
    by = list(by)
    values = pd.to_numeric(df[measure], errors="coerce").astype(float)
    frame = df[by].assign(_value=values.to_numpy())
    if by:
        grouped = frame.groupby(by, dropna=False, sort=False)["_value"]
        stats = grouped.agg(n_measured="count", per_trial="mean", total="sum").reset_index()
        out = summary.merge(stats, on=by, how="left")
        out["n_measured"] = out["n_measured"].fillna(0).astype(int)
    else:
        out = summary.assign(
            n_measured=int(values.notna().sum()),
            per_trial=float(values.mean()),
            total=float(values.sum()),
        )
    out.loc[out["n_measured"] == 0, ["per_trial", "total"]] = np.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        spend = k * out["per_trial"].to_numpy(dtype=float)
        out["per_reliable_success"] = spend / out["pass^k"].to_numpy(dtype=float)
        out["per_reliable_success_lo"] = spend / out["pass^k_hi"].to_numpy(dtype=float)
        out["per_reliable_success_hi"] = spend / out["pass^k_lo"].to_numpy(dtype=float)
    return carry(out, summary)  # a merge loses what the summary says it is
