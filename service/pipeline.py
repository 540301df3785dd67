"""The request pipeline: decode -> bind -> queue -> compute -> encode, for every transport.

A transport reads a request (an HTTP body today) and hands `run` an `Exchange`: how to decode
its tensors and how to encode the outcome for its protocol. Each step happens once, in order:

- decode: `Exchange.decode`, on the event loop when small, else in a worker thread (`offload`);
- bind: the descriptor resolved against the decoded tensors (`binding`), into a `Work`;
- queue and compute: the output limit checked, then a compute slot (`concurrency`) and the
  device (`device`), on the event loop when the work is tiny (`cost`); a registered operator
  that batches queues in its batcher instead, which runs it with others under one slot
  (`batching`);
- encode: `Exchange.encode`, offloaded like decoding.

The operator layer's errors become service errors in one place (`errors.from_kernels`), and
the whole walk is observed once in the metrics. Nothing here imports FastAPI: a gRPC server
calls `run` with its own `Exchange`.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from dmlserve.kernels import DescriptorError, OperatorBase
from dmlserve.kernels.descriptors import attr_name
from dmlserve.kernels.errors import Loc
from dmlserve.kernels.operators import Constants
from dmlserve.kernels.wire import Encoding, HostTensor, text_bytes
from dmlserve.service.concurrency import offload
from dmlserve.service.cost import placement
from dmlserve.service.errors import (
    KERNEL_ERRORS,
    PayloadTooLargeError,
    from_kernels,
    host_out_of_memory,
)
from dmlserve.service.observation import Observation
from dmlserve.service.work import Outcome, Work

if TYPE_CHECKING:
    from dmlserve.service.state import ServiceState

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


@dataclass
class Decoded:
    """What decoding a request yields: the descriptor and the tensors to bind it to."""

    descriptor: Any  # the operator's JSON object, or a registered (resolved) model
    inputs: dict[str, HostTensor]
    loc: Loc = ()  # where descriptor errors point, e.g. ("operator",)
    #: where each input tensor sits in the request, e.g. {"InputTensor": ("inputs", 0)}
    input_locs: Mapping[str, Loc] = field(default_factory=dict)
    # CUDA shared memory: where the device writes the output, and what it holds while it runs
    # (`Work.sink`, `Work.pin`). Keyword-only, so subclasses' positional fields keep their places.
    sink: Any = field(default=None, kw_only=True)
    pin: AbstractContextManager[Any] | None = field(default=None, kw_only=True)
    #: a registered operator's constants (`Work.constants`)
    constants: Constants | None = field(default=None, kw_only=True)

    def where(self, loc: Loc) -> Loc:
        """Where a binding error at `loc` points in the request: a tensor the descriptor does
        not describe is reported where the request sent it, the rest in the descriptor."""
        name = loc[0] if loc else None
        if isinstance(name, str) and name in self.input_locs and not self._describes(name):
            return (*self.input_locs[name], *loc[1:])
        return (*self.loc, *loc)

    def _describes(self, name: str) -> bool:
        # A registered model was resolved with its own tensor descriptors, so a tensor rule it
        # breaks now is broken by the request's tensor.
        d = self.descriptor
        return isinstance(d, Mapping) and (name in d or attr_name(name) in d)

    def output_encoding(self) -> Encoding:
        """How the output will be sent; a text encoding is bounded before anything runs."""
        return "binary"


D = TypeVar("D", bound=Decoded)


class Exchange(Protocol, Generic[D, R_co]):
    """One request of one protocol, as the pipeline sees it."""

    @property
    def received_bytes(self) -> int:
        """Bytes received (before decompression), for the metrics."""

    @property
    def decode_bytes(self) -> int:
        """The size of the decoding work, which decides whether it leaves the event loop."""

    @property
    def operator(self) -> str:
        """The operator type when known before decoding ("" otherwise), for the metrics."""

    @property
    def model(self) -> str:
        """The registered name ("" for an operator given inline)."""

    def decode(self) -> D:
        """Parse the request and decode its tensors (no I/O: the request is already read)."""

    def encode(self, decoded: D, outcome: Outcome) -> tuple[R_co, int]:
        """The response, and the tensor bytes it carries."""


async def run(state: ServiceState, exchange: Exchange[D, R]) -> R:
    """Serve one request from decoded tensors to the encoded response."""
    metrics, model = state.metrics, exchange.model
    statistics = state.registry.statistics(model) if model else None
    with Observation(metrics, exchange.received_bytes, exchange.operator, model, statistics) as obs:
        try:
            t0 = time.perf_counter()
            decoded = await offload(exchange.decode_bytes, exchange.decode)
            work = bind(state, decoded, model)
            work.timings.decode = time.perf_counter() - t0
            obs.operator = str(work.operator.type)
            check_text_output(state, work, decoded.output_encoding())
            outcome = await compute(state, work)
            t1 = time.perf_counter()
            response, nbytes = await offload(
                outcome.output.nbytes, exchange.encode, decoded, outcome
            )
            work.timings.encode = time.perf_counter() - t1
        except KERNEL_ERRORS as exc:
            raise from_kernels(exc) from None
        except MemoryError:  # decoding or encoding a large tensor: 503, as in the compute
            raise host_out_of_memory(state.settings.retry_after_s) from None
        obs.finished(outcome, nbytes)
        return response


def bind(state: ServiceState, decoded: Decoded, model: str = "") -> Work:
    """The decoded descriptor resolved against the decoded tensors (`DescriptorError` located
    where the request put the field: `Decoded.where`)."""
    try:
        op = state.resolved.bind(decoded.descriptor, decoded.inputs)
    except DescriptorError as exc:
        raise exc.relocated(decoded.where) from None
    # A descriptor that declares its input tensors (a registered one) resolves without them;
    # the computation cannot.
    missing = [name for name in op.input_names if name not in decoded.inputs]
    if missing:
        raise DescriptorError.at(("inputs",), "missing input(s): " + ", ".join(missing))
    registered = decoded.descriptor if isinstance(decoded.descriptor, OperatorBase) else None
    pin = decoded.pin or nullcontext()
    return Work(
        op, decoded.inputs, model, sink=decoded.sink, pin=pin, registered=registered,
        constants=decoded.constants,
    )  # fmt: skip


def check_text_output(state: ServiceState, work: Work, encoding: Encoding) -> None:
    """413 when the output's `data` or `b64` text could pass `max_text_output_bytes`."""
    out = work.operator.output_tensor
    assert out is not None
    limit = state.settings.max_text_output_bytes
    size = text_bytes(out.data_type, math.prod(out.sizes), encoding)
    if size > limit:
        raise PayloadTooLargeError(
            "max_text_output_bytes", limit, size, f"the {encoding} text of OutputTensor",
            loc=["output_encoding"], hint="; ask for the binary output encoding",
        )  # fmt: skip


