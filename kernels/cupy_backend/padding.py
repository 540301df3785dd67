"""PADDING on the GPU: launcher of `kernels/cuda/padding.cu`."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ..directml import PaddingMode
from ._common import (
    Plan,
    chunk_plan,
    fast_divmod,
    fill_divisors,
    index_type,
    launch,
    param_struct,
    plan_cache,
)

__all__ = ["PATHS", "padding", "padding_on"]

Path = Literal["tiles", "chunks", "chunks1"]
PATHS: tuple[Path, ...] = ("tiles", "chunks", "chunks1")
# pad_chunks: chunks per thread ("chunks"; "chunks1" forces one), all loaded before any is
# stored: more bytes in flight per SM where one chunk a thread left the H200 latency-bound.
CHUNKS_PER_THREAD = 2
# pad_tiles: output bytes per CTA (a multiple of 16) and its shared-memory limit (the default
# one, so no opt-in); rows longer than TILE_ROW_LIMIT take another kernel, as a tile stages
# whole source rows and a long row would be read several times.
TILE_BYTES = 16 * 1024
TILES_SMEM_BUDGET = 48 * 1024
TILE_ROW_LIMIT = 4 * 1024

PARAMS = param_struct("padding.cu", "dml::PadParams")


def collapse(
    shape: Sequence[int], strides: Sequence[int], lo: Sequence[int], hi: Sequence[int]
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Merge neighbouring unpadded dims that are contiguous in the input; drop unpadded 1s.

    Fewer dims mean longer output rows and less index decoding; the result describes the
    same element mapping.
    """
    dims = [
        [n, s, a, b]
        for n, s, a, b in zip(shape, strides, lo, hi, strict=True)
        if not (n == 1 and a == 0 and b == 0)
    ]
    if not dims:
        dims = [[1, 1, 0, 0]]
    merged = [dims[-1]]
    for n, s, a, b in reversed(dims[:-1]):
        inner = merged[0]
        if a == b == 0 and inner[2] == inner[3] == 0 and s == inner[1] * inner[0]:
            inner[0] *= n
        else:
            merged.insert(0, [n, s, a, b])
    return (
        [d[0] for d in merged],
        [d[1] for d in merged],
        [d[2] for d in merged],
        [d[3] for d in merged],
    )


def _needs_period(n: int, lo: int, hi: int, mode: str) -> bool:
    """True when a pad reaches beyond one fold, where the closed-form mirror stops holding."""
    if mode == "REFLECTION":
        return max(lo, hi) > n - 1
    if mode in ("SYMMETRIC", "WRAP"):
        return max(lo, hi) > n
    return False


def _period(n: int, mode: str) -> int:
    """The period of the inner dim's mirror map (1 where there is none)."""
    return max(1, {"REFLECTION": 2 * (n - 1), "SYMMETRIC": 2 * n, "WRAP": n}.get(mode, 1))


