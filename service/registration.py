"""Registering an operator: validate and infer shapes, find a repeat, warm up, then add.

The steps a model repository loader takes for each file too, so a repository model and a
`POST /v1/operators` registration are the same thing. Constant inputs are decoded with the
request (`read_registration`), checked against the descriptor, then kept on the device.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dmlserve import kernels
from dmlserve.kernels import OperatorBase
from dmlserve.kernels.wire import BinarySection, HostTensor
from dmlserve.service.binding import bind, describe
from dmlserve.service.codec import decode_inputs, validate
from dmlserve.service.concurrency import offload
from dmlserve.service.errors import UnprocessableError, kernel_errors
from dmlserve.service.pipeline import compute
from dmlserve.service.registry import (
    RegisteredOperator,
    Source,
    check_name,
    fingerprint,
    variable_batch,
)
from dmlserve.service.schemas import Batching, RegisterRequest
from dmlserve.service.state import ServiceState
from dmlserve.service.warmup import example_inputs
from dmlserve.service.work import Work

logger = logging.getLogger("dmlserve")


@dataclass(frozen=True)
class Registration:
    """A `POST /v1/operators` body, its constant tensors decoded (on the host)."""

    descriptor: Any
    name: str | None = None
    constants: Mapping[str, HostTensor] = field(default_factory=dict)
    batching: Batching | None = None


def read_registration(doc: Any, section: BinarySection, max_tensor_bytes: int) -> Registration:
    """A registration body (the JSON document, and the binary tensors of a framed body)."""
    req = validate(RegisterRequest, doc)
    with kernel_errors():
        constants, _ = decode_inputs(req.constants or {}, section, max_tensor_bytes, "constants")
    return Registration(req.operator, req.name, constants, req.batching)


def resolve_registration(reg: Registration) -> OperatorBase:
    """The resolved descriptor of a registration: its constants bound, -1 batches allowed."""
    with kernel_errors(("operator",)):
        parsed = kernels.parse_operator(reg.descriptor)
    known = (*parsed.input_names, *parsed.optional_input_names)
    for n in reg.constants:
        if n not in known:
            msg = f"{parsed.type} has no input {n!r}; its inputs are " + ", ".join(known)
            raise UnprocessableError(
                f"constants.{n}: {msg}", errors=[{"loc": ["constants", n], "msg": msg}]
            )
    tensors = {n: describe(t) for n, t in reg.constants.items()}
    with kernel_errors(("operator",)):
        op = kernels.resolve(parsed, tensors, allow_batch_wildcard=True)
    if reg.batching is not None and not variable_batch(op, reg.constants):
        msg = (
            "dynamic batching needs a variable batch: every input sent at execution and "
            "OutputTensor must have Sizes[0] = -1"
        )
        raise UnprocessableError(f"batching: {msg}", errors=[{"loc": ["batching"], "msg": msg}])
    return op


@dataclass(frozen=True)
class Prepared:
    """A registration validated and resolved, with its digest; nothing on the device yet."""

    name: str | None
    operator: OperatorBase
    digest: str
    constants: Mapping[str, HostTensor]
    batching: Batching | None


def prepare(reg: Registration) -> Prepared:
    """Validate a registration (name, descriptor, constants, batching) without a device."""
    name = check_name(reg.name) if reg.name is not None else None
    op = resolve_registration(reg)
    digest = fingerprint(op, reg.constants, reg.batching)
    return Prepared(name, op, digest, reg.constants, reg.batching)


async def register(
    state: ServiceState,
    descriptor: Any,
    name: str | None = None,
    *,
    constants: Mapping[str, HostTensor] | None = None,
    batching: Batching | None = None,
    source: Source = "runtime",
    replace: bool = False,
) -> tuple[RegisteredOperator, bool]:
    """The registration of `descriptor` (under `name`, if given), and whether it is new.

    The same registration again is the existing one; its name with another one is 422 (with
    `replace`, the repository's reload, the new one takes the name).
    """
    prepared = prepare(Registration(descriptor, name, constants or {}, batching))
    return await register_prepared(state, prepared, source=source, replace=replace)


async def register_prepared(
    state: ServiceState, prepared: Prepared, *, source: Source = "runtime", replace: bool = False
) -> tuple[RegisteredOperator, bool]:
    """`register` of a registration already validated by `prepare`."""
    existing = (
        state.registry.find(prepared.operator, prepared.name, prepared.digest)
        if not (replace)
        else None
    )
    if existing is not None:
        return existing, False
    resident = await load(state, prepared)
    return state.registry.add(
        prepared.operator, prepared.name, digest=prepared.digest, constants=resident,
        batching=prepared.batching, source=source, replace=replace,
    )  # fmt: skip


async def load(state: ServiceState, prepared: Prepared) -> dict[str, HostTensor]:
    """Put the constants on the device and run the registration once on zeros (batch 1),
    compiling its kernels; returns the constants as the device holds them."""
    device = state.require_ready()
    constants = {
        n: await offload(t.nbytes, device.resident, t) for n, t in prepared.constants.items()
    }
    op = prepared.operator
    inputs = {**example_inputs(op, constants), **constants}
    with kernel_errors(("operator",)):
        bound = bind(op, inputs)
    assert bound.output_tensor is not None
    budget = state.settings.max_output_bytes
    if bound.output_tensor.nbytes > budget or sum(t.nbytes for t in inputs.values()) > budget:
        logger.info("warm-up skipped: operator too large", extra={"operator": str(op.type)})
        return constants
    with kernel_errors(("operator",)):
        await compute(state, Work(bound, inputs))
    return constants
