"""The OpenAPI document: every reference resolves, every route is described."""

from __future__ import annotations

from typing import Any

import httpx


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


async def test_every_reference_resolves(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi.json")).json()
    assert doc["openapi"].startswith("3.")
    schemas = doc["components"]["schemas"]
    refs = set(_refs(doc))
    assert refs, "the document uses references"
    for ref in refs:
        assert ref.startswith("#/components/schemas/"), ref
        assert ref.removeprefix("#/components/schemas/") in schemas, ref
    # The descriptor schema is the operator layer's: all five operators, DirectML names.
    variants = {r["$ref"].rsplit("/", 1)[1] for r in schemas["Operator"]["oneOf"]}
    assert variants == {
        "FoldOperator", "UnfoldOperator", "PaddingOperator", "AveragePoolingOperator",
        "ConvolutionIntegerOperator",
    }  # fmt: skip
    assert "WindowSizes" in schemas["FoldOperator"]["properties"]


async def test_every_route_is_documented(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/openapi.json")).json()["paths"]
    expected = {
        "/v1/execute": {"post"},
        "/v1/operators": {"get", "post"},
        "/v1/operators/{name}": {"get", "delete"},
        "/v1/operators/{name}/execute": {"post"},
        "/v2": {"get"},
        "/v2/health/live": {"get"},
        "/v2/health/ready": {"get"},
        "/v2/models/{name}": {"get"},
        "/v2/models/{name}/ready": {"get"},
        "/v2/models/{name}/infer": {"post"},
    }
    for path, methods in expected.items():
        assert path in paths, path
        assert methods <= set(paths[path]), (path, set(paths[path]))
    problem = paths["/v1/execute"]["post"]["responses"]["422"]["content"]
    assert "application/problem+json" in problem
