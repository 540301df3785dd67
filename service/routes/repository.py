"""Triton's model-repository extension: the index of the model repository, load and unload."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from dmlserve.service.body import read_body
from dmlserve.service.codec import load_json, validate
from dmlserve.service.repository import index as repository_index
from dmlserve.service.repository import refuse_overrides, repository_of
from dmlserve.service.responses import json_response
from dmlserve.service.routes._route import KeyedRoute
from dmlserve.service.routes.v2 import ERRORS
from dmlserve.service.schemas import (
    RepositoryIndexEntry,
    RepositoryIndexRequest,
    RepositoryModelRequest,
)
from dmlserve.service.state import ServiceState, StateDep

router = APIRouter(prefix="/v2/repository", tags=["v2"], responses=ERRORS, route_class=KeyedRoute)


async def _body(request: Request, state: ServiceState) -> dict[str, Any]:
    """The optional JSON body of a repository request ({} when empty)."""
    body = await read_body(
        request, state.settings.max_request_bytes, state.settings.body_timeout_s, control=True
    )
    return load_json(body.json) if len(body.json) else {}


@router.post(
    "/index", response_model=list[RepositoryIndexEntry], summary="Models of the repository"
)
async def index(request: Request, state: StateDep) -> Response:
    req = validate(RepositoryIndexRequest, await _body(request, state))
    return json_response(repository_index(state, req.ready))


@router.post("/models/{name}/load", summary="Load (or reload) a model from its file")
async def load(name: str, request: Request, state: StateDep) -> Response:
    req = validate(RepositoryModelRequest, await _body(request, state))
    refuse_overrides(req.parameters or {})
    await repository_of(state).load(state, name)
    return json_response({})


@router.post("/models/{name}/unload", summary="Unload a model")
async def unload(name: str, request: Request, state: StateDep) -> Response:
    validate(RepositoryModelRequest, await _body(request, state))
    await repository_of(state).unload(state, name)
    return json_response({})
