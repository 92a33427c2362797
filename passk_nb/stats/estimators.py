"""Unbiased pass@k and pass^k estimators for one task run n times with c successes.

pass@k = 1 − C(n−c, k) / C(n, k) ("at least once in k tries") and pass^k = C(c, k) / C(n, k)
("all k times"), evaluated in product form, never with huge binomials nor with the biased
plug-in (c/n)^k. Inputs broadcast like numpy arrays; k > n gives NaN (never clamped).

>>> pass_hat_k(4, 3, 4)  # plug-in (3/4)**4 would claim 0.32
0.0
>>> round(pass_at_k(4, 1, 2), 12)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
0.5

The product forms and their measured accuracy: ``docs/methods/estimators.md``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

ArrayLike = npt.ArrayLike
#: Largest number of (element, draw) terms evaluated in one block.
_BLOCK = 1 << 21


def pass_at_k(n: ArrayLike, c: ArrayLike, k: ArrayLike) -> float | np.ndarray:
    """Unbiased pass@k, 1 − C(n−c, k) / C(n, k): the chance that at least one of k
    trials drawn without replacement from the n observed ones succeeded.

    Arguments broadcast; a scalar result is a Python float. k > n gives NaN.

    >>> pass_at_k(10, 3, 1)
    0.3
    >>> round(pass_at_k(10, 3, 5), 6)  # 1 - C(7,5)/C(10,5) = 1 - 21/252
    0.916667
    >>> pass_at_k([4, 4, 3], [0, 2, 3], 4).tolist()
    [0.0, 1.0, nan]
    """
    n, c, k = _validated(n, c, k)

    def log_all_fail(n_: np.ndarray, c_: np.ndarray, i: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log1p(-np.minimum(c_ / (n_ - i), 1.0))

    log_p = _reduce_draws(n, c, k, log_all_fail, np.sum)
    return _scalar_or_array(-np.expm1(log_p) + 0.0)  # + 0.0 turns -0.0 into 0.0


def pass_hat_k(n: ArrayLike, c: ArrayLike, k: ArrayLike) -> float | np.ndarray:
    """Unbiased pass^k, C(c, k) / C(n, k): the chance that all of k trials drawn without
    replacement from the n observed ones succeeded.

    Arguments broadcast; a scalar result is a Python float. k > n gives NaN.

    >>> pass_hat_k(4, 3, 2)
    0.5
    >>> pass_hat_k(8, 8, 8)
    1.0
    >>> pass_hat_k(5, [5, 4, 1], [2, 2, 6]).round(12).tolist()
    [1.0, 0.6, nan]
    """
    n, c, k = _validated(n, c, k)

    def all_succeed(n_: np.ndarray, c_: np.ndarray, i: np.ndarray) -> np.ndarray:
        return np.maximum(c_ - i, 0) / (n_ - i)

    return _scalar_or_array(_reduce_draws(n, c, k, all_succeed, np.prod))


def _validated(n: ArrayLike, c: ArrayLike, k: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Broadcast n, c, k to int64 arrays of one shape, or raise ValueError naming bad values."""
    arrays = {name: _integer_array(name, value) for name, value in (("n", n), ("c", c), ("k", k))}
    try:
        n_, c_, k_ = np.broadcast_arrays(arrays["n"], arrays["c"], arrays["k"])
    except ValueError as err:
        shapes = {name: a.shape for name, a in arrays.items()}
        raise ValueError(f"n, c and k do not broadcast together: shapes {shapes}") from err
    checks = (
        (n_ < 0, "n must be ≥ 0", ("n",)),
        (c_ < 0, "c must be ≥ 0", ("c",)),
        (c_ > n_, "c must be ≤ n (successes cannot exceed trials)", ("n", "c")),
        (k_ < 1, "k must be ≥ 1", ("k",)),
    )
    named = {"n": n_, "c": c_, "k": k_}
    for bad, rule, names in checks:
        if bad.any():
            where = np.flatnonzero(bad.ravel())
            shown = ", ".join(
                "(" + ", ".join(f"{name}={named[name].ravel()[j]}" for name in names) + ")" for j in where[:5]
            )
            more = f" and {where.size - 5} more" if where.size > 5 else ""
            raise ValueError(f"{rule}; got {shown}{more}")
    return n_, c_, k_


def _integer_array(name: str, value: ArrayLike) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind in "iu":
        return array.astype(np.int64)
    if array.dtype.kind == "f":
        bad = ~np.isfinite(array) | (array != np.round(array))
        if not bad.any():
            return array.astype(np.int64)
        shown = ", ".join(str(v) for v in array.ravel()[np.flatnonzero(bad.ravel())[:5]])
        raise ValueError(f"{name} must hold whole numbers; got {name}={shown}")
    raise ValueError(f"{name} must be integers; got {value!r} (dtype {array.dtype})")


def _reduce_draws(
    n: np.ndarray,
    c: np.ndarray,
    k: np.ndarray,
    term: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
    reduce: Callable[..., np.ndarray],
) -> np.ndarray:
    """``reduce`` over draws i = 0..k−1 of ``term(n, c, i)``, per element; NaN where k > n.

    Elements sharing a k are evaluated together as a (rows, k) block, in blocks of at
    most ``_BLOCK`` terms, so memory stays bounded for any n and k.
    """
    n_flat, c_flat, k_flat = n.ravel(), c.ravel(), k.ravel()
    out = np.full(n_flat.shape, np.nan)
    defined = k_flat <= n_flat
    for kk in np.unique(k_flat[defined]):
        rows = np.flatnonzero(defined & (k_flat == kk))
        draws = np.arange(kk)
        step = max(1, _BLOCK // int(kk))
        for start in range(0, rows.size, step):
            block = rows[start : start + step]
            out[block] = reduce(term(n_flat[block, None], c_flat[block, None], draws), axis=1)
    return out.reshape(n.shape)


def _scalar_or_array(values: np.ndarray) -> float | np.ndarray:
    return float(values) if values.ndim == 0 else values
