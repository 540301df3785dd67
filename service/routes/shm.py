"""KServe v2 shared-memory extensions over HTTP: register, status and unregister regions.

`/v2/systemsharedmemory/...` (POSIX shared memory, any host) and `/v2/cudasharedmemory/...`
(CUDA IPC memory, where the server computes on a GPU), in Triton's JSON forms. The regions
themselves and their rules are `shm` and `cudashm`; inference requests name them.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from fastapi import APIRouter, Request
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
from dmlserve.service.shm import SystemRegion
from dmlserve.service.state import ServiceState, StateDep

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


@router.get(SYSTEM + "/status", response_model=list[SystemSharedMemoryStatus])
@router.get(SYSTEM + "/region/{region}/status", response_model=list[SystemSharedMemoryStatus])
async def system_status(state: StateDep, region: str = "") -> Response:
    """The registered system shared-memory regions (one, when named)."""
    return json_response(state.shared_memory.status("system", region))


@router.post(
    SYSTEM + "/region/{region}/register", summary="Register a system shared-memory region", **EMPTY
)
async def system_register(region: str, request: Request, state: StateDep) -> Response:
    body = await read_body(
        request, state.settings.max_request_bytes, state.settings.body_timeout_s, control=True
    )
    req = validate(SystemSharedMemoryRegister, await parse_json(body.json))
    opened = SystemRegion.open(check_name(region), req.key, req.offset, req.byte_size)
    state.shared_memory.register(opened)
    return _done()


@router.post(
    SYSTEM + "/unregister", summary="Unregister every system shared-memory region", **EMPTY
)
@router.post(SYSTEM + "/region/{region}/unregister", summary="Unregister one", **EMPTY)
async def system_unregister(state: StateDep, region: str = "") -> Response:
    state.shared_memory.unregister("system", region)
    return _done()


def _cuda(state: ServiceState) -> None:
    # Only registering is refused: status and unregister-all answer (with no regions), as
    # clients such as perf_analyzer clean up both kinds whatever they used.
    if not state.shared_memory.cuda:
        raise BadRequestError(
            "CUDA shared memory is not served here: this server computes on the CPU "
            "(no CUDA device); use system shared memory"
        )


@router.get(CUDA + "/status", response_model=list[CudaSharedMemoryStatus])
@router.get(CUDA + "/region/{region}/status", response_model=list[CudaSharedMemoryStatus])
async def cuda_status(state: StateDep, region: str = "") -> Response:
    """The registered CUDA shared-memory regions (one, when named)."""
    return json_response(state.shared_memory.status("cuda", region))


@router.post(
    CUDA + "/region/{region}/register", summary="Register a CUDA shared-memory region", **EMPTY
)
async def cuda_register(region: str, request: Request, state: StateDep) -> Response:
    _cuda(state)
    body = await read_body(
        request, state.settings.max_request_bytes, state.settings.body_timeout_s, control=True
    )
    req = validate(CudaSharedMemoryRegister, await parse_json(body.json))
    try:
        # Triton's C++ client (libb64, as perf_analyzer sends it) breaks the text into lines.
        raw = base64.b64decode("".join(req.raw_handle.b64.split()), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BadRequestError(f"raw_handle.b64 is not valid base64: {exc}") from None
    from dmlserve.service.cudashm import register

    await register(state, check_name(region), raw, req.device_id, req.byte_size)
    return _done()


@router.post(CUDA + "/unregister", summary="Unregister every CUDA shared-memory region", **EMPTY)
@router.post(CUDA + "/region/{region}/unregister", summary="Unregister one", **EMPTY)
async def cuda_unregister(state: StateDep, region: str = "") -> Response:
    state.shared_memory.unregister("cuda", region)
    return _done()
