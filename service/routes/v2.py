"""KServe v2 / Open Inference Protocol: health, server and model metadata, inference."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from dmlserve.service.body import read_body
from dmlserve.service.errors import NotFoundError, UnavailableError
from dmlserve.service.kserve import VERSION, InferExchange, model_metadata, model_statistics
from dmlserve.service.kserve import server_metadata as kserve_server_metadata
from dmlserve.service.model_config import service_model_config
from dmlserve.service.pipeline import run
from dmlserve.service.registry import RegisteredOperator
from dmlserve.service.responses import json_response
from dmlserve.service.routes._route import KeyedRoute, direct, error_responses
from dmlserve.service.routes.v1 import FRAMING, FRAMING_HEADER
from dmlserve.service.schemas import (
    InferResponse,
    ModelMetadata,
    ModelStatsResponse,
    ServerMetadata,
)
from dmlserve.service.state import StateDep, state_of

ERRORS = error_responses(
    "application/json", "V2Error", (400, 401, 404, 408, 413, 415, 422, 429, 503, 504)
)

health = APIRouter(prefix="/v2/health", tags=["v2"])
router = APIRouter(prefix="/v2", tags=["v2"], responses=ERRORS, route_class=KeyedRoute)


@health.get("/live", summary="Liveness")
async def live() -> Response:
    return json_response({"live": True})


@health.get("/ready", summary="Readiness: true once the backend is warm", responses=ERRORS)
async def ready(state: StateDep) -> Response:
    state.check_ready()
    return json_response({"ready": True})


@router.get("", response_model=ServerMetadata, summary="Server metadata")
async def server_metadata(state: StateDep) -> Response:
    return json_response(kserve_server_metadata(state.shared_memory))


def _model(state: StateDep, name: str, version: str | None) -> RegisteredOperator:
    reg = state.registry.get(name)
    if version is not None and version != VERSION:
        raise NotFoundError(f"model {name!r} has no version {version!r}; its version is {VERSION}")
    return reg


# Before `/models/{name}`, so that `stats` is read as the statistics of every model.
@router.get("/models/stats", response_model=ModelStatsResponse, summary="Statistics, every model")
async def all_statistics(state: StateDep) -> Response:
    return json_response(model_statistics(state.registry.list()))


@router.get("/models/{name}", response_model=ModelMetadata, summary="Model metadata")
@router.get(
    "/models/{name}/versions/{version}", response_model=ModelMetadata, include_in_schema=False
)
async def metadata(state: StateDep, name: str, version: str | None = None) -> Response:
    return json_response(model_metadata(_model(state, name, version)))


@router.get("/models/{name}/ready", summary="Model readiness")
@router.get("/models/{name}/versions/{version}/ready", include_in_schema=False)
async def model_ready(state: StateDep, name: str, version: str | None = None) -> Response:
    _model(state, name, version)
    if not state.ready:
        raise UnavailableError("the service is starting up", state.settings.retry_after_s)
    return json_response({"name": name, "ready": True})


@router.post(
    "/models/{name}/infer",
    response_model=InferResponse,
    summary="Inference (JSON or binary tensor data)",
    openapi_extra={
        "parameters": [FRAMING_HEADER],
        "requestBody": {
            "required": True,
            "description": FRAMING,
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/InferRequest"}},
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            },
        },
    },
)
@router.post("/models/{name}/versions/{version}/infer", include_in_schema=False)
@direct
async def infer(name: str, request: Request, version: str | None = None) -> Response:
    state = state_of(request)
    reg = _model(state, name, version)
    state.limiter.refuse_if_full()  # 429 before the body is read
    s = state.settings
    body = await read_body(
        request, s.max_request_bytes, s.body_timeout_s, deadlines=state.body_deadlines
    )
    exchange = InferExchange(body, state.settings.max_tensor_bytes, reg, state.shared_memory)
    try:
        return await run(state, exchange)
    finally:
        exchange.leases.release()


@router.get("/models/{name}/config", summary="Model configuration (Triton's ModelConfig)")
@router.get("/models/{name}/versions/{version}/config", include_in_schema=False)
async def config(state: StateDep, name: str, version: str | None = None) -> Response:
    return json_response(service_model_config(state, _model(state, name, version)))


@router.get("/models/{name}/stats", response_model=ModelStatsResponse, summary="Statistics")
@router.get(
    "/models/{name}/versions/{version}/stats",
    response_model=ModelStatsResponse,
    include_in_schema=False,
)
async def statistics(state: StateDep, name: str, version: str | None = None) -> Response:
    return json_response(model_statistics([_model(state, name, version)]))
