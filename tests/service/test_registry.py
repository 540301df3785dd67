"""The registry of operators: names, repeats, conflicts, listing, removal."""

from __future__ import annotations

import pytest

from dmlserve import kernels
from dmlserve.kernels import OperatorBase
from dmlserve.service.errors import NotFoundError, UnprocessableError
from dmlserve.service.registration import register
from dmlserve.service.registry import (
    OperatorRegistry,
    check_name,
    fingerprint,
    resolve_for_registration,
)
from tests.service.conftest import app_client

PAD = {
    "type": "PADDING",
    "StartPadding": [0, 1],
    "EndPadding": [0, 1],
    "InputTensor": {"DataType": "FLOAT32", "Sizes": [-1, 3]},
}


def _op(**changes: object) -> OperatorBase:
    return resolve_for_registration({**PAD, **changes})


def test_fingerprint_is_the_resolved_descriptor() -> None:
    # Spelled differently, resolved the same: one fingerprint.
    spelled = {**PAD, "type": "DML_OPERATOR_PADDING", "PaddingMode": "DML_PADDING_MODE_CONSTANT"}
    assert fingerprint(_op()) == fingerprint(resolve_for_registration(spelled))
    assert fingerprint(_op()) != fingerprint(_op(EndPadding=[0, 2]))


def test_generated_names_and_repeats() -> None:
    registry = OperatorRegistry()
    reg, created = registry.add(_op(), None)
    assert created and reg.name == f"padding-{fingerprint(_op())[:12]}"
    again, created = registry.add(_op(), None)
    assert again is reg and not created
    assert registry.find(_op(), None) is reg
    assert registry.find(_op(EndPadding=[0, 2]), None) is None


def test_a_name_holds_one_descriptor() -> None:
    registry = OperatorRegistry()
    reg, _ = registry.add(_op(), "pad")
    assert registry.find(_op(), "pad") is reg and registry.add(_op(), "pad") == (reg, False)
    with pytest.raises(UnprocessableError, match="already registered with another descriptor"):
        registry.find(_op(EndPadding=[0, 2]), "pad")
    with pytest.raises(UnprocessableError, match="already registered with another descriptor"):
        registry.add(_op(EndPadding=[0, 2]), "pad")
    # The same descriptor under a second name is a second registration.
    assert registry.add(_op(), "pad2")[1]


def test_read_list_and_remove() -> None:
    registry = OperatorRegistry()
    for name in ("b", "a", "c"):
        registry.add(_op(EndPadding=[0, ord(name)]), name)
    assert [r.name for r in registry.list()] == ["a", "b", "c"]
    assert registry.get("b").to_json()["operator"]["EndPadding"] == [0, ord("b")]
    assert registry.remove("b").name == "b"
    with pytest.raises(NotFoundError):
        registry.get("b")
    with pytest.raises(NotFoundError):
        registry.remove("b")


@pytest.mark.parametrize("name", ["a", "A.b-c_9", "x" * 128])
def test_valid_names(name: str) -> None:
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["", "-a", ".a", "a/b", "a b", "x" * 129, "é"])
def test_invalid_names(name: str) -> None:
    with pytest.raises(UnprocessableError) as err:
        check_name(name)
    assert err.value.errors[0]["loc"] == ["name"]


def test_registration_allows_a_variable_batch_and_execution_does_not() -> None:
    assert _op().input_tensor.sizes[0] == -1  # type: ignore[union-attr]
    with pytest.raises(kernels.DescriptorError):
        kernels.resolve(PAD)


# --- over HTTP: bounded state ----------------------------------------------------------------


def _pad(width: int) -> dict[str, object]:
    return {**PAD, "InputTensor": {"DataType": "FLOAT32", "Sizes": [-1, width]}}


