"""The RPCs of `inference.GRPCInferenceService`, on the state the HTTP routes share.

Each handler takes the request message and returns the response message; service errors leave
as they are (`server` maps them to status codes). `OPEN` names the RPCs served without an API
key, as the HTTP health endpoints are.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from dmlserve.service import kserve, repository
from dmlserve.service.errors import NotFoundError
from dmlserve.service.model_config import service_model_config
from dmlserve.service.pipeline import run
from dmlserve.service.registry import RegisteredOperator, check_name
from dmlserve.service.rpc.infer import GrpcInferExchange
from dmlserve.service.rpc.third_party.triton import grpc_service_pb2 as pb
from dmlserve.service.rpc.third_party.triton import model_config_pb2 as mc
from dmlserve.service.shm import Kind, SystemRegion
from dmlserve.service.state import ServiceState

Handler = Callable[[ServiceState, Any], Awaitable[Message]]
HANDLERS: dict[str, Handler] = {}
OPEN = frozenset({"ServerLive", "ServerReady"})


def rpc(fn: Handler) -> Handler:
    HANDLERS[fn.__name__] = fn
    return fn


def _model(state: ServiceState, name: str, version: str) -> RegisteredOperator:
    reg = state.registry.get(name)
    if version not in ("", kserve.VERSION):
        raise NotFoundError(
            f"model {name!r} has no version {version!r}; its version is {kserve.VERSION}"
        )
    return reg


@rpc
async def ServerLive(state: ServiceState, request: pb.ServerLiveRequest) -> Message:  # noqa: N802
    return pb.ServerLiveResponse(live=True)


@rpc
async def ServerReady(state: ServiceState, request: pb.ServerReadyRequest) -> Message:  # noqa: N802
    return pb.ServerReadyResponse(ready=state.ready)


@rpc
async def ModelReady(state: ServiceState, request: pb.ModelReadyRequest) -> Message:  # noqa: N802
    try:
        _model(state, request.name, request.version)
    except NotFoundError:
        return pb.ModelReadyResponse(ready=False)
    return pb.ModelReadyResponse(ready=state.ready)


@rpc
async def ServerMetadata(state: ServiceState, request: pb.ServerMetadataRequest) -> Message:  # noqa: N802
    return json_format.ParseDict(
        kserve.server_metadata(state.shared_memory), pb.ServerMetadataResponse()
    )


@rpc
async def ModelMetadata(state: ServiceState, request: pb.ModelMetadataRequest) -> Message:  # noqa: N802
    reg = _model(state, request.name, request.version)
    return json_format.ParseDict(kserve.model_metadata(reg), pb.ModelMetadataResponse())


@rpc
async def ModelConfig(state: ServiceState, request: pb.ModelConfigRequest) -> Message:  # noqa: N802
    reg = _model(state, request.name, request.version)
    config = service_model_config(state, reg)
    return pb.ModelConfigResponse(config=json_format.ParseDict(config, mc.ModelConfig()))


@rpc
async def ModelStatistics(state: ServiceState, request: pb.ModelStatisticsRequest) -> Message:  # noqa: N802
    if request.name:
        regs = [_model(state, request.name, request.version)]
    else:
        regs = state.registry.list()
    return json_format.ParseDict(kserve.model_statistics(regs), pb.ModelStatisticsResponse())


@rpc
async def RepositoryIndex(state: ServiceState, request: pb.RepositoryIndexRequest) -> Message:  # noqa: N802
    models = repository.index(state, request.ready)
    return json_format.ParseDict({"models": models}, pb.RepositoryIndexResponse())


@rpc
async def RepositoryModelLoad(  # noqa: N802
    state: ServiceState, request: pb.RepositoryModelLoadRequest
) -> Message:
    repository.refuse_overrides(request.parameters)
    await repository.repository_of(state).load(state, request.model_name)
    return pb.RepositoryModelLoadResponse()


@rpc
async def RepositoryModelUnload(  # noqa: N802
    state: ServiceState, request: pb.RepositoryModelUnloadRequest
) -> Message:
    await repository.repository_of(state).unload(state, request.model_name)
    return pb.RepositoryModelUnloadResponse()


@rpc
async def ModelInfer(state: ServiceState, request: pb.ModelInferRequest) -> Message:  # noqa: N802
    reg = _model(state, request.model_name, request.model_version)
    s = state.settings
    exchange = GrpcInferExchange(request, reg, s.max_tensor_bytes, state.shared_memory)
    try:
        return await run(state, exchange)
    finally:
        exchange.leases.release()


# --- shared memory ---------------------------------------------------------------------------


def _region_rpcs(kind: Kind, prefix: str) -> None:
    """`{prefix}Status` and `{prefix}Unregister`: the same for both kinds of region."""
    status_response: type[Message] = getattr(pb, f"{prefix}StatusResponse")
    unregister_response: type[Message] = getattr(pb, f"{prefix}UnregisterResponse")

    async def status(state: ServiceState, request: Any) -> Message:
        regions = state.shared_memory.status(kind, request.name)
        return json_format.ParseDict(
            {"regions": {r["name"]: r for r in regions}}, status_response()
        )

    async def unregister(state: ServiceState, request: Any) -> Message:
        state.shared_memory.unregister(kind, request.name)
        return unregister_response()

    HANDLERS[f"{prefix}Status"] = status
    HANDLERS[f"{prefix}Unregister"] = unregister


_region_rpcs("system", "SystemSharedMemory")
_region_rpcs("cuda", "CudaSharedMemory")


@rpc
async def SystemSharedMemoryRegister(  # noqa: N802
    state: ServiceState, request: pb.SystemSharedMemoryRegisterRequest
) -> Message:
    name = check_name(request.name)
    region = SystemRegion.open(name, request.key, request.offset, request.byte_size)
    state.shared_memory.register(region)
    return pb.SystemSharedMemoryRegisterResponse()


@rpc
async def CudaSharedMemoryRegister(  # noqa: N802
    state: ServiceState, request: pb.CudaSharedMemoryRegisterRequest
) -> Message:
    state.shared_memory.require_cuda()
    from dmlserve.service.cudashm import register

    name = check_name(request.name)
    await register(state, name, request.raw_handle, request.device_id, request.byte_size)
    return pb.CudaSharedMemoryRegisterResponse()
