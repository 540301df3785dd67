"""CuPy CONVOLUTION_INTEGER: the 3x3 kernel fed by the copy engine (TMA), on inputs stored
(N, H, W, C), against the NumPy reference, bit for bit: forced tiles over its geometry (strides
of 1 and 2, pads of 0 and 1, odd widths, tiles of rows and of whole images, partial last tiles,
tiles shifted onto 32-byte sectors, output channels past the last 64- or 128-channel block),
every signedness pair and zero-point form; the tiles a registration times; chained registered
calls launched as programmatic dependents; the shapes and tiles it refuses. It runs on compute
capability 9.0 only (elsewhere the GPU tests here check the refusal). The zero-point terms'
algebra is checked on the CPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dmlserve.kernels import reference
from dmlserve.kernels.cupy_backend._convolution_integer_tma import (
    TmaTile,
    _masks,
    _region,
    _region_fits,
    _table,
)
from dmlserve.kernels.cupy_backend.convolution_integer import _Problem

from ._conv_support import (
    PAIRS,
    channels_last,
    check,
    random_int8,
    random_zero_point,
    zero_points,
)
from ._support import launcher

gpu = pytest.mark.gpu


def _sm90() -> bool:
    import cupy

    return str(cupy.cuda.Device().compute_capability) == "90"


@pytest.mark.parametrize(
    ("count", "stride", "pad", "size", "masks"),
    [
        (28, 1, 1, 28, (0b110, 7, 0b011)),  # padding 1: the first tap left out, then the last
        (26, 1, 0, 28, (7, 7, 7)),  # no padding: every tap inside
        (28, 2, 1, 56, (0b110, 7, 7)),  # stride 2: only the first output has a tap outside
        (2, 1, 1, 2, (0b110, 7, 0b011)),  # two outputs, no inner one
        (1, 1, 1, 1, None),  # one output: first and last at once
        (5, 1, 2, 5, None),  # pads of 2: a second output with a tap outside
    ],
)
def test_tap_masks(
    count: int, stride: int, pad: int, size: int, masks: tuple[int, int, int] | None
) -> None:
    assert _masks(count, stride, pad, size) == masks


@pytest.mark.parametrize(
    ("width", "stride", "fits"), [(254, 1, True), (255, 1, False), (254, 2, True), (255, 2, False)]
)
def test_region_box_limit(width: int, stride: int, fits: bool) -> None:
    """Where a filter zero point is not 0, a tile copies its input region in one box a chunk:
    (OW - 1) stride + 3 columns, at most the copy engine's 256."""
    ow = (width + 2 - 3) // stride + 1
    q = _Problem(1, 64, 8, width, 64, 64, 3, 3, 1, 3, ow, stride, stride, 1, 1, 1, 1, 128,
                 np.zeros(64, np.int32))  # fmt: skip
    assert _region(q, 1)[1] == (ow - 1) * stride + 3
    assert _region_fits(q, 1) == fits


@pytest.mark.parametrize("zp_mode", ["none", "tensor", "channel"])
@pytest.mark.parametrize(("xt", "wt"), PAIRS)
@pytest.mark.parametrize(
    ("shape", "m", "stride", "pads"),
    [((2, 64, 9, 7), 5, 1, (1, 1)), ((1, 64, 10, 11), 3, 2, (1, 0)), ((1, 64, 6, 6), 2, 1, (0, 0))],
)
def test_zero_point_terms(
    shape: tuple[int, int, int, int],
    m: int,
    stride: int,
    pads: tuple[int, int],
    xt: Any,
    wt: Any,
    zp_mode: str,
) -> None:
    """The kernel's decomposition, in NumPy: the convolution of the input with 0 outside the
    image (what the MMAs over TMA's fill sum), less z_w times each pixel's sum of that input
    over its window, plus the table's term for the pixel's class, is DirectML's sum
    (x - z_x)(w - z_w) over the input padded with z_x, modulo 2^32."""
    rng = np.random.default_rng([*shape, m, stride, *pads, PAIRS.index((xt, wt)), len(zp_mode)])
    x = random_int8(rng, shape, xt)
    w = random_int8(rng, (m, shape[1], 3, 3), wt)
    zx = random_zero_point(rng, xt)
    zw = zero_points(rng, zp_mode, wt, m)
    geometry = ((stride, stride), (1, 1), pads, (1, 1), 1)
    want = reference.convolution_integer(x, w, zx, zw, *geometry)
    oh, ow = want.shape[2:]
    rows = _masks(oh, stride, pads[0], shape[2])
    cols = _masks(ow, stride, pads[1], shape[3])
    assert rows is not None and cols is not None
    table = _table(w, zw, (rows, cols), 64)
    assert table.shape == (64, 9) and not table[m:].any()
    zero = np.zeros(m, np.int32)
    sums = reference.convolution_integer(x, w, 0, zero, *geometry).astype(np.int64)
    ones = np.ones((1, shape[1], 3, 3), np.int8)
    pixel = reference.convolution_integer(x, ones, 0, np.zeros(1, np.int32), *geometry)
    rc = np.where(np.arange(oh) == 0, 0, np.where(np.arange(oh) == oh - 1, 2, 1))
    cc = np.where(np.arange(ow) == 0, 0, np.where(np.arange(ow) == ow - 1, 2, 1))
    terms = zx * table[:m][:, 3 * rc[:, None] + cc[None, :]].astype(np.int64)  # [M][OH][OW]
    got = sums - zw.astype(np.int64)[None, :, None, None] * pixel + terms[None]
    np.testing.assert_array_equal(((got + 2**31) % 2**32 - 2**31).astype(np.int32), want)


