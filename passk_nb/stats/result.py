"""What a statistic's frame is, carried with it in ``.attrs``: so nothing downstream guesses it.

Each statistic sets :data:`KEYS` on the frame it returns (:func:`described`): ``statistic`` (the
function's name), ``by`` (its grouping columns), ``k`` (the k, or the ks of a curve), ``ci``,
``method`` and ``infra``. A table or a plot reads ``by`` and ``ci`` there (:func:`result_by`,
:func:`result_ci`) instead of inferring them from the column order.

pandas keeps ``.attrs`` through selecting rows or columns, ``assign``, ``copy``, ``sort_values``,
``reset_index`` and the concat of frames with equal attrs, but not through ``merge`` or
``pd.DataFrame(frame)``: code that merges a result passes them on with :func:`carry`.

The frame is a :class:`Result`, a DataFrame whose ``.plot()`` draws it with the view's plot for
its statistic (``passk_nb.curve(df).plot()`` is ``passk_nb.view.plot_curve(passk_nb.curve(df))``).

>>> import pandas as pd
>>> out = described(pd.DataFrame({"model": ["m"], "k": [2]}), "summarize", by=("model",), k=2, ci=0.9)
>>> result_by(out[out["k"] == 2], "summarize()"), result_ci(out, None, "summarize()")
(('model',), 0.9)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd


class Result(pd.DataFrame):
    """A statistic's frame: a DataFrame (rows, columns and ``.attrs`` as before) whose ``.plot()``
    draws it with the plot made for its statistic instead of pandas' generic plot.

    stats never imports view: ``.plot()`` goes through ``df.passk.plot``, the accessor that
    ``passk_nb`` (the package that wires the layers) registers from :mod:`passk_nb.view.accessor`.
    Selecting rows or columns keeps the type, so ``curve[curve["k"] <= 5].plot()`` draws too;
    pandas' own plot stays at hand as ``pd.DataFrame.plot(result).bar()``.
    """

    @property
    def _constructor(self) -> type[Result]:
        return Result

    def plot(self, *args: Any, **options: Any) -> Any:
        """Draw this result with the view's plot for its statistic (``.attrs['statistic']``);
        ``options`` are that plot's drawing options (``ax=``, ``title=``, ...)."""
        return self.passk.plot(*args, **options)


def as_result(frame: pd.DataFrame) -> Result:
    """``frame`` as a :class:`Result`, keeping its ``.attrs`` (``pd.DataFrame(frame)`` drops them)."""
    if isinstance(frame, Result):
        return frame
    out = Result(frame)
    out.attrs = dict(frame.attrs)
    return out


#: The keys of ``.attrs`` a statistic's frame carries.
KEYS: tuple[str, ...] = ("statistic", "by", "k", "ci", "method", "infra")


def described(
    frame: pd.DataFrame,
    statistic: str,
    *,
    by: Sequence[str],
    k: int | Sequence[int] | None = None,
    ci: float | None = None,
    method: str | None = None,
    infra: str | None = None,
    records: object = None,
    **details: object,
) -> Result:
    """``frame`` as a :class:`Result` saying which statistic it is and how it was computed
    (``details``: what else its plot needs, such as the arms of a comparison; ``records``: the
    input, whose prompt names it keeps for the labels, :func:`prompt_names`)."""
    frame = as_result(frame)
    labels_hashes = "prompt_hash" in frame.columns or details.get("on") == "prompt_hash"
    needs_names = labels_hashes and "prompt_name" not in frame.columns  # else nothing to look up
    names = prompt_names(records) if needs_names and isinstance(records, pd.DataFrame) else {}
    frame.attrs.update(
        details,
        **({"prompt_names": names} if names else {}),
        statistic=statistic,
        by=tuple(by),
        k=k if k is None or isinstance(k, int) else tuple(int(x) for x in k),
        ci=ci,
        method=method,
        infra=infra,
    )
    return frame


def carry(frame: pd.DataFrame, source: pd.DataFrame, **changed: object) -> Result:
    """``frame`` as a :class:`Result` with the :data:`KEYS` of ``source`` (a merge loses them),
    some ``changed``."""
    frame = as_result(frame)
    kept = (*KEYS, "prompt_names")
    frame.attrs.update({key: source.attrs[key] for key in kept if key in source.attrs}, **changed)
    return frame


def prompt_names(frame: pd.DataFrame) -> dict[str, str]:
    """``{prompt_hash: prompt_name}`` a frame knows: its ``.attrs['prompt_names']`` (kept by the
    statistic from its records) and its own ``prompt_hash``/``prompt_name`` columns.

    >>> prompt_names(pd.DataFrame({"prompt_hash": ["9c1f", "77ab"], "prompt_name": ["strict", None]}))
    {'9c1f': 'strict'}
    """
    names = {str(h): str(n) for h, n in (frame.attrs.get("prompt_names") or {}).items()}
    if {"prompt_hash", "prompt_name"} <= set(frame.columns):
        pairs = frame[["prompt_hash", "prompt_name"]].dropna().drop_duplicates("prompt_hash")
        names |= {
            str(h): str(n) for h, n in zip(pairs["prompt_hash"], pairs["prompt_name"], strict=True) if n
        }
    return names


def result_by(frame: pd.DataFrame, what: str) -> tuple[str, ...]:
    """The grouping columns of a statistic's frame; a clear error for a frame that does not say.

    >>> result_by(pd.DataFrame({"model": ["m"], "k": [2]}), "summarize()")
    Traceback (most recent call last):
    ...
    ValueError: this frame does not say which columns it was grouped by (its .attrs['by']); pass the frame summarize() returned
    """  # noqa: E501
    by = frame.attrs.get("by")
    if by is None:
        raise ValueError(
            "this frame does not say which columns it was grouped by (its .attrs['by']); pass the "
            f"frame {what} returned"
        )
    missing = [col for col in by if col not in frame.columns]
    if missing:
        raise ValueError(
            f"this frame was grouped by {list(by)} but has no column {missing} any more; keep the "
            "grouping columns of the frame"
        )
    return tuple(by)


def result_ci(frame: pd.DataFrame, ci: float | None, what: str) -> float:
    """The level a statistic's frame was computed at; ``ci`` when given (it must agree).

    >>> frame = described(pd.DataFrame(), "curve", by=(), ci=0.9)
    >>> result_ci(frame, 0.95, "curve()")
    Traceback (most recent call last):
    ...
    ValueError: ci=0.95, but this frame was computed at ci=0.9: leave ci out, or compute the frame at 0.95
    """
    level = frame.attrs.get("ci")
    if level is None:
        if ci is None:
            raise ValueError(
                f"this frame does not say its interval level (its .attrs['ci']); pass the frame {what} "
                "returned, or give ci="
            )
        return ci
    if ci is not None and ci != level:
        raise ValueError(
            f"ci={ci}, but this frame was computed at ci={level}: leave ci out, or compute the frame at {ci}"
        )
    return float(level)
