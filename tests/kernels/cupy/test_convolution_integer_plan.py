"""CONVOLUTION_INTEGER's GPU launch decisions that need no GPU to check."""

from __future__ import annotations

import numpy as np
import pytest

from dmlserve.kernels.cupy_backend._convolution_integer_gemm import (
    _gather_items,
    _nhwc_gather_sets,
    _nhwc_pixels,
    padded_input_fits,
)

MIB = 1 << 20


def test_the_padded_input_copy_is_bounded() -> None:
    image = 32 * 128 * 28 * 28
    assert padded_input_fits(image, 32 * 128 * 30 * 30)  # 3x3, pad 1: the frame is small
    assert padded_input_fits(16, MIB)  # a tiny image: up to the slack
    assert not padded_input_fits(16 * 4, 60001 * 60001 * 16)  # a huge start pad
    assert not padded_input_fits(image, 3 * image)  # more than twice the image


@pytest.mark.parametrize(
    ("pixels", "chunks", "threads", "items"),
    [
        (4 * 64, 1, 64, 2),  # 128 items: one round of 2 a thread
        (4 * 65, 1, 64, 3),  # 130: two rounds of 2, one of 3
        (4 * 500, 1, 256, 2),  # 1000: two rounds either way
        (4 * 1000, 4, 256, 3),  # 8000: 16 rounds of 2, 11 of 3
        (318.8, 2, 128, 3),  # 64 channels on a 224-pixel tile of 56 x 56 planes: 2.5 a thread
        (249, 4, 256, 2),  # 128 channels on 28 x 28 planes: under 2 a thread
    ],
)
def test_gather_items_a_thread(pixels: float, chunks: int, threads: int, items: int) -> None:
    """A gather thread loads 3 items at a time only where that takes fewer rounds than 2."""
    assert _gather_items(pixels, chunks, threads) == items


@pytest.mark.parametrize(
    ("shape", "strides", "cg", "alignment", "pixel"),
    [
        ((2, 64, 5, 6), (1920, 1, 384, 64), 64, 16, 64),  # (N, H, W, C), packed
        ((2, 64, 5, 6), (2400, 1, 480, 80), 32, 16, 80),  # 16 spare channels a pixel, groups
        ((2, 64, 5, 6), (2160, 1, 432, 72), 64, 16, None),  # pixels 72 bytes apart
        ((2, 64, 5, 6), (1920, 1, 384, 64), 64, 4, None),  # the view 4 bytes off 16
        ((2, 48, 5, 6), (1440, 1, 288, 48), 24, 16, None),  # groups of 24 channels
        ((2, 64, 5, 6), (1920, 30, 6, 1), 64, 16, None),  # NCHW planes
        ((2, 64, 5, 6), (2000, 1, 400, 64), 64, 16, None),  # rows 16 bytes apart past W pixels
        ((2, 64, 5, 6), (1928, 1, 384, 64), 64, 16, None),  # images 8 bytes off 16
        ((1, 64, 5, 6), (1928, 1, 384, 64), 64, 16, 64),  # one image: its stride unused
        ((2, 64, 5, 1), (320, 1, 64, 7), 64, 16, 64),  # one column: rows are the pixels
        ((2, 64, 1, 1), (64, 1, 5, 7), 64, 16, 16),  # one pixel: any strides
        ((2, 64, 5, 6), (-1920, 1, -384, -64), 64, 16, -64),  # images, rows, pixels backwards
        ((2, 64, 5, 6), (0, 1, 384, 64), 64, 16, 64),  # one image broadcast over N
    ],
)
def test_channels_last_pixels(
    shape: tuple[int, int, int, int],
    strides: tuple[int, int, int, int],
    cg: int,
    alignment: int,
    pixel: int | None,
) -> None:
    """The shifted-window GEMM reads (N, H, W, C) pixels where they lie only where each
    group's channels are 16-byte blocks on 16 bytes and the rows are packed."""
    assert _nhwc_pixels(shape, strides, cg, alignment) == pixel


def test_channels_last_gather_sets() -> None:
    """Two sets of chunks on phase planes, one elsewhere."""
    assert [_nhwc_gather_sets(planes) for planes in (1, 2, 4)] == [1, 2, 2]


