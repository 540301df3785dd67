"""UNFOLD (im2col) on the GPU: launcher of `kernels/cuda/unfold.cu`."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..geometry import Window
from ._common import Plan, chunk_plan, fast_divmod, fill_divisors, param_struct

__all__ = ["unfold"]

PARAMS = param_struct("unfold.cu", "dml::UnfoldParams")


@functools.lru_cache(maxsize=512)
def _plan(
    shape: tuple[int, ...],
    byte_strides: tuple[int, ...],
    itemsize: int,
    window: Window,
) -> Plan:
    """Everything but the data, once per geometry: a call then only allocates and launches."""
    n, c, *sizes = shape
    dims = len(sizes)
    blocks = window.blocks(sizes)
    taps = window.taps
    length = math.prod(blocks)
    out_shape = (n, c * taps, length)
    p = np.zeros((), dtype=PARAMS)
    if math.prod(out_shape) == 0:
        return Plan(out_shape, None, p)

    xs = [s // itemsize for s in byte_strides]
    p["x_stride_n"], p["x_stride_c"] = xs[0], xs[1]
    p["x_stride"][:dims] = xs[2:]
    p["size"][:dims] = sizes
    p["window_stride"][:dims] = window.strides
    p["dilation"][:dims] = window.dilations
    p["pad_lo"][:dims] = window.start_padding
    p["blocks"][:dims] = blocks
    fill_divisors(p["block_div"], blocks)
    fill_divisors(p["window_div"], window.sizes)
    p["taps_div"] = fast_divmod(taps)
    p["channel_div"] = fast_divmod(c)
    p["block_count"] = length
    return chunk_plan(
        p, shape, xs, out_shape, length, itemsize, "unfold.cu", "unfold_chunks", itemsize, dims
    )


def unfold(x: Any, window: Window) -> Any:
    """``(N, C, *S) -> (N, C*prod(K), BlockCount)`` for 1..6 spatial dims, any dtype."""
    return _plan(x.shape, x.strides, x.dtype.itemsize, window).run(x)
