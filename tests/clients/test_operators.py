"""Every operator helper and `execute`, against the real service, checked against `kernels`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dmlserve import kernels
from dmlserve.clients import Client
from dmlserve.kernels import PaddingOperator, TensorDesc
from tests.backend import TEST_BACKEND
from tests.seed_examples import SEED_EXAMPLES, SeedExample

RNG = np.random.default_rng(20261121)


def local(operator: dict[str, Any], **inputs: np.ndarray) -> np.ndarray:
    """The oracle: the same descriptor through the operator layer on NumPy."""
    return np.asarray(kernels.execute(operator, inputs, backend="numpy")["OutputTensor"])


def assert_same(actual: np.ndarray, expected: np.ndarray) -> None:
    """Bit-exact on the NumPy backend and for integers; floats from the GPU within rounding."""
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    if TEST_BACKEND == "numpy" or actual.dtype.kind != "f":
        np.testing.assert_array_equal(actual, expected)
    else:
        rtol = 2e-3 if actual.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol)


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
    kwargs: dict[str, Any] = {
        "strides": [2, 1],
        "dilations": [1, 2],
        "start_padding": [1, 0],
        "end_padding": [0, 2],
    }
    cols = client.unfold(x, [3, 2], **kwargs)
    op = {
        "type": "UNFOLD",
        "WindowSizes": [3, 2],
        "Strides": [2, 1],
        "Dilations": [1, 2],
        "StartPadding": [1, 0],
        "EndPadding": [0, 2],
    }
    assert_same(cols, local(op, InputTensor=x))
    image = client.fold(cols, output_size=[6, 5], window_sizes=[3, 2], **kwargs)
    fold_op = {
        **op,
        "type": "FOLD",
        "OutputTensor": {
            "DataType": kernels.dtypes.from_numpy(x.dtype).value,
            "Sizes": [2, 3, 6, 5],
        },
    }
    assert_same(image, local(fold_op, InputTensor=cols))


def test_fold_and_unfold_in_one_and_three_dims(client: Client) -> None:
    x1 = RNG.standard_normal((1, 2, 9)).astype(np.float32)
    cols = client.unfold(x1, 3, strides=2)  # an int stands for every spatial dimension
    assert_same(cols, local({"type": "UNFOLD", "WindowSizes": [3], "Strides": [2]}, InputTensor=x1))
    x3 = RNG.integers(-5, 5, size=(1, 1, 3, 4, 3), dtype=np.int16)
    cols3 = client.unfold(x3, [2, 2, 2])
    back = client.fold(cols3, [3, 4, 3], [2, 2, 2])
    op = {
        "type": "FOLD",
        "WindowSizes": [2, 2, 2],
        "OutputTensor": {"DataType": "INT16", "Sizes": [1, 1, 3, 4, 3]},
    }
    assert_same(back, local(op, InputTensor=cols3))


@pytest.mark.parametrize("mode", ["CONSTANT", "EDGE", "REFLECTION", "SYMMETRIC", "WRAP"])
def test_padding_modes(client: Client, mode: str) -> None:
    x = RNG.standard_normal((2, 3, 4)).astype(np.float64)
    y = client.padding(x, [0, 2, 5], [1, 3, 0], mode=mode, value=0.1)
    op = {
        "type": "PADDING",
        "PaddingMode": mode,
        "PaddingValue": 0.1,
        "PaddingValueDataType": "FLOAT64",
        "StartPadding": [0, 2, 5],
        "EndPadding": [1, 3, 0],
    }
    assert_same(y, local(op, InputTensor=x))


def test_padding_value_is_exact_in_the_tensor_type(client: Client) -> None:
    x = np.zeros((1, 2), dtype=np.int64)
    big = 2**62 + 1  # a float32 PaddingValue could not hold it
    y = client.padding(x, [0, 1], [0, 1], value=big)
    assert y.dtype == np.int64 and y.tolist() == [[big, 0, 0, big]]
    assert client.padding(np.ones((2,), np.float64), [1], [0], value=0.1).tolist() == [0.1, 1, 1]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_average_pooling(client: Client, dtype: type) -> None:
    x = RNG.standard_normal((2, 3, 7, 6)).astype(dtype)
    y = client.average_pooling(
        x, [3, 2], strides=[2, 1], dilations=[1, 2], start_padding=[1, 1], end_padding=[1, 0]
    )
    op = {
        "type": "AVERAGE_POOLING",
        "WindowSize": [3, 2],
        "Strides": [2, 1],
        "Dilations": [1, 2],
        "StartPadding": [1, 1],
        "EndPadding": [1, 0],
        "IncludePadding": False,
    }
    assert_same(y, local(op, InputTensor=x))
    with_padding = client.average_pooling(x, 2, start_padding=1, include_padding=True)
    op2 = {
        "type": "AVERAGE_POOLING",
        "WindowSize": [2, 2],
        "StartPadding": [1, 1],
        "IncludePadding": True,
    }
    assert_same(with_padding, local(op2, InputTensor=x))


def test_average_pooling_3d_window_over_the_whole_input(client: Client) -> None:
    x = RNG.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    y = client.average_pooling(x, [3, 4, 5])
    assert y.shape == (1, 2, 1, 1, 1)
    np.testing.assert_allclose(y.reshape(2), x.reshape(2, -1).mean(axis=1), rtol=1e-5)


def test_convolution_integer_with_zero_points_and_groups(client: Client) -> None:
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
    op = {
        "type": "CONVOLUTION_INTEGER",
        "Strides": [2, 1],
        "Dilations": [1, 2],
        "StartPadding": [1, 0],
        "EndPadding": [0, 1],
        "GroupCount": 2,
    }
    expected = local(
        op,
        InputTensor=x,
        FilterTensor=w,
        InputZeroPointTensor=np.full((1, 1, 1, 1), 7, np.uint8),
        FilterZeroPointTensor=w_zp.reshape(1, 6, 1, 1),
    )
    assert_same(y, expected)
    assert y.dtype == np.int32


def test_convolution_integer_1d_without_zero_points(client: Client) -> None:
    x = RNG.integers(-128, 128, size=(1, 3, 10), dtype=np.int8)
    w = RNG.integers(0, 256, size=(2, 3, 4), dtype=np.uint8)
    y = client.convolution_integer(x, w, strides=3)
    # Independent check: a direct cross-correlation in int64.
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
        local(op, InputTensor=np.ascontiguousarray(sliced)),
    )


@pytest.mark.gpu
def test_cupy_inputs_are_copied_to_host(client: Client) -> None:
    import cupy

    x = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
    y = client.average_pooling(cupy.asarray(x), 2)
    assert isinstance(y, np.ndarray)
    assert_same(y, client.average_pooling(x, 2))
