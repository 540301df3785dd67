"""The route class of the API routers: API key first, then a lean call of `direct` endpoints;
and `DirectRoutes`, which dispatches the POSTs of `direct` endpoints without FastAPI's router."""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine, Iterable
from http import HTTPStatus
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.routing import APIRoute
from starlette.convertors import Convertor
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
        handler: Callable[[Request], Coroutine[Any, Any, Response]]
        if getattr(endpoint, "direct_endpoint", False):

            async def call_direct(request: Request) -> Response:
                response: Response = await endpoint(request=request, **request.path_params)
                return response

            handler = call_direct
        else:
            handler = super().get_route_handler()

        async def keyed(request: Request) -> Response:
            keys = state_of(request).settings.api_keys
            authorize(keys, request.headers.get("authorization", ""))
            return await handler(request)

        return keyed


Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class DirectRoutes:
    """A POST to a `direct` endpoint of `routers` goes straight to its `KeyedRoute` handler.

    The operator endpoints serve most requests. FastAPI's router would find the same route
    by trying each route in turn, then run its exception and exit-stack layers, tens of
    microseconds per request before the endpoint starts. Placed innermost among the
    middleware, this changes nothing else: the API key is checked by the same handler, a
    `ServiceError` is rendered as the error handler renders it, any other exception goes on
    to the server-error handler, and every other request (another method, path or a
    `root_path`) goes on to FastAPI.
    """

    def __init__(self, app: ASGIApp, routers: Iterable[APIRouter]) -> None:
        self.app = app
        self.routes: list[tuple[re.Pattern[str], dict[str, Convertor[Any]], APIRoute, Handler]]
        self.routes = [
            (route.path_regex, route.param_convertors, route, route.get_route_handler())
            for router in routers
            for route in router.routes
            if isinstance(route, KeyedRoute)
            and getattr(route.endpoint, "direct_endpoint", False)
            and route.methods == {"POST"}
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            path = scope["path"]
            for regex, convertors, route, handler in self.routes:
                match = regex.match(path)
                if match is not None:
                    params = {k: convertors[k].convert(v) for k, v in match.groupdict().items()}
                    scope["path_params"], scope["route"] = params, route
                    scope["endpoint"] = route.endpoint
                    request = Request(scope, receive)
                    try:
                        response = await handler(request)
                    except ServiceError as exc:
                        response = render_error(path, exc)
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)
