"""`GET /` (JSON for programs, HTML for browsers) and the 404 of a path no route serves."""

from __future__ import annotations

import shlex

import httpx
import pytest

from dmlserve import __version__
from dmlserve.kernels import OPERATORS
from dmlserve.service import Settings, create_app
from tests.backend import TEST_BACKEND
from tests.service.conftest import app_client

BROWSER_ACCEPT = (
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
)


async def test_landing_json_names_the_service_and_links_that_work(
    any_client: httpx.AsyncClient,
) -> None:
    r = await any_client.get("/")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert "Accept" in r.headers["vary"].split(", ")
    doc = r.json()
    assert (doc["name"], doc["version"]) == ("dmlserve", __version__)
    assert (doc["backend"], doc["ready"]) == (TEST_BACKEND, True)
    assert doc["operators"] == list(OPERATORS)
    assert set(doc["links"]) == {"docs", "openapi", "live", "ready", "metrics", "v2"}
    for href in doc["links"].values():
        assert (await any_client.get(href)).status_code == 200, href


async def test_landing_examples_run_as_shown(any_client: httpx.AsyncClient) -> None:
    """Each example is a curl command; sent as it is written, it succeeds."""
    examples = (await any_client.get("/")).json()["examples"]
    assert set(examples) == set(OPERATORS)
    for command in examples.values():
        words = shlex.split(command)
        assert words[:2] == ["curl", "-s"]
        url = words[2]
        assert url.startswith(str(any_client.base_url).rstrip("/") + "/v1/execute"), url
        header = words[words.index("-H") + 1]
        body = words[words.index("-d") + 1]
        name, _, value = header.partition(": ")
        r = await any_client.post(url, content=body, headers={name: value})
        assert r.status_code == 200, (command, r.text)


@pytest.mark.parametrize(
    ("accept", "html"),
    [
        (BROWSER_ACCEPT, True),
        ("text/html", True),
        ("*/*", False),
        ("", False),
        ("application/json", False),
        ("application/json, text/html;q=0.9", False),
        ("text/html;q=0.5, application/json;q=0.9", False),
        ("text/html;q=0, */*", False),
    ],
)
async def test_landing_page_for_browsers(
    client: httpx.AsyncClient, accept: str, html: bool
) -> None:
    r = await client.get("/", headers={"accept": accept})
    assert r.status_code == 200
    if not html:
        assert r.headers["content-type"] == "application/json"
        return
    assert r.headers["content-type"].startswith("text/html")
    page = r.text
    doc = (await client.get("/", headers={"accept": "application/json"})).json()
    assert f"dmlserve {__version__}" in page and f"<b>{TEST_BACKEND}</b>" in page
    for href in doc["links"].values():
        assert f'href="{href}"' in page
    for op in OPERATORS:
        assert f"<h3>{op}</h3>" in page


async def test_landing_answers_before_ready_and_without_a_key() -> None:
    """Open like the health endpoints; before start-up it says so instead of failing."""
    app = create_app(Settings(backend=TEST_BACKEND, api_keys=("secret",)))
    transport = httpx.ASGITransport(app=app)  # no lifespan: the service has not started
    async with httpx.AsyncClient(transport=transport, base_url="http://dmlserve") as c:
        doc = (await c.get("/")).json()
    assert (doc["backend"], doc["ready"]) == (None, False)
    async with app_client(api_keys=("secret",)) as c:
        assert (await c.get("/")).status_code == 200
        assert (await c.get("/v1/operators")).status_code == 401


async def test_unknown_v1_path_names_the_path_and_the_nearest_route(
    any_client: httpx.AsyncClient,
) -> None:
    r = await any_client.get("/v1/execut")
    assert r.status_code == 404
    assert r.headers["content-type"] == "application/problem+json"
    problem = r.json()
    assert problem["detail"].startswith("no route serves GET /v1/execut; did you mean ")
    assert "POST /v1/execute" in problem["detail"] and "/docs" in problem["detail"]
    assert problem["errors"] == [{"loc": ["path"], "msg": "no route serves GET /v1/execut"}]


async def test_unknown_path_fills_in_the_name(any_client: httpx.AsyncClient) -> None:
    r = await any_client.post("/v1/operator/pool/execute", json={})
    assert r.status_code == 404
    assert "POST /v1/operators/pool/execute" in r.json()["detail"]


async def test_unknown_v2_path_is_a_kserve_error_with_the_hint(
    any_client: httpx.AsyncClient,
) -> None:
    r = await any_client.get("/v2/health")
    assert r.status_code == 404
    assert r.headers["content-type"] == "application/json"
    (error,) = r.json().values()
    assert error.startswith("no route serves GET /v2/health; did you mean ")
    assert "GET /v2/health/live" in error and "GET /v2/health/ready" in error


async def test_a_path_like_no_route_points_at_the_docs(client: httpx.AsyncClient) -> None:
    detail = (await client.get("/nothing/like/it")).json()["detail"]
    assert "did you mean" not in detail
    assert detail.startswith("no route serves GET /nothing/like/it.") and "/docs" in detail


async def test_a_long_unknown_path_is_not_echoed_whole(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/" + "x" * 5000)
    assert r.status_code == 404
    assert len(r.text) < 1000


async def test_an_unknown_operator_name_keeps_its_own_404(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/operators/missing")
    assert r.status_code == 404
    assert r.json()["detail"] == "no operator is registered under the name 'missing'"
