"""The KServe v2 gRPC service with the unmodified tritonclient.grpc (sync and aio) and stub.

Every operator sample goes through ModelInfer (raw contents, and typed contents through the
published stub) and is compared with its oracle; metadata, configuration, statistics, the API
key, limits, errors as status codes and a graceful shutdown are checked on real servers.
"""

from __future__ import annotations

import re
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton
import tritonclient.grpc.aio as triton_aio
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from dmlserve.service.rpc.infer import CONTENTS
from tests.operator_info import Sample, assert_matches, sample_id
from tests.service.conftest import TransportServer
from tests.service.helpers import slow_pooling
from tests.service.transports import SAMPLES, kserve

PAD = "t-padding-reflection-rank3-float32"
PAD_SAMPLE = dict(SAMPLES)[PAD]


def _inputs(module: Any, sample: Sample) -> list[Any]:
    tensors = []
    for name, array in sample.inputs.items():
        tensor = module.InferInput(name, list(array.shape), kserve(array))
        tensor.set_data_from_numpy(np.ascontiguousarray(array))
        tensors.append(tensor)
    return tensors


@pytest.fixture
def client(transport_server: TransportServer) -> Iterator[triton.InferenceServerClient]:
    c = triton.InferenceServerClient(transport_server.grpc_address)
    try:
        yield c
    finally:
        c.close()


@pytest.mark.parametrize(("model", "sample"), SAMPLES, ids=sample_id)
def test_every_operator_sync(
    client: triton.InferenceServerClient, model: str, sample: Sample
) -> None:
    result = client.infer(model, _inputs(triton, sample), request_id="r-1")
    assert result.get_response().id == "r-1"
    assert_matches(result.as_numpy("OutputTensor"), sample)


@pytest.mark.parametrize(("model", "sample"), SAMPLES, ids=sample_id)
async def test_every_operator_aio(
    transport_server: TransportServer, model: str, sample: Sample
) -> None:
    client = triton_aio.InferenceServerClient(transport_server.grpc_address)
    try:
        result = await client.infer(model, _inputs(triton_aio, sample))
        assert_matches(result.as_numpy("OutputTensor"), sample)
    finally:
        await client.close()


TYPED = [(m, s) for m, s in SAMPLES if all(kserve(a) in CONTENTS for a in s.inputs.values())]


@pytest.mark.parametrize(("model", "sample"), TYPED, ids=sample_id)
def test_typed_contents(transport_server: TransportServer, model: str, sample: Sample) -> None:
    request = service_pb2.ModelInferRequest(model_name=model)
    for name, array in sample.inputs.items():
        tensor = request.inputs.add(name=name, datatype=kserve(array), shape=array.shape)
        getattr(tensor.contents, CONTENTS[kserve(array)]).extend(array.reshape(-1).tolist())
    with grpc.insecure_channel(transport_server.grpc_address) as channel:
        response = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request)
    out = response.outputs[0]
    assert out.datatype == kserve(sample.expected)
    got = np.frombuffer(response.raw_output_contents[0], sample.expected.dtype)
    assert_matches(got.reshape(list(out.shape)), sample)


def test_health_metadata_config_statistics(client: triton.InferenceServerClient) -> None:
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready(PAD) and not client.is_model_ready("no-such-model")
    assert not client.is_model_ready(PAD, model_version="2")
    meta = client.get_server_metadata()
    assert meta.name == "dmlserve" and "binary_tensor_data" in meta.extensions
    model = client.get_model_metadata(PAD)
    assert [(t.name, t.datatype, list(t.shape)) for t in model.inputs] == [
        ("InputTensor", "FP32", [2, 3, 4])
    ]
    assert list(model.outputs[0].shape) == list(PAD_SAMPLE.expected.shape)
    config = client.get_model_config(PAD).config
    assert config.name == PAD and config.max_batch_size == 0  # a fixed batch: not batched
    assert [(i.name, list(i.dims)) for i in config.input] == [("InputTensor", [2, 3, 4])]
    assert config.output[0].data_type == triton.model_config_pb2.TYPE_FP32
    stats = client.get_inference_statistics(PAD)
    assert [s.name for s in stats.model_stats] == [PAD]
    index = client.get_model_repository_index()
    assert PAD in {m.name for m in index.models}
    with pytest.raises(InferenceServerException, match="no model repository is configured"):
        client.load_model(PAD)