def _tile_slot(n: int, lo: int, hi: int, itemsize: int) -> tuple[int, int]:
    """pad_tiles' ``(lead, slot)``: the slot byte where the source row's first aligned block
    goes (room for the start pad and 32 bytes of slack before it), and the slot's bytes (the
    row at any alignment, the end pad, and slack for shifted reads past it)."""
    lead = 16 * -(-(lo * itemsize + 32) // 16)
    return lead, 16 * -(-(lead + 15 + (n + hi) * itemsize + 20) // 16)


def _lanes_per_row(chunks: int) -> int:
    """A power of two of lanes, at most a warp, for a row of ``chunks`` chunks."""
    return min(32, 1 << max(0, (chunks - 1).bit_length()))


@functools.lru_cache(maxsize=512)
def _plan(
    shape: tuple[int, ...],
    byte_strides: tuple[int, ...],
    itemsize: int,
    start_padding: tuple[int, ...],
    end_padding: tuple[int, ...],
    mode: str,
    path: Path | None = None,
) -> Plan:
    """Everything but the data, once per geometry: a call then only allocates and launches.

    ``path`` forces a kernel (tests run every case through each; one that does not apply
    falls back to pad_chunks); None chooses pad_tiles for 1- and 2-byte elements and for maps
    beyond one fold where it applies, else pad_chunks.
    """
    out_shape = tuple(n + a + b for n, a, b in zip(shape, start_padding, end_padding, strict=True))
    p = np.zeros((), dtype=PARAMS)
    strides = [s // itemsize for s in byte_strides]
    sizes, in_strides, lo, hi = collapse(shape, strides, start_padding, end_padding)
    if math.prod(out_shape) == 0 or all(a == 0 and b == 0 for a, b in zip(lo, hi, strict=True)):
        return Plan(out_shape, None, p)

    rank = len(sizes)
    sizes_out = [n + a + b for n, a, b in zip(sizes, lo, hi, strict=True)]

    p["in_stride"][:rank] = in_strides
    p["in_size"][:rank] = sizes
    p["out_size"][:rank] = sizes_out
    p["pad_lo"][:rank] = lo
    fill_divisors(p["out_div"], sizes_out)
    periods = [_period(n, mode) for n in sizes]
    fill_divisors(p["period_div"], periods)
    p["period_offset"][:rank] = [t * -(-a // t) for t, a in zip(periods, lo, strict=True)]
    p["mode"] = PaddingMode(mode).dml_value
    p["periodic"] = int(
        any(_needs_period(n, a, b, mode) for n, a, b in zip(sizes, lo, hi, strict=True))
    )
    p["inner_contiguous"] = int(in_strides[-1] == 1)
    # The last addressed byte lies after x by the positive strides only (negative ones point
    # before it); an empty input addresses nothing.
    last = sum((n - 1) * s for n, s in zip(shape, strides, strict=True) if s > 0)
    p["in_end"] = 0 if 0 in shape else (last + 1) * itemsize

    width = sizes_out[-1]
    tile = TILE_BYTES // itemsize
    max_rows = (tile + width - 2) // width + 1
    lead, tile_slot = _tile_slot(sizes[-1], lo[-1], hi[-1], itemsize)
    tiles_fit = (
        in_strides[-1] == 1
        and min(in_strides) >= 0
        and min(sizes) > 0
        and 16 <= width * itemsize <= TILE_ROW_LIMIT
        and max_rows * (tile_slot + 4) <= TILES_SMEM_BUDGET
    )
    if path is None:
        # pad_chunks measured 96-97 % of copy for 4-byte elements on an H100 (run 5; one chunk
        # a thread, 86 % on an H200, where more bytes in flight are predicted to help); pad_tiles
        # measured faster than the row-per-group kernel it replaced on every 1- and 2-byte case
        # and than pad_chunks on maps beyond one fold.
        path = "tiles" if tiles_fit and (itemsize <= 2 or p["periodic"]) else "chunks"
    if path == "tiles" and tiles_fit:
        total = math.prod(out_shape)
        p["total_chunks"] = total
        p["tile"] = tile
        p["lead"] = lead
        p["row_bytes"] = tile_slot
        p["max_rows"] = max_rows
        p["border_div"] = fast_divmod(max(1, width - sizes[-1]))
        idx = index_type(shape, strides, total + tile)
        kernel = launch(
            "padding.cu",
            "pad_tiles",
            itemsize,
            rank,
            idx,
            PaddingMode(mode).dml_value,
            _lanes_per_row(-(-(15 + sizes[-1] * itemsize) // 16)),
            grid=(-(-total // tile), 1, 1),
            shared_mem=max_rows * (tile_slot + 4),
        )
        return Plan(out_shape, kernel, p)
    per_thread = 1 if path == "chunks1" else CHUNKS_PER_THREAD
    return chunk_plan(
        p, shape, strides, out_shape, sizes_out[-1], itemsize, "padding.cu", "pad_chunks",
        itemsize, rank, PaddingMode(mode).dml_value, per_thread, per_thread=per_thread,
    )  # fmt: skip


@plan_cache
def _call_plan(
    shape: tuple[int, ...],
    byte_strides: tuple[int, ...],
    itemsize: int,
    start_padding: tuple[int, ...],
    end_padding: tuple[int, ...],
    mode: str,
    path: Path | None,
    value: bytes,
) -> Plan:
    """`_plan` with the CONSTANT value's bytes (``b""`` for the other modes) in its struct,
    memoized too: copying a parameter struct costs more host time than the launch."""
    plan = _plan(shape, byte_strides, itemsize, start_padding, end_padding, mode, path)
    if not value or plan.launch is None:
        return plan
    params = plan.params.copy()
    params["value"] = int.from_bytes(value.ljust(8, b"\0"), "little")
    return plan._replace(params=params)


def _value_bytes(value: Any, dtype: np.dtype) -> bytes:
    """The CONSTANT value cast to the tensor's dtype, as bytes."""
    if type(value) is dtype.type:
        return value.tobytes()  # type: ignore[no-any-return]
    return np.asarray(value, dtype=dtype).tobytes()


def padding_on(
    path: Path | None,
    x: Any,
    start_padding: Sequence[int],
    end_padding: Sequence[int],
    mode: str,
    value: Any,
) -> Any:
    """`padding` through the kernel `path` (None: the launcher's choice; "tiles" falls back
    to "chunks" where it does not apply)."""
    dtype = x.dtype
    plan = _call_plan(
        x.shape,
        x.strides,
        dtype.itemsize,
        tuple(start_padding),
        tuple(end_padding),
        mode,
        path,
        _value_bytes(value, dtype) if mode == "CONSTANT" else b"",
    )
    if plan.launch is None:
        import cupy

        y = cupy.empty(plan.out_shape, dtype=dtype)
        if y.size:
            y[...] = x  # nothing to pad: a plain copy
        return y
    return plan.run(x)


def padding(
    x: Any, start_padding: Sequence[int], end_padding: Sequence[int], mode: str, value: Any
) -> Any:
    """``Out.Sizes[i] = In.Sizes[i] + Start[i] + End[i]`` (rank 1..8, any dtype), on the GPU."""
    return padding_on(None, x, start_padding, end_padding, mode, value)
