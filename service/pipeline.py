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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from dmlserve.kernels import DescriptorError, OperatorBase
from dmlserve.kernels.wire import HostTensor
from dmlserve.service.concurrency import offload
from dmlserve.service.cost import placement
from dmlserve.service.errors import KERNEL_ERRORS, PayloadTooLargeError, from_kernels
from dmlserve.service.metrics import Observation
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
    loc: tuple[str | int, ...] = ()  # where descriptor errors point, e.g. ("operator",)


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
    with Observation(metrics, exchange.received_bytes, exchange.operator, model) as obs:
        try:
            decoded = await offload(exchange.decode_bytes, exchange.decode)
            work = bind(state, decoded, model)
            obs.operator = str(work.operator.type)
            outcome = await compute(state, work)
            response, nbytes = await offload(
                outcome.output.nbytes, exchange.encode, decoded, outcome
            )
        except KERNEL_ERRORS as exc:
            raise from_kernels(exc) from None
        obs.finished(outcome, nbytes)
        return response


def bind(state: ServiceState, decoded: Decoded, model: str = "") -> Work:
    """The decoded descriptor resolved against the decoded tensors (`DescriptorError` located
    where the exchange points)."""
    try:
        op = state.resolved.bind(decoded.descriptor, decoded.inputs)
    except DescriptorError as exc:
        raise exc.prefixed(*decoded.loc) from None
    registered = decoded.descriptor if isinstance(decoded.descriptor, OperatorBase) else None
    return Work(op, decoded.inputs, model, registered=registered)


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
    pending.inc()
    batcher = state.batchers.get(work)
    if batcher is not None:
        return await batcher.submit(work, on_dequeue=pending.dec)
    input_bytes = sum(t.buffer.nbytes for t in work.inputs.values())
    on_host, inline = placement(device, s, work.operator, input_bytes)
    output = await state.limiter.run(
        lambda: device.run(work, on_host=on_host),
        s.request_timeout_s,
        work.timings,
        inline=inline,
        on_dequeue=pending.dec,
    )
    return Outcome(work, output, device.name)