@pytest.mark.parametrize(
    ("shape", "k", "strides", "dilations", "start", "end"),
    [
        ((3, 7, 7), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),  # 8 x 8 virtual pixels, not 9 x 9
        ((2, 9, 7), (3, 3), (1, 1), (2, 1), (2, 0), (1, 3)),  # uneven pads, a dilation
        ((2, 8, 8), (3, 3), (1, 1), (1, 2), (4, 3), (3, 5)),  # pads wider than the window
        ((2, 4, 4), (3, 3), (1, 1), (1, 1), (5, 5), (5, 5)),  # pads wider than the image
        ((2, 6, 5), (3, 3), (1, 1), (1, 1), (0, 2), (2, 0)),  # end pads only on rows
        ((2, 5, 6), (1, 9), (1, 1), (1, 1), (0, 4), (0, 4)),  # 1 x 9
        ((3, 10, 9), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1)),  # phase planes
        ((2, 11, 8), (3, 3), (2, 2), (1, 1), (1, 0), (0, 2)),  # odd rows, uneven pads
        ((2, 9, 10), (3, 3), (2, 1), (1, 2), (2, 1), (1, 3)),  # rows strided, a dilation
        ((2, 7, 12), (3, 3), (1, 2), (2, 1), (0, 1), (3, 1)),  # columns strided
        ((2, 12, 12), (3, 3), (2, 2), (2, 2), (2, 2), (2, 2)),  # even dilations: one plane
        ((1, 5, 5), (3, 3), (2, 2), (1, 1), (4, 4), (4, 4)),  # pads wider than the image
    ],
)
def test_shifted_window_addressing(
    shape: tuple[int, int, int],
    k: tuple[int, int],
    strides: tuple[int, int],
    dilations: tuple[int, int],
    start: tuple[int, int],
    end: tuple[int, int],
) -> None:
    """The shifted-window GEMM's addressing, emulated: images placed in the virtual grid (one
    run per phase plane, z_x around them) as the kernel's gather places them, each output the
    sum over its taps' shifts of its virtual pixel, against the reference."""
    from dmlserve.kernels import reference
    from dmlserve.kernels.cupy_backend import _convolution_integer_gemm as gemm
    from dmlserve.kernels.cupy_backend.convolution_integer import _Problem

    n, h, wd = shape
    c, m, zx = 3, 2, 7
    rng = np.random.default_rng([*shape, *k, *strides, *dilations, *start, *end])
    x = rng.integers(0, 256, (n, c, h, wd)).astype(np.uint8)
    w = rng.integers(-128, 128, (m, c, *k)).astype(np.int8)
    zw = rng.integers(-128, 128, m).astype(np.int32)
    geometry = (strides, dilations, start, end, 1)
    want = reference.convolution_integer(x, w, zx, zw, *geometry)
    oh, ow = want.shape[2:]
    (sh, sw), (dh, dw), (ph, pw) = strides, dilations, start
    q = _Problem(n, c, h, wd, m, c, *k, 1, oh, ow, sh, sw, dh, dw, ph, pw, zx, zw)
    hv, wv = gemm._virtual_grid(q, *gemm.padded_extent(q), shared_pads=True)
    pixels = n * hv * wv
    reach = (k[0] - 1) * dh // sh * wv + (k[1] - 1) * dw // sw
    run = np.full((sh * sw, pixels + reach, c), zx, np.int64)  # z_x everywhere first
    for i, j in np.ndindex(h, wd):  # then each image pixel, where the gather puts it
        plane = (i + ph) % sh * sw + (j + pw) % sw
        v = np.arange(n) * hv * wv + (i + ph) // sh * wv + (j + pw) // sw
        run[plane, v] = x[:, :, i, j]
    got = np.zeros((n, m, oh, ow), np.int64)
    v = (np.arange(n)[:, None, None] * hv + np.arange(oh)[:, None]) * wv + np.arange(ow)
    for r, s in np.ndindex(*k):
        plane = r * dh % sh * sw + s * dw % sw
        taps = run[plane, v + r * dh // sh * wv + s * dw // sw] - zx  # (n, oh, ow, c)
        got += np.einsum("nhwc,mc->nmhw", taps, w[:, :, r, s].astype(np.int64) - zw[:, None])
    assert oh <= hv and ow <= wv  # each output its own virtual pixel
    np.testing.assert_array_equal(got.astype(np.uint32).view(np.int32), want)
