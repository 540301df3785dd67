"""The model repository, constants, configuration and statistics through gRPC (the unmodified
`tritonclient.grpc`), served by the same modules as over HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.utils import InferenceServerException

from tests.service.conftest import TransportServer
from tests.service.models import BATCHING, conv_input, expected_conv, write_repository


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TransportServer]:
    repository = write_repository(tmp_path_factory.mktemp("repository"))
    srv = TransportServer("--model-repository", str(repository), "--model-control", "explicit")
    try:
        yield srv
    finally:
        srv.stop()


def test_load_configure_infer_and_count_over_grpc(server: TransportServer) -> None:
    with triton.InferenceServerClient(server.grpc_address) as client:
        index = {m.name: m.state for m in client.get_model_repository_index().models}
        assert index == {"conv": "UNAVAILABLE", "fold": "UNAVAILABLE", "pool": "UNAVAILABLE"}
        client.load_model("conv")
        assert client.is_model_ready("conv")
        index = {m.name: m.state for m in client.get_model_repository_index().models}
        assert index == {"conv": "READY", "fold": "UNAVAILABLE", "pool": "UNAVAILABLE"}

        config = client.get_model_config("conv").config
        assert config.max_batch_size == BATCHING["max_batch_size"]
        assert [(i.name, list(i.dims)) for i in config.input] == [("InputTensor", [2, 5, 5])]
        assert list(config.dynamic_batching.preferred_batch_size) == [4, 8]

        x = conv_input(3, seed=9)
        tensor = triton.InferInput("InputTensor", list(x.shape), "UINT8")
        tensor.set_data_from_numpy(x)
        out = client.infer("conv", [tensor]).as_numpy("OutputTensor")
        np.testing.assert_array_equal(out, expected_conv(x))

        stat = client.get_inference_statistics("conv").model_stats[0]
        assert (stat.inference_count, stat.execution_count) == (3, 1)
        assert stat.inference_stats.success.count == 1

        client.unload_model("conv")
        assert not client.is_model_ready("conv")
        with pytest.raises(InferenceServerException, match="has no missing.json"):
            client.load_model("missing")


@pytest.mark.parametrize(
    ("config", "files", "refused"),
    [('{"max_batch_size": 1}', None, "'config'"), (None, {"file:1/model.json": b"{}"}, "'file:")],
)
def test_a_load_that_would_replace_the_file_is_refused_over_grpc(
    server: TransportServer, config: str | None, files: dict[str, bytes] | None, refused: str
) -> None:
    # The same refusal as over HTTP: silently loading the file instead would leave the client
    # believing its configuration is served.
    with triton.InferenceServerClient(server.grpc_address) as client:
        with pytest.raises(InferenceServerException, match=f"load parameter {refused}") as err:
            client.load_model("pool", config=config, files=files)
        assert err.value.status() == "StatusCode.INVALID_ARGUMENT"
        assert not client.is_model_ready("pool")
