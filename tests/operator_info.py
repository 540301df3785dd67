"""One entry per operator, driving every table-driven test (after PyTorch's OpInfo).

An entry holds samples: small cases over data types, ranks and edge cases (padding, strides,
dilations, groups, zero points), each as a descriptor with its inputs, the same case as an
SDK helper call, and the expected output from `tests.oracles` (element-by-element definitions
that share no code with what they check). Adding an operator to `kernels.operators.OPERATORS`
without an entry here fails `tests/kernels/operators/test_table.py`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dmlserve.kernels.dtypes import from_numpy
from tests.oracles import (
    Array,
    Geometry,
    naive_average_pooling,
    naive_convolution_integer,
    naive_fold,
    naive_padding,
    naive_unfold,
    random_array,
)

RNG_SEED = 20261122


@dataclass(frozen=True)
class Sample:
    """One case: a descriptor (wire names) and inputs, the SDK call that means the same,
    and the oracle's output. `rtol` is 0 where the result must be bit-exact."""

    name: str
    descriptor: dict[str, Any]
    inputs: dict[str, Array]
    expected: Array
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    rtol: float = 0.0


@dataclass(frozen=True)
class OpInfo:
    type: str
    samples: Callable[[np.random.Generator], list[Sample]]


def _geometry(
    sizes: tuple[int, ...],
    window: tuple[int, ...],
    strides: tuple[int, ...] | None = None,
    dilations: tuple[int, ...] | None = None,
    start: tuple[int, ...] | None = None,
    end: tuple[int, ...] | None = None,
) -> Geometry:
    ones, zeros = (1,) * len(sizes), (0,) * len(sizes)
    return Geometry(sizes, window, strides or ones, dilations or ones, start or zeros, end or zeros)


def _window_fields(g: Geometry) -> dict[str, Any]:
    return {
        "Strides": list(g.strides),
        "Dilations": list(g.dilations),
        "StartPadding": list(g.start),
        "EndPadding": list(g.end),
    }


def _window_kwargs(g: Geometry) -> dict[str, Any]:
    return {
        "strides": g.strides,
        "dilations": g.dilations,
        "start_padding": g.start,
        "end_padding": g.end,
    }


# ---- UNFOLD / FOLD ------------------------------------------------------------------------

WINDOW_CASES: list[tuple[str, Any, int, Geometry]] = [
    ("1d-stride", np.int8, 2, _geometry((9,), (3,), strides=(2,))),
    ("2d-padded-dilated", np.float32, 3, _geometry((5, 4), (2, 3), (1, 2), (2, 1), (1, 0), (0, 2))),
    ("2d-seed-page", np.float16, 1, _geometry((5, 5), (3, 3), start=(1, 0), end=(1, 0))),
    ("3d", np.uint16, 2, _geometry((3, 4, 3), (2, 2, 2), strides=(1, 2, 1))),
    ("2d-wide-stride", np.int64, 1, _geometry((7, 6), (2, 2), (3, 2), (2, 2), (2, 1), (1, 2))),
]  # fmt: skip


def _unfold_samples(rng: np.random.Generator) -> list[Sample]:
    samples = []
    for name, dtype, channels, g in WINDOW_CASES:
        x = random_array(rng, (2, channels, *g.sizes), dtype)
        samples.append(
            Sample(
                name,
                {"type": "UNFOLD", "WindowSizes": list(g.window), **_window_fields(g)},
                {"InputTensor": x},
                naive_unfold(x, g),
                (x, g.window),
                _window_kwargs(g),
            )
        )
    return samples


def _fold_samples(rng: np.random.Generator) -> list[Sample]:
    samples = []
    for name, dtype, channels, g in WINDOW_CASES:
        # Integers over the whole range: overlapping sums wrap in the tensor's own type.
        shape = (2, channels * math.prod(g.window), math.prod(g.blocks))
        x = random_array(rng, shape, dtype)
        output = {"DataType": from_numpy(x.dtype).value, "Sizes": [2, channels, *g.sizes]}
        samples.append(
            Sample(
                name,
                {
                    "type": "FOLD",
                    "WindowSizes": list(g.window),
                    "OutputTensor": output,
                    **_window_fields(g),
                },
                {"InputTensor": x},
                naive_fold(x, g),
                (x, g.sizes, g.window),
                _window_kwargs(g),
            )
        )
    return samples


# ---- PADDING ---------------------------------------------------------------------------------

PADDING_CASES: list[tuple[str, Any, tuple[int, ...], tuple[int, ...], tuple[int, ...], float]] = [
    ("CONSTANT", np.int64, (2, 3, 4), (0, 1, 2), (1, 0, 3), -7),
    ("EDGE", np.uint8, (5,), (3,), (4,), 0),
    ("REFLECTION", np.float32, (2, 3, 4), (1, 2, 5), (0, 4, 1), 0),
    ("SYMMETRIC", np.int16, (1, 2, 2, 3), (0, 1, 3, 2), (1, 4, 0, 6), 0),
    ("WRAP", np.float64, (3, 2), (7, 5), (4, 2), 0),
    ("CONSTANT", np.float16, (1, 1, 2, 2), (0, 0, 1, 2), (0, 0, 2, 1), 0.5),
]