async def test_metric_series_leave_with_their_model() -> None:
    async with app_client() as c:
        for cycle in range(3):
            name = f"cycle-{cycle}"
            assert (await c.post("/v1/operators", json={"name": name, "operator": PAD})).is_success
            x = {"DataType": "FLOAT32", "Sizes": [1, 3], "data": [1, 2, 3]}
            r = await c.post(f"/v1/operators/{name}/execute", json={"inputs": {"InputTensor": x}})
            assert r.status_code == 200
            bad = {"inputs": {"InputTensor": {**x, "data": [1]}}}
            assert (await c.post(f"/v1/operators/{name}/execute", json=bad)).status_code == 422
            assert f'model="{name}"' in (await c.get("/metrics")).text
            assert (await c.delete(f"/v1/operators/{name}")).status_code == 200
            assert f'model="{name}"' not in (await c.get("/metrics")).text
        # Another model's series are untouched by a deletion.
        await c.post("/v1/operators", json={"name": "kept", "operator": PAD})
        await c.post("/v1/operators/kept/execute", json={"inputs": {}})
        await c.post("/v1/operators", json={"name": "gone", "operator": _pad(4)})
        await c.delete("/v1/operators/gone")
        assert 'nv_inference_request_failure{model="kept"' in (await c.get("/metrics")).text


async def test_runtime_registrations_are_capped() -> None:
    async with app_client(max_operators=2) as c:
        for width in (3, 4):
            assert (
                await c.post("/v1/operators", json={"operator": _pad(width)})
            ).status_code == 201
        r = await c.post("/v1/operators", json={"name": "third", "operator": _pad(5)})
        assert r.status_code == 507 and "max_operators = 2" in r.json()["detail"]
        assert r.json()["errors"][0]["loc"] == ["max_operators"]
        # A repeat of an existing registration is not a new one.
        assert (await c.post("/v1/operators", json={"operator": _pad(3)})).status_code == 200
        listed = (await c.get("/v1/operators")).json()["operators"]
        await c.delete(f"/v1/operators/{listed[0]['name']}")
        r = await c.post("/v1/operators", json={"name": "third", "operator": _pad(5)})
        assert r.status_code == 201
        v2 = await c.post("/v1/operators", json={"name": "fourth", "operator": _pad(6)})
        assert v2.status_code == 507


async def test_registrations_outside_the_api_do_not_count() -> None:
    async with app_client(max_operators=1) as c:
        state = c.app.state.dmlserve  # type: ignore[attr-defined]
        for width in (3, 4):  # as the model repository registers its files
            await register(state, _pad(width), f"repo-{width}", source="repository")
        assert (await c.post("/v1/operators", json={"operator": _pad(5)})).status_code == 201
        assert (await c.post("/v1/operators", json={"operator": _pad(6)})).status_code == 507


async def test_the_listing_is_paginated() -> None:
    async with app_client() as c:
        names = [f"op-{i:02d}" for i in range(7)]
        for i, name in enumerate(reversed(names)):
            await c.post("/v1/operators", json={"name": name, "operator": _pad(i + 1)})
        seen: list[str] = []
        after = None
        pages = 0
        while True:
            params: dict[str, object] = {"limit": 3, **({"after": after} if after else {})}
            page = (await c.get("/v1/operators", params=params)).json()
            assert set(page) == {"operators", "next"} and len(page["operators"]) <= 3
            seen += [op["name"] for op in page["operators"]]
            pages += 1
            after = page["next"]
            if after is None:
                break
        assert seen == names and pages == 3
        whole = (await c.get("/v1/operators")).json()
        assert [op["name"] for op in whole["operators"]] == names and whole["next"] is None
        for bad in ({"limit": 0}, {"limit": 1001}, {"limit": "x"}):
            assert (await c.get("/v1/operators", params=bad)).status_code == 422


@pytest.mark.parametrize("name", ["abc\n", "a\tb", "\x00", "abc\r", "abc\x7f"])
async def test_names_with_control_characters_are_refused(name: str) -> None:
    with pytest.raises(UnprocessableError):
        check_name(name)
    async with app_client() as c:
        r = await c.post("/v1/operators", json={"name": name, "operator": PAD})
        assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["name"]
