"""Registering an operator: validate and infer shapes, find a repeat, warm up, then add.

The steps a model repository loader takes for each file too, so a repository model and a
`POST /v1/operators` registration are the same thing.
"""

from __future__ import annotations

import logging
from typing import Any

from dmlserve.kernels import OperatorBase
from dmlserve.service.binding import bind
from dmlserve.service.errors import kernel_errors
from dmlserve.service.pipeline import compute
from dmlserve.service.registry import RegisteredOperator, check_name, resolve_for_registration
from dmlserve.service.state import ServiceState
from dmlserve.service.warmup import example_inputs
from dmlserve.service.work import Work

logger = logging.getLogger("dmlserve")


async def register(
    state: ServiceState, descriptor: Any, name: str | None = None, *, capped: bool = True
) -> tuple[RegisteredOperator, bool]:
    """The registration of `descriptor` (under `name`, if given), and whether it is new.

    The same descriptor again is the existing registration; its name with another one is 422.
    A new registration counts against `max_operators` (507 past it, checked before the
    warm-up and again when adding) unless `capped` is false: the model repository's, bounded by
    the repository itself.
    """
    name = check_name(name) if name is not None else None
    with kernel_errors(("operator",)):
        op = resolve_for_registration(descriptor)
    existing = state.registry.find(op, name)
    if existing is not None:
        return existing, False
    cap = state.settings.max_operators if capped else None
    if cap is not None:
        state.registry.check_room(cap)
    await warm(state, op)
    return state.registry.add(op, name, cap)


def unregister(state: ServiceState, name: str) -> RegisteredOperator:
    """Remove a registration, and its metric series with it."""
    reg = state.registry.remove(name)
    state.metrics.remove_model(name)
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
