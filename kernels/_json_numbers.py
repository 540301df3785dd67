"""JSON numbers of a tensor's `data`: exact integers, floats with NaN and the infinities, and
every value the type cannot hold refused at its element (`DescriptorError` at
`(*loc, "data", index)`), never wrapped or rounded to infinity. Used by `wire`.
"""

from __future__ import annotations

from typing import Any, NoReturn, cast

import numpy as np

from .dtypes import DataType
from .errors import DescriptorError, Loc

__all__ = ["flat_numbers", "floats", "integers"]


def integers(flat: list[Any], kinds: set[type], dt: DataType, loc: Loc) -> np.ndarray:
    """`flat` (of the Python types `kinds`) as an integer array of `dt`, exactly."""
    target = dt.numpy
    info = np.iinfo(target)
    if float in kinds:
        if int in kinds:  # the floats checked on their own; then every element as an integer
            at = np.fromiter((i for i, v in enumerate(flat) if type(v) is float), np.intp)
            f = np.fromiter((flat[i] for i in at), np.float64, len(at))
        else:
            at, f = None, np.asarray(flat, dtype=np.float64)
        _refuse_first(
            ~(np.isfinite(f) & (f == np.trunc(f))), loc, f"{dt.value} data must be integers", at
        )
        # float(info.max + 1) is a power of two, exact: no rounding at the bounds.
        _refuse_first((f < info.min) | (f >= float(info.max + 1)), loc, _outside(dt), at)
        # A JSON parser reads an integer literal beyond 64 bits as a rounded float; past 2**53
        # a float no longer says which integer was meant.
        inexact = np.abs(f) > _EXACT_FLOAT_INT
        if inexact.any():
            value = float(f[np.argmax(inexact)])
            msg = (
                f"{dt.value} values beyond +-2**53 must be integer literals within the type's "
                f"range (this one reads as the rounded float {value!r})"
            )
            _refuse_first(inexact, loc, msg, at)
        if at is None:
            return f.astype(target)
        flat = [int(v) for v in flat]
    try:
        return np.array(flat, dtype=target)
    except OverflowError:
        first = next(i for i, v in enumerate(flat) if not info.min <= v <= info.max)
        _bad((*loc, "data"), first, _outside(dt))


def floats(flat: list[Any], kinds: set[type], dt: DataType, loc: Loc) -> np.ndarray:
    """`flat` as a float array of `dt`; NaN and the infinities kept, overflow refused."""
    if int in kinds:
        # Integers that a float cannot hold exactly are a client error, not a rounding.
        big = np.fromiter((type(v) is int and abs(v) > _EXACT_FLOAT_INT for v in flat), bool)
        _refuse_first(big, loc, f"an integer is too large to be represented as {dt.value}")
    target = dt.numpy
    if kinds == _FLOATS and len(flat) <= _SCANNED and target.itemsize < 8:
        # Python's min and max over the list (a NaN after the first value is skipped: it
        # casts without overflow); each Python float (a double) is rounded once into the type,
        # as through a FLOAT64 array.
        if not flat or _fits(min(flat), max(flat), target.itemsize):
            return np.array(flat, dtype=target)
    wide = np.asarray(flat, dtype=np.float64)
    if target == wide.dtype:
        return wide
    if not wide.size or _fits(wide.min(), wide.max(), target.itemsize):  # NaN: not in range
        return wide.astype(target)
    with np.errstate(over="ignore"):
        buffer = wide.astype(target)
    _refuse_first(np.isfinite(wide) & ~np.isfinite(buffer), loc, _outside(dt))
    return buffer


_FLOATS = {float}
#: Lists at most this long are scanned for their range in Python (C loops over the list, no
#: array built first); longer ones through NumPy.
_SCANNED = 4096
#: The largest finite FLOAT16 and FLOAT32 values, by item size.
_LARGEST = {n: float(np.finfo(f"<f{n}").max) for n in (2, 4)}


_EXACT_FLOAT_INT = 2**53


def _fits(low: float, high: float, itemsize: int) -> bool:
    """Whether values from `low` to `high` cast to the float type of `itemsize` bytes without
    overflow (a NaN bound and the infinities do not: they take the checked cast)."""
    largest = _LARGEST[itemsize]
    return bool(-largest <= low and high <= largest)


def _outside(dt: DataType) -> str:
    return f"the value is outside the range of {dt.value}"


def _refuse_first(bad: np.ndarray, loc: Loc, msg: str, at: np.ndarray | None = None) -> None:
    """A DescriptorError at the first element of `data` marked in `bad` (`at[i]` is the
    element of `bad[i]`, when given), if any."""
    if bad.any():
        first = int(np.argmax(bad))
        _bad((*loc, "data"), int(at[first]) if at is not None else first, msg)


def flat_numbers(values: Any, loc: Loc) -> tuple[list[Any], set[type]]:
    """The numbers of `values` as one flat list, and the Python types among them."""
    if not isinstance(values, list):
        _bad(loc, "data", "data must be a JSON array of numbers")
    kinds = set(map(type, values))  # one pass: every later check reads these
    if list in kinds:
        try:
            values = np.asarray(values, dtype=object).reshape(-1).tolist()
        except ValueError:
            values = [[]]  # NumPy refuses some ragged nestings, builds lists of others
        kinds = set(map(type, values))
        if list in kinds:
            _bad(loc, "data", "nested data must be rectangular; send a flat row-major array")
    if not kinds <= {int, float}:
        first, value = next((i, v) for i, v in enumerate(values) if type(v) not in (int, float))
        what = "a boolean is not a number" if type(value) is bool else "data must hold numbers only"
        _bad((*loc, "data"), first, what)
    return cast(list[Any], values), kinds


def _bad(loc: Loc, field: str | int, msg: str) -> NoReturn:
    raise DescriptorError.at((*loc, field), msg)
