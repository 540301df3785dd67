"""The route class of the API routers: API key first, then a lean call of `direct` endpoints."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.responses import Response

from dmlserve.service.auth import authorize
from dmlserve.service.state import state_of

E = TypeVar("E", bound=Callable[..., Any])


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
