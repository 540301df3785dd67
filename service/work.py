"""One request's unit of compute, as it passes from binding through the queue to the device.

A `Work` is what the concurrency limiter schedules and the device runs; it comes back as an
`Outcome` for the encoder and the metrics. Everything a later stage needs to know about the
request's computation travels here, not in the transport's request object.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dmlserve.kernels import OperatorBase
from dmlserve.kernels._array import is_cupy_array
from dmlserve.kernels.operators import Constants
from dmlserve.kernels.wire import HostTensor


@dataclass
class Timings:
    """Seconds spent in each stage of one request."""

    queue: float = 0.0
    transfer: float = 0.0  # host<->device, both ways
    compute: float = 0.0
    transfer_out: float = 0.0  # the device->host part of `transfer`
    decode: float = 0.0  # the request's tensors decoded and bound
    encode: float = 0.0  # the response encoded

    @property
    def compute_input(self) -> float:
        """Triton's compute_input: the inputs decoded and copied to the device."""
        return self.decode + self.transfer - self.transfer_out

    @property
    def compute_output(self) -> float:
        """Triton's compute_output: the output copied from the device and encoded."""
        return self.transfer_out + self.encode


@dataclass
class Work:
    """A resolved operator bound to the host tensors it runs on."""

    operator: OperatorBase  # resolved against exactly these inputs
    inputs: Mapping[str, HostTensor]
    model: str = ""  # the registered name, "" for an operator given inline
    timings: Timings = field(default_factory=Timings)
    #: `time.monotonic()` past which the computation stops (None: no limit), and the limit
    #: it comes from, for the 504's wording.
    deadline: float | None = None
    time_limit_s: float = 0.0
    # CUDA shared memory: the inputs' buffers may be the client's device memory (CuPy arrays),
    # `sink` takes the output on the device, and `pin` keeps that memory registered while the
    # device runs (even past the request's time limit).
    sink: Any = None
    pin: AbstractContextManager[Any] = field(default_factory=nullcontext)
    # What this request accounts for in the statistics: alone it is one execution of its own
    # batch; of the requests a dynamic batch runs together, one counts the execution (with the
    # batch's size) and the others 0, so that a batch counts once.
    executions: int = 1
    execution_batch: int = 0  # the batch size executed (0: this request's own)
    #: the registered descriptor `operator` was bound from (batch sizes may be -1); None for
    #: an operator given inline (a batcher takes only work of its own registration)
    registered: OperatorBase | None = None
    #: that registration's constants: what the backend derived from them is reused
    constants: Constants | None = None

    @property
    def in_device_memory(self) -> bool:
        """Whether an input or the output lives in device memory (CUDA shared memory, a
        constant kept on the GPU): then the device runs it."""
        return self.sink is not None or any(is_cupy_array(t.buffer) for t in self.inputs.values())

    @property
    def label(self) -> str:
        """The model name metrics use: the registered name, else the operator type."""
        return self.model or str(self.operator.type)


@dataclass
class Outcome:
    """A computed output with what produced it."""

    work: Work
    output: np.ndarray
    backend: str  # the device that computed it: "numpy" or "cupy"
