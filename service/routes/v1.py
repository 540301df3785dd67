"""`/v1`: execute an operator given inline, and register operators to execute by name."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from starlette.responses import Response

from dmlserve.kernels import DescriptorError
from dmlserve.service.encoding import Encoding, HostTensor
from dmlserve.service.limits import Body, read_body
from dmlserve.service.observability import KeyedRoute, direct
from dmlserve.service.registry import check_name, resolve_for_registration
from dmlserve.service.runtime import (
    Observation,
    ServiceState,
    StateDep,
    as_unprocessable,
    bind,
    compute,
    offload,
    state_of,
    warm_registered,
)
from dmlserve.service.schemas import (
    ExecuteRequest,
    ExecuteResponse,
    OperatorExecuteRequest,
    OperatorList,
    RegisteredResponse,
    RegisterRequest,
)
from dmlserve.service.wire import (
    decode_v1_inputs,
    encode_v1_outputs,
    json_response,
    load_json,
    parse_json,
    validate,
)

PROBLEMS: dict[int | str, dict[str, Any]] = {
    code: {
        "description": HTTPStatus(code).phrase,
        "content": {
            "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
        },
    }
    for code in (400, 401, 404, 413, 415, 422, 429, 503, 504)
}


def _body_doc(model: type) -> dict[str, Any]:
    schema = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": schema},
                "application/octet-stream": {
                    "schema": {"type": "string", "format": "binary"},
                    "description": "KServe binary framing: Inference-Header-Content-Length bytes "
                    "of JSON, then the binary tensors",
                },
            },
        }
    }


router = APIRouter(prefix="/v1", tags=["v1"], responses=PROBLEMS, route_class=KeyedRoute)


@router.post(
    "/execute",
    response_model=ExecuteResponse,
    summary="Execute an operator given inline",
    openapi_extra=_body_doc(ExecuteRequest),
)
@direct
async def execute(request: Request) -> Response:
    state = state_of(request)
    body = await read_body(request, state.settings.max_request_bytes)
    with Observation(state, body.received_bytes) as obs:
        req, inputs, default = await _decode(state, ExecuteRequest, body)
        return await _run(state, obs, req.operator, inputs, req.output_encoding or default)


V = TypeVar("V", ExecuteRequest, OperatorExecuteRequest)


async def _decode(
    state: ServiceState, model: type[V], body: Body
) -> tuple[V, dict[str, HostTensor], Encoding]:
    """Parse and validate the body and decode its tensors: on the event loop when the body is
    small, else in one worker-thread call."""

    def work() -> tuple[V, dict[str, HostTensor], Encoding]:
        req = validate(model, load_json(body.json))
        inputs, default = decode_v1_inputs(req.inputs, body, state.settings.max_tensor_bytes)
        return req, inputs, default

    return await offload(len(body.json), work)


async def _run(
    state: ServiceState,
    obs: Observation,
    descriptor: Any,
    inputs: dict[str, HostTensor],
    encoding: Encoding,
) -> Response:
    """Bind the descriptor to the decoded tensors, compute, and encode the output."""
    op = bind(descriptor, inputs, ("operator",), state.resolved)
    obs.operator = str(op.type)
    outcome = await compute(state, op, inputs, obs.model)
    backend = state.require_ready().name
    outputs = {"OutputTensor": outcome.output}
    response, nbytes = await offload(
        outcome.output.nbytes, encode_v1_outputs, outputs, backend, encoding
    )
    obs.finished(outcome, nbytes)
    return response


@router.post(
    "/operators",
    response_model=RegisteredResponse,
    status_code=201,
    summary="Register an operator (validated, shapes inferred, kernels compiled once)",
    responses={200: {"model": RegisteredResponse, "description": "already registered"}},
    openapi_extra=_body_doc(RegisterRequest),
)
async def register(request: Request, state: StateDep) -> Response:
    body = await read_body(request, state.settings.max_request_bytes)
    req = validate(RegisterRequest, await parse_json(body.json))
    name = check_name(req.name) if req.name is not None else None
    try:
        op = resolve_for_registration(req.operator)
    except DescriptorError as exc:
        raise as_unprocessable(exc, ("operator",)) from None
    existing = state.registry.find(op, name)
    if existing is not None:
        return json_response(existing.to_json(), 200)
    await warm_registered(state, op)
    reg, created = state.registry.add(op, name)
    return json_response(reg.to_json(), 201 if created else 200)


@router.get("/operators", response_model=OperatorList, summary="List registered operators")
async def list_operators(state: StateDep) -> Response:
    return json_response({"operators": [r.to_json() for r in state.registry.list()]})


@router.get("/operators/{name}", response_model=RegisteredResponse, summary="Read one")
async def read_operator(name: str, state: StateDep) -> Response:
    return json_response(state.registry.get(name).to_json())


@router.delete("/operators/{name}", response_model=RegisteredResponse, summary="Remove one")
async def delete_operator(name: str, state: StateDep) -> Response:
    return json_response(state.registry.remove(name).to_json())


@router.post(
    "/operators/{name}/execute",
    response_model=ExecuteResponse,
    summary="Execute a registered operator",
    openapi_extra=_body_doc(OperatorExecuteRequest),
)
@direct
async def execute_registered(name: str, request: Request) -> Response:
    state = state_of(request)
    reg = state.registry.get(name)
    body = await read_body(request, state.settings.max_request_bytes)
    with Observation(state, body.received_bytes) as obs:
        obs.operator, obs.model = reg.type, reg.name
        req, inputs, default = await _decode(state, OperatorExecuteRequest, body)
        return await _run(state, obs, reg.operator, inputs, req.output_encoding or default)
