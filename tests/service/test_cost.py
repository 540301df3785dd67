"""The cost estimate: which NumPy work is tiny enough to run on the event loop."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from dmlserve.kernels.dtypes import DataType
from dmlserve.kernels.wire import HostTensor
from dmlserve.service.binding import bind
from dmlserve.service.cost import is_tiny


def _case(op: dict[str, Any], **shapes: tuple[tuple[int, ...], DataType]) -> tuple[Any, dict]:
    inputs = {
        name: HostTensor(dt, sizes, None, np.zeros(math.prod(sizes), dt.numpy))
        for name, (sizes, dt) in shapes.items()
    }
    return bind(op, inputs), inputs


F32, I8 = DataType.FLOAT32, DataType.INT8
PAD = {"type": "PADDING", "StartPadding": [0, 0, 1, 1], "EndPadding": [0, 0, 1, 1]}


@pytest.mark.parametrize(
    ("op", "shapes", "tiny"),
    [
        (PAD, {"InputTensor": ((1, 1, 8, 8), F32)}, True),
        (PAD, {"InputTensor": ((1, 1, 120, 120), F32)}, False),  # 57 KB in, 59 KB out
        ({"type": "UNFOLD", "WindowSizes": [8, 8]}, {"InputTensor": ((1, 1, 8, 8), F32)}, True),
        ({"type": "UNFOLD", "WindowSizes": [9, 9]}, {"InputTensor": ((1, 1, 9, 9), F32)}, False),
        (
            {"type": "AVERAGE_POOLING", "WindowSize": [3, 3]},
            {"InputTensor": ((1, 1, 60, 60), F32)},  # 14 KB in, 13 KB out x 9 taps
            False,
        ),
        (
            {"type": "CONVOLUTION_INTEGER"},
            {"InputTensor": ((1, 4, 8, 8), I8), "FilterTensor": ((2, 4, 3, 3), I8)},
            True,
        ),
        (
            {"type": "CONVOLUTION_INTEGER"},
            {"InputTensor": ((1, 8, 9, 9), I8), "FilterTensor": ((1, 8, 3, 3), I8)},  # 72 taps
            False,
        ),
    ],
)
def test_is_tiny(op: dict, shapes: dict, tiny: bool) -> None:
    bound, inputs = _case(op, **shapes)
    assert is_tiny(bound, inputs) is tiny