def _tma(tile: TmaTile) -> Any:
    return launcher("convolution_integer").Options(tma=tile)


def _check_forced(
    seed: list[Any],
    shape: tuple[int, int, int, int],
    m: int,
    geometry: tuple[tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int], int],
    tile: TmaTile,
    xt: Any,
    wt: Any,
    zp_mode: str,
) -> None:
    """Random values of the pair's types and zero-point form through the forced `tile`, exact
    (the input's bytes lying past its channels and before it holding junk that any read of
    them would add); refused where the GPU is not of compute capability 9.0."""
    rng = np.random.default_rng(seed)
    x = random_int8(rng, shape, xt)
    w = random_int8(rng, (m, shape[1], 3, 3), wt)
    zx = random_zero_point(rng, xt)
    zw = zero_points(rng, zp_mode, wt, m)
    options = _tma(tile)
    if not _sm90():
        with pytest.raises(ValueError, match="compute capability 9.0|GPU"):
            check(x, w, zx, zw, *geometry, view=channels_last(16, 32), options=options)
        return
    what = check(x, w, zx, zw, *geometry, view=channels_last(16, 32), options=options)
    assert what == "wgmma_tma"


# (shape (N, C, H, W), M, strides, start pads, end pads, tile (wm, rows, images, stages))
FORCED = [
    ((2, 128, 28, 28), 128, 1, (1, 1), (1, 1), (2, 7, 1, 4)),  # tiles shifted by 4 columns
    ((2, 64, 28, 28), 64, 1, (1, 1), (1, 1), (1, 7, 1, 4)),  # shifted, 64-byte rows, WN = 2
    ((2, 128, 28, 28), 128, 1, (1, 1), (1, 1), (2, 8, 1, 3)),  # a partial last tile of rows
    ((2, 128, 28, 28), 128, 1, (1, 1), (1, 1), (1, 8, 1, 4)),  # two warpgroups along pixels
    ((3, 64, 14, 14), 64, 1, (1, 1), (1, 1), (1, 14, 1, 6)),  # 64 channels: 64-byte rows
    ((3, 64, 14, 14), 64, 1, (1, 1), (1, 1), (1, 14, 2, 4)),  # two images a tile, one short
    ((5, 256, 7, 7), 192, 1, (1, 1), (1, 1), (2, 7, 4, 3)),  # 192 outputs: half a last block
    ((2, 128, 15, 16), 96, 2, (1, 1), (1, 1), (2, 8, 2, 4)),  # stride 2, odd rows
    ((2, 128, 56, 56), 128, 2, (1, 1), (1, 1), (2, 7, 1, 2)),  # stride 2, shifted tiles
    ((2, 64, 12, 11), 72, 2, (1, 0), (0, 1), (2, 6, 2, 5)),  # stride 2, uneven pads, odd width
    ((1, 192, 10, 9), 40, 1, (0, 0), (0, 0), (2, 8, 1, 2)),  # no padding, 7 wide: pairs split
    ((3, 64, 9, 7), 64, 1, (1, 1), (1, 1), (1, 9, 2, 4)),  # the second warpgroup mid-row
]


@gpu
@pytest.mark.parametrize("zp_mode", ["none", "tensor", "channel"])
@pytest.mark.parametrize(("xt", "wt"), PAIRS)
@pytest.mark.parametrize(("shape", "m", "stride", "start", "end", "tile"), FORCED)
def test_forced_tiles(
    shape: tuple[int, int, int, int],
    m: int,
    stride: int,
    start: tuple[int, int],
    end: tuple[int, int],
    tile: tuple[int, int, int, int],
    xt: Any,
    wt: Any,
    zp_mode: str,
) -> None:
    """Every geometry the kernel takes, exact, the input's bytes lying past its channels (spare
    channels) and before it holding junk that any read of them would add."""
    seed = [*shape, m, stride, *tile, PAIRS.index((xt, wt)), len(zp_mode)]
    geometry = ((stride, stride), (1, 1), start, end, 1)
    _check_forced(seed, shape, m, geometry, TmaTile(*tile), xt, wt, zp_mode)


