"""Registering an operator: validate and infer shapes, find a repeat, warm up, then add.

The steps a model repository loader takes for each file too, so a repository model and a
`POST /v1/operators` registration are the same thing.
"""

from __future__ import annotations

import logging
from typing import Any

from dmlserve.kernels import OperatorBase
from dmlserve.service.batching import BatchPolicy, batchable
from dmlserve.service.binding import bind
from dmlserve.service.errors import UnprocessableError, kernel_errors
from dmlserve.service.pipeline import compute
from dmlserve.service.registry import RegisteredOperator, check_name, resolve_for_registration
from dmlserve.service.state import ServiceState
from dmlserve.service.warmup import example_inputs
from dmlserve.service.work import Work

logger = logging.getLogger("dmlserve")


async def register(
    state: ServiceState,
    descriptor: Any,
    name: str | None = None,
    batching: BatchPolicy | None = None,
) -> tuple[RegisteredOperator, bool]:
    """The registration of `descriptor` (under `name`, if given, with dynamic `batching`, if
    given), and whether it is new.

    The same descriptor (and batching) again is the existing registration; its name with
    another one is 422.
    """
    name = check_name(name) if name is not None else None
    with kernel_errors(("operator",)):
        op = resolve_for_registration(descriptor)
    if batching is not None and not batchable(op):
        msg = (
            "dynamic batching needs a batch size of -1 (Sizes[0]) on every input a request "
            f"sends ({', '.join(op.input_names)}) and on OutputTensor"
        )
        raise UnprocessableError(msg, errors=[{"loc": ["batching"], "msg": msg}])
    existing = state.registry.find(op, name, batching)
    if existing is not None:
        return existing, False
    await warm(state, op)
    reg, created = state.registry.add(op, name, batching)
    if created and batching is not None:
        state.batchers.add(state, reg.name, reg.operator, batching)
    return reg, created


def unregister(state: ServiceState, name: str) -> RegisteredOperator:
    """Remove the operator registered as `name` (requests it already queued still run)."""
    reg = state.registry.remove(name)
    state.batchers.discard(name)
    return reg


async def warm(state: ServiceState, op: OperatorBase) -> None:
    """Run a newly registered operator once on zeros (batch 1), compiling its kernels."""
    state.require_ready()
    inputs = example_inputs(op)
    with kernel_errors():
        bound = bind(op, inputs)
    assert bound.output_tensor is not None
    budget = state.settings.max_output_bytes
    if bound.output_tensor.nbytes > budget or sum(t.nbytes for t in inputs.values()) > budget:
        logger.info("warm-up skipped: operator too large", extra={"operator": str(op.type)})
        return
    with kernel_errors():
        await compute(state, Work(bound, inputs))
