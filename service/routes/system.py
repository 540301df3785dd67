"""The landing page, metrics and the API documentation (Swagger UI from local files, no CDN)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.responses import HTMLResponse, Response

from dmlserve.service import landing
from dmlserve.service.metrics import CONTENT_TYPE
from dmlserve.service.state import StateDep

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
SWAGGER_PREFIX = "/docs/static"

router = APIRouter(include_in_schema=False)


@router.get("/")
async def root(request: Request, state: StateDep) -> Response:
    return landing.render(request, state)


@router.get("/metrics")
async def metrics(state: StateDep) -> Response:
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)


@router.get("/docs")
async def docs(request: Request) -> HTMLResponse:
    root = request.scope.get("root_path", "")
    return get_swagger_ui_html(
        openapi_url=f"{root}/openapi.json",
        title="dmlserve API",
        swagger_js_url=f"{root}{SWAGGER_PREFIX}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{SWAGGER_PREFIX}/swagger-ui.css",
        swagger_favicon_url=f"{root}{SWAGGER_PREFIX}/favicon-32x32.png",
        # No call to the public validator service: the page works offline.
        swagger_ui_parameters={"validatorUrl": None},
    )
