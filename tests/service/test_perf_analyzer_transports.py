"""Triton's perf_analyzer, unmodified, against a live server over gRPC and shared memory.

perf_analyzer reads the model's configuration first (ModelConfig over gRPC, GET
/v2/models/{name}/config over HTTP), then measures; each run here is a few small windows, and
only its outcome is checked (it ran, got answers, cleaned up), never its figures.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import httpx
import pytest

from tests.service.conftest import TransportServer
from tests.service.transports import SAMPLES
from tests.tools.perf_analyzer import cuda_runtime_library_path, perf_analyzer_command

MODEL = "t-padding-reflection-rank3-float32"
OUTPUT_BYTES = dict(SAMPLES)[MODEL].expected.nbytes
WINDOWS = ["--concurrency-range", "2", "--measurement-mode", "count_windows",
           "--measurement-request-count", "20", "--max-trials", "3",
           "--stability-percentage", "999"]  # fmt: skip


@pytest.fixture(scope="module")
def server() -> Iterator[TransportServer]:
    from tests.service.transports import register_samples

    srv = TransportServer()
    try:
        register_samples(srv.url)
        yield srv
    finally:
        srv.stop()


def _run(*args: str, shared_memory: bool = False) -> str:
    env = dict(os.environ)
    if shared_memory:
        env["DMLSERVE_PERF_ANALYZER_LIBRARY_PATH"] = cuda_runtime_library_path()
    done = subprocess.run(
        [*perf_analyzer_command(), "-m", MODEL, *args, *WINDOWS],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "Concurrency: 2, throughput:" in output, output
    assert "Unable to" not in output and "error" not in output.lower(), output
    return output


def test_grpc(server: TransportServer) -> None:
    _run("-i", "grpc", "-u", server.grpc_address)


def test_grpc_with_system_shared_memory(server: TransportServer) -> None:
    _run("-i", "grpc", "-u", server.grpc_address, "--shared-memory", "system",
         "--output-shared-memory-size", str(OUTPUT_BYTES), shared_memory=True)  # fmt: skip
    # perf_analyzer unregistered what it registered.
    assert httpx.get(server.url + "/v2/systemsharedmemory/status").json() == []


def test_http_with_system_shared_memory(server: TransportServer) -> None:
    _run("-i", "http", "-u", server.http_address, "--shared-memory", "system",
         "--output-shared-memory-size", str(OUTPUT_BYTES), shared_memory=True)  # fmt: skip
    assert httpx.get(server.url + "/v2/systemsharedmemory/status").json() == []


@pytest.mark.gpu
def test_grpc_and_http_with_cuda_shared_memory() -> None:
    from tests.service.transports import register_samples

    srv = TransportServer("--backend", "cupy")
    try:
        register_samples(srv.url)
        args = ["--shared-memory", "cuda", "--output-shared-memory-size", str(OUTPUT_BYTES)]
        _run("-i", "grpc", "-u", srv.grpc_address, *args, shared_memory=True)
        if httpx.get(f"{srv.url}/v2/models/{MODEL}/config").status_code != 404:
            _run("-i", "http", "-u", srv.http_address, *args, shared_memory=True)
        assert httpx.get(srv.url + "/v2/cudasharedmemory/status").json() == []
    finally:
        srv.stop()
