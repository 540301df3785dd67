"""PADDING's descriptor rules and PaddingValue conversion (SEMANTICS.md §4)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dmlserve import kernels
from dmlserve.kernels import DataType, resolve
from tests.kernels.descriptor_helpers import desc, errors_of, locs


def test_padding_dimension_count_must_equal_rank() -> None:
    errs = errors_of(
        {"type": "PADDING", "StartPadding": [1], "EndPadding": [1]},
        {"InputTensor": desc("INT8", 2, 2)},
    )
    assert locs(errs) == [("StartPadding",)]


@pytest.mark.parametrize(
    ("dtype", "value", "typed"),
    [
        ("UINT8", -1, False),
        ("UINT8", 256, False),
        ("INT8", 300, False),
        ("INT8", -129, True),
        ("UINT16", 65535.5, True),
        ("FLOAT16", 70000.0, False),
        ("INT32", 1e39, False),
        ("UINT64", 2**64, True),
    ],
)
def test_out_of_range_padding_value_is_refused(dtype: str, value: float, typed: bool) -> None:
    op: dict[str, Any] = {
        "type": "PADDING",
        "StartPadding": [1],
        "EndPadding": [1],
        "PaddingValue": value,
    }
    if typed:
        op["PaddingValueDataType"] = dtype
    assert locs(errors_of(op, {"InputTensor": desc(dtype, 3)})) == [("PaddingValue",)]


@pytest.mark.parametrize(
    ("dtype", "value", "typed", "expected"),
    [
        ("INT32", 10.6, False, 10),
        ("INT32", -7.9, False, -7),
        ("INT64", 123456789, False, 123456792),  # a FLOAT32 cannot hold it
        ("INT64", 123456789, True, 123456789),  # PADDING1: exact
        ("UINT64", 2**64 - 1, True, 2**64 - 1),
        ("INT64", -(2**63), True, -(2**63)),
        ("FLOAT64", 0.1, False, float(np.float32(0.1))),
        ("FLOAT64", 0.1, True, 0.1),
        ("FLOAT16", 0.1, False, float(np.float16(0.1))),
    ],
)
def test_padding_value_conversion(dtype: str, value: float, typed: bool, expected: float) -> None:
    op: dict[str, Any] = {
        "type": "PADDING",
        "StartPadding": [1],
        "EndPadding": [0],
        "PaddingValue": value,
    }
    if typed:
        op["PaddingValueDataType"] = dtype
    x = np.ones(2, dtype=DataType(dtype).numpy)
    out = kernels.execute(op, {"InputTensor": x})["OutputTensor"]
    assert out.dtype == x.dtype
    assert out[0] == DataType(dtype).numpy.type(expected)


def test_padding_value_data_type_must_equal_tensor_type() -> None:
    op = {
        "type": "PADDING",
        "StartPadding": [1],
        "EndPadding": [1],
        "PaddingValueDataType": "INT16",
    }
    assert locs(errors_of(op, {"InputTensor": desc("INT8", 3)})) == [("PaddingValueDataType",)]


def test_padding_value_is_ignored_outside_constant_mode() -> None:
    op = {
        "type": "PADDING",
        "PaddingMode": "EDGE",
        "StartPadding": [1],
        "EndPadding": [1],
        "PaddingValue": -5,
    }
    assert resolve(op, {"InputTensor": desc("UINT8", 3)}).output_tensor.sizes == (5,)