def test_a_variable_batch_model_is_configured_as_batched(transport_server: TransportServer) -> None:
    descriptor = {"type": "UNFOLD", "WindowSizes": [2, 2],
                  "InputTensor": {"DataType": "FLOAT32", "Sizes": [-1, 2, 4, 5]}}  # fmt: skip
    r = httpx.post(transport_server.url + "/v1/operators",
                   json={"name": "t-batched-unfold", "operator": descriptor})  # fmt: skip
    assert r.status_code in (200, 201), r.text
    with triton.InferenceServerClient(transport_server.grpc_address) as client:
        config = client.get_model_config("t-batched-unfold").config
        assert config.max_batch_size > 0
        assert list(config.input[0].dims) == [2, 4, 5]
        assert list(config.output[0].dims) == [8, 12]
        x = np.arange(3 * 2 * 4 * 5, dtype=np.float32).reshape(3, 2, 4, 5)
        tensor = triton.InferInput("InputTensor", [3, 2, 4, 5], "FP32")
        tensor.set_data_from_numpy(x)
        out = client.infer("t-batched-unfold", [tensor]).as_numpy("OutputTensor")
    windows = [x[:, :, i : i + 2, j : j + 2].reshape(3, 8) for i in range(3) for j in range(4)]
    np.testing.assert_array_equal(out, np.stack(windows, axis=-1))


def _status(exc: InferenceServerException) -> str:
    return str(exc.status())


def test_errors_are_status_codes_with_the_message(client: triton.InferenceServerClient) -> None:
    with pytest.raises(InferenceServerException) as info:
        client.get_model_metadata("no-such-model")
    assert _status(info.value) == "StatusCode.NOT_FOUND"
    assert "no operator is registered under the name 'no-such-model'" in info.value.message()
    bad = triton.InferInput("InputTensor", [2, 3, 5], "FP32")  # the model takes (2, 3, 4)
    bad.set_data_from_numpy(np.zeros((2, 3, 5), np.float32))
    with pytest.raises(InferenceServerException) as info:
        client.infer(PAD, [bad])
    assert _status(info.value) == "StatusCode.INVALID_ARGUMENT"  # HTTP's 422
    assert "Sizes" in info.value.message()
    wrong = triton.InferInput("Nope", [2, 3, 4], "FP32")
    wrong.set_data_from_numpy(np.zeros((2, 3, 4), np.float32))
    with pytest.raises(InferenceServerException, match="has no input 'Nope'"):
        client.infer(PAD, [wrong])
    right = triton.InferInput("InputTensor", [2, 3, 4], "FP32")
    right.set_data_from_numpy(np.zeros((2, 3, 4), np.float32))
    with pytest.raises(InferenceServerException, match="has no output 'Nope'"):
        client.infer(PAD, [right], outputs=[triton.InferRequestedOutput("Nope")])


def test_a_short_raw_tensor_is_invalid_argument(transport_server: TransportServer) -> None:
    request = service_pb2.ModelInferRequest(model_name=PAD)
    request.inputs.add(name="InputTensor", datatype="FP32", shape=[2, 3, 4])
    request.raw_input_contents.append(b"\0" * 95)
    with grpc.insecure_channel(transport_server.grpc_address) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        with pytest.raises(grpc.RpcError) as info:
            stub.ModelInfer(request)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "96 bytes" in info.value.details()


@pytest.fixture(scope="module")
def keyed_server() -> Iterator[TransportServer]:
    srv = TransportServer("--api-keys", "k-one,k-two", "--max-request-bytes", "4096",
                          "--max-tensor-bytes", "2048")  # fmt: skip
    try:
        r = httpx.post(srv.url + "/v1/operators", headers={"Authorization": "Bearer k-one"},
                       json={"name": "pad", "operator": {"type": "PADDING", "StartPadding": [1],
                             "EndPadding": [1], "InputTensor": {"DataType": "FLOAT32",
                             "Sizes": [-1]}}})  # fmt: skip
        assert r.status_code == 422  # a -1 batch of a rank-1 tensor cannot be padded
        r = httpx.post(srv.url + "/v1/operators", headers={"Authorization": "Bearer k-one"},
                       json={"name": "pad", "operator": {"type": "PADDING", "StartPadding": [0, 1],
                             "EndPadding": [0, 1], "InputTensor": {"DataType": "FLOAT32",
                             "Sizes": [-1, 4]}}})  # fmt: skip
        assert r.status_code == 201, r.text
        yield srv
    finally:
        srv.stop()


