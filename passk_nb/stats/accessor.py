"""The ``df.passk`` accessor: every statistic of :mod:`passk_nb.stats` as a method of a frame of
trial records.

Importing :mod:`passk_nb` registers it (this class loads on the first ``df.passk``). A frame
without the columns the analysis needs has no ``passk`` accessor (an ``AttributeError`` naming
the missing columns, pandas' rule for accessors). The methods are generated from the face: each
function of ``passk_nb.stats.__all__`` that takes the records first (:data:`DATA_FIRST`) is a
method of the same name, signature (less the records) and docstring, so a new statistic is on
``df.passk`` without a line here.

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

import functools
import inspect
from collections.abc import Callable
from typing import Any

import pandas as pd

import passk_nb.stats as _face

#: Columns a frame needs for ``df.passk``.
REQUIRED: tuple[str, ...] = ("task", "passed", "outcome")
#: The names a function of the face gives its first parameter when it takes trial records.
DATA_FIRST: frozenset[str] = frozenset({"df", "data", "records", "pilot"})


def statistics() -> dict[str, Callable[..., Any]]:
    """The functions of the stats face that take trial records first, by name."""
    out: dict[str, Callable[..., Any]] = {}
    for name in _face.__all__:
        function = getattr(_face, name)
        if inspect.isfunction(function):
            first = next(iter(inspect.signature(function).parameters), None)
            if first in DATA_FIRST:
                out[name] = function
    return out


def _method(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` as a method passing the accessor's frame as its first argument."""

    def method(self: PasskAccessor, *args: Any, **kwargs: Any) -> Any:
        return function(self._df, *args, **kwargs)

    functools.update_wrapper(method, function)
    signature = inspect.signature(function)
    rest = list(signature.parameters.values())[1:]
    self_ = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    method.__signature__ = signature.replace(parameters=[self_, *rest])  # type: ignore[attr-defined]
    method.__qualname__ = f"PasskAccessor.{function.__name__}"
    return method


class PasskAccessor:
    """``df.passk.<statistic>(...)`` is ``passk_nb.stats.<statistic>(df, ...)``."""

    def __init__(self, df: pd.DataFrame) -> None:
        missing = [col for col in REQUIRED if col not in df.columns]
        if missing:
            raise AttributeError(
                f"df.passk needs trial records: the frame lacks columns {missing} (needs "
                f"{list(REQUIRED)}); build frames with passk_nb.data.frame_from_records or passk_nb.load"
            )
        self._df = df


for _name, _function in statistics().items():
    setattr(PasskAccessor, _name, _method(_function))
