"""CuPy CONVOLUTION_INTEGER pointwise kernel (1x1, unit stride, no padding, one group, planes
contiguous) against the NumPy reference, bit-exact; every test checks which kernel ran."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dmlserve.kernels import reference

from ._conv_support import PAIRS, chained_calls, check, dependent_launches, run_both, zero_points
from ._conv_support import random_int8 as _rand
from ._conv_support import random_zero_point as _zp
from ._support import launcher

pytestmark = pytest.mark.gpu

_ONE = ((1, 1), (1, 1), (0, 0), (0, 0))  # strides, dilations, start and end padding


def _conv() -> Any:
    return launcher("convolution_integer")


def _check(
    x: np.ndarray,
    w: np.ndarray,
    zx: int,
    zw: np.ndarray,
    view: Callable[[Any], Any] | None = None,
    w_view: Callable[[Any], Any] | None = None,
    options: Any = None,
) -> Any:
    """Ours against the reference (`check`) as a 1x1 unit-stride layer; returns what ran."""
    geometry = _ONE if x.ndim == 4 else ((1,), (1,), (0,), (0,))
    return check(x, w, zx, zw, *geometry, 1, view, w_view, options)


def _pointwise(what: Any) -> Any:
    assert isinstance(what, _conv().PointwisePlan), what
    return what


@pytest.mark.parametrize(("xt", "wt"), PAIRS)
@pytest.mark.parametrize("zp_mode", ["none", "tensor", "channel"])
def test_signedness_and_zero_points(xt: Any, wt: Any, zp_mode: str) -> None:
    rng = np.random.default_rng([PAIRS.index((xt, wt)), len(zp_mode), 3])
    x = _rand(rng, (2, 64, 8, 8), xt)
    w = _rand(rng, (80, 64, 1, 1), wt)  # a full and a partial chunk of 64 output channels
    zx = 0 if zp_mode == "none" else _zp(rng, xt)
    plan = _pointwise(_check(x, w, zx, zero_points(rng, zp_mode, wt, 80), None))
    assert plan.mchunks == 2 and plan.zw_any == (zp_mode != "none")


@pytest.mark.parametrize(("xt", "wt"), PAIRS)
def test_extreme_zero_points(xt: Any, wt: Any) -> None:
    """Zero points at the ends of their types, and an input zero point no byte can hold (the
    kernel never fills a pad with it)."""
    rng = np.random.default_rng(PAIRS.index((xt, wt)) + 30)
    x = _rand(rng, (1, 32, 4, 5), xt)
    w = _rand(rng, (6, 32, 1, 1), wt)
    wi = np.iinfo(wt)
    zw = np.resize(np.array([wi.min, wi.max, 0], np.int32), 6)
    for zx in (int(np.iinfo(xt).min), int(np.iinfo(xt).max), 2**31 - 5, -(2**31)):
        _pointwise(_check(x, w, zx, zw))


@pytest.mark.parametrize(
    ("n", "c", "hw", "m"),
    [
        (1, 1, (2, 2), 1),  # one channel: every step is the tail
        (3, 5, (4, 5), 3),  # channels and outputs far below a step and a chunk
        (2, 48, (3, 4), 64),  # half a step of channels at the end
        (3, 96, (5, 4), 130),  # three chunks, the last of 2 channels; pixels not a multiple of 32
        (1, 256, (2, 18), 65),
    ],
)
def test_shapes(n: int, c: int, hw: tuple[int, int], m: int) -> None:
    rng = np.random.default_rng(n * c + m)
    x = _rand(rng, (n, c, *hw), np.uint8)
    w = _rand(rng, (m, c, 1, 1), np.int8)
    zw = rng.integers(-128, 128, m).astype(np.int32)
    plan = _pointwise(_check(x, w, 128, zw))
    assert plan.mchunks == -(-m // 64)


@pytest.mark.parametrize(("hw", "vec16"), [((16, 35), True), ((17, 36), False), ((23, 24), False)])
def test_tiles(hw: tuple[int, int], vec16: bool) -> None:
    """Several 256-pixel tiles per image, the last partial; planes that take 16-byte copies
    and planes that take 4-byte ones."""
    rng = np.random.default_rng(hw[0])
    x = _rand(rng, (2, 40, *hw), np.int8)
    w = _rand(rng, (100, 40, 1, 1), np.uint8)
    zw = rng.integers(0, 256, 100).astype(np.int32)
    plan = _pointwise(_check(x, w, -3, zw))
    assert plan.tiles == -(-hw[0] * hw[1] // 256) > 1 and plan.vec16 == vec16


def test_one_dimensional() -> None:
    rng = np.random.default_rng(4)
    x = _rand(rng, (2, 33, 28), np.uint8)
    w = _rand(rng, (20, 33, 1), np.int8)
    _pointwise(_check(x, w, 100, np.full(20, 5, np.int32)))


def _misaligned(a: Any) -> Any:
    """The same values one byte into a wider buffer: planes contiguous, words unaligned."""
    import cupy

    flat = cupy.empty(a.size + 1, a.dtype)
    view = flat[1:].reshape(a.shape)
    view[...] = a
    return view


@pytest.mark.parametrize(
    ("shape", "view", "channels", "inside"),
    [
        ((4, 40, 4, 6), lambda a: a[:, ::-1], 40, True),  # a negative channel stride
        ((4, 40, 4, 6), lambda a: a[::2], 40, True),  # every other image
        ((4, 40, 4, 6), lambda a: a[:, 3:], 37, True),  # from the fourth plane on
        ((4, 40, 4, 6), lambda a: a.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2), 40, False),
        ((4, 40, 4, 8), lambda a: a[:, :, :, ::2], 40, False),  # a strided row
        ((4, 40, 5, 6), lambda a: a[:, :, 1:], 40, False),  # planes 30 bytes apart
        ((4, 40, 4, 6), _misaligned, 40, False),
    ],
)
def test_views(
    shape: tuple[int, ...], view: Callable[[Any], Any], channels: int, inside: bool
) -> None:
    rng = np.random.default_rng(sum(shape) + channels)
    x = _rand(rng, shape, np.uint8)
    w = _rand(rng, (24, channels, 1, 1), np.int8)
    zw = rng.integers(-128, 128, 24).astype(np.int32)

    def w_view(a: Any) -> Any:
        return a[:, ::-1]  # a filter with a negative channel stride

    what = _check(x, w, 7, zw, view=view, w_view=w_view)
    assert isinstance(what, _conv().PointwisePlan) == inside, what


@pytest.mark.parametrize(
    ("w_view", "copied"),
    [
        (lambda a: a[:, :32], False),  # rows 64 bytes apart, read in place
        (lambda a: a[::2, 16:48], False),  # every other row, from byte 16: read in place
        (lambda a: a[:, 8:40], True),  # rows starting 8 bytes in: a padded copy
    ],
)
def test_filter_views(w_view: Callable[[Any], Any], copied: bool) -> None:
    """Filter rows at 16-byte multiples are read where they lie (a registration keeps
    nothing); others take a zero-padded copy (which a registration keeps)."""
    import cupy

    conv = _conv()
    rng = np.random.default_rng(17)
    x = _rand(rng, (2, 32, 4, 4), np.uint8)
    w_dev = w_view(cupy.asarray(_rand(rng, (48, 64, 1, 1), np.int8)))
    w = cupy.asnumpy(w_dev)
    zw = np.full(w.shape[0], -5, np.int32)
    cache: dict[Any, Any] = {}
    ran: list[Any] = []
    got = conv.convolution_integer(
        cupy.asarray(x), w_dev, 9, zw, *_ONE, 1, ran=ran, filter_cache=cache
    )
    _pointwise(ran[0])
    np.testing.assert_array_equal(
        cupy.asnumpy(got), reference.convolution_integer(x, w, 9, zw, *_ONE, 1)
    )
    assert ("pointwise" in cache) == copied


@pytest.mark.parametrize(
    ("geometry", "groups"),
    [
        (((2, 2), (1, 1), (0, 0), (0, 0)), 1),  # stride 2
        (((1, 1), (1, 1), (1, 0), (0, 0)), 1),  # padding
        (((1, 1), (1, 1), (0, 0), (0, 1)), 1),  # end padding only
        (_ONE, 2),  # two groups
    ],
)
def test_outside_shapes_take_other_kernels(geometry: Any, groups: int) -> None:
    rng = np.random.default_rng(groups + sum(geometry[0]))
    x = _rand(rng, (2, 32, 8, 8), np.uint8)
    w = _rand(rng, (32, 32 // groups, 1, 1), np.int8)
    zw = np.zeros(32, np.int32)
    ran: list[Any] = []
    got, want = run_both(x, w, 128, zw, *geometry, groups, ran=ran)
    np.testing.assert_array_equal(got, want)
    assert not isinstance(ran[0], _conv().PointwisePlan)


def test_forced_gemm_and_option_keep_the_gemm() -> None:
    conv = _conv()
    rng = np.random.default_rng(2)
    x = _rand(rng, (2, 32, 4, 4), np.uint8)
    w = _rand(rng, (32, 32, 1, 1), np.int8)
    zw = np.zeros(32, np.int32)
    for options in (conv.Options(pointwise=False), conv.Options(tensor_cores="mma_sync")):
        assert _check(x, w, 128, zw, options=options) in ("wgmma", "mma_sync")


def test_int32_wraps() -> None:
    """Sums far past 32 bits (filter zero points as large as the int32 contract allows) come
    out modulo 2^32, as the reference's."""
    rng = np.random.default_rng(6)
    x = rng.integers(200, 256, (1, 64, 2, 2)).astype(np.uint8)
    w = rng.integers(-128, -100, (8, 64, 1, 1)).astype(np.int8)
    zw = np.full(8, 2**24 + 3, np.int32)
    exact = np.einsum("nchw,mc->nmhw", x.astype(np.int64), w[:, :, 0, 0] - np.int64(2**24 + 3))
    assert np.abs(exact).min() > 2**31  # the case really wraps
    _pointwise(_check(x, w, 0, zw))
    want = reference.convolution_integer(x, w, 0, zw, *_ONE, 1)
    np.testing.assert_array_equal(want, exact.astype(np.int32))


