"""The route class of the API routers: API key first, then a lean call of `direct` endpoints;
and `DirectRoutes`, which answers the POSTs of `direct` endpoints without FastAPI's layers."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Coroutine, Iterable, Sequence
from http import HTTPStatus
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.routing import APIRoute
from starlette.convertors import Convertor
from starlette.middleware import Middleware
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from dmlserve.service.auth import authorize
from dmlserve.service.errors import ServiceError
from dmlserve.service.responses import render_error
from dmlserve.service.state import state_of

E = TypeVar("E", bound=Callable[..., Any])


def error_responses(
    media_type: str, schema: str, statuses: Iterable[int]
) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI answers of error `statuses`: a body of `media_type` that is `schema`."""
    return {
        status: {
            "description": HTTPStatus(status).phrase,
            "content": {media_type: {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
        }
        for status in statuses
    }


def direct(endpoint: E) -> E:
    """Mark an endpoint that takes the request (and string path parameters) and returns a
    Response: a `KeyedRoute` calls it without FastAPI's per-request parameter machinery."""
    endpoint.direct_endpoint = True  # type: ignore[attr-defined]
    return endpoint


class KeyedRoute(APIRoute):
    """A route that checks the API key before anything else of the route runs.

    Given as a router's `route_class`, it covers every route of that router, in the place a
    router dependency would run (after routing, before parameters and body), without the
    per-request cost of FastAPI's dependency resolution. Endpoints marked `direct` are called
    with the request and the path parameters as they are (FastAPI's handler would solve an
    empty dependency graph and re-wrap a response the endpoint already built).
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        endpoint = self.endpoint
        if getattr(endpoint, "direct_endpoint", False):
            return functools.partial(call_direct, endpoint)
        handler = super().get_route_handler()

        async def keyed(request: Request) -> Response:
            check_key(request)
            return await handler(request)

        return keyed


async def call_direct(endpoint: Callable[..., Any], request: Request) -> Response:
    """A direct endpoint's whole handling, wherever it is dispatched from: the API key, then
    the endpoint as it is, with the path's parameters."""
    check_key(request)
    response: Response = await endpoint(request=request, **request.path_params)
    return response


def check_key(request: Request) -> None:
    """401 unless the request carries an API key of the service's (when it has any)."""
    keys = state_of(request).settings.api_keys
    if keys:  # with auth off the header is not even looked for
        authorize(keys, request.headers.get("authorization", ""))


class DirectRoutes:
    """The POSTs of the `direct` endpoints of `routers`, answered before FastAPI's own layers.

    The operator endpoints serve most requests. FastAPI would pass each one through its error,
    telemetry and body-limit middleware, find the route by trying each route in turn, then run
    its exception and exit-stack layers: tens of microseconds per request before the endpoint
    starts. The app asks `match` first; a request that matches goes through `stack`, the
    service's own middleware (the same classes every other request passes), to what its
    `KeyedRoute` handler does: the API key checked (`check_key`), the endpoint called as it is;
    a `ServiceError` is rendered as the error handler renders it, and any other exception is
    answered by the middleware as a defect. Every other request (another method, path or a
    `root_path`) goes to FastAPI.
    """

    def __init__(self, routers: Iterable[APIRouter], middleware: Sequence[Middleware]) -> None:
        self.routes: list[tuple[re.Pattern[str], dict[str, Convertor[Any]], APIRoute]] = [
            (route.path_regex, route.param_convertors, route)
            for router in routers
            for route in router.routes
            if isinstance(route, KeyedRoute)
            and getattr(route.endpoint, "direct_endpoint", False)
            and route.methods == {"POST"}
        ]
        app: ASGIApp = self._dispatch
        for cls, args, kwargs in reversed(middleware):
            app = cls(app, *args, **kwargs)
        self.stack = app

    def match(self, scope: Scope) -> bool:
        """Whether `scope` (an HTTP request) is for a direct endpoint; if so, the route and
        its path parameters are set in it, as FastAPI's router sets them."""
        if scope["method"] != "POST" or scope.get("root_path"):
            return False
        path = scope["path"]
        for regex, convertors, route in self.routes:
            found = regex.match(path)
            if found is not None:
                params = {k: convertors[k].convert(v) for k, v in found.groupdict().items()}
                scope["path_params"], scope["route"] = params, route
                scope["endpoint"] = route.endpoint
                return True
        return False

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            response = await call_direct(scope["endpoint"], request)
        except ServiceError as exc:
            response = render_error(scope["path"], exc)
        await response(scope, receive, send)
