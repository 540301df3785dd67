"""Sliding-window geometry shared by UNFOLD, FOLD, AVERAGE_POOLING and CONVOLUTION_INTEGER.

SEMANTICS.md §3: on every spatial axis ``d`` the window offset ``k`` of block ``b`` reads
position ``pos[d] = b[d]*Strides[d] + k[d]*Dilations[d] - StartPadding[d]``. Shifting by
``StartPadding`` makes that an index into the *padded* image
(``StartPadding + S + EndPadding`` long), so for one fixed offset ``k`` the positions read by
all blocks form one strided slice of the padded image. The reference operators loop over the
window offsets (a handful) and move whole slices, never single elements.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..geometry import Window

Array = npt.NDArray[Any]
Index = tuple[slice | int, ...]

EVERYTHING: Index = (slice(None), slice(None))  # the N and C axes, whole


def window_offsets(window_sizes: Sequence[int]) -> list[tuple[int, ...]]:
    """Every window offset ``k``, row-major (last window axis fastest), as UNFOLD orders rows."""
    return list(np.ndindex(*window_sizes))


def tap_slices(offset: Sequence[int], blocks: Sequence[int], window: Window) -> tuple[slice, ...]:
    """The padded-image slices that window offset ``offset`` reads for all blocks at once.

    Block ``b`` reads padded index ``b*Strides + k*Dilations``; ``b`` runs over
    ``range(blocks)``, which is ``slice(k*D, k*D + (blocks-1)*S + 1, S)``.
    """
    return tuple(
        slice(k * d, k * d + (b - 1) * s + 1, s)
        for k, b, s, d in zip(offset, blocks, window.strides, window.dilations, strict=True)
    )


def interior(sizes: Sequence[int], start_padding: Sequence[int]) -> tuple[slice, ...]:
    """The slices of the padded image that hold the image itself."""
    return tuple(slice(a, a + s) for s, a in zip(sizes, start_padding, strict=True))


def padded_sizes(
    sizes: Sequence[int], start_padding: Sequence[int], end_padding: Sequence[int]
) -> tuple[int, ...]:
    """``Start + S + End`` per spatial axis."""
    return tuple(a + s + e for s, a, e in zip(sizes, start_padding, end_padding, strict=True))


def zero_padded(
    x: Array,
    start_padding: Sequence[int],
    end_padding: Sequence[int],
    dtype: npt.DTypeLike,
) -> Array:
    """``(N, C, *S) -> (N, C, *(Start + S + End))`` in ``dtype``, zero outside the image."""
    spatial = x.shape[2:]
    out = np.zeros(x.shape[:2] + padded_sizes(spatial, start_padding, end_padding), dtype=dtype)
    out[(*EVERYTHING, *interior(spatial, start_padding))] = x
    return out


def accumulation_dtype(dtype: npt.DTypeLike) -> np.dtype[Any]:
    """FLOAT16 sums accumulate in FLOAT32; every other type in itself (integers wrap)."""
    dt = np.dtype(dtype)
    return np.dtype(np.float32) if dt == np.float16 else dt
