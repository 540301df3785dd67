"""Warm-up: every operator run once at start-up, and each registered operator once, so that
no request pays for compiling kernels."""

from __future__ import annotations

import math
from collections.abc import Collection

import numpy as np

from dmlserve import kernels
from dmlserve.kernels import OperatorBase
from dmlserve.kernels.dtypes import DataType
from dmlserve.kernels.wire import HostTensor
from dmlserve.service.binding import bind
from dmlserve.service.device import Device
from dmlserve.service.work import Work


def zeros(dt: DataType, sizes: tuple[int, ...]) -> HostTensor:
    return HostTensor(dt, sizes, None, np.zeros(math.prod(sizes), dt.numpy))


def warmup_cases() -> list[Work]:
    """One tiny case per operator, from each operator's declared warm-up example."""
    cases = []
    for spec in kernels.OPERATORS.values():
        inputs = {name: zeros(d.data_type, d.sizes) for name, d in spec.warmup.inputs.items()}
        cases.append(Work(bind(spec.warmup.descriptor, inputs), inputs))
    return cases


def warm_up(device: Device) -> None:
    """Run every operator once on a tiny input, so the first request pays no compile."""
    for work in warmup_cases():
        device.run(work)


def example_inputs(op: OperatorBase, constants: Collection[str] = ()) -> dict[str, HostTensor]:
    """Zeros for each input of a registered operator but its `constants` (batch 1 where the
    batch is variable)."""
    inputs: dict[str, HostTensor] = {}
    for name, desc in op.tensor_descs().items():
        if name != "OutputTensor" and name not in constants:
            sizes = (1, *desc.sizes[1:]) if desc.has_wildcard_batch else desc.sizes
            inputs[name] = zeros(desc.data_type, sizes)
    return inputs