WINDOW = [
    ((2, 128, 28, 28), 128, (1, 1), (1, 1), (2, 7, 1, 4)),  # 128-byte rows, one chunk
    ((2, 128, 28, 28), 128, (1, 1), (1, 1), (2, 8, 1, 3)),  # a partial last tile of rows
    ((2, 64, 56, 56), 64, (1, 1), (1, 1), (1, 7, 1, 4)),  # 64-byte rows, WN = 2
    ((3, 64, 14, 14), 64, (1, 1), (1, 1), (1, 14, 2, 4)),  # two images a tile, one short
    ((2, 256, 12, 12), 192, (1, 1), (1, 1), (2, 6, 1, 3)),  # two chunks, half a last block
    ((2, 192, 14, 14), 64, (1, 1), (1, 1), (1, 14, 1, 2)),  # three chunks: the windows reused
    ((1, 128, 10, 30), 40, (0, 0), (0, 0), (2, 7, 1, 2)),  # no padding, a one-row last tile
    ((2, 128, 14, 14), 128, (1, 1), (1, 1), (1, 14, 1, 4)),  # 128-byte rows, WN = 2
    ((1, 640, 10, 10), 64, (1, 1), (1, 1), (1, 10, 1, 2)),  # five chunks: the phases wrap
    ((2, 64, 12, 11), 72, (1, 0), (0, 1), (2, 6, 1, 5)),  # uneven pads, odd width
    ((1, 64, 8, 32), 64, (1, 1), (1, 1), (1, 6, 1, 4)),  # 32 wide: rows 40 pixels apart
]


@gpu
@pytest.mark.parametrize("zp_mode", ["none", "tensor", "channel"])
@pytest.mark.parametrize(("xt", "wt"), PAIRS)
@pytest.mark.parametrize(("shape", "m", "start", "end", "tile"), WINDOW)
def test_window_tiles(
    shape: tuple[int, int, int, int],
    m: int,
    start: tuple[int, int],
    end: tuple[int, int],
    tile: tuple[int, int, int, int],
    xt: Any,
    wt: Any,
    zp_mode: str,
) -> None:
    """The shifted-window form (each chunk's input region copied once for its nine taps; where
    a filter zero point is not 0, the pixel sums made from the same copies), forced, exact."""
    seed = [*shape, m, *tile, PAIRS.index((xt, wt)), len(zp_mode)]
    geometry = ((1, 1), (1, 1), start, end, 1)
    _check_forced(seed, shape, m, geometry, TmaTile(*tile, window=True), xt, wt, zp_mode)


