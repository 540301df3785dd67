"""The model repository in process: start-up, model control, broken files, index and rescans."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from dmlserve.service import Settings, create_app
from dmlserve.service.app import StartupError
from dmlserve.service.repository import ModelRepository
from dmlserve.service.state import ServiceState
from tests.backend import TEST_BACKEND
from tests.service.conftest import app_client
from tests.service.models import (
    POOL,
    conv_input,
    expected_conv,
    expected_pool,
    pool_input,
    write_repository,
)


def _infer(name: str, x: np.ndarray, datatype: str) -> tuple[str, dict[str, Any]]:
    body = {"inputs": [{"name": "InputTensor", "shape": list(x.shape), "datatype": datatype,
                        "data": x.reshape(-1).tolist()}]}  # fmt: skip
    return f"/v2/models/{name}/infer", body


async def _output(client: httpx.AsyncClient, name: str, x: np.ndarray, datatype: str) -> Any:
    path, body = _infer(name, x, datatype)
    r = await client.post(path, json=body)
    assert r.status_code == 200, r.text
    out = r.json()["outputs"][0]
    return np.reshape(out["data"], out["shape"])


async def _index(client: httpx.AsyncClient, **body: Any) -> dict[str, tuple[str, str]]:
    r = await client.post("/v2/repository/index", json=body)
    assert r.status_code == 200, r.text
    return {e["name"]: (e["state"], e["reason"]) for e in r.json()}


def _state(client: httpx.AsyncClient) -> ServiceState:
    state: ServiceState = client.app.state.dmlserve  # type: ignore[attr-defined]
    return state


def _write(path: Path, body: Any) -> None:
    path.write_bytes(body if isinstance(body, bytes) else orjson.dumps(body))


async def test_none_serves_every_file_from_the_first_ready_answer(tmp_path: Path) -> None:
    repo = write_repository(tmp_path / "models")
    async with app_client(model_repository=repo) as client:
        assert (await client.get("/v2/health/ready")).status_code == 200
        listed = (await client.get("/v1/operators")).json()["operators"]
        assert {(o["name"], o["source"]) for o in listed} == {
            ("conv", "repository"), ("fold", "repository"), ("pool", "repository"),
        }  # fmt: skip
        assert await _index(client) == {n: ("READY", "") for n in ("conv", "fold", "pool")}
        x = pool_input(2)
        np.testing.assert_array_equal(await _output(client, "pool", x, "FP32"), expected_pool(x))
        u = conv_input(2)
        np.testing.assert_array_equal(await _output(client, "conv", u, "UINT8"), expected_conv(u))
        # With model control none, the set of models is the repository's.
        for action in ("load", "unload"):
            r = await client.post(f"/v2/repository/models/pool/{action}")
            assert r.status_code == 400 and "model control 'none'" in r.json()["error"]
        r = await client.delete("/v1/operators/pool")
        assert r.status_code == 409 and "unload" in r.json()["detail"]


BROKEN: list[tuple[str, Any, str]] = [
    ("bad-json", b"{", "not valid JSON"),
    ("bad-field", {"operator": {**POOL["operator"], "WindowSize": [2, 2, 2]}},
     "operator.WindowSize: WindowSize has 3 entries"),
    ("other-name", {"name": "pool2", **POOL}, "name: must be the file's name 'other-name'"),
    ("bad-constant", {**POOL, "constants": {"Bias": {"DataType": "FLOAT32", "Sizes": [1],
                                                      "data": [0]}}},
     "constants.Bias: AVERAGE_POOLING has no input 'Bias'"),
    ("bad name", POOL, "name: a name is 1-128 letters"),
    ("extra-field", {**POOL, "labels": {}}, "labels: Extra inputs are not permitted"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "body", "words"), BROKEN, ids=[b[0] for b in BROKEN])
async def test_a_broken_file_stops_start_up_naming_the_file_and_field(
    tmp_path: Path, name: str, body: Any, words: str
) -> None:
    repo = write_repository(tmp_path / "models")
    _write(repo / f"{name}.json", body)
    app = create_app(Settings(backend=TEST_BACKEND, model_repository=repo))
    with pytest.raises(StartupError) as err:
        async with app.router.lifespan_context(app):
            pass
    message = str(err.value)
    assert str(repo / f"{name}.json") in message and words in message, message


async def test_a_file_over_the_request_limit_is_refused_before_reading(tmp_path: Path) -> None:
    repo = write_repository(tmp_path / "models")
    size = (repo / "conv.json").stat().st_size
    app = create_app(
        Settings(backend=TEST_BACKEND, model_repository=repo, max_request_bytes=size - 1)
    )
    with pytest.raises(StartupError, match=f"{size} bytes exceeds the limit max_request_bytes"):
        async with app.router.lifespan_context(app):
            pass


async def test_a_missing_directory_stops_start_up(tmp_path: Path) -> None:
    app = create_app(Settings(backend=TEST_BACKEND, model_repository=tmp_path / "none"))
    with pytest.raises(StartupError, match="is not a directory"):
        async with app.router.lifespan_context(app):
            pass


async def test_explicit_loads_what_is_asked_and_a_broken_file_leaves_the_rest(
    tmp_path: Path,
) -> None:
    repo = write_repository(tmp_path / "models")
    _write(repo / "broken.json", {"operator": {"type": "AVERAGE_POOLING"}})
    async with app_client(model_repository=repo, model_control="explicit") as client:
        assert (await client.get("/v2/health/ready")).status_code == 200
        assert set((await _index(client)).values()) == {("UNAVAILABLE", "not loaded")}
        assert (await client.get("/v2/models/pool")).status_code == 404
        for name in ("pool", "conv"):
            r = await client.post(f"/v2/repository/models/{name}/load")
            assert r.status_code == 200 and r.json() == {}, r.text
        r = await client.post("/v2/repository/models/broken/load")
        assert r.status_code == 400
        assert str(repo / "broken.json") in r.json()["error"]
        assert "operator.WindowSize" in r.json()["error"]
        index = await _index(client)
        assert index["pool"] == index["conv"] == ("READY", "")
        assert index["broken"][0] == "UNAVAILABLE" and "WindowSize" in index["broken"][1]
        assert set(await _index(client, ready=True)) == {"conv", "pool"}
        x = pool_input(1)
        np.testing.assert_array_equal(await _output(client, "pool", x, "FP32"), expected_pool(x))

        r = await client.post("/v2/repository/models/pool/unload", json={"parameters": {}})
        assert r.status_code == 200
        path, body = _infer("pool", x, "FP32")
        assert (await client.post(path, json=body)).status_code == 404
        assert (await _index(client))["pool"] == ("UNAVAILABLE", "unloaded")
        assert (await client.post("/v2/repository/models/nothing/unload")).status_code == 404
        r = await client.post("/v2/repository/models/nothing/load")
        assert r.status_code == 400 and "has no nothing.json" in r.json()["error"]
        r = await client.post(
            "/v2/repository/models/pool/load", json={"parameters": {"config": "{}"}}
        )
        assert r.status_code == 400 and "'config' is not supported" in r.json()["error"]


async def test_runtime_registrations_and_repository_models_keep_to_their_names(
    tmp_path: Path,
) -> None:
    repo = write_repository(tmp_path / "models")
    async with app_client(model_repository=repo, model_control="explicit") as client:
        r = await client.post("/v1/operators", json={"name": "pool", **POOL})
        assert r.status_code == 201 and r.json()["source"] == "runtime"
        assert (await _index(client))["pool"] == ("READY", "")
        # The file cannot take a name a runtime registration holds.
        r = await client.post("/v2/repository/models/pool/load")
        assert r.status_code == 400 and "held by a runtime registration" in r.json()["error"]
        # Unloading serves both kinds: the runtime registration goes.
        assert (await client.post("/v2/repository/models/pool/unload")).status_code == 200
        assert (await client.post("/v2/repository/models/pool/load")).status_code == 200
        assert (await client.get("/v1/operators/pool")).json()["source"] == "repository"


async def test_poll_loads_new_and_changed_files_and_unloads_removed_ones(tmp_path: Path) -> None:
    repo = write_repository(tmp_path / "models")
    async with app_client(
        model_repository=repo, model_control="poll", repository_poll_s=3600
    ) as client:
        state = _state(client)
        assert state.repository is not None
        assert set(await _index(client, ready=True)) == {"conv", "fold", "pool"}

        _write(repo / "pool2.json", POOL)
        changed = {"operator": {**POOL["operator"], "Strides": [1, 1]}}
        _write(repo / "pool.json", changed)
        os.utime(repo / "pool.json", ns=(1, 1))  # a new stamp whatever the clock's resolution
        (repo / "fold.json").unlink()
        _write(repo / "broken.json", b"[")
        await state.repository.poll(state)

        index = await _index(client)
        assert index["pool2"] == index["pool"] == ("READY", "")
        assert "fold" not in index and (await client.get("/v2/models/fold")).status_code == 404
        assert index["broken"][0] == "UNAVAILABLE" and "not valid JSON" in index["broken"][1]
        meta = (await client.get("/v2/models/pool")).json()
        assert meta["outputs"][0]["shape"] == [-1, 3, 7, 7]  # the changed file's strides

        # An unloaded model stays unloaded until its file changes.
        assert (await client.post("/v2/repository/models/pool2/unload")).status_code == 200
        await state.repository.poll(state)
        assert (await _index(client))["pool2"] == ("UNAVAILABLE", "unloaded")
        os.utime(repo / "pool2.json", ns=(2, 2))
        await state.repository.poll(state)
        assert (await _index(client))["pool2"] == ("READY", "")


async def test_poll_forever_rescans_between_sleeps(tmp_path: Path) -> None:
    repo = write_repository(tmp_path / "models")
    async with app_client(model_repository=repo, model_control="explicit") as client:
        state = _state(client)
        repository = ModelRepository(repo, "poll", Settings(repository_poll_s=7))
        slept: list[float] = []

        class Stop(Exception):
            pass

        async def sleep(seconds: float) -> None:
            slept.append(seconds)
            if len(slept) == 2:
                raise Stop

        with pytest.raises(Stop):
            await repository.poll_forever(state, sleep)
        # One rescan between the two sleeps, which loaded every file.
        assert slept == [7, 7]
        assert {r.name for r in state.registry.list()} == {"conv", "fold", "pool"}
