"""`/v1`: execute an operator given inline, and register operators to execute by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from dmlserve.service.body import read_body
from dmlserve.service.codec import V1Exchange, parse_json
from dmlserve.service.pipeline import run
from dmlserve.service.registration import read_registration, unregister
from dmlserve.service.registration import register as register_operator
from dmlserve.service.registry import RegisteredOperator
from dmlserve.service.responses import json_response
from dmlserve.service.routes._route import E, KeyedRoute, direct, error_responses
from dmlserve.service.schemas import (
    ExecuteRequest,
    ExecuteResponse,
    OperatorExecuteRequest,
    OperatorList,
    RegisteredResponse,
    RegisterRequest,
)
from dmlserve.service.state import StateDep, state_of

PROBLEMS = error_responses(
    "application/problem+json", "Problem", (400, 401, 404, 408, 409, 413, 415, 422, 429, 503, 504)
)


FRAMING = (
    "application/json, or the KServe binary framing (application/octet-stream): "
    "Inference-Header-Content-Length bytes of JSON, then each binary tensor's bytes in the "
    "order the JSON names them (`parameters.binary_data_size` each)"
)
#: The binary framing's header, as the OpenAPI document describes it.
FRAMING_HEADER: dict[str, Any] = {
    "name": "Inference-Header-Content-Length",
    "in": "header",
    "required": False,
    "schema": {"type": "integer", "minimum": 0},
    "description": "with an application/octet-stream body: the byte length of the JSON header "
    "that opens it (the KServe binary tensor extension); the binary tensors follow it",
}


def _body_doc(model: type) -> dict[str, Any]:
    schema = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {
        "parameters": [FRAMING_HEADER],
        "requestBody": {
            "required": True,
            "description": FRAMING,
            "content": {
                "application/json": {"schema": schema},
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            },
        },
    }


#: Operators per page of `GET /v1/operators`: the default, and the most one page holds.
PAGE, MAX_PAGE = 100, 1000

router = APIRouter(prefix="/v1", tags=["v1"], responses=PROBLEMS, route_class=KeyedRoute)


def _execute_route(path: str, summary: str, body: type) -> Callable[[E], E]:
    """An execute endpoint: a `direct` route answering an ExecuteResponse."""
    post = router.post(
        path, response_model=ExecuteResponse, summary=summary, openapi_extra=_body_doc(body)
    )
    return lambda endpoint: post(direct(endpoint))


@_execute_route("/execute", "Execute an operator given inline", ExecuteRequest)
async def execute(request: Request) -> Response:
    return await _execute(request)


async def _execute(request: Request, registered: RegisteredOperator | None = None) -> Response:
    state = state_of(request)
    state.limiter.refuse_if_full()  # 429 before the body is read
    s = state.settings
    body = await read_body(
        request, s.max_request_bytes, s.body_timeout_s, deadlines=state.body_deadlines
    )
    return await run(state, V1Exchange(body, state.settings.max_tensor_bytes, registered))


@router.post(
    "/operators",
    response_model=RegisteredResponse,
    status_code=201,
    summary="Register an operator (validated, shapes inferred, kernels compiled once)",
    responses={
        200: {"model": RegisteredResponse, "description": "already registered"},
        507: {**PROBLEMS[413], "description": "max_operators registrations exist already"},
    },
    openapi_extra=_body_doc(RegisterRequest),
)
async def register(request: Request, state: StateDep) -> Response:
    body = await read_body(request, state.settings.max_request_bytes, state.settings.body_timeout_s)
    doc = await parse_json(body.json)
    req = read_registration(doc, body.section(), state.settings.max_tensor_bytes)
    reg, created = await register_operator(
        state, req.descriptor, req.name, constants=req.constants, batching=req.batching
    )
    return json_response(reg.to_json(), 201 if created else 200)


@router.get("/operators", response_model=OperatorList, summary="List registered operators")
async def list_operators(
    state: StateDep,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="operators per page")] = PAGE,
    after: Annotated[
        str | None, Query(max_length=128, description="the `next` of the previous page")
    ] = None,
) -> Response:
    """Registered operators in name order, `limit` at a time; `next` is the `after` of the
    following page (null on the last one)."""
    page, more = state.registry.page(limit, after)
    return json_response(
        {"operators": [r.to_json() for r in page], "next": page[-1].name if more else None}
    )


@router.get("/operators/{name}", response_model=RegisteredResponse, summary="Read one")
async def read_operator(name: str, state: StateDep) -> Response:
    return json_response(state.registry.get(name).to_json())


@router.delete("/operators/{name}", response_model=RegisteredResponse, summary="Remove one")
async def delete_operator(name: str, state: StateDep) -> Response:
    return json_response(unregister(state, name, source="runtime").to_json())


@_execute_route(
    "/operators/{name}/execute", "Execute a registered operator", OperatorExecuteRequest
)
async def execute_registered(name: str, request: Request) -> Response:
    return await _execute(request, state_of(request).registry.get(name))