def test_filter_rows_beyond_shared_memory_take_the_gemm() -> None:
    rng = np.random.default_rng(7)
    x = _rand(rng, (1, 4096, 2, 2), np.uint8)
    w = _rand(rng, (8, 4096, 1, 1), np.int8)
    assert _check(x, w, 128, np.zeros(8, np.int32)) in ("wgmma", "mma_sync")


def test_constant_filter_kept() -> None:
    """A filter cache (a registration's constant filter) keeps what a call had to make: the
    zero-padded rows of a filter whose rows are not 16-byte multiples, and per-channel zero
    points on the device; reused while they stay, left alone by a call with others (which
    makes its own, exact). A filter used as it lies with one zero point makes nothing."""
    import cupy

    conv = _conv()
    rng = np.random.default_rng(22)
    cache: dict[Any, Any] = {}

    ring = conv.Options(pointwise_form="ring")

    def call(w_dev: Any, w: np.ndarray, zx: int, zw: np.ndarray) -> None:
        x = _rand(rng, (2, w.shape[1], 4, 3), np.uint8)
        ran: list[Any] = []
        got = conv.convolution_integer(
            cupy.asarray(x), w_dev, zx, zw, *_ONE, 1, ring, ran=ran, filter_cache=cache
        )
        _pointwise(ran[0])
        want = reference.convolution_integer(x, w, zx, zw, *_ONE, 1)
        np.testing.assert_array_equal(cupy.asnumpy(got), want)

    w = _rand(rng, (70, 40, 1, 1), np.int8)  # rows of 40 bytes: a padded copy
    w_dev = cupy.asarray(w)
    zw = np.full(70, 3, np.int32)
    kept = []
    for zx, zws in ((128, zw), (7, zw), (128, zw + 1)):
        call(w_dev, w, zx, zws)
        kept.append(cache["pointwise"][1][0])
    assert kept[1] is kept[0] and kept[2] is kept[0]  # not replaced by other zero points
    assert kept[0].shape == (70, 48) and list(cache) == ["pointwise"]

    cache.clear()
    w = _rand(rng, (70, 32, 1, 1), np.int8)  # rows of 32 bytes: used as they lie
    call(cupy.asarray(w), w, 5, np.full(70, -2, np.int32))
    assert cache == {}
    zw = rng.integers(-128, 128, 70).astype(np.int32)
    call(cupy.asarray(w), w, 5, zw)  # per-channel zero points: uploaded once, kept
    assert cache["pointwise"][1][2].shape == (70,)


