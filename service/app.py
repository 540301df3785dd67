"""`create_app`: the FastAPI application, its lifespan, middleware and routers."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import TypeAdapter
from starlette.middleware import Middleware
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from dmlserve import __version__
from dmlserve.kernels import BackendUnavailableError, Operator
from dmlserve.service import landing
from dmlserve.service.compression import Compression
from dmlserve.service.examples import add_examples
from dmlserve.service.guard import Guard
from dmlserve.service.observability import RequestContextMiddleware
from dmlserve.service.repository import ModelRepository, RepositoryError
from dmlserve.service.responses import install_error_handlers
from dmlserve.service.routes import repository, shm, system, v1, v2
from dmlserve.service.routes._route import DirectRoutes
from dmlserve.service.schemas import (
    ExecuteRequest,
    InferRequest,
    OperatorExecuteRequest,
    Problem,
    RegisterRequest,
    V2Error,
)
from dmlserve.service.settings import Settings, get_settings
from dmlserve.service.state import ServiceState

if TYPE_CHECKING:
    from dmlserve.service.rpc.server import GrpcServer

logger = logging.getLogger("dmlserve")

DESCRIPTION = (
    "DirectML's FOLD, UNFOLD, PADDING, AVERAGE_POOLING and CONVOLUTION_INTEGER with DirectML's "
    "semantics: `/v1` takes operator descriptors with DirectML field names; `/v2` is the "
    "KServe v2 Open Inference Protocol over registered operators.\n\n"
    "Tensors are row-major. The windowed operators take `[N, C, spatial...]`, DirectML's "
    "`{ BatchCount, ChannelCount, ... }`, with DimensionCount spatial sizes; PADDING takes any "
    "rank. Each operator's schema (`FoldOperator`, ...) gives the Sizes of its tensors. Every "
    "request body has one example per operator: pick one under Try it out and Execute."
)


class StartupError(RuntimeError):
    """The service cannot start as configured (e.g. the requested backend is unavailable)."""


class ServiceApp(FastAPI):
    """FastAPI, with the operator endpoints' POSTs answered by `direct` before FastAPI's own
    layers (through the same service middleware as every other request)."""

    direct: DirectRoutes | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        direct = self.direct
        if direct is not None and scope["type"] == "http" and direct.match(scope):
            scope["app"] = self  # what Starlette sets first: `Request.app` reads it
            await direct.stack(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the service. Start-up work (backend choice, warm-up) runs in the lifespan."""
    settings = settings or get_settings()
    state = ServiceState(settings)
    if settings.model_repository is not None:
        state.repository = ModelRepository(
            settings.model_repository, settings.model_control, settings
        )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            await state.start()
        except (BackendUnavailableError, RepositoryError) as exc:
            logger.error("start-up failed", extra={"reason": str(exc)})
            raise StartupError(str(exc)) from exc
        grpc_server = await _start_grpc(state)
        # What start-up made (modules, the app, compiled kernels, models) lives as long as the
        # service. Frozen, it is left out of the collector's full passes, which would otherwise
        # walk all of it (tens of milliseconds with a GPU stack loaded) while every request in
        # flight waits. Thawed at shutdown, so a process that outlives the app can collect it.
        gc.collect()
        gc.freeze()
        logger.info("ready", extra={"backend": state.device.name if state.device else None})
        poller = None
        if state.repository is not None and settings.model_control == "poll":
            # A plain task, not a task group: the lifespan may end in another task than it began.
            poller = asyncio.create_task(state.repository.poll_forever(state))
        try:
            yield
        finally:
            state.ready = False
            if poller is not None:
                poller.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await poller
            if grpc_server is not None:
                await grpc_server.stop(settings.shutdown_timeout_s)
            state.shared_memory.close()
            gc.unfreeze()
            logger.info("shut down")

    app = ServiceApp(
        title="dmlserve",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.dmlserve = state
    install_error_handlers(app)
    app.add_exception_handler(404, landing.on_unknown_route)
    middleware = [
        Middleware(RequestContextMiddleware),
        Middleware(Guard, state=state),  # inside the access log, which then sees its status
        # gzip only when the client asks; Starlette never emits brotli (tritonclient can't read it).
        Middleware(Compression, minimum_size=1024),
    ]
    for m in reversed(middleware):
        app.add_middleware(m.cls, *m.args, **m.kwargs)
    app.include_router(v1.router)
    app.include_router(v2.health)
    app.include_router(v2.router)
    app.include_router(shm.router)
    app.include_router(repository.router)
    app.include_router(system.router)
    app.mount(system.SWAGGER_PREFIX, StaticFiles(directory=system.STATIC_DIR / "swagger-ui"))
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    # The operator endpoints' POSTs skip FastAPI's layers (every other request passes them).
    app.direct = DirectRoutes((v1.router, v2.router), middleware)
    return app


async def _start_grpc(state: ServiceState) -> GrpcServer | None:
    """The gRPC server on the app's event loop, unless `grpc_port` is 0."""
    if not state.settings.grpc_port:
        return None
    from dmlserve.service.rpc.server import GrpcServer

    server = GrpcServer(state)
    try:
        await server.start()
    except RuntimeError as exc:
        logger.error("start-up failed", extra={"reason": str(exc), "address": server.address})
        raise StartupError(f"gRPC cannot listen on {server.address}: {exc}") from exc
    return server


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document plus the envelope schemas the routes read from raw bodies."""
    if app.openapi_schema is None:
        doc = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        schemas = doc.setdefault("components", {}).setdefault("schemas", {})
        ref = "#/components/schemas/{model}"
        models = (ExecuteRequest, OperatorExecuteRequest, RegisterRequest, InferRequest, Problem)
        for model in (*models, V2Error):
            js = model.model_json_schema(ref_template=ref)
            schemas.update(js.pop("$defs", {}))
            field = js.get("properties", {}).get("operator")
            if field is not None:
                # Validated by `kernels` from a plain object; documented with its real schema.
                js["properties"]["operator"] = {
                    "$ref": ref.format(model="Operator"),
                    "description": field.get("description", ""),
                }
            schemas[model.__name__] = js
        # The descriptor schema is the operator layer's own (one schema for server and SDK).
        operator = TypeAdapter(Operator).json_schema(by_alias=True, ref_template=ref)
        schemas.update(operator.pop("$defs", {}))
        schemas["Operator"] = operator
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        add_examples(doc)
        app.openapi_schema = doc
    return app.openapi_schema
