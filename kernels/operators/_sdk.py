"""Argument conventions of the SDK helpers, shared by every operator's `helper`.

The helpers take NumPy-style arguments (snake_case, DirectML's defaults) and return one
descriptor model plus its named inputs as host arrays; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import numpy.typing as npt

from .._array import to_host

__all__ = ["ArrayLike", "Dims", "NDArray", "per_axis", "to_host", "window_fields"]

#: A tensor: a NumPy array (any strides), a CuPy array (copied to host) or anything
#: `numpy.asarray` takes.
ArrayLike = npt.ArrayLike
#: One value per spatial dimension, or one int for all of them.
Dims = int | Sequence[int]
NDArray = npt.NDArray[Any]


@overload
def per_axis(value: Dims, count: int) -> tuple[int, ...]: ...
@overload
def per_axis(value: None, count: int) -> None: ...
def per_axis(value: Dims | None, count: int) -> tuple[int, ...] | None:
    """An int stands for the same value on every spatial dimension."""
    if value is None:
        return None
    if isinstance(value, int):
        return (value,) * count
    return tuple(int(v) for v in value)


def window_fields(
    count: int,
    strides: Dims | None,
    dilations: Dims | None,
    start_padding: Dims | None,
    end_padding: Dims | None,
) -> dict[str, Any]:
    """The sliding-window fields of a descriptor, for `count` spatial dimensions."""
    return {
        "strides": per_axis(strides, count),
        "dilations": per_axis(dilations, count),
        "start_padding": per_axis(start_padding, count),
        "end_padding": per_axis(end_padding, count),
    }