def _capability() -> int:
    import cupy

    return int(cupy.cuda.Device().compute_capability)


def _expected_form(form: str) -> str:
    """The form that runs where `form` is asked for: the resident form needs sm_90's bulk
    copies, the warpgroup-MMA form sm_90a (compute capability 9.0 exactly)."""
    cc = _capability()
    if form == "wgmma" and cc == 90 or form == "resident" and cc >= 90:
        return form
    return "ring"


def _form(what: Any, form: str, run: int, chunks: int) -> None:
    """`what` is `form` (where the device runs it) with `run` chunks per CTA."""
    plan = _pointwise(what)
    assert plan.mchunks == chunks
    assert plan.form == _expected_form(form), plan
    assert plan.run == (min(run, chunks) if plan.form != "ring" else 1), plan


@pytest.mark.parametrize(("xt", "wt"), PAIRS)
@pytest.mark.parametrize("zp_mode", ["none", "tensor", "channel"])
@pytest.mark.parametrize("run", [1, 2, 3, 8])
@pytest.mark.parametrize(
    ("form", "hw"),
    [
        ("resident", (16, 20)),  # two tiles (the second of 64 pixels): a copy a row
        ("resident", (12, 15)),  # one tile of 180 pixels: a copy a chunk
        ("wgmma", (12, 15)),  # 180 pixels of the MMA's 256 rows
        ("wgmma", (16, 16)),  # 256 pixels: every row, the staging rows 256 ints apart
    ],
)
def test_forms(xt: Any, wt: Any, zp_mode: str, run: int, form: str, hw: tuple[int, int]) -> None:
    """The resident and warpgroup-MMA forms: runs of 1, 2, 3 and all of 5 chunks (the last of
    44 channels, the last run shorter), 3 steps of channels (the last of 8), a filter padded
    to 16-byte rows, every zero-point mode and signedness pair."""
    conv = _conv()
    rng = np.random.default_rng([PAIRS.index((xt, wt)), len(zp_mode), run, hw[0], len(form)])
    x = _rand(rng, (2, 72, *hw), xt)
    w = _rand(rng, (300, 72, 1, 1), wt)
    zx = 0 if zp_mode == "none" else _zp(rng, xt)
    zw = zero_points(rng, zp_mode, wt, 300)
    options = conv.Options(pointwise_form=form, pointwise_run=run)
    _form(_check(x, w, zx, zw, options=options), form, run, 5)


