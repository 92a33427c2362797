"""The ``passk`` DataFrame accessor: the statistics as methods of a frame of trial records.

Importing this module registers ``df.passk`` on every pandas DataFrame
(``import passk_nb`` does so). Accessing it checks that the frame has the columns
the analysis needs and names any that are missing.

>>> import pandas as pd
>>> import passk_nb.accessor
>>> df = pd.DataFrame({"task": ["a"] * 4 + ["b"] * 4, "model": "m", "prompt_hash": "p",
...                    "passed": [True, True, True, True, True, True, False, False]})
>>> df["outcome"] = df["passed"].map({True: "pass", False: "wrong_state"})
>>> df.passk.summary(k=2, by="model")[["model", "pass@k", "pass^k"]].round(4)
  model  pass@k  pass^k
0     m  0.9167  0.5833
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from types import ModuleType

import pandas as pd


def _stats() -> ModuleType:
    """passk_nb.stats, imported on first use (it pulls in scipy; ``import passk_nb`` stays quick)."""
    return importlib.import_module("passk_nb.stats")


@pd.api.extensions.register_dataframe_accessor("passk")
class PasskAccessor:
    """``df.passk``: :func:`~passk_nb.stats.summarize`, :func:`~passk_nb.stats.curve`,
    :func:`~passk_nb.stats.compare` and :func:`~passk_nb.stats.flips` on this frame.

    >>> import pandas as pd
    >>> import passk_nb.accessor
    >>> pd.DataFrame({"task": ["a"]}).passk
    Traceback (most recent call last):
    ...
    ValueError: the frame lacks columns ['passed', 'outcome']; trial records need at least ['task', 'passed', 'outcome'] plus the grouping columns. Build them with passk_nb.records.frame_from_records
    """  # noqa: E501

    def __init__(self, df: pd.DataFrame) -> None:
        stats = _stats()
        stats.require_columns(df, stats.ANALYSIS_COLUMNS)
        self._df = df

    def summary(self, k: int, **options: object) -> pd.DataFrame:
        """:func:`passk_nb.stats.summarize` of this frame; ``options`` as there (``by``, ``ci``, ...).

        >>> import pandas as pd
        >>> import passk_nb.accessor
        >>> df = pd.DataFrame({"task": "t", "passed": [True, True, False], "outcome": "pass"})
        >>> float(df.passk.summary(k=2, by=(), n_boot=0).loc[0, "pass^k"])
        0.3333333333333333
        """
        return _stats().summarize(self._df, k=k, **options)

    def curve(self, ks: Iterable[int] | None = None, **options: object) -> pd.DataFrame:
        """:func:`passk_nb.stats.curve` of this frame.

        >>> import pandas as pd
        >>> import passk_nb.accessor
        >>> df = pd.DataFrame({"task": "t", "passed": [True, True, False], "outcome": "pass"})
        >>> df.passk.curve(by=(), n_boot=0)["value"].round(4).tolist()
        [0.6667, 1.0, 1.0, 0.6667, 0.3333, 0.0]
        """
        return _stats().curve(self._df, ks, **options)

    def compare(self, *, a: object, b: object, k: int, **options: object) -> pd.DataFrame:
        """:func:`passk_nb.stats.compare` of arms ``a`` and ``b`` in this frame (``on=`` picks the column).

        >>> import pandas as pd
        >>> import passk_nb.accessor
        >>> df = pd.DataFrame({"task": list("aabb") * 2, "prompt_hash": ["p1"] * 4 + ["p2"] * 4,
        ...                    "passed": [True, False, True, True] + [True, True, True, True]})
        >>> df["outcome"] = "pass"
        >>> df.passk.compare(a="p1", b="p2", k=1, by=(), n_boot=0)[["metric", "diff"]]
           metric  diff
        0  pass@k  0.25
        1  pass^k  0.25
        """
        return _stats().compare(self._df, a=a, b=b, k=k, **options)

    def flips(self, *, a: object, b: object, **options: object) -> pd.DataFrame:
        """:func:`passk_nb.stats.flips` between arms ``a`` and ``b`` in this frame (``on=`` picks the column).

        >>> import pandas as pd
        >>> import passk_nb.accessor
        >>> df = pd.DataFrame({"task": "t", "model": "m", "prompt_hash": ["p1"] * 4 + ["p2"] * 4,
        ...                    "passed": [True] * 4 + [False] * 4, "outcome": "pass"})
        >>> df.passk.flips(a="p1", b="p2")[["task", "successes_a", "successes_b", "flip"]]
          task  successes_a  successes_b  flip
        0    t            4            0  True
        """
        return _stats().flips(self._df, a=a, b=b, **options)
