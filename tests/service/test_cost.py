"""Placement: which work is tiny enough to run on the event loop, and which tiny work a GPU
server computes on its host (only where the host gives the device's bytes)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from dmlserve.kernels.dtypes import DataType, from_numpy
from dmlserve.kernels.wire import HostTensor
from dmlserve.service.binding import bind
from dmlserve.service.cost import host_exact, is_tiny, placement
from dmlserve.service.device import Device
from dmlserve.service.settings import Settings
from dmlserve.service.work import Work
from tests.operator_info import Sample, all_samples, sample_id


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


# --- the host path of a GPU server -----------------------------------------------------------


def _sample_work(sample: Sample) -> tuple[Any, dict[str, HostTensor]]:
    inputs = {
        name: HostTensor(from_numpy(a.dtype), a.shape, None, a.reshape(-1))
        for name, a in sample.inputs.items()
    }
    return bind(sample.descriptor, inputs), inputs


def _exact_by_rule(op_type: str, data_type: DataType) -> bool:
    """Data movement, or integer sums (FOLD's and CONVOLUTION_INTEGER's)."""
    return op_type in ("PADDING", "UNFOLD") or (
        op_type in ("FOLD", "CONVOLUTION_INTEGER") and data_type.is_integer
    )


@pytest.mark.parametrize(("op_type", "sample"), all_samples(), ids=sample_id)
def test_the_host_path_is_taken_only_where_the_host_answers_exactly(
    op_type: str, sample: Sample
) -> None:
    op, inputs = _sample_work(sample)
    assert op.output_tensor is not None
    exact = _exact_by_rule(op_type, op.output_tensor.data_type)
    assert host_exact(op) is exact
    input_bytes = sum(t.buffer.nbytes for t in inputs.values())
    assert is_tiny(op, inputs)  # the samples are all tiny
    gpu = Device("cupy")  # placement reads what the device is; nothing touches a GPU here
    assert placement(gpu, Settings(), op, input_bytes) == (exact, exact)
    assert placement(gpu, Settings(tiny_on_host=False), op, input_bytes) == (False, False)
    assert placement(Device("numpy"), Settings(), op, input_bytes) == (True, True)


def test_large_work_leaves_the_loop_on_either_backend() -> None:
    op, inputs = _case(PAD, InputTensor=((1, 1, 120, 120), F32))
    size = sum(t.buffer.nbytes for t in inputs.values())
    assert placement(Device("cupy"), Settings(), op, size) == (False, False)
    assert placement(Device("numpy"), Settings(), op, size) == (True, False)


@pytest.mark.gpu
@pytest.mark.parametrize(("op_type", "sample"), all_samples(), ids=sample_id)
def test_where_the_host_path_is_taken_its_bytes_are_the_gpus(op_type: str, sample: Sample) -> None:
    """The proof of `host_exact` on a GPU: host and device give the same bytes wherever it says
    so (floats sums, where it does not, may differ in the last place)."""
    op, inputs = _sample_work(sample)
    device = Device("cupy")
    on_device = device.run(Work(op, inputs))
    on_host = device.run(Work(op, inputs), on_host=True)
    assert on_device.dtype == on_host.dtype and on_device.shape == on_host.shape
    if host_exact(op):
        assert on_device.tobytes() == on_host.tobytes()
