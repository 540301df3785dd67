"""The one place that asks whether an array lives on a GPU, and whether a GPU answers."""

from __future__ import annotations

import functools
import sys
from typing import Any

import numpy as np


def is_cupy_array(x: Any) -> bool:
    """True for a CuPy array; never imports CuPy when it has not been imported already."""
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(x, cupy.ndarray)


@functools.cache
def cuda_available() -> bool:
    """True when CuPy imports and at least one CUDA device answers a query."""
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount()) > 0
    except Exception:  # noqa: BLE001 - any import or driver failure means "no GPU here"
        return False


def to_host(x: Any) -> np.ndarray:
    """A NumPy array of `x`: CuPy arrays are copied to the host, anything else `asarray`'d."""
    if is_cupy_array(x):
        host: np.ndarray = x.get()
        return host
    return np.asarray(x)
