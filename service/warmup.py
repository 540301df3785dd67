"""Warm-up: every operator run once at start-up, and each registered operator once, so that
no request pays for compiling kernels."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dmlserve.kernels import OperatorBase
from dmlserve.kernels.dtypes import DataType
from dmlserve.kernels.wire import HostTensor
from dmlserve.service.binding import bind
from dmlserve.service.device import Device
from dmlserve.service.work import Work


def zeros(dt: DataType, sizes: tuple[int, ...]) -> HostTensor:
    return HostTensor(dt, sizes, None, np.zeros(math.prod(sizes), dt.numpy))


def warmup_cases() -> list[Work]:
    """One tiny case per operator."""
    f32, i8 = DataType.FLOAT32, DataType.INT8
    specs: list[tuple[dict[str, Any], dict[str, HostTensor]]] = [
        (
            {"type": "PADDING", "PaddingMode": "REFLECTION", "StartPadding": [0, 0, 1, 1],
             "EndPadding": [0, 0, 1, 1]},
            {"InputTensor": zeros(f32, (1, 1, 2, 2))},
        ),
        (
            {"type": "UNFOLD", "WindowSizes": [2, 2]},
            {"InputTensor": zeros(f32, (1, 1, 3, 3))},
        ),
        (
            {"type": "FOLD", "WindowSizes": [2, 2],
             "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 3, 3]}},
            {"InputTensor": zeros(f32, (1, 4, 4))},
        ),
        (
            {"type": "AVERAGE_POOLING", "WindowSize": [2, 2]},
            {"InputTensor": zeros(f32, (1, 1, 3, 3))},
        ),
        (
            {"type": "CONVOLUTION_INTEGER"},
            {"InputTensor": zeros(i8, (1, 1, 3, 3)), "FilterTensor": zeros(i8, (1, 1, 2, 2))},
        ),
    ]  # fmt: skip
    return [Work(bind(spec, inputs), inputs) for spec, inputs in specs]


def warm_up(device: Device) -> None:
    """Run every operator once on a tiny input, so the first request pays no compile."""
    for work in warmup_cases():
        device.run(work)


def example_inputs(op: OperatorBase) -> dict[str, HostTensor]:
    """Zeros for each input of a registered operator (batch 1 where the batch is variable)."""
    inputs: dict[str, HostTensor] = {}
    for name, desc in op.tensor_descs().items():
        if name != "OutputTensor":
            sizes = (1, *desc.sizes[1:]) if desc.has_wildcard_batch else desc.sizes
            inputs[name] = zeros(desc.data_type, sizes)
    return inputs
