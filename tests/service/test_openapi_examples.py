"""Every example of the OpenAPI document validates against its schema and runs with success.

Read from the served document, as Swagger UI's "Try it out" reads it: each request body example
and each `{name}` parameter example of the same operator. Registrations run first, so the
examples that execute by name find their operator; deletions run last.
"""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema

from dmlserve.kernels import OPERATORS


def _validator(doc: dict[str, Any], schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    # the document's components resolve the schema's "#/components/schemas/..." references
    return jsonschema.Draft202012Validator({**schema, "components": doc["components"]})


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    ops = [
        (method, path, op)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method != "parameters"
    ]

    def phase(entry: tuple[str, str, dict[str, Any]]) -> int:
        method, path, _ = entry
        return 2 if method == "delete" else int("{name}" in path)

    return sorted(ops, key=phase)


def _name_example(op: dict[str, Any], key: str) -> str | None:
    for parameter in op.get("parameters", []):
        if parameter["in"] == "path" and parameter["name"] == "name":
            value: str = parameter["examples"][key]["value"]
            return value
    return None


async def test_every_example_validates_and_succeeds(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi.json")).json()
    ran: dict[tuple[str, str], set[str]] = {}
    for method, path, op in _operations(doc):
        content = op.get("requestBody", {}).get("content", {}).get("application/json")
        bodies = (content or {}).get("examples")
        if content is not None:
            assert bodies, f"{method} {path} has a JSON body but no examples"
            assert set(bodies) == set(OPERATORS), (method, path)
        keys = list(bodies or OPERATORS)
        for key in keys:
            name = _name_example(op, key)
            if "{name}" in path:
                assert name is not None, f"{method} {path} has no example for {{name}}"
            url = path.replace("{name}", name or "")
            request: dict[str, Any] = {}
            if bodies:
                body = bodies[key]["value"]
                _validator(doc, content["schema"]).validate(body)
                request["json"] = body
            r = await client.request(method.upper(), url, **request)
            assert r.status_code in (200, 201), (method, url, r.text)
            success = op["responses"].get(str(r.status_code), {})
            schema = success.get("content", {}).get("application/json", {}).get("schema")
            if schema:
                _validator(doc, schema).validate(r.json())
            ran.setdefault((method, path), set()).add(key)
    assert ("post", "/v1/execute") in ran and ("post", "/v2/models/{name}/infer") in ran
    # the examples leave nothing registered behind
    assert (await client.get("/v1/operators")).json()["operators"] == []


async def test_examples_compute_what_the_operator_computes(client: httpx.AsyncClient) -> None:
    """The inline and the registered examples of one operator give the same output."""
    doc = (await client.get("/openapi.json")).json()

    def examples(path: str) -> dict[str, Any]:
        body = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        return {k: v["value"] for k, v in body["examples"].items()}

    inline, registrations = examples("/v1/execute"), examples("/v1/operators")
    by_name = examples("/v1/operators/{name}/execute")
    for key in OPERATORS:
        direct = await client.post("/v1/execute", json=inline[key])
        registered = (await client.post("/v1/operators", json=registrations[key])).json()
        again = await client.post(f"/v1/operators/{registered['name']}/execute", json=by_name[key])
        assert direct.status_code == again.status_code == 200
        assert direct.json()["outputs"] == again.json()["outputs"]
        await client.delete(f"/v1/operators/{registered['name']}")