@gpu
@pytest.mark.parametrize(
    ("shape", "m", "stride"),
    [((4, 128, 28, 28), 128, 1), ((4, 64, 56, 56), 64, 1), ((4, 256, 14, 14), 256, 1),
     ((8, 512, 7, 7), 512, 1), ((4, 128, 56, 56), 128, 2), ((1, 128, 28, 28), 128, 1)],
)  # fmt: skip
@pytest.mark.parametrize("zp_mode", ["none", "channel"])
def test_offered_tiles(shape: tuple[int, int, int, int], m: int, stride: int, zp_mode: str) -> None:
    """The benchmark's 3x3 layers (smaller batches): every tile a registration would time is
    exact, for filter zero points of 0 and per channel (whose tiles also hold their input
    regions)."""
    import cupy

    tma = launcher("_convolution_integer_tma")
    conv = launcher("convolution_integer")
    rng = np.random.default_rng([*shape, m, stride, len(zp_mode)])
    x = random_int8(rng, shape, np.uint8)
    w = random_int8(rng, (m, shape[1], 3, 3), np.int8)
    zw = zero_points(rng, zp_mode, np.int8, m)
    view = channels_last()
    oh, ow = ((shape[2] + 2 - 3) // stride + 1, (shape[3] + 2 - 3) // stride + 1)
    q = conv._Problem(*shape, m, shape[1], 3, 3, 1, oh, ow, stride, stride, 1, 1, 1, 1, 128, zw)
    x_view = view(cupy.asarray(x))
    device = cupy.cuda.Device().id
    tiles = tma.tma_tiles(q, x_view.shape, x_view.strides, 16, device, zw=zp_mode != "none")
    if not _sm90():
        assert tiles == []
        return
    assert tiles
    assert any(tile.window for tile in tiles) == (stride == 1)  # (the window form: stride 1)
    for tile in tiles:
        geometry = ((stride, stride), (1, 1), (1, 1), (1, 1), 1)
        assert check(x, w, 128, zw, *geometry, view=view, options=_tma(tile)) == "wgmma_tma"


@gpu
@pytest.mark.parametrize("zp_mode", ["none", "channel"])
def test_registered_calls(zp_mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A registered operator's first call times the kernel's tiles beside the other plans and
    keeps one; that call and the later ones (the kept filter, table and choice) are exact."""
    import cupy

    gemm = launcher("_convolution_integer_gemm")
    conv = launcher("convolution_integer")
    timed: list[str] = []
    plan_ms = gemm._plan_ms

    def recorded(plan: Any, *args: Any) -> float:
        timed.append(plan.kernel)
        return float(plan_ms(plan, *args))

    monkeypatch.setattr(gemm, "_plan_ms", recorded)
    rng = np.random.default_rng([7, len(zp_mode)])
    w = random_int8(rng, (128, 128, 3, 3), np.int8)
    zw = zero_points(rng, zp_mode, np.int8, 128)
    w_dev = cupy.asarray(w)
    cache: dict[Any, Any] = {}
    geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    for call in range(3):
        x = random_int8(rng, (2, 128, 14, 14), np.uint8)
        zx = random_zero_point(rng, np.uint8)
        x_dev = channels_last()(cupy.asarray(x))
        ran: list[Any] = []
        got = conv.convolution_integer(x_dev, w_dev, zx, zw, *geometry, filter_cache=cache, ran=ran)
        want = reference.convolution_integer(x, w, zx, zw, *geometry)
        np.testing.assert_array_equal(cupy.asnumpy(got), want)
        if call == 0:
            assert ("wgmma_tma" in timed) == _sm90()
    if _sm90():
        assert len(timed) > 1 and len(cache["tuned"]) == 1


@gpu
def test_registered_calls_keep_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the registration's timing keeps the kernel (its plans timed fastest here), the
    later calls run the kept tile on the kept filter and table, launched as programmatic
    dependents, exact for any input zero point (the table does not depend on it)."""
    import cupy

    if not _sm90():
        pytest.skip("the TMA-fed kernel runs on compute capability 9.0 only")
    gemm = launcher("_convolution_integer_gemm")
    conv = launcher("convolution_integer")
    monkeypatch.setattr(
        gemm, "_plan_ms", lambda plan, *a: 0.0 if plan.kernel == "wgmma_tma" else 1.0
    )
    tma = launcher("_convolution_integer_tma")
    launched: list[bool] = []
    packed = tma.launch_packed

    def recorded(kernel: Any, args: Any, dependent: bool) -> None:
        launched.append(dependent)
        packed(kernel, args, dependent)

    monkeypatch.setattr(tma, "launch_packed", recorded)
    rng = np.random.default_rng(5)
    w = random_int8(rng, (96, 64, 3, 3), np.int8)
    zw = np.zeros(96, np.int32)
    w_dev = cupy.asarray(w)
    cache: dict[Any, Any] = {}
    geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    for zx in (3, 3, 200, 3):
        x = random_int8(rng, (3, 64, 10, 12), np.uint8)
        x_dev = channels_last(16)(cupy.asarray(x))
        got = conv.convolution_integer(x_dev, w_dev, zx, zw, *geometry, filter_cache=cache)
        want = reference.convolution_integer(x, w, zx, zw, *geometry)
        np.testing.assert_array_equal(cupy.asnumpy(got), want)
    (kept,) = cache["tuned"].values()
    assert isinstance(kept, TmaTile)
    assert launched[-3:] == [True, True, True]  # the kept filter: dependents


@gpu
def test_misaligned_input_is_not_taken() -> None:
    """An input whose first byte is not on 16 bytes (the copy descriptor needs it) is refused:
    no tile is offered, a forced one raises."""
    import cupy

    conv = launcher("convolution_integer")
    tma = launcher("_convolution_integer_tma")
    rng = np.random.default_rng(9)
    x = random_int8(rng, (2, 64, 8, 8), np.uint8)
    w = random_int8(rng, (64, 64, 3, 3), np.int8)
    q = conv._Problem(
        2, 64, 8, 8, 64, 64, 3, 3, 1, 8, 8, 1, 1, 1, 1, 1, 1, 0, np.zeros(64, np.int32)
    )
    view = channels_last(0, 8)(cupy.asarray(x))
    assert tma.tma_tiles(q, view.shape, view.strides, 8, cupy.cuda.Device().id, zw=False) == []
    with pytest.raises(ValueError, match="TMA-fed|compute capability"):
        check(
            x, w, 1, np.zeros(64, np.int32), (1, 1), (1, 1), (1, 1), (1, 1), 1,
            view=channels_last(0, 8), options=_tma(TmaTile(1, 8, 1, 4)),
        )  # fmt: skip


@gpu
def test_chained_dependent_calls() -> None:
    """Registered calls on the bytes the call before wrote, launched as programmatic
    dependents back to back behind a GPU-side wait: each reads its input only after the grid
    ahead of it (which wrote it) completes."""
    import cupy

    if not _sm90():
        pytest.skip("the TMA-fed kernel runs on compute capability 9.0 only")
    conv = launcher("convolution_integer")
    spin = launcher("_common").launch("timing.cu", "spin", grid=(1, 1, 1), block=(1, 1, 1))
    rng = np.random.default_rng(11)
    n, c, h, wd = 2, 128, 28, 28
    w = cupy.asarray(random_int8(rng, (c, c, 3, 3), np.int8))
    zw = zero_points(rng, "channel", np.int8, c)
    first = channels_last()(cupy.asarray(random_int8(rng, (n, c, h, wd), np.uint8)))
    options = _tma(TmaTile(2, 7, 1, 4))
    cache: dict[Any, Any] = {}
    geometry = ((1, 1), (1, 1), (1, 1), (1, 1), 1)
    pairs = []
    x = first
    for i in range(6):
        out = conv.convolution_integer(x, w, 7, zw, *geometry, options=options, filter_cache=cache)
        pairs.append((x, out))
        # the output's first bytes as the next input, stored (N, H, W, C)
        x = out.view(cupy.uint8).ravel()[: first.size].reshape(n, h, wd, c).transpose(0, 3, 1, 2)
        if i == 0:
            cupy.cuda.Device().synchronize()
            spin(np.int64(30_000_000))
    for x, out in pairs:
        want = reference.convolution_integer(cupy.asnumpy(x), cupy.asnumpy(w), 7, zw, *geometry)
        np.testing.assert_array_equal(cupy.asnumpy(out), want)


@gpu
@pytest.mark.parametrize(
    ("shape", "m", "geometry", "view", "tile"),
    [
        ((2, 128, 8, 8), 64, ((1, 1), (1, 1), (1, 1), (1, 1), 1), None, (1, 8, 1, 4)),  # NCHW
        ((2, 96, 8, 8), 64, ((1, 1), (1, 1), (1, 1), (1, 1), 1), "nhwc", (1, 8, 1, 4)),  # C % 64
        ((2, 128, 8, 8), 64, ((1, 1), (1, 1), (2, 2), (2, 2), 1), "nhwc", (1, 8, 1, 4)),  # pad 2
        ((2, 128, 8, 8), 64, ((1, 1), (2, 2), (1, 1), (1, 1), 1), "nhwc", (1, 8, 1, 4)),  # dilated
        ((2, 128, 8, 8), 64, ((1, 1), (1, 1), (1, 1), (1, 1), 2), "nhwc", (1, 8, 1, 4)),  # groups
        ((2, 128, 8, 8), 64, ((1, 1), (1, 1), (1, 1), (1, 1), 1), "nhwc", (1, 9, 1, 4)),  # rows
        ((2, 128, 8, 8), 64, ((1, 1), (1, 1), (1, 1), (1, 1), 1), "nhwc", (1, 8, 2, 9)),  # stages
        ((2, 128, 32, 32), 64, ((1, 1), (1, 1), (1, 1), (1, 1), 1), "nhwc", (1, 32, 1, 2)),  # NP
        ((1, 128, 8, 96), 64, ((2, 2), (1, 1), (1, 1), (1, 1), 1), "nhwc", (2, 1, 1, 2, True)),
    ],
)
def test_refused(
    shape: tuple[int, int, int, int], m: int, geometry: Any, view: str | None, tile: Any
) -> None:
    """A shape, layout or tile the kernel does not take is refused before any launch."""
    rng = np.random.default_rng(3)
    x = random_int8(rng, shape, np.uint8)
    w = random_int8(rng, (m, shape[1] // geometry[-1], 3, 3), np.int8)
    with pytest.raises(ValueError, match="TMA-fed|compute capability"):
        check(
            x, w, 1, np.zeros(m, np.int32), *geometry,
            view=channels_last() if view else None, options=_tma(TmaTile(*tile)),
        )  # fmt: skip
