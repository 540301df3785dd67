"""UNFOLD (im2col) on the GPU: launcher of `kernels/cuda/unfold.cu`."""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from ..geometry import Window
from ._common import Plan, chunk_plan, fast_divmod, fill_divisors, param_struct, plan_cache
from ._patches import patch_plan, slab_plan

__all__ = ["PATHS", "unfold", "unfold_on"]

Path = Literal["slabs", "patches", "chunks"]
PATHS: tuple[Path, ...] = ("slabs", "patches", "chunks")

PARAMS = param_struct("unfold.cu", "dml::UnfoldParams")


@plan_cache
def _plan(
    shape: tuple[int, ...],
    byte_strides: tuple[int, ...],
    itemsize: int,
    window: Window,
    path: Path | None = None,
) -> Plan:
    """Everything but the data, once per geometry: a call then only allocates and launches.

    ``path`` forces a kernel (tests run every case through each). Where the windows tile the
    image without overlap (patches.cuh) None and "slabs" take unfold_slabs, "patches" the
    tile transpose unfold_patches; elsewhere, and where a slab outgrows its shared-memory
    budget, unfold_chunks. The tile transpose writes the columns in 112-byte runs on a ViT
    patching (55 us against the chunk kernel's 42, H100); a slab is one run of KW*BH*BW.
    """
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
    col_strides = (c * taps * length, length, 1)
    if path in (None, "slabs"):
        slabs = slab_plan(
            shape, xs, col_strides, window, itemsize, True, "unfold.cu", "unfold_slabs", itemsize
        )
        if slabs is not None:
            return slabs
    if path == "patches":
        patches = patch_plan(
            shape, xs, col_strides, window, itemsize, True, "unfold.cu", "unfold_patches", itemsize
        )
        if patches is not None:
            return patches
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


def unfold_on(path: Path | None, x: Any, window: Window) -> Any:
    """`unfold` through the kernel `path` (None: the launcher's choice; "slabs" and "patches"
    fall back to "chunks" where the windows overlap or do not tile the image)."""
    return _plan(x.shape, x.strides, x.dtype.itemsize, window, path).run(x)


def unfold(x: Any, window: Window) -> Any:
    """``(N, C, *S) -> (N, C*prod(K), BlockCount)`` for 1..6 spatial dims, any dtype."""
    return unfold_on(None, x, window)
