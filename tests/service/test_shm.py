"""System shared memory with the unmodified tritonclient (HTTP and gRPC) against a real server.

Inputs are read from, and outputs written into, regions made by `tritonclient.utils.
shared_memory`; every operator sample's output is compared with its oracle. Bad regions give
clear errors, and a client that truncates or deletes its region never hurts the server.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from dmlserve.service.shm import Leases, ShmRef
from tests.backend import TEST_BACKEND
from tests.operator_info import Sample, assert_matches, sample_id
from tests.service.conftest import TransportServer, app_client
from tests.service.transports import SAMPLES, kserve, region, shm_path, unique

PROTOCOLS = {"http": triton_http, "grpc": triton_grpc}
ALIGN = 64


def _client(server: TransportServer, protocol: str) -> Any:
    address = server.http_address if protocol == "http" else server.grpc_address
    return PROTOCOLS[protocol].InferenceServerClient(address)


@pytest.fixture(params=sorted(PROTOCOLS))
def client(request: pytest.FixtureRequest, transport_server: TransportServer) -> Iterator[Any]:
    c = _client(transport_server, request.param)
    c.protocol = request.param
    try:
        yield c
    finally:
        c.close()


def _layout(arrays: dict[str, np.ndarray]) -> tuple[dict[str, int], int]:
    """Offsets that place every array in one region (each aligned), and the region's size."""
    offsets, end = {}, 0
    for name, array in arrays.items():
        offsets[name] = end
        end += -(-array.nbytes // ALIGN) * ALIGN
    return offsets, end


@pytest.mark.parametrize(("model", "sample"), SAMPLES, ids=sample_id)
def test_every_operator_through_system_shared_memory(
    client: Any, model: str, sample: Sample
) -> None:
    module = PROTOCOLS[client.protocol]
    inputs = {n: np.ascontiguousarray(a) for n, a in sample.inputs.items()}
    offsets, in_size = _layout(inputs)
    out_size = sample.expected.nbytes
    with (
        region(in_size, "in") as (h_in, in_name, in_key),
        region(out_size + ALIGN, "out") as (h_out, out_name, out_key),
    ):
        for name, array in inputs.items():
            shm.set_shared_memory_region(h_in, [array], offset=offsets[name])
        client.register_system_shared_memory(in_name, in_key, in_size)
        # The output region starts ALIGN bytes into its object: `offset` at registration.
        client.register_system_shared_memory(out_name, out_key, out_size, offset=ALIGN)
        try:
            request_inputs = []
            for name, array in inputs.items():
                tensor = module.InferInput(name, list(array.shape), kserve(array))
                tensor.set_shared_memory(in_name, array.nbytes, offset=offsets[name])
                request_inputs.append(tensor)
            output = module.InferRequestedOutput("OutputTensor")
            output.set_shared_memory(out_name, out_size)
            result = client.infer(model, request_inputs, outputs=[output])
            entry = result.get_output("OutputTensor")
            shape = list(entry["shape"] if client.protocol == "http" else entry.shape)
            assert shape == list(sample.expected.shape)
            got = shm.get_contents_as_numpy(h_out, sample.expected.dtype, shape, offset=ALIGN)
            assert_matches(got, sample)
        finally:
            client.unregister_system_shared_memory(in_name)
            client.unregister_system_shared_memory(out_name)


def test_status_register_unregister_and_extensions(client: Any) -> None:
    with region(256) as (_, name, key):
        client.register_system_shared_memory(name, key, 128, offset=64)
        status = client.get_system_shared_memory_status(name)
        if client.protocol == "http":
            assert status == [{"name": name, "key": key, "offset": 64, "byte_size": 128}]
        else:
            entry = status.regions[name]
            assert (entry.key, entry.offset, entry.byte_size) == (key, 64, 128)
        client.unregister_system_shared_memory(name)
        with pytest.raises(InferenceServerException, match="no system shared-memory region"):
            client.get_system_shared_memory_status(name)
    metadata = client.get_server_metadata()
    extensions = metadata["extensions"] if client.protocol == "http" else metadata.extensions
    assert "system_shared_memory" in extensions
    assert ("cuda_shared_memory" in extensions) == (TEST_BACKEND == "cupy")


# --- bad regions -----------------------------------------------------------------------------

PAD = "t-padding-reflection-rank3-float32"  # a FLOAT32 (2, 3, 4) input
PAD_SAMPLE = dict(SAMPLES)[PAD]
PAD_X = PAD_SAMPLE.inputs["InputTensor"]
PAD_IN, PAD_OUT = PAD_X.nbytes, PAD_SAMPLE.expected.nbytes


def _pad_infer(
    client: Any, in_region: str, in_size: int = PAD_IN, in_offset: int = 0,
    out: tuple[str, int] | None = None,
) -> Any:  # fmt: skip
    module = PROTOCOLS[client.protocol]
    tensor = module.InferInput("InputTensor", [2, 3, 4], "FP32")
    tensor.set_shared_memory(in_region, in_size, offset=in_offset)
    outputs = None
    if out is not None:
        requested = module.InferRequestedOutput("OutputTensor")
        requested.set_shared_memory(*out)
        outputs = [requested]
    return client.infer(PAD, [tensor], outputs=outputs)


@pytest.fixture
def pad_region(client: Any) -> Iterator[tuple[Any, str, str]]:
    with region(PAD_IN) as (handle, name, key):
        shm.set_shared_memory_region(handle, [np.ascontiguousarray(PAD_X)])
        client.register_system_shared_memory(name, key, PAD_IN)
        try:
            yield handle, name, key
        finally:
            client.unregister_system_shared_memory(name)


def test_shared_memory_input_with_a_binary_output(client: Any, pad_region: Any) -> None:
    _, name, _ = pad_region
    assert_matches(_pad_infer(client, name).as_numpy("OutputTensor"), PAD_SAMPLE)


def test_out_of_range_is_refused(client: Any, pad_region: Any) -> None:
    _, name, _ = pad_region
    with pytest.raises(InferenceServerException, match="past the end of region"):
        _pad_infer(client, name, in_offset=16)


def test_a_size_that_is_not_the_tensors_is_refused(client: Any, pad_region: Any) -> None:
    _, name, _ = pad_region
    with pytest.raises(InferenceServerException, match="shared_memory_byte_size is 64"):
        _pad_infer(client, name, in_size=64)


def test_an_output_region_too_small_is_refused(client: Any, pad_region: Any) -> None:
    _, name, _ = pad_region
    with region(64) as (_, out_name, out_key):
        client.register_system_shared_memory(out_name, out_key, 64)
        try:
            with pytest.raises(InferenceServerException, match=f"OutputTensor needs {PAD_OUT}"):
                _pad_infer(client, name, out=(out_name, 64))
        finally:
            client.unregister_system_shared_memory(out_name)


def test_an_unregistered_region_is_refused(client: Any) -> None:
    with pytest.raises(InferenceServerException, match="no shared-memory region is registered"):
        _pad_infer(client, unique("never"))


@pytest.mark.parametrize(
    ("key", "message"),
    [("/does-not-exist-dmlserve", "unable to open shared-memory key"),
     ("/a/b", "not a POSIX shared-memory name")],
)  # fmt: skip
def test_a_wrong_key_is_refused(client: Any, key: str, message: str) -> None:
    with pytest.raises(InferenceServerException, match=message):
        client.register_system_shared_memory(unique("bad"), key, 16)


def test_a_region_larger_than_its_object_is_refused(client: Any) -> None:
    with region(64) as (_, name, key):
        with pytest.raises(InferenceServerException, match="past the end of shared-memory key"):
            client.register_system_shared_memory(name, key, 65)
        with pytest.raises(InferenceServerException, match="past the end of shared-memory key"):
            client.register_system_shared_memory(name, key, 64, offset=1)


def test_a_taken_name_is_refused(client: Any, pad_region: Any) -> None:
    _, name, key = pad_region
    with pytest.raises(InferenceServerException, match="already registered"):
        client.register_system_shared_memory(name, key, PAD_IN)


# --- the client's file changes under the server ----------------------------------------------


def test_a_truncated_input_region_is_a_clear_error_and_the_server_lives(
    client: Any, pad_region: Any, transport_server: TransportServer
) -> None:
    _, name, key = pad_region
    os.truncate(shm_path(key), 0)  # what a mapped read would meet as SIGBUS
    with pytest.raises(InferenceServerException, match="truncated by its owner"):
        _pad_infer(client, name)
    assert httpx.get(transport_server.url + "/v2/health/live").status_code == 200
    os.truncate(shm_path(key), PAD_IN)  # grown back (zeros): served again
    output = _pad_infer(client, name).as_numpy("OutputTensor")
    np.testing.assert_array_equal(output, np.zeros_like(PAD_SAMPLE.expected))


def test_a_truncated_output_region_is_a_clear_error(client: Any, pad_region: Any) -> None:
    _, name, _ = pad_region
    with region(PAD_OUT) as (_, out_name, out_key):
        client.register_system_shared_memory(out_name, out_key, PAD_OUT)
        try:
            os.truncate(shm_path(out_key), 0)
            with pytest.raises(InferenceServerException, match="truncated by its owner"):
                _pad_infer(client, name, out=(out_name, PAD_OUT))
            assert os.stat(shm_path(out_key)).st_size == 0  # never grown back by the server
        finally:
            client.unregister_system_shared_memory(out_name)


def test_a_deleted_region_is_still_served_from_the_open_object(client: Any) -> None:
    name = unique("gone")
    handle = shm.create_shared_memory_region(name, "/" + name, PAD_IN)
    shm.set_shared_memory_region(handle, [np.ascontiguousarray(PAD_X)])
    client.register_system_shared_memory(name, "/" + name, PAD_IN)
    shm.destroy_shared_memory_region(handle)  # unlinked: the server keeps its descriptor
    assert not os.path.exists(shm_path(name))
    try:
        assert_matches(_pad_infer(client, name).as_numpy("OutputTensor"), PAD_SAMPLE)
    finally:
        client.unregister_system_shared_memory(name)


# --- in use, limits, auth (in process: the real app, its table reachable) --------------------


PADDING_4 = {"name": "p", "operator": {"type": "PADDING", "StartPadding": [1], "EndPadding": [0],
             "InputTensor": {"DataType": "FLOAT32", "Sizes": [4]}}}  # fmt: skip


async def test_a_region_in_use_cannot_be_unregistered() -> None:
    async with app_client() as http:
        state = http.app.state.dmlserve  # type: ignore[attr-defined]
        with region(64) as (_, name, key):
            r = await http.post(
                f"/v2/systemsharedmemory/region/{name}/register",
                json={"key": key, "byte_size": 64},
            )
            assert r.status_code == 200, r.text
            leases = Leases(state.shared_memory)  # a request holding the region
            leases.take(ShmRef(name, 64), ("inputs", 0))
            with leases.held():  # and the device computing on it past the request's end
                leases.release()
                r = await http.post(f"/v2/systemsharedmemory/region/{name}/unregister")
                assert r.status_code == 409
                assert name in r.json()["error"] and "in use" in r.json()["error"]
                r = await http.post("/v2/systemsharedmemory/unregister")
                assert r.status_code == 409
            r = await http.post(f"/v2/systemsharedmemory/region/{name}/unregister")
            assert r.status_code == 200, r.text


async def test_a_failed_request_releases_its_regions() -> None:
    async with app_client() as http:
        with region(64) as (_, name, key):
            r = await http.post(
                f"/v2/systemsharedmemory/region/{name}/register",
                json={"key": key, "byte_size": 64},
            )
            reg = {
                "name": "p",
                "operator": {
                    "type": "PADDING",
                    "StartPadding": [1],
                    "EndPadding": [0],
                    "InputTensor": {"DataType": "FLOAT32", "Sizes": [4]},
                },
            }
            assert (await http.post("/v1/operators", json=reg)).status_code == 201
            params = {"shared_memory_region": name, "shared_memory_byte_size": 8}
            body = {"inputs": [{"name": "InputTensor", "shape": [4], "datatype": "FP32",
                                "parameters": params}]}  # fmt: skip
            r = await http.post("/v2/models/p/infer", json=body)
            assert r.status_code == 400 and "need 16 bytes" in r.json()["error"]
            r = await http.post(f"/v2/systemsharedmemory/region/{name}/unregister")
            assert r.status_code == 200, r.text


async def test_registrations_are_bounded_in_number_and_bytes() -> None:
    async with app_client(max_shm_regions=1, max_shm_bytes=100) as http:
        with region(128) as (_, a, key_a), region(128) as (_, b, key_b):
            ok = await http.post(
                f"/v2/systemsharedmemory/region/{a}/register", json={"key": key_a, "byte_size": 64}
            )
            assert ok.status_code == 200, ok.text
            r = await http.post(
                f"/v2/systemsharedmemory/region/{b}/register", json={"key": key_b, "byte_size": 8}
            )
            assert r.status_code == 507 and "max_shm_regions = 1" in r.json()["error"]
            await http.post(f"/v2/systemsharedmemory/region/{a}/unregister")
            r = await http.post(
                f"/v2/systemsharedmemory/region/{b}/register", json={"key": key_b, "byte_size": 101}
            )
            assert r.status_code == 507 and "max_shm_bytes = 100" in r.json()["error"]
            r = await http.get("/v2/systemsharedmemory/status")
            assert r.json() == []


async def test_shared_memory_endpoints_need_the_api_key() -> None:
    async with app_client(api_keys=("k1",)) as http:
        r = await http.get("/v2/systemsharedmemory/status")
        assert r.status_code == 401 and "error" in r.json()
        r = await http.get("/v2/systemsharedmemory/status", headers={"Authorization": "Bearer k1"})
        assert r.status_code == 200 and r.json() == []


async def test_malformed_shared_memory_parameters_are_422() -> None:
    async with app_client() as http:
        assert (await http.post("/v1/operators", json=PADDING_4)).status_code == 201
        size = "shared_memory_byte_size"
        for params, field in [
            ({"shared_memory_region": "r"}, size),
            ({"shared_memory_region": "r", size: -1}, size),
            ({"shared_memory_region": "r", size: 16, "shared_memory_offset": "0"},
             "shared_memory_offset"),
            ({size: 16}, size),
        ]:  # fmt: skip
            body = {"inputs": [{"name": "InputTensor", "shape": [4], "datatype": "FP32",
                                "parameters": params}]}  # fmt: skip
            r = await http.post("/v2/models/p/infer", json=body)
            assert r.status_code == 422, (params, r.text)
            assert field in r.json()["error"]


async def test_cuda_shared_memory_is_refused_without_a_gpu_backend() -> None:
    async with app_client(backend="numpy") as http:
        raw_handle = {"b64": base64.b64encode(bytes(64)).decode()}
        r = await http.post(
            "/v2/cudasharedmemory/region/c/register",
            json={"raw_handle": raw_handle, "device_id": 0, "byte_size": 64},
        )
        assert r.status_code == 400 and "CUDA shared memory is not served" in r.json()["error"]
        # Clients clean up both kinds whatever they used: there is nothing to list or remove.
        assert (await http.get("/v2/cudasharedmemory/status")).json() == []
        assert (await http.post("/v2/cudasharedmemory/unregister")).status_code == 200
        assert "cuda_shared_memory" not in (await http.get("/v2")).json()["extensions"]
