"""Every operator helper and `execute`, against the real service.

The expected outputs come from the seed pages, `numpy.pad`, hand counts and the
element-by-element definitions of `tests.oracles`: none of them is the code the server runs.
Each operator's samples come from the operator table (`tests.operator_info`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dmlserve.clients import Client
from dmlserve.kernels import OPERATORS, PaddingOperator, TensorDesc
from tests.backend import TEST_BACKEND
from tests.operator_info import Sample, all_samples, assert_matches, sample_id
from tests.oracles import (
    Geometry,
    naive_average_pooling,
    naive_convolution_integer,
    naive_fold,
    naive_unfold,
)
from tests.seed_examples import SEED_EXAMPLES, SeedExample

RNG = np.random.default_rng(20261121)
SAMPLES = all_samples()
# Floats from the GPU are summed in another order: within rounding there, bit-exact on NumPy.
GPU_RTOL = {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}


def assert_same(actual: np.ndarray, expected: np.ndarray, rtol: float = 0.0) -> None:
    """Dtype and shape exactly; values bit-exact, or within `rtol` (and GPU rounding) for floats."""
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    if TEST_BACKEND != "numpy" and actual.dtype.kind == "f":
        rtol = max(rtol, GPU_RTOL[actual.dtype])
    if rtol and actual.dtype.kind == "f":
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(actual, expected)


def _gpu_rtol(sample: Sample) -> float:
    dtype = sample.expected.dtype
    return GPU_RTOL[dtype] if TEST_BACKEND != "numpy" and dtype.kind == "f" else 0.0


@pytest.mark.parametrize(("op_type", "sample"), SAMPLES, ids=sample_id)
def test_operator_helper(client: Client, op_type: str, sample: Sample) -> None:
    helper = getattr(client, OPERATORS[op_type].name)
    assert_matches(helper(*sample.args, **sample.kwargs), sample, rtol=_gpu_rtol(sample))


@pytest.mark.parametrize(("op_type", "sample"), SAMPLES, ids=sample_id)
def test_execute_descriptor(client: Client, op_type: str, sample: Sample) -> None:
    outputs = client.execute(sample.descriptor, sample.inputs)
    assert list(outputs) == ["OutputTensor"]
    assert_matches(outputs["OutputTensor"], sample, rtol=_gpu_rtol(sample))


@pytest.mark.parametrize("example", SEED_EXAMPLES, ids=lambda e: e.name)
def test_seed_examples_through_execute(client: Client, example: SeedExample) -> None:
    outputs = client.execute(example.operator, example.inputs)
    assert list(outputs) == ["OutputTensor"]
    assert_same(outputs["OutputTensor"], example.expected)


@pytest.mark.parametrize("encoding", ["binary", "json"])
def test_execute_takes_a_model_and_either_encoding(client: Client, encoding: str) -> None:
    x = RNG.integers(-100, 100, size=(2, 3, 4), dtype=np.int64)
    op = PaddingOperator(
        start_padding=(0, 1, 2),
        end_padding=(1, 0, 3),
        padding_mode="SYMMETRIC",
        input_tensor=TensorDesc(data_type="INT64", sizes=(2, 3, 4)),
    )
    y = client.execute(op, {"InputTensor": x}, encoding=encoding)["OutputTensor"]  # type: ignore[arg-type]
    expected = np.pad(x, [(0, 1), (1, 0), (2, 3)], mode="symmetric")
    assert_same(y, expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.uint64, np.int32])
def test_unfold_then_fold(client: Client, dtype: type) -> None:
    x = RNG.integers(0, 50, size=(2, 3, 6, 5)).astype(dtype)
    g = Geometry((6, 5), (3, 2), (2, 1), (1, 2), (1, 0), (0, 2))
    kwargs: dict[str, Any] = {
        "strides": [2, 1],
        "dilations": [1, 2],
        "start_padding": [1, 0],
        "end_padding": [0, 2],
    }
    cols = client.unfold(x, [3, 2], **kwargs)
    assert_same(cols, naive_unfold(x, g))
    image = client.fold(cols, output_size=[6, 5], window_sizes=[3, 2], **kwargs)
    assert_same(image, naive_fold(cols, g))


def test_an_int_stands_for_every_spatial_dimension(client: Client) -> None:
    x1 = RNG.standard_normal((1, 2, 9)).astype(np.float32)
    cols = client.unfold(x1, 3, strides=2)
    assert_same(cols, naive_unfold(x1, Geometry((9,), (3,), (2,), (1,), (0,), (0,))))
    x3 = RNG.integers(-5, 5, size=(1, 1, 3, 4, 3), dtype=np.int16)
    g3 = Geometry((3, 4, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), (0, 0, 0), (0, 0, 0))
    cols3 = client.unfold(x3, [2, 2, 2])
    back = client.fold(cols3, [3, 4, 3], 2)
    assert_same(back, naive_fold(cols3, g3))
    x2 = RNG.standard_normal((2, 3, 7, 6)).astype(np.float32)
    pooled = client.average_pooling(x2, 2, start_padding=1, include_padding=True)
    g2 = Geometry((7, 6), (2, 2), (1, 1), (1, 1), (1, 1), (0, 0))
    assert_same(pooled, naive_average_pooling(x2, g2, True).astype(np.float32), rtol=1e-6)


def test_padding_value_is_exact_in_the_tensor_type(client: Client) -> None:
    x = np.zeros((1, 2), dtype=np.int64)
    big = 2**62 + 1  # a float32 PaddingValue could not hold it
    y = client.padding(x, [0, 1], [0, 1], value=big)
    assert y.dtype == np.int64 and y.tolist() == [[big, 0, 0, big]]
    assert client.padding(np.ones((2,), np.float64), [1], [0], value=0.1).tolist() == [0.1, 1, 1]


def test_average_pooling_3d_window_over_the_whole_input(client: Client) -> None:
    x = RNG.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    y = client.average_pooling(x, [3, 4, 5])
    assert y.shape == (1, 2, 1, 1, 1)
    np.testing.assert_allclose(y.reshape(2), x.reshape(2, -1).mean(axis=1), rtol=1e-5)


def test_convolution_integer_zero_points_as_numbers_and_per_channel(client: Client) -> None:
    x = RNG.integers(0, 256, size=(2, 4, 6, 5), dtype=np.uint8)
    w = RNG.integers(-128, 128, size=(6, 2, 3, 2), dtype=np.int8)
    w_zp = RNG.integers(-5, 5, size=6, dtype=np.int8)
    y = client.convolution_integer(
        x,
        w,
        x_zero_point=7,
        w_zero_point=w_zp,
        strides=[2, 1],
        dilations=[1, 2],
        start_padding=[1, 0],
        end_padding=[0, 1],
        group_count=2,
    )
    g = Geometry((6, 5), (3, 2), (2, 1), (1, 2), (1, 0), (0, 1))
    assert_same(y, naive_convolution_integer(x, w, 7, w_zp.astype(np.int32), g, 2))
    one = client.convolution_integer(x, w, x_zero_point=7, w_zero_point=-3, group_count=2)
    g1 = Geometry((6, 5), (3, 2), (1, 1), (1, 1), (0, 0), (0, 0))
    assert_same(one, naive_convolution_integer(x, w, 7, np.full(6, -3, np.int32), g1, 2))


def test_convolution_integer_1d_without_zero_points(client: Client) -> None:
    x = RNG.integers(-128, 128, size=(1, 3, 10), dtype=np.int8)
    w = RNG.integers(0, 256, size=(2, 3, 4), dtype=np.uint8)
    y = client.convolution_integer(x, w, strides=3)
    # A direct cross-correlation in int64.
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.int64), 4, axis=2)[:, :, ::3]
    expected = np.einsum("ncok,mck->nmo", windows, w.astype(np.int64)).astype(np.int32)
    assert_same(y, expected)


def test_non_contiguous_and_broadcast_inputs(client: Client) -> None:
    base = RNG.standard_normal((5, 4, 3, 2)).astype(np.float32)
    transposed = base.transpose(3, 2, 1, 0)  # (2, 3, 4, 5), no unit stride
    y = client.average_pooling(transposed, [2, 3])
    assert_same(y, client.average_pooling(np.ascontiguousarray(transposed), [2, 3]))
    row = np.arange(6, dtype=np.int32)
    broadcast = np.broadcast_to(row, (2, 3, 4, 6))  # strides (0, 0, 0, 4)
    padded = client.padding(broadcast, [0, 0, 1, 1], [0, 0, 0, 2], mode="REFLECTION")
    expected = np.pad(np.ascontiguousarray(broadcast), [(0, 0), (0, 0), (1, 0), (1, 2)], "reflect")
    assert_same(padded, expected)
    sliced = base[::2, 1:, :, ::-1]  # negative and gapped strides
    op = {"type": "PADDING", "StartPadding": [1, 0, 0, 0], "EndPadding": [0, 0, 0, 1]}
    assert_same(
        client.execute(op, {"InputTensor": sliced})["OutputTensor"],
        np.pad(sliced, [(1, 0), (0, 0), (0, 0), (0, 1)]),
    )


@pytest.mark.gpu
def test_cupy_inputs_are_copied_to_host(client: Client) -> None:
    import cupy

    x = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
    y = client.average_pooling(cupy.asarray(x), 2)
    assert isinstance(y, np.ndarray)
    assert_same(y, client.average_pooling(x, 2))
