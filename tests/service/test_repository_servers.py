"""Real server processes on one model repository, driven by the unmodified `tritonclient`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import orjson
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from tests.backend import TEST_BACKEND
from tests.servers import REPO, ServerProcess
from tests.service.models import (
    BATCHING,
    POOL,
    conv_input,
    expected_conv,
    expected_fold,
    expected_pool,
    fold_input,
    pool_input,
    write_repository,
)

MODELS: dict[str, tuple[Callable[..., np.ndarray], Callable[[np.ndarray], np.ndarray], str]] = {
    "pool": (pool_input, expected_pool, "FP32"),
    "conv": (conv_input, expected_conv, "UINT8"),
    "fold": (fold_input, expected_fold, "FP32"),
}


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_repository(tmp_path_factory.mktemp("repository"), extra=POOL)


@pytest.fixture(scope="module")
def servers(repository: Path) -> Iterator[list[ServerProcess]]:
    """Two replicas of one repository: model control none, and poll (load and unload on)."""
    started = [ServerProcess("--model-repository", str(repository))]
    try:
        started.append(
            ServerProcess(
                "--model-repository",
                str(repository),
                "--model-control",
                "poll",
                "--repository-poll-s",
                "3600",
            )  # fmt: skip
        )
        yield started
    finally:
        for server in started:
            server.stop()


def _client(server: ServerProcess) -> triton.InferenceServerClient:
    return triton.InferenceServerClient(server.url.removeprefix("http://"))


def _infer(client: triton.InferenceServerClient, name: str, x: np.ndarray, dt: str) -> np.ndarray:
    inp = triton.InferInput("InputTensor", list(x.shape), dt)
    inp.set_data_from_numpy(x, binary_data=True)
    out = client.infer(name, [inp], outputs=[triton.InferRequestedOutput("OutputTensor")])
    result: np.ndarray = out.as_numpy("OutputTensor")
    return result


def test_every_replica_serves_the_repository(servers: list[ServerProcess]) -> None:
    for i, server in enumerate(servers):
        client = _client(server)
        try:
            assert client.is_server_ready()
            assert {"model_repository", "statistics"} <= set(
                client.get_server_metadata()["extensions"]
            )
            for name, (make, expect, dt) in MODELS.items():
                assert client.is_model_ready(name)
                x = make(2, seed=i)
                np.testing.assert_array_equal(_infer(client, name, x, dt), expect(x))
            index = client.get_model_repository_index()
            assert {(m["name"], m["state"]) for m in index} == {
                (n, "READY") for n in (*MODELS, "extra")
            }
        finally:
            client.close()


def test_get_model_config(servers: list[ServerProcess]) -> None:
    client = _client(servers[0])
    try:
        conv = client.get_model_config("conv")
        assert conv["max_batch_size"] == BATCHING["max_batch_size"]
        assert [(i["name"], i["data_type"], i["dims"]) for i in conv["input"]] == [
            ("InputTensor", "TYPE_UINT8", [2, 5, 5])
        ]
        assert conv["dynamic_batching"]["preferred_batch_size"] == [4, 8]
        pool = client.get_model_config("pool", model_version="1")
        assert pool["max_batch_size"] > 0 and pool["output"][0]["dims"] == [3, 4, 4]
        with pytest.raises(InferenceServerException):
            client.get_model_config("nothing")
    finally:
        client.close()


def test_get_inference_statistics(servers: list[ServerProcess]) -> None:
    client = _client(servers[0])
    try:
        before = client.get_inference_statistics("fold")["model_stats"][0]
        for batch in (1, 4):
            _infer(client, "fold", fold_input(batch), "FP32")
        after = client.get_inference_statistics("fold", "1")["model_stats"][0]
        assert after["inference_count"] - before["inference_count"] == 5
        assert after["execution_count"] - before["execution_count"] == 2
        success = after["inference_stats"]["success"]
        assert success["count"] - before["inference_stats"]["success"]["count"] == 2
        every = client.get_inference_statistics()["model_stats"]
        assert {s["name"] for s in every} == {*MODELS, "extra"}
    finally:
        client.close()


def test_load_and_unload_model(servers: list[ServerProcess], repository: Path) -> None:
    client = _client(servers[1])
    try:
        client.unload_model("extra")
        assert not client.is_model_ready("extra")
        entry = next(m for m in client.get_model_repository_index() if m["name"] == "extra")
        assert (entry["state"], entry["reason"]) == ("UNAVAILABLE", "unloaded")
        client.load_model("extra")
        assert client.is_model_ready("extra")
        x = pool_input(1)
        np.testing.assert_array_equal(_infer(client, "extra", x, "FP32"), expected_pool(x))
        with pytest.raises(InferenceServerException, match="has no missing.json"):
            client.load_model("missing")
        # The other replica, with model control none, refuses both.
        other = _client(servers[0])
        try:
            with pytest.raises(InferenceServerException, match="model control 'none'"):
                other.unload_model("extra")
        finally:
            other.close()
    finally:
        client.close()


def test_a_broken_file_stops_the_server_with_one_line(tmp_path: Path) -> None:
    repo = write_repository(tmp_path / "models")
    broken = {"operator": {**POOL["operator"], "Strides": [2, 0]}}
    (repo / "broken.json").write_bytes(orjson.dumps(broken))
    pythonpath = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "DMLSERVE_MODEL_REPOSITORY": str(repo)}
    done = subprocess.run(
        [sys.executable, "-m", "dmlserve.service.cli", "serve", "--backend", TEST_BACKEND,
         "--port", "0"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    # One plain line for the operator (beside the JSON log record), and no traceback.
    plain = [line for line in done.stderr.splitlines() if not line.startswith("{")]
    assert len(plain) == 1 and plain[0].startswith("dmlserve: "), done.stderr
    assert str(repo / "broken.json") in plain[0] and "Strides[1] must be at least 1" in plain[0]
    assert "Traceback" not in done.stderr
