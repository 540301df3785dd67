"""Shared pieces of the CuPy CONVOLUTION_INTEGER tests: the signedness pairs, random int8 data
and zero points, one call of ours beside the NumPy reference (with what ran), and chains of
registered calls through memory with a record of their dependent launches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dmlserve.kernels import reference

from ._support import launcher

PAIRS = [(np.uint8, np.int8), (np.int8, np.uint8), (np.int8, np.int8), (np.uint8, np.uint8)]


def random_int8(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, size=shape, dtype=np.int64).astype(dtype)


def random_zero_point(rng: np.random.Generator, dtype: Any) -> int:
    info = np.iinfo(dtype)
    return int(rng.integers(info.min, info.max + 1))


def zero_points(rng: np.random.Generator, mode: str, dtype: Any, m: int) -> np.ndarray:
    """Filter zero points for `m` channels: "none" (all 0), "tensor" (one random value) or
    "channel" (one random value per channel), of the filter's type `dtype`."""
    if mode == "channel":
        return rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max + 1, m).astype(np.int32)
    return np.full(m, 0 if mode == "none" else random_zero_point(rng, dtype), np.int32)


def run_both(
    x: np.ndarray,
    w: np.ndarray,
    zx: int,
    zw: np.ndarray,
    strides: tuple[int, ...],
    dilations: tuple[int, ...],
    start: tuple[int, ...],
    end: tuple[int, ...],
    groups: int,
    view: Callable[[Any], Any] | None = None,
    w_view: Callable[[Any], Any] | None = None,
    options: Any = None,
    ran: list[Any] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Our result and the reference's; what ran is appended to `ran`."""
    import cupy

    conv = launcher("convolution_integer")
    x_dev, w_dev = cupy.asarray(x), cupy.asarray(w)
    if view is not None:
        x_dev = view(x_dev)
        x = cupy.asnumpy(x_dev)
    if w_view is not None:
        w_dev = w_view(w_dev)
        w = cupy.asnumpy(w_dev)
    args = (zx, zw, strides, dilations, start, end, groups)
    # Poison the pool: the output block was full of garbage, so unwritten elements show.
    junk = cupy.full(4 << 20, 0x5A5A5A5A, dtype=cupy.int32)
    del junk
    got = conv.convolution_integer(x_dev, w_dev, *args, options=options or conv.Options(), ran=ran)
    assert got.dtype == cupy.int32 and got.flags.c_contiguous
    return cupy.asnumpy(got), reference.convolution_integer(x, w, *args)


def check(
    x: np.ndarray,
    w: np.ndarray,
    zx: int,
    zw: np.ndarray,
    strides: tuple[int, ...],
    dilations: tuple[int, ...],
    start: tuple[int, ...],
    end: tuple[int, ...],
    groups: int,
    view: Callable[[Any], Any] | None = None,
    w_view: Callable[[Any], Any] | None = None,
    options: Any = None,
) -> Any:
    """Ours (on `view` of x's device copy, where given) against the reference, bit for bit;
    returns what ran."""
    ran: list[Any] = []
    got, want = run_both(
        x, w, zx, zw, strides, dilations, start, end, groups, view, w_view, options, ran
    )
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    (what,) = ran
    return what


def dependent_launches(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """A list that gets, for each programmatic dependent launch asked for from now on, whether
    the driver launched it (each still launches as it would)."""
    common = launcher("_common")
    record: list[bool] = []
    launch_dependent = common.DependentLaunch.__call__

    def counted(self: Any, *arrays: Any) -> bool:
        launched = bool(launch_dependent(self, *arrays))
        record.append(launched)
        return launched

    monkeypatch.setattr(common.DependentLaunch, "__call__", counted)
    return record


def chained_calls(call: Callable[[Any], Any], first: Any, calls: int = 8) -> list[tuple[Any, Any]]:
    """`call` on `first`, then `calls - 1` times on the bytes the call before wrote (its int32
    output seen as an input of `first`'s shape and type); after the first call, which keeps
    what the operator keeps, the rest are queued behind a GPU-side wait, so that they meet on
    the GPU back to back however slowly the host issues them. The (input, output) pairs."""
    import cupy

    spin = launcher("_common").launch("timing.cu", "spin", grid=(1, 1, 1), block=(1, 1, 1))
    pairs: list[tuple[Any, Any]] = []
    x = first
    for i in range(calls):
        out = call(x)
        pairs.append((x, out))
        x = out.view(first.dtype).ravel()[: first.size].reshape(first.shape)
        if i == 0:
            cupy.cuda.Device().synchronize()
            spin(np.int64(30_000_000))
    return pairs


def channels_last(spare: int = 0, offset: int = 0, junk: int = 0x5A) -> Callable[[Any], Any]:
    """A view that stores (N, C, H, W) as (N, H, W, C + spare) from `offset` bytes into its
    allocation, the spare channels (and the bytes before) holding `junk`: any read of them
    changes the sums."""

    def view(a: Any) -> Any:
        import cupy

        n, c, h, wd = a.shape
        size = n * h * wd * (c + spare)
        store = cupy.full(offset + size, junk, a.dtype)
        pixels = store[offset:].reshape(n, h, wd, c + spare)
        pixels[..., :c] = a.transpose(0, 2, 3, 1)
        return pixels[..., :c].transpose(0, 3, 1, 2)

    return view