def _pad_input(rows: int) -> triton.InferInput:
    tensor = triton.InferInput("InputTensor", [rows, 4], "FP32")
    tensor.set_data_from_numpy(np.ones((rows, 4), np.float32))
    return tensor


def test_the_api_key_is_checked(keyed_server: TransportServer) -> None:
    with triton.InferenceServerClient(keyed_server.grpc_address) as client:
        assert client.is_server_live() and client.is_server_ready()  # open, as HTTP health
        with pytest.raises(InferenceServerException) as info:
            client.get_model_metadata("pad")
        assert _status(info.value) == "StatusCode.UNAUTHENTICATED"
        with pytest.raises(InferenceServerException, match="UNAUTHENTICATED"):
            client.infer("pad", [_pad_input(1)], headers={"authorization": "Bearer nope"})
        out = client.infer("pad", [_pad_input(2)], headers={"authorization": "Bearer k-two"})
        np.testing.assert_array_equal(
            out.as_numpy("OutputTensor"), np.pad(np.ones((2, 4), np.float32), [(0, 0), (1, 1)])
        )


def test_limits_are_resource_exhausted(keyed_server: TransportServer) -> None:
    auth = {"authorization": "Bearer k-one"}
    with triton.InferenceServerClient(keyed_server.grpc_address) as client:
        with pytest.raises(InferenceServerException) as info:  # 160 rows * 16 B > 2048
            client.infer("pad", [_pad_input(160)], headers=auth)
        assert _status(info.value) == "StatusCode.RESOURCE_EXHAUSTED"
        assert "max_tensor_bytes" in info.value.message()
        with pytest.raises(InferenceServerException) as info:  # the message > 4096 bytes
            client.infer("pad", [_pad_input(1024)], headers=auth)
        assert _status(info.value) == "StatusCode.RESOURCE_EXHAUSTED"
        assert re.search(r"larger than max|message larger", info.value.message())


def test_shutdown_finishes_the_call_in_flight_then_stops() -> None:
    srv = TransportServer("--max-concurrency", "1")
    try:
        op, x = slow_pooling()
        op = {**op, "InputTensor": {"DataType": "FLOAT32", "Sizes": list(x.shape)}}
        r = httpx.post(
            srv.url + "/v1/operators", json={"name": "slow", "operator": op}, timeout=120
        )
        assert r.status_code == 201, r.text
        client = triton.InferenceServerClient(srv.grpc_address)
        tensor = triton.InferInput("InputTensor", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        done: Future[Any] = Future()
        threading.Thread(
            target=lambda: done.set_result(_call(lambda: client.infer("slow", [tensor])))
        ).start()
        # Signal once the call holds the compute slot (or has already finished).
        with httpx.Client(base_url=srv.url, timeout=60) as http:
            while (
                not done.done()
                and "dmlserve_inflight_requests 1.0" not in http.get("/metrics").text
            ):
                pass
        srv.http.proc.send_signal(signal.SIGTERM)
        result = done.result(timeout=120)
        assert not isinstance(result, Exception), result
        assert result.as_numpy("OutputTensor").shape == (1, 1, 492, 492)
        # uvicorn re-raises the signal after its graceful shutdown: -SIGTERM is a clean stop.
        assert srv.http.proc.wait(timeout=120) in (0, -signal.SIGTERM)
        assert '"shut down"' in srv.http.logs()
        with pytest.raises(InferenceServerException, match="UNAVAILABLE"):
            client.is_server_live()
        client.close()
    finally:
        srv.stop()


def _call(fn: Any) -> Any:
    try:
        return fn()
    except Exception as exc:  # handed to the test thread
        return exc
