"""The gRPC server: `grpc.aio` on the HTTP server's event loop, started and stopped with the app.

Every method of the service descriptor that `handlers` implements is served (the others answer
UNIMPLEMENTED, as gRPC does for an unknown method). Around each call: the API key from the
`authorization` metadata (except `handlers.OPEN`), and service errors mapped to status codes
with their message (`Retry-After` as trailing metadata where the HTTP answer has it).
Messages are limited to `max_request_bytes` in (RESOURCE_EXHAUSTED beyond, as HTTP's 413) and
the largest output plus its envelope out.
"""

from __future__ import annotations

import logging
from typing import Any

import grpc
import grpc.aio

from dmlserve.service.auth import authorize
from dmlserve.service.errors import ServiceError
from dmlserve.service.rpc.handlers import HANDLERS, OPEN, Handler
from dmlserve.service.rpc.third_party.triton import grpc_service_pb2 as pb
from dmlserve.service.state import ServiceState

logger = logging.getLogger("dmlserve")

SERVICE = pb.DESCRIPTOR.services_by_name["GRPCInferenceService"]
MAX_MESSAGE = 2**31 - 1  # gRPC's and protobuf's own ceiling
ENVELOPE = 1 << 20  # room for a response's fields beside its tensor bytes

STATUS = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    404: grpc.StatusCode.NOT_FOUND,
    409: grpc.StatusCode.FAILED_PRECONDITION,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    415: grpc.StatusCode.INVALID_ARGUMENT,
    422: grpc.StatusCode.INVALID_ARGUMENT,
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    501: grpc.StatusCode.UNIMPLEMENTED,
    503: grpc.StatusCode.UNAVAILABLE,
    504: grpc.StatusCode.DEADLINE_EXCEEDED,
    507: grpc.StatusCode.RESOURCE_EXHAUSTED,
}


def status_code(exc: ServiceError) -> grpc.StatusCode:
    """The gRPC status of a service error (INTERNAL for a bug)."""
    return STATUS.get(exc.status, grpc.StatusCode.INTERNAL)


def _method(state: ServiceState, name: str, handler: Handler) -> grpc.RpcMethodHandler[Any, Any]:
    method = SERVICE.methods_by_name[name]
    request_type = pb.DESCRIPTOR.message_types_by_name[method.input_type.name]
    request_class: Any = getattr(pb, request_type.name)
    keyed = name not in OPEN

    async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            if keyed:
                authorize(state.settings.api_keys, _authorization(context))
            return await handler(state, request)
        except ServiceError as exc:
            error = exc
        except Exception:
            logger.exception("unhandled error", extra={"rpc": name})
            error = ServiceError("internal error; this is a bug")
        retry_after = error.headers.get("Retry-After")
        if retry_after is not None:
            context.set_trailing_metadata((("retry-after", retry_after),))
        await context.abort(status_code(error), error.detail)

    return grpc.unary_unary_rpc_method_handler(
        call,
        request_deserializer=request_class.FromString,
        response_serializer=lambda message: message.SerializeToString(),
    )


def _authorization(context: grpc.aio.ServicerContext[Any, Any]) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            return value if isinstance(value, str) else value.decode("latin-1")
    return ""


class GrpcServer:
    """KServe v2's GRPCInferenceService on `settings.host:settings.grpc_port`."""

    def __init__(self, state: ServiceState) -> None:
        self.state = state
        s = state.settings
        options = [
            ("grpc.max_receive_message_length", min(s.max_request_bytes, MAX_MESSAGE)),
            ("grpc.max_send_message_length", min(s.max_output_bytes + ENVELOPE, MAX_MESSAGE)),
        ]
        # Calls beyond the compute slots, the queue and a margin for metadata calls are refused
        # by gRPC itself (RESOURCE_EXHAUSTED), so no client can pile up request messages.
        limit = 2 * (s.max_concurrency + s.max_queue) + 16
        self.server = grpc.aio.server(options=options, maximum_concurrent_rpcs=limit)
        handlers = {name: _method(state, name, fn) for name, fn in HANDLERS.items()}
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE.full_name, handlers),)
        )
        self.address = f"{s.host}:{s.grpc_port}"
        self.port = 0

    async def start(self) -> None:
        """Bind and serve; RuntimeError when the port cannot be bound."""
        self.port = self.server.add_insecure_port(self.address)
        await self.server.start()
        logger.info("gRPC serving", extra={"address": self.address})

    async def stop(self, grace_s: float) -> None:
        """Refuse new calls, let running ones finish within `grace_s`, then cancel the rest."""
        await self.server.stop(grace_s)
