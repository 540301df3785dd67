"""CONVOLUTION_INTEGER, SEMANTICS.md §6."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..geometry import Window
from ._windows import Array
from .unfold import unfold

__all__ = ["convolution_integer"]


def convolution_integer(
    x: Array,
    w: Array,
    x_zero_point: int,
    w_zero_point: Array,
    strides: Sequence[int],
    dilations: Sequence[int],
    start_padding: Sequence[int],
    end_padding: Sequence[int],
    group_count: int,
) -> Array:
    """Forward cross-correlation of INT8/UINT8 data: ``(N, C, *S), (M, C/G, *K) -> (N, M, *O)``.

    ``Y[n,m,o] = sum_{c in g(m)} sum_t (X~[n,c, o*Strides + t*Dilations - Start] - x_zp)
    * (W[m, c - g*C/G, t] - w_zp[m])`` with ``X~`` padded by ``x_zp`` (padded taps contribute 0),
    output channel ``m`` in group ``g = m // (M/G)``. ``w_zero_point`` holds one value per output
    channel (shape ``(M,)``; a single value broadcasts). Exact in int64, then wrapped to INT32
    (two's complement), the project's overflow rule. Integers never pass through floats.
    """
    n, c = x.shape[:2]
    m = w.shape[0]
    g = group_count
    window = Window(w.shape[2:], strides, dilations, start_padding, end_padding)
    out_sizes = window.blocks(x.shape[2:])

    # Subtracting x_zp first turns "pad with x_zp" into UNFOLD's implicit zero padding.
    centered = x.astype(np.int64) - np.int64(x_zero_point)
    columns = unfold(centered, window)  # (N, C*prod(K), BlockCount)
    columns = columns.reshape(n, g, (c // g) * window.taps, -1)

    w_zp = np.broadcast_to(np.asarray(w_zero_point, dtype=np.int64).reshape(-1), (m,))
    filters = w.astype(np.int64) - w_zp.reshape(m, *([1] * (w.ndim - 1)))
    filters = filters.reshape(g, m // g, -1)  # rows of group g: channels [g*C/G, (g+1)*C/G)

    # (G, M/G, C/G*prod(K)) @ (N, G, C/G*prod(K), B) -> (N, G, M/G, B): one matrix product per
    # group, exact in int64; astype then keeps the low 32 bits (two's-complement wrap).
    products = np.matmul(filters, columns)
    out: Array = products.reshape(n, m, *out_sizes).astype(np.int32, order="C")
    return out
