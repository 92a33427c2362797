"""What a trial costs: token prices (USD per million tokens) applied to a record's reported usage.

One place for the pricing rule, read by the analysis (:func:`passk_nb.stats.with_cost`) and by a
run that keeps to a budget (``run(budget_usd=, prices=)``): a trial costs its input tokens times
``price_in`` plus its output tokens times ``price_out``, over a million; where no price is given,
the cost the backend itself reported (``cost_usd`` in ``provider_meta``, e.g. the claude-code
provider's). A cost is never invented: unknown tokens or no price make it NaN, not 0.

>>> table = price_table({"gpt-x": (1.0, 4.0)})
>>> trial_cost({"model": "gpt-x", "input_tokens": 2000, "output_tokens": 500}, table)
0.004
>>> trial_cost({"model": "other", "provider_meta": '{"cost_usd": 0.25}'}, table)
0.25
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping
from typing import Any, TypeAlias

import numpy as np
import pandas as pd

#: Token prices: USD per million input and output tokens, as ``{model: (price_in, price_out)}`` or
#: a frame with columns ``model``, ``price_in``, ``price_out``.
Prices: TypeAlias = Mapping[str, tuple[float, float]] | pd.DataFrame | None


def price_table(prices: Mapping[str, tuple[float, float]] | pd.DataFrame) -> pd.DataFrame:
    """Prices as a frame indexed by model, checked: one price per model, each a finite number ≥ 0.

    ``prices``: ``{model: (price_in, price_out)}`` (USD per million tokens) or a frame with
    columns ``model``, ``price_in``, ``price_out``.

    >>> price_table({"a": (1, 2)}).loc["a"].tolist()
    [1.0, 2.0]
    """
    if isinstance(prices, pd.DataFrame):
        missing = [c for c in ("model", "price_in", "price_out") if c not in prices.columns]
        if missing:
            raise ValueError(f"the price table needs columns model, price_in, price_out; missing {missing}")
        if prices["model"].duplicated().any():
            raise ValueError("the price table lists a model twice; give one price per model")
        table = prices.set_index("model")[["price_in", "price_out"]].astype(float)
    elif isinstance(prices, Mapping):
        rows = {}
        for model, pair in prices.items():
            if isinstance(pair, str | bytes) or not hasattr(pair, "__len__") or len(pair) != 2:
                raise ValueError(
                    f"prices[{model!r}] must be a pair (price_in, price_out) in USD per million tokens, "
                    f"got {pair!r}"
                )
            rows[model] = {"price_in": float(pair[0]), "price_out": float(pair[1])}
        table = pd.DataFrame.from_dict(rows, orient="index", columns=["price_in", "price_out"])
    else:
        raise TypeError(
            "prices must be {model: (price_in, price_out)} (USD per million tokens) or a frame with "
            f"columns model, price_in, price_out; got {type(prices).__name__}"
        )
    values = table.to_numpy(dtype=float)
    if not (np.isfinite(values).all() and (values >= 0).all()):
        raise ValueError("every price must be a finite number ≥ 0 USD per million tokens")
    return table


def reported_cost(meta: object) -> float:
    """The cost a backend reported in a record's ``provider_meta`` (JSON text), NaN if none.

    >>> reported_cost('{"cost_usd": 0.002}'), reported_cost("{}")
    (0.002, nan)
    """
    try:
        value = json.loads(meta) if isinstance(meta, str) else meta
    except ValueError:
        return math.nan
    cost = value.get("cost_usd") if isinstance(value, dict) else None
    return float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else math.nan


def trial_cost(record: Mapping[str, Any], table: pd.DataFrame | None) -> float:
    """One record's cost in USD: its tokens at its model's price in ``table`` (:func:`price_table`),
    else the cost its backend reported; NaN when neither is known."""
    model = record.get("model")
    if table is not None and model in table.index:
        tokens_in, tokens_out = record.get("input_tokens"), record.get("output_tokens")
        if _count(tokens_in) and _count(tokens_out):
            price_in, price_out = table.loc[model, "price_in"], table.loc[model, "price_out"]
            return float((float(tokens_in) * price_in + float(tokens_out) * price_out) / 1e6)  # type: ignore[arg-type]
        return math.nan
    return reported_cost(record.get("provider_meta"))


def _count(value: object) -> bool:
    """A token count a backend reported: a finite number (an int, a numpy integer, a float)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))