async def compute(state: ServiceState, work: Work) -> Outcome:
    """Run bound work under the limiter, with the output limit checked before allocating.

    The operator layer's errors come out as they are; the caller translates them.
    """
    device = state.require_ready()
    s = state.settings
    out = work.operator.output_tensor
    assert out is not None
    if out.nbytes > s.max_output_bytes:
        raise PayloadTooLargeError(
            "max_output_bytes", s.max_output_bytes, out.nbytes, "OutputTensor"
        )
    pending = state.metrics.pending(work.label)
    # The computation stops at the same moment the limiter gives the request up.
    work.deadline = time.monotonic() + s.request_timeout_s
    work.time_limit_s = s.request_timeout_s
    batcher = state.batchers.get(state, work)
    if batcher is not None:
        return await batcher.submit(work, pending)
    input_bytes = sum(t.buffer.nbytes for t in work.inputs.values())
    # Device memory (CUDA shared memory, constants kept on the GPU) only exists on a GPU.
    host_data = device.runs_on_host or not work.in_device_memory
    on_host, inline = placement(device, s, work.operator, input_bytes, host_data=host_data)
    output = await state.limiter.run(
        functools.partial(device.run, work, on_host=on_host),
        s.request_timeout_s,
        work.timings,
        inline=inline,
        pending=pending,
    )
    return Outcome(work, output, device.name)