def _padding_samples(rng: np.random.Generator) -> list[Sample]:
    samples = []
    for mode, dtype, shape, start, end, value in PADDING_CASES:
        x = random_array(rng, shape, dtype)
        descriptor: dict[str, Any] = {
            "type": "PADDING",
            "PaddingMode": mode,
            "StartPadding": list(start),
            "EndPadding": list(end),
        }
        if mode == "CONSTANT":
            # PADDING1: the value typed as the tensor, so it is used exactly.
            descriptor |= {"PaddingValue": value, "PaddingValueDataType": from_numpy(dtype).value}
        expected = naive_padding(x, start, end, mode, np.dtype(dtype).type(value))
        name = f"{mode.lower()}-rank{len(shape)}-{np.dtype(dtype).name}"
        samples.append(
            Sample(
                name,
                descriptor,
                {"InputTensor": x},
                expected,
                (x, start, end),
                {"mode": mode, "value": value},
            )
        )
    return samples


# ---- AVERAGE_POOLING -------------------------------------------------------------------------

POOLING_CASES: list[tuple[str, Any, Geometry, bool]] = [
    ("1d-counted-padding", np.float32, _geometry((6,), (3,), (2,), (1,), (2,), (1,)), True),
    ("2d-dilated", np.float16, _geometry((7, 6), (3, 2), (2, 1), (1, 2), (1, 1), (1, 0)), False),
    ("3d", np.float32, _geometry((3, 4, 5), (2, 2, 3), start=(0, 1, 1)), False),
]  # fmt: skip


def _pooling_samples(rng: np.random.Generator) -> list[Sample]:
    samples = []
    for name, dtype, g, include in POOLING_CASES:
        x = rng.standard_normal((2, 3, *g.sizes)).astype(dtype)
        descriptor = {
            "type": "AVERAGE_POOLING",
            "WindowSize": list(g.window),
            "IncludePadding": include,
            **_window_fields(g),
        }
        # The oracle's float64 mean, rounded once: one rounding step away at most.
        expected = naive_average_pooling(x, g, include).astype(dtype)
        rtol = 1e-3 if dtype == np.float16 else 1e-6
        kwargs = {**_window_kwargs(g), "include_padding": include}
        samples.append(
            Sample(name, descriptor, {"InputTensor": x}, expected, (x, g.window), kwargs, rtol)
        )
    return samples


# ---- CONVOLUTION_INTEGER ---------------------------------------------------------------------

CONV_CASES: list[tuple[str, Any, Any, Geometry, int, int, int, str]] = [
    # name, x type, w type, geometry, groups, C/G, M/G, zero points (none, tensor, channel)
    ("2d-groups-per-channel", np.uint8, np.int8,
     _geometry((6, 5), (3, 2), (2, 1), (1, 2), (1, 0), (0, 1)), 2, 2, 3, "channel"),
    ("1d-no-zero-points", np.int8, np.uint8, _geometry((10,), (4,), strides=(3,)), 1, 3, 2, "none"),
    ("2d-per-tensor", np.int8, np.int8, _geometry((4, 4), (3, 3), start=(1, 1), end=(1, 1)),
     1, 2, 2, "tensor"),
]  # fmt: skip


def _conv_samples(rng: np.random.Generator) -> list[Sample]:
    samples = []
    for name, x_type, w_type, g, groups, c_per, m_per, zero_points in CONV_CASES:
        c, m = groups * c_per, groups * m_per
        x = random_array(rng, (2, c, *g.sizes), x_type)
        w = random_array(rng, (m, c_per, *g.window), w_type)
        inputs = {"InputTensor": x, "FilterTensor": w}
        kwargs: dict[str, Any] = {**_window_kwargs(g), "group_count": groups}
        x_zp, w_zp = 0, np.zeros(m, np.int32)
        if zero_points != "none":
            x_zp = int(random_array(rng, (), x_type))
            w_values = random_array(rng, (m,) if zero_points == "channel" else (1,), w_type)
            w_zp = np.broadcast_to(w_values.astype(np.int32), (m,)).copy()
            inputs["InputZeroPointTensor"] = np.full((1, 1, 1, 1), x_zp, x_type)
            per_channel_sizes = (1, m, 1, 1) if zero_points == "channel" else (1, 1, 1, 1)
            inputs["FilterZeroPointTensor"] = w_values.reshape(per_channel_sizes)
            kwargs |= {"x_zero_point": x_zp, "w_zero_point": w_values}
        descriptor = {"type": "CONVOLUTION_INTEGER", "GroupCount": groups, **_window_fields(g)}
        expected = naive_convolution_integer(x, w, x_zp, w_zp, g, groups)
        samples.append(Sample(name, descriptor, inputs, expected, (x, w), kwargs))
    return samples


OPERATOR_INFO: dict[str, OpInfo] = {
    info.type: info
    for info in [
        OpInfo("FOLD", _fold_samples),
        OpInfo("UNFOLD", _unfold_samples),
        OpInfo("PADDING", _padding_samples),
        OpInfo("AVERAGE_POOLING", _pooling_samples),
        OpInfo("CONVOLUTION_INTEGER", _conv_samples),
    ]
}


def all_samples() -> list[tuple[str, Sample]]:
    """(operator type, sample) for every sample of every entry, with fixed data."""
    rng = np.random.default_rng(RNG_SEED)
    return [(t, s) for t, info in OPERATOR_INFO.items() for s in info.samples(rng)]


def sample_id(value: Any) -> str:
    return value.name if isinstance(value, Sample) else str(value)


def assert_matches(actual: Any, sample: Sample, *, rtol: float | None = None) -> None:
    """The sample's dtype and shape exactly; values bit-exact, or within `rtol` (floats)."""
    expected = sample.expected
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    tolerance = sample.rtol if rtol is None else max(rtol, sample.rtol)
    if tolerance and expected.dtype.kind == "f":
        np.testing.assert_allclose(actual, expected, rtol=tolerance, atol=tolerance)
    else:
        np.testing.assert_array_equal(actual, expected, strict=True)
