"""What a newcomer meets first: the landing page at `/`, and the hint of an unknown route's 404.

`GET /` answers JSON unless the client prefers HTML: curl, scripts and probes (`Accept: */*`)
get a document they can parse, a browser (which asks for `text/html` first) a page whose links
it can follow. Both carry the same facts: name, version, backend, readiness, the operators,
the links, and one example request per operator.
"""

from __future__ import annotations

import difflib
import html
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from dmlserve import __version__
from dmlserve.kernels import OPERATORS
from dmlserve.service.errors import NotFoundError
from dmlserve.service.examples import curl
from dmlserve.service.responses import json_response, render_error
from dmlserve.service.state import ServiceState

LINKS = {
    "docs": "/docs",
    "openapi": "/openapi.json",
    "live": "/v2/health/live",
    "ready": "/v2/health/ready",
    "metrics": "/metrics",
    "v2": "/v2",
}
_MAX_SHOWN = 256  # characters of an unknown path compared with the routes and echoed back
_TITLES = {
    "docs": "API documentation (Swagger UI)",
    "openapi": "OpenAPI document",
    "live": "liveness",
    "ready": "readiness",
    "metrics": "Prometheus metrics",
    "v2": "KServe v2 server metadata",
}


def _quality(accept: str, media: str) -> float:
    """The q-value `accept` gives `media` exactly (0 when it is not named)."""
    for part in accept.split(","):
        kind, *params = (p.strip() for p in part.split(";"))
        if kind.lower() == media:
            for param in params:
                key, _, value = param.partition("=")
                if key.strip().lower() == "q":
                    try:
                        return float(value)
                    except ValueError:
                        return 0.0
            return 1.0
    return 0.0


def prefers_html(accept: str) -> bool:
    """Whether the client asked for HTML at least as much as for JSON."""
    q_html = _quality(accept, "text/html")
    return q_html > 0 and q_html >= _quality(accept, "application/json")


def landing(state: ServiceState, base: str, root: str) -> dict[str, Any]:
    """The landing document; `base` is the URL the client reached, `root` the path prefix."""
    device = state.device
    return {
        "name": "dmlserve",
        "version": __version__,
        "backend": device.name if device else None,
        "ready": state.ready,
        "operators": list(OPERATORS),
        "links": {key: root + path for key, path in LINKS.items()},
        "examples": {spec.type: curl(base, spec) for spec in OPERATORS.values()},
    }


def render(request: Request, state: ServiceState) -> Response:
    root = request.scope.get("root_path", "")
    base = str(request.base_url).rstrip("/")
    doc = landing(state, base, root)
    if not prefers_html(request.headers.get("accept", "")):
        response = json_response(doc)
    else:
        response = HTMLResponse(_page(doc))
    response.headers["Vary"] = "Accept"
    return response


def _page(doc: dict[str, Any]) -> str:
    e = html.escape
    backend = doc["backend"] or "starting"
    links = "".join(
        f'<li><a href="{e(href)}">{e(href)}</a> {e(_TITLES[key])}</li>'
        for key, href in doc["links"].items()
    )
    examples = "".join(
        f"<h3>{e(op)}</h3><pre>{e(cmd)}</pre>" for op, cmd in doc["examples"].items()
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>dmlserve {e(doc['version'])}</title>"
        "<style>body{font:16px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;"
        "padding:0 1rem}pre{background:#f4f4f4;padding:.5rem;white-space:pre-wrap;"
        "overflow-wrap:anywhere}</style></head><body>"
        f"<h1>dmlserve {e(doc['version'])}</h1>"
        f"<p>DirectML's {e(', '.join(doc['operators']))} with DirectML's semantics. "
        f"Backend: <b>{e(backend)}</b>; ready: <b>{str(doc['ready']).lower()}</b>.</p>"
        f"<ul>{links}</ul>"
        "<h2>Try it</h2><p>Tensors are row-major; the windowed operators take "
        "<code>[N, C, spatial...]</code> (DirectML's <code>{ BatchCount, ChannelCount, ... }"
        "</code>): each operator's schema in the documentation gives its tensors' Sizes.</p>"
        f"{examples}</body></html>"
    )


def _routes(request: Request) -> dict[str, list[str]]:
    """Path template -> methods, of every documented route and every landing link."""
    found = {path: ["GET"] for path in ("/", *LINKS.values())}
    for path, item in request.app.openapi().get("paths", {}).items():
        methods = [m.upper() for m in item if m != "parameters"]
        found[path] = sorted({*found.get(path, []), *methods})
    return found


def _concrete(template: str, path: str) -> str:
    """`template` with its `{parameters}` taken from `path` where it has that segment."""
    given = path.split("/")
    parts = [
        given[i] if part.startswith("{") and i < len(given) and given[i] else part
        for i, part in enumerate(template.split("/"))
    ]
    return "/".join(parts)


async def on_unknown_route(request: Request, exc: Exception) -> Response:
    """The 404 of a path no route serves (the router's own): the path, the nearest routes and
    where the API is described, in the path's error shape."""
    root = request.scope.get("root_path", "")
    path, method = request.scope["path"], request.method
    if root and path.startswith(root):
        path = path[len(root) :]
    candidates: dict[str, list[str]] = {}
    for template, methods in _routes(request).items():
        candidates.setdefault(_concrete(template, path), []).extend(methods)
    near: list[str] = []
    if len(path) <= _MAX_SHOWN:
        near = difflib.get_close_matches(path, list(candidates), n=3, cutoff=0.6)
    else:  # a client's arbitrary path is neither compared nor echoed in full
        path = path[:_MAX_SHOWN] + "..."
    missing = f"no route serves {method} {root}{path}"
    hint = " or ".join(f"{'/'.join(candidates[p])} {root}{p}" for p in near)
    detail = (
        f"{missing}{f'; did you mean {hint}?' if near else '.'} The API is described at "
        f"{root}/docs (OpenAPI: {root}/openapi.json); GET {root or '/'} links the endpoints"
    )
    error = NotFoundError(detail, errors=[{"loc": ["path"], "msg": missing}])
    return render_error(path, error)
