"""Every example of the OpenAPI document validates against its schema; the operator examples
run with success.

Read from the served document, as Swagger UI's "Try it out" reads it: each request body example
with the `{name}` parameter example of the same operator. Registrations run first, so the
examples that execute by name find their operator; reads of a registered name follow.
"""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema

from dmlserve.kernels import OPERATORS
from dmlserve.service.examples import BODIES, model_name

Operation = tuple[str, str, dict[str, Any]]


def _validator(doc: dict[str, Any], schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    # the document's components resolve the schema's "#/components/schemas/..." references
    return jsonschema.Draft202012Validator({**schema, "components": doc["components"]})


def _operations(doc: dict[str, Any]) -> list[Operation]:
    return [
        (method, path, op)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method != "parameters"
    ]


def _json_body(op: dict[str, Any]) -> dict[str, Any] | None:
    content: dict[str, Any] | None = (
        op.get("requestBody", {}).get("content", {}).get("application/json")
    )
    return content


def _schema_name(content: dict[str, Any]) -> str:
    return str(content.get("schema", {}).get("$ref", "")).rsplit("/", 1)[-1]


def _name_example(op: dict[str, Any], key: str) -> str | None:
    for parameter in op.get("parameters", []):
        if parameter["in"] == "path" and parameter["name"] == "name":
            value: str = parameter["examples"][key]["value"]
            return value
    return None


async def _check(
    client: httpx.AsyncClient, doc: dict[str, Any], method: str, url: str, op: dict[str, Any],
    body: Any = None,
) -> None:  # fmt: skip
    r = await client.request(method.upper(), url, json=body)
    assert r.status_code in (200, 201), (method, url, r.text)
    success = op["responses"].get(str(r.status_code), {})
    schema = success.get("content", {}).get("application/json", {}).get("schema")
    if schema:
        _validator(doc, schema).validate(r.json())


async def test_every_example_validates_against_its_schema(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi.json")).json()
    checked = 0
    for _, _, op in _operations(doc):
        for media in op.get("requestBody", {}).get("content", {}).values():
            for example in media.get("examples", {}).values():
                _validator(doc, media["schema"]).validate(example["value"])
                checked += 1
    assert checked >= len(BODIES) * len(OPERATORS)


async def test_every_operator_example_runs(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi.json")).json()
    operations = _operations(doc)
    with_examples = [
        (method, path, op, content)
        for method, path, op in operations
        if (content := _json_body(op)) is not None and _schema_name(content) in BODIES
    ]
    # every operator body schema has examples, one per operator
    assert {_schema_name(content) for *_, content in with_examples} == set(BODIES)
    registrations_first = sorted(with_examples, key=lambda entry: "{name}" in entry[1])
    for method, path, op, content in registrations_first:
        assert set(content["examples"]) == set(OPERATORS), (method, path)
        for key, example in content["examples"].items():
            name = _name_example(op, key)
            assert ("{name}" in path) == (name is not None), (method, path)
            url = path.replace("{name}", name or "")
            await _check(client, doc, method, url, op, example["value"])
    # the reads of each registered example by its name, then its removal
    for method, path, op in operations:
        if method == "get" and "{name}" in path:
            for key in OPERATORS:
                name = _name_example(op, key)
                if name is not None:
                    await _check(client, doc, method, path.replace("{name}", name), op)
    for spec in OPERATORS.values():
        assert (await client.delete(f"/v1/operators/{model_name(spec)}")).status_code == 200
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
