"""Where an operator runs: the cost estimate that keeps tiny work on the event loop, and which
work the host may compute for a GPU server.

Work under both bounds runs inline. Bytes: what the operator reads and writes, the output
counted once per window tap; taps: the CPU path's loops run once per window offset.

On a GPU server, tiny work runs on the host (inline, no thread hop, no copies, no launch) only
where the host's answer is the device's bit for bit: data movement, and integer sums (they wrap
in their type, so the order of the additions does not matter). Float sums stay on the device:
the backends add in different orders.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from dmlserve import kernels
from dmlserve.kernels import OperatorBase
from dmlserve.kernels.wire import HostTensor
from dmlserve.service.concurrency import INLINE_BYTES

if TYPE_CHECKING:
    from dmlserve.service.device import Device
    from dmlserve.service.settings import Settings

INLINE_TAPS = 64


def is_tiny(op: OperatorBase, inputs: Mapping[str, HostTensor]) -> bool:
    """Whether running `op` on `inputs` is small enough not to stall the event loop."""
    return is_tiny_for(op, sum(t.buffer.nbytes for t in inputs.values()))


def is_tiny_for(op: OperatorBase, input_bytes: int) -> bool:
    """`is_tiny` for inputs of `input_bytes` bytes in all."""
    out = op.output_tensor
    assert out is not None
    taps = kernels.spec_of(op).taps(op)
    if taps > INLINE_TAPS:
        return False
    return input_bytes + out.nbytes * taps <= INLINE_BYTES


def host_exact(op: OperatorBase) -> bool:
    """Whether the host computes `op` bit for bit as the GPU does."""
    out = op.output_tensor
    assert out is not None
    return not kernels.spec_of(op).sums or out.data_type.is_integer


def placement(
    device: Device,
    settings: Settings,
    op: OperatorBase,
    input_bytes: int,
    *,
    host_data: bool = True,
) -> tuple[bool, bool]:
    """Where `op` on `input_bytes` of inputs runs: (on the host, on the event loop).

    `host_data` is false when an input or the output is in device memory: the device runs it.
    """
    tiny = is_tiny_for(op, input_bytes)
    on_host = device.runs_on_host or (
        tiny and host_data and settings.tiny_on_host and host_exact(op)
    )
    return on_host, tiny and on_host
