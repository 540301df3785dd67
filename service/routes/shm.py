"""KServe v2 shared-memory extensions over HTTP: register, status and unregister regions.

`/v2/systemsharedmemory/...` (POSIX shared memory, any host) and `/v2/cudasharedmemory/...`
(CUDA IPC memory, where the server computes on a GPU), in Triton's JSON forms. The regions
themselves and their rules are `shm` and `cudashm`; inference requests name them.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from pydantic import BaseModel
from starlette.responses import Response

from dmlserve.service.body import read_body
from dmlserve.service.codec import parse_json, validate
from dmlserve.service.errors import BadRequestError
from dmlserve.service.registry import check_name
from dmlserve.service.responses import json_response
from dmlserve.service.routes._route import KeyedRoute
from dmlserve.service.routes.v2 import ERRORS
from dmlserve.service.schemas import (
    CudaSharedMemoryRegister,
    CudaSharedMemoryStatus,
    SystemSharedMemoryRegister,
    SystemSharedMemoryStatus,
)
from dmlserve.service.shm import Kind, SystemRegion
from dmlserve.service.state import ServiceState, StateDep

M = TypeVar("M", bound=BaseModel)

router = APIRouter(prefix="/v2", tags=["v2"], responses=ERRORS, route_class=KeyedRoute)
SYSTEM = "/systemsharedmemory"
CUDA = "/cudasharedmemory"


def _done() -> Response:
    return Response(b"", 200)


#: What the OpenAPI document says of an answer with an empty body (Triton's).
EMPTY: dict[str, Any] = {
    "response_class": Response,
    "responses": {200: {"description": "done (the body is empty)", "content": {}}},
}


async def _registration(model: type[M], request: Request, state: ServiceState) -> M:
    """The JSON body of a register request, as `model`."""
    body = await read_body(
        request, state.settings.max_request_bytes, state.settings.body_timeout_s, control=True
    )
    return validate(model, await parse_json(body.json))


async def system_register(region: str, request: Request, state: StateDep) -> Response:
    req = await _registration(SystemSharedMemoryRegister, request, state)
    opened = SystemRegion.open(check_name(region), req.key, req.offset, req.byte_size)
    state.shared_memory.register(opened)
    return _done()


async def cuda_register(region: str, request: Request, state: StateDep) -> Response:
    state.shared_memory.require_cuda()
    req = await _registration(CudaSharedMemoryRegister, request, state)
    try:
        # Triton's C++ client (libb64, as perf_analyzer sends it) breaks the text into lines.
        raw = base64.b64decode("".join(req.raw_handle.b64.split()), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BadRequestError(f"raw_handle.b64 is not valid base64: {exc}") from None
    from dmlserve.service.cudashm import register

    await register(state, check_name(region), raw, req.device_id, req.byte_size)
    return _done()


def _routes(
    kind: Kind, prefix: str, statuses: Any, register: Callable[..., Any], what: str
) -> None:
    """The routes of one kind of region (`statuses`: the status answer's model): status and
    unregister are the same for both kinds, registering is `register`."""

    async def status(state: StateDep, region: str = "") -> Response:
        return json_response(state.shared_memory.status(kind, region))

    async def unregister(state: StateDep, region: str = "") -> Response:
        state.shared_memory.unregister(kind, region)
        return _done()

    doc = f"The registered {what} regions (one, when named)."
    for path in ("/region/{region}/status", "/status"):
        router.get(prefix + path, response_model=statuses, name=f"{kind}_status", description=doc)(
            status
        )
    summary = f"Register a {what} region"
    router.post(prefix + "/region/{region}/register", summary=summary, **EMPTY)(register)
    for path, summary in (
        ("/region/{region}/unregister", "Unregister one"),
        ("/unregister", f"Unregister every {what} region"),
    ):
        router.post(prefix + path, name=f"{kind}_unregister", summary=summary, **EMPTY)(unregister)


_routes("system", SYSTEM, list[SystemSharedMemoryStatus], system_register, "system shared-memory")
_routes("cuda", CUDA, list[CudaSharedMemoryStatus], cuda_register, "CUDA shared-memory")
