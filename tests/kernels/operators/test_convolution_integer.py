"""CONVOLUTION_INTEGER's descriptor rules: output shape and type, groups, zero points."""

from __future__ import annotations

from typing import Any

import pytest

from dmlserve.kernels import TensorDesc, resolve
from tests.kernels.descriptor_helpers import conv_tensors, desc, errors_of, locs


def test_convolution_output_shape_and_type() -> None:
    op = {
        "type": "CONVOLUTION_INTEGER",
        "Strides": [2, 1],
        "StartPadding": [1, 0],
        "EndPadding": [1, 2],
        "GroupCount": 2,
    }
    out = resolve(op, conv_tensors((2, 4, 7, 5), (6, 2, 3, 3))).output_tensor
    assert out == desc("INT32", 2, 6, 4, 5)


def test_one_dimensional_convolution() -> None:
    out = resolve({"type": "CONVOLUTION_INTEGER"}, conv_tensors((1, 3, 9), (4, 3, 2))).output_tensor
    assert out.sizes == (1, 4, 8)


@pytest.mark.parametrize(
    ("tensors", "extra", "loc"),
    [
        (conv_tensors((1, 4, 5, 5), (4, 3, 3, 3)), {}, ("FilterTensor", "Sizes", 1)),
        (conv_tensors((1, 4, 5, 5), (3, 2, 3, 3)), {"GroupCount": 2}, ("GroupCount",)),
        (conv_tensors((1, 4, 5, 5), (4, 4, 3, 3), xt="INT16"), {}, ("InputTensor", "DataType")),
        (conv_tensors((1, 4, 5, 5), (4, 4, 3), xt="INT8"), {}, ("FilterTensor", "Sizes")),
        (conv_tensors((1, 4, 5, 5, 5), (4, 4, 3, 3, 3)), {}, ("InputTensor", "Sizes")),
        (conv_tensors((1, 4, 2, 2), (4, 4, 3, 3)), {}, ("FilterTensor", "Sizes", 2)),
        (
            {
                **conv_tensors((1, 4, 5, 5), (4, 4, 3, 3)),
                "InputZeroPointTensor": desc("INT8", 1, 1, 1, 1),
            },
            {},
            ("InputZeroPointTensor", "DataType"),
        ),
        (
            {
                **conv_tensors((1, 4, 5, 5), (4, 4, 3, 3)),
                "InputZeroPointTensor": desc("UINT8", 1, 2, 1, 1),
            },
            {},
            ("InputZeroPointTensor", "Sizes"),
        ),
        (
            {
                **conv_tensors((1, 4, 5, 5), (4, 4, 3, 3)),
                "FilterZeroPointTensor": desc("INT8", 1, 3, 1, 1),
            },
            {},
            ("FilterZeroPointTensor", "Sizes"),
        ),
        (
            {
                **conv_tensors((1, 4, 5, 5), (4, 4, 3, 3)),
                "InputZeroPointTensor": desc("UINT8", 1, 1, 1, 1),
                "FilterZeroPointTensor": desc("INT8", 4),
            },
            {},
            ("FilterZeroPointTensor", "Sizes"),
        ),
    ],
)
def test_convolution_rules(
    tensors: dict[str, TensorDesc], extra: dict[str, Any], loc: tuple[Any, ...]
) -> None:
    assert loc in locs(errors_of({"type": "CONVOLUTION_INTEGER", **extra}, tensors))


def test_per_channel_filter_zero_point_shapes() -> None:
    for sizes in [(1, 4, 1, 1), (4,), (1, 4), (1, 1, 1, 1), (1,)]:
        tensors = {
            **conv_tensors((1, 4, 5, 5), (4, 4, 3, 3)),
            "FilterZeroPointTensor": desc("INT8", *sizes),
        }
        assert resolve({"type": "CONVOLUTION_INTEGER"}, tensors).output_tensor is not None
