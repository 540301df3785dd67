"""CUDA shared memory with the unmodified tritonclient against a live server on the CuPy backend.

The client's device buffers (tritonclient.utils.cuda_shared_memory) are registered by IPC
handle; the kernels read the input from them and the output is copied into the client's output
buffer. Skipped where no CUDA device answers (tests/conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException

from tests.operator_info import Sample, assert_matches, sample_id
from tests.service.conftest import TransportServer
from tests.service.transports import SAMPLES, kserve, register_samples, unique

pytestmark = pytest.mark.gpu

PROTOCOLS = {"http": triton_http, "grpc": triton_grpc}
DEVICE = 0


@pytest.fixture(scope="module")
def gpu_server() -> Iterator[TransportServer]:
    srv = TransportServer("--backend", "cupy", "--device", str(DEVICE))
    try:
        register_samples(srv.url)
        yield srv
    finally:
        srv.stop()


@pytest.fixture(params=sorted(PROTOCOLS))
def client(request: pytest.FixtureRequest, gpu_server: TransportServer) -> Iterator[Any]:
    address = gpu_server.http_address if request.param == "http" else gpu_server.grpc_address
    c = PROTOCOLS[request.param].InferenceServerClient(address)
    c.protocol = request.param
    try:
        yield c
    finally:
        c.close()


def _cudashm() -> Any:
    import tritonclient.utils.cuda_shared_memory as cudashm

    return cudashm


@pytest.mark.parametrize(("model", "sample"), SAMPLES, ids=sample_id)
def test_every_operator_through_cuda_shared_memory(client: Any, model: str, sample: Sample) -> None:
    cudashm = _cudashm()
    module = PROTOCOLS[client.protocol]
    handles, names, request_inputs = [], [], []
    try:
        for name, array in sample.inputs.items():
            array = np.ascontiguousarray(array)
            region = unique("cin")
            handle = cudashm.create_shared_memory_region(region, array.nbytes, DEVICE)
            handles.append(handle)
            cudashm.set_shared_memory_region(handle, [array])
            raw = cudashm.get_raw_handle(handle)
            client.register_cuda_shared_memory(region, raw, DEVICE, array.nbytes)
            names.append(region)
            tensor = module.InferInput(name, list(array.shape), kserve(array))
            tensor.set_shared_memory(region, array.nbytes)
            request_inputs.append(tensor)
        out_region, out_size = unique("cout"), sample.expected.nbytes
        out_handle = cudashm.create_shared_memory_region(out_region, out_size, DEVICE)
        handles.append(out_handle)
        client.register_cuda_shared_memory(
            out_region, cudashm.get_raw_handle(out_handle), DEVICE, out_size
        )
        names.append(out_region)
        output = module.InferRequestedOutput("OutputTensor")
        output.set_shared_memory(out_region, out_size)
        client.infer(model, request_inputs, outputs=[output])
        got = cudashm.get_contents_as_numpy(
            out_handle, sample.expected.dtype, list(sample.expected.shape)
        )
        assert_matches(got, sample)
    finally:
        for region in names:
            client.unregister_cuda_shared_memory(region)
        for handle in handles:
            cudashm.destroy_shared_memory_region(handle)


def test_status_extensions_and_bad_registrations(client: Any) -> None:
    cudashm = _cudashm()
    metadata = client.get_server_metadata()
    extensions = metadata["extensions"] if client.protocol == "http" else metadata.extensions
    assert "cuda_shared_memory" in extensions and "system_shared_memory" in extensions
    region = unique("c")
    handle = cudashm.create_shared_memory_region(region, 256, DEVICE)
    raw = cudashm.get_raw_handle(handle)
    try:
        with pytest.raises(InferenceServerException, match="larger than the device allocation"):
            client.register_cuda_shared_memory(region, raw, DEVICE, 1 << 30)
        with pytest.raises(InferenceServerException, match="this server computes on device 0"):
            client.register_cuda_shared_memory(region, raw, DEVICE + 1, 256)
        client.register_cuda_shared_memory(region, raw, DEVICE, 256)
        status = client.get_cuda_shared_memory_status(region)
        if client.protocol == "http":
            assert status == [{"name": region, "device_id": DEVICE, "byte_size": 256}]
        else:
            assert status.regions[region].byte_size == 256
        with pytest.raises(InferenceServerException, match="already registered"):
            client.register_cuda_shared_memory(region, raw, DEVICE, 256)
        module = PROTOCOLS[client.protocol]
        tensor = module.InferInput("InputTensor", [2, 3, 4], "FP32")
        tensor.set_shared_memory(region, 96, offset=192)  # 192 + 96 > 256
        with pytest.raises(InferenceServerException, match="past the end of region"):
            client.infer("t-padding-reflection-rank3-float32", [tensor])
    finally:
        client.unregister_cuda_shared_memory()
        cudashm.destroy_shared_memory_region(handle)
    status = client.get_cuda_shared_memory_status()
    assert (list(status) if client.protocol == "http" else list(status.regions)) == []


def test_a_handle_in_wrapped_base64_registers(gpu_server: TransportServer) -> None:
    # Triton's C++ client (libb64, as perf_analyzer sends it) breaks base64 into 72-char lines.
    import base64
    import json
    import urllib.request

    cudashm = _cudashm()
    region = unique("w")
    handle = cudashm.create_shared_memory_region(region, 256, DEVICE)
    text = base64.b64encode(base64.b64decode(cudashm.get_raw_handle(handle))).decode()
    wrapped = "\n".join(text[i : i + 72] for i in range(0, len(text), 72)) + "\n"
    body = {"raw_handle": {"b64": wrapped}, "device_id": DEVICE, "byte_size": 256}
    url = f"{gpu_server.url}/v2/cudasharedmemory/region/{region}/register"
    request = urllib.request.Request(url, json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200
        status = triton_http.InferenceServerClient(gpu_server.http_address)
        assert status.get_cuda_shared_memory_status(region)[0]["byte_size"] == 256
        status.unregister_cuda_shared_memory(region)
        status.close()
    finally:
        cudashm.destroy_shared_memory_region(handle)
