"""The ``df.passk`` accessor: the statistics as methods of a frame of trial records.

Importing :mod:`passk_nb` registers it (this class loads on the first ``df.passk``). A frame
without the columns the analysis needs has no ``passk`` accessor (an ``AttributeError`` naming
the missing columns, pandas' rule for accessors). Each method is the function of the same name with the
same keywords and defaults.

>>> import pandas as pd
>>> import passk_nb
>>> df = pd.DataFrame({"task": ["a"] * 4 + ["b"] * 4, "model": "m",
...                    "passed": [True, True, True, True, True, True, False, False]})
>>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
>>> df.passk.summarize(k=2, n_boot=0)[["model", "pass@k", "pass^k"]].round(4)
  model  pass@k  pass^k
0     m  0.9167  0.5833
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from passk_nb.stats.params import CI, INFRA, METHOD, MIN_TASKS, N_BOOT, PAIRED_METHOD, SEED

#: Columns a frame needs for ``df.passk``.
REQUIRED: tuple[str, ...] = ("task", "passed", "outcome")


def _call(module: str, name: str, *args: Any, **kwargs: Any) -> Any:
    """``passk_nb.stats.<module>.<name>(...)``, imported on first use (scipy stays unloaded until then)."""
    return getattr(importlib.import_module(f"passk_nb.stats.{module}"), name)(*args, **kwargs)


class PasskAccessor:
    """``df.passk.summarize``, ``.curve``, ``.compare``, ``.flips`` on this frame."""

    def __init__(self, df: pd.DataFrame) -> None:
        missing = [col for col in REQUIRED if col not in df.columns]
        if missing:
            raise AttributeError(
                f"df.passk needs trial records: the frame lacks columns {missing} (needs "
                f"{list(REQUIRED)}); build frames with passk_nb.data.frame_from_records or passk_nb.load"
            )
        self._df = df

    def summarize(
        self,
        *,
        k: int,
        by: str | Sequence[str] | None = None,
        ci: float = CI,
        n_boot: int = N_BOOT,
        seed: int = SEED,
        infra: str = INFRA,
        method: str = METHOD,
        min_tasks: int = MIN_TASKS,
    ) -> pd.DataFrame:
        """:func:`passk_nb.summarize` of this frame."""
        options = {"by": by, "ci": ci, "n_boot": n_boot, "seed": seed, "infra": infra}
        options |= {"method": method, "min_tasks": min_tasks}
        return _call("summary", "summarize", self._df, k=k, **options)

    def curve(
        self,
        ks: Iterable[int] | None = None,
        *,
        by: str | Sequence[str] | None = None,
        ci: float = CI,
        n_boot: int = N_BOOT,
        seed: int = SEED,
        infra: str = INFRA,
        method: str = METHOD,
        min_tasks: int = MIN_TASKS,
    ) -> pd.DataFrame:
        """:func:`passk_nb.curve` of this frame."""
        options = {"by": by, "ci": ci, "n_boot": n_boot, "seed": seed, "infra": infra}
        options |= {"method": method, "min_tasks": min_tasks}
        return _call("summary", "curve", self._df, ks, **options)

    def compare(
        self,
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
        method: str = PAIRED_METHOD,
        min_tasks: int = MIN_TASKS,
    ) -> pd.DataFrame:
        """:func:`passk_nb.compare` of arms ``a`` and ``b`` (values of column ``on``) in this frame."""
        options = {"by": by, "ci": ci, "n_boot": n_boot, "seed": seed, "infra": infra}
        options |= {"method": method, "min_tasks": min_tasks}
        return _call("paired", "compare", self._df, on=on, a=a, b=b, k=k, **options)

    def flips(
        self,
        *,
        on: str = "prompt_hash",
        a: object,
        b: object,
        by: str | Sequence[str] | None = None,
        alpha: float = 0.05,
        infra: str = INFRA,
        test: str = "fisher",
        family: str = "tarone",
    ) -> pd.DataFrame:
        """:func:`passk_nb.flips` between arms ``a`` and ``b`` (values of column ``on``) in this frame."""
        options = {"by": by, "alpha": alpha, "infra": infra, "test": test, "family": family}
        return _call("paired", "flips", self._df, on=on, a=a, b=b, **options)