@pytest.mark.parametrize(
    ("n", "c", "hw", "m", "form", "run", "expected"),
    [
        # ResNet-50's expansion: the MMA form, chosen
        (3, 256, (14, 14), 1024, None, None, "wgmma"),
        (3, 256, (14, 14), 1024, "resident", None, "resident"),
        (2, 256, (14, 14), 256, None, None, "wgmma"),  # the most channels its registers take
        (2, 288, (14, 14), 256, None, None, "resident"),  # ... a step more: the resident form
        (2, 416, (4, 4), 256, "resident", None, "resident"),  # the most the resident form fits
        (2, 417, (4, 4), 256, "resident", None, "ring"),  # one more: the ring form
        (2, 64, (8, 8), 64, None, None, "ring"),  # one chunk: nothing to overlap
        (2, 64, (8, 8), 64, "wgmma", 1, "wgmma"),  # ... but forced
        (1, 64, (16, 20), 256, None, None, "ring"),  # two tiles an image: the ring form
        (1, 64, (16, 20), 256, "wgmma", 2, "ring"),  # ... which the MMA form does not take
        (1, 64, (16, 20), 256, "resident", 2, "resident"),  # ... nor, unforced, the resident
        (2, 64, (8, 8), 256, "ring", None, "ring"),
        (1, 1, (2, 2), 70, "wgmma", 2, "wgmma"),  # one channel, 4 pixels
        (1, 1, (2, 2), 70, "resident", 2, "resident"),
        (2, 40, (17, 36), 130, "resident", 2, "resident"),  # 4-byte copies; 3 tiles
        (2, 41, (6, 10), 130, "wgmma", 2, "wgmma"),  # C HW not a multiple of 16: 4-byte copies
        (2, 41, (4, 10), 130, "wgmma", 2, "wgmma"),  # ... into rows of 11 words for 10
        (1, 256, (4, 53), 128, None, None, "wgmma"),  # 212 pixels, 256 channels
        (2, 256, (16, 16), 192, None, None, "wgmma"),  # 256 pixels and channels: the most
        (1, 64, (13, 20), 128, None, None, "ring"),  # 260 pixels: two tiles, the ring form
        (1, 33, (1, 4), 64, "resident", 1, "resident"),  # one chunk of one run, 4 pixels
        (3, 32, (10, 12), 200, "wgmma", None, "wgmma"),  # 120 pixels: one warpgroup's rows idle
        (2, 72, (7, 4), 130, "wgmma", 1, "wgmma"),  # 28 pixels: 7 words, an odd row of them
    ],
)
def test_form_shapes(
    n: int, c: int, hw: tuple[int, int], m: int, form: str | None, run: int | None, expected: str
) -> None:
    conv = _conv()
    rng = np.random.default_rng([n, c, m, len(form or "")])
    x = _rand(rng, (n, c, *hw), np.uint8)
    w = _rand(rng, (m, c, 1, 1), np.int8)
    zw = rng.integers(-128, 128, m).astype(np.int32)
    options = conv.Options(pointwise_form=form, pointwise_run=run)
    plan = _pointwise(_check(x, w, 128, zw, options=options))
    want = _expected_form(expected)
    if expected == "wgmma" and want == "ring" and _capability() >= 90 and form is None:
        want = "resident"  # sm_90 without sm_90a's MMA: the resident form
    assert plan.form == want, plan
    if plan.form != "ring" and run is None:  # chosen: the images' chunks over the SMs once
        import cupy

        sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
        assert plan.run == min(plan.mchunks, -(-n * plan.mchunks // sms))


@pytest.mark.parametrize("run", [1, 2, 3, 8])
@pytest.mark.parametrize("form", ["resident", "wgmma"])
@pytest.mark.parametrize(
    ("xt", "wt", "zp_mode"), [(np.uint8, np.int8, "channel"), (np.int8, np.uint8, "none")]
)
def test_forms_on_views_with_kept_filter(
    form: str, run: int, xt: Any, wt: Any, zp_mode: str
) -> None:
    """The resident and MMA forms on an input view (every other image, planes from the third
    on) with a registration's kept filter (a padded copy of its rows; for the MMA form also
    its blocks and their rows' sums, each chunk one bulk copy), over repeated calls with other
    zero points: per channel, new each call, or none."""
    import cupy

    conv = _conv()
    rng = np.random.default_rng([31, run, len(form), len(zp_mode)])
    options = conv.Options(pointwise_form=form, pointwise_run=run)
    cache: dict[Any, Any] = {}
    w = _rand(rng, (300, 40, 1, 1), wt)  # rows of 40 bytes: a padded copy, kept
    w_dev = cupy.asarray(w)
    kept = []
    for i in range(3):
        x = _rand(rng, (4, 43, 6, 10), xt)
        x_dev = cupy.asarray(x)[::2, 3:]
        zw = zero_points(rng, zp_mode, wt, 300)
        ran: list[Any] = []
        got = conv.convolution_integer(
            x_dev, w_dev, 100 + i, zw, *_ONE, 1, options, ran=ran, filter_cache=cache
        )
        _form(ran[0], form, run, 5)
        want = reference.convolution_integer(x[::2, 3:], w, 100 + i, zw, *_ONE, 1)
        np.testing.assert_array_equal(cupy.asnumpy(got), want)
        kept.append(cache.get("pointwise blocks"))
    assert cache["pointwise"][1][0].shape == (300, 48)
    if _expected_form(form) == "wgmma":  # 5 chunks of 2 steps of 16-channel blocks
        blocks = kept[0][1]
        assert blocks.shape == (5, 4 * 64 * 16 + 64 * 4) and kept[2][1] is blocks
        # each chunk's 64 row sums after its block, zeros past the 300 rows
        sums = cupy.asnumpy(blocks[:, 4 * 64 * 16 :]).view(np.int32).reshape(-1)
        np.testing.assert_array_equal(sums[:300], w.reshape(300, 40).astype(np.int32).sum(1))
        assert not sums[300:].any()
    else:
        assert kept == [None] * 3


def test_mma_form_kept_blocks_over_a_long_run() -> None:
    """A registered operator's kept blocks over a run of 10 chunks (its three blocks filled
    four, three and three times: their barriers' phases wrap), then a call with another filter
    while those are kept (its blocks made for the call alone, launched as usual)."""
    import cupy

    conv = _conv()
    rng = np.random.default_rng(43)
    options = conv.Options(pointwise_form="wgmma", pointwise_run=10)
    cache: dict[Any, Any] = {}
    zw = rng.integers(-128, 128, 640).astype(np.int32)
    filters = [_rand(rng, (640, 64, 1, 1), np.int8) for _ in range(2)]
    devices = [cupy.asarray(w) for w in filters]
    for w, w_dev in zip(filters, devices, strict=True):
        for _ in range(2):
            x = _rand(rng, (2, 64, 6, 10), np.uint8)
            ran: list[Any] = []
            got = conv.convolution_integer(
                cupy.asarray(x), w_dev, 9, zw, *_ONE, 1, options, ran=ran, filter_cache=cache
            )
            _form(ran[0], "wgmma", 10, 10)
            want = reference.convolution_integer(x, w, 9, zw, *_ONE, 1)
            np.testing.assert_array_equal(cupy.asnumpy(got), want)
    if _expected_form("wgmma") == "wgmma":  # the first filter's blocks stay kept
        assert cache["pointwise blocks"][0][1] == devices[0].data.ptr


@pytest.mark.parametrize("registered", [False, True])
def test_mma_calls_chained_through_memory(
    monkeypatch: pytest.MonkeyPatch, registered: bool
) -> None:
    """Calls of the MMA form queued back to back, each reading the bytes the call before it
    wrote (its int32 output seen as the next call's uint8 input), checked once the whole chain
    has run. Inline (no kept filter) and registered (the filter's blocks kept), each call is
    launched to start while the grid ahead of it finishes, and must read nothing that grid
    writes (an inline call: nothing at all, filter rows included) before it is done; the chain
    is queued behind a GPU-side wait, so that the calls meet on the GPU back to back however
    slowly the host issues them, and the small grids leave most SMs free, so a call that read
    early would see its input before it was written."""
    import cupy

    if _expected_form("wgmma") != "wgmma":
        pytest.skip("the MMA form runs on compute capability 9.0 only")
    conv = _conv()
    dependent = dependent_launches(monkeypatch)
    rng = np.random.default_rng(41 if registered else 42)
    n, c, hw, m = (4, 256, 14, 128) if registered else (4, 128, 12, 192)
    zx = 7 if registered else 5
    w = cupy.asarray(_rand(rng, (m, c, 1, 1), np.int8))
    zw = rng.integers(-128, 128, m).astype(np.int32)
    cache: dict[Any, Any] | None = {} if registered else None

    def call(x: Any) -> Any:
        ran: list[Any] = []
        out = conv.convolution_integer(x, w, zx, zw, *_ONE, 1, ran=ran, filter_cache=cache)
        _form(ran[0], "wgmma", 1, -(-m // 64))
        return out

    first = cupy.asarray(_rand(rng, (n, c, hw, hw), np.uint8))
    w_host = cupy.asnumpy(w)
    for x, out in chained_calls(call, first):
        want = reference.convolution_integer(cupy.asnumpy(x), w_host, zx, zw, *_ONE, 1)
        np.testing.assert_array_equal(cupy.asnumpy(out), want)
    # registered: the first call's blocks are complete before it launches
    assert dependent == [True] * 8
