"""The cost estimate that decides whether an operator runs on the event loop (NumPy backend).

Work under both bounds runs inline. Bytes: what the operator reads and writes, the output
counted once per window tap; taps: the reference backend's Python-level loop runs once per
window offset.
"""

from __future__ import annotations

from collections.abc import Mapping

from dmlserve import kernels
from dmlserve.kernels import OperatorBase
from dmlserve.kernels.wire import HostTensor
from dmlserve.service.concurrency import INLINE_BYTES

INLINE_TAPS = 64


def is_tiny(op: OperatorBase, inputs: Mapping[str, HostTensor]) -> bool:
    """Whether running `op` on `inputs` is small enough not to stall the event loop."""
    out = op.output_tensor
    assert out is not None
    taps = kernels.spec_of(op).taps(op)
    if taps > INLINE_TAPS:
        return False
    touched = sum(t.buffer.nbytes for t in inputs.values()) + out.nbytes * taps
    return touched <= INLINE_BYTES
