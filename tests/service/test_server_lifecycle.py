"""A real server: body limit enforced while reading, graceful shutdown, request ids, logs, CLI."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import numpy as np

from tests.servers import REPO, ServerProcess
from tests.service.helpers import PADDING_OP, execute_request, slow_pooling


def _raw_request(port: int, head: bytes, body: bytes, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(head + body)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


def test_body_over_the_limit_is_refused_without_reading_it(server: ServerProcess) -> None:
    # Declare 1 GiB, send 10 bytes: the answer comes at once, the rest is never awaited.
    head = (
        b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1073741824\r\n\r\n"
    )
    start = time.monotonic()
    reply = _raw_request(server.port, head, b'{"operator"')
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert time.monotonic() - start < 5


def test_chunked_body_over_the_limit_stops_reading(server: ServerProcess) -> None:
    # No Content-Length: 1 MiB chunks keep coming; the server answers 413 once past the limit
    # (64 MiB by default) while the client is still sending, and stops reading.
    sent = 0
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as s:
        s.sendall(
            b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"%x\r\n%s\r\n" % (1 << 20, b" " * (1 << 20))

        def send() -> None:
            nonlocal sent
            try:
                while sent < 256:  # never more than 256 MiB
                    s.sendall(chunk)
                    sent += 1
            except OSError:
                pass  # the server closed the connection: it stopped reading

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        reply = s.recv(65536)
        s.shutdown(socket.SHUT_RDWR)
        sender.join(20)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert sent < 256


def test_request_id_is_honoured_or_generated_and_logged(server: ServerProcess) -> None:
    r = httpx.get(server.url + "/v2/health/live", headers={"X-Request-ID": "trace-123"})
    assert r.headers["x-request-id"] == "trace-123"
    generated = httpx.get(server.url + "/v2/health/live").headers["x-request-id"]
    assert len(generated) == 32
    # An id that could forge log lines is replaced.
    forged = httpx.get(server.url + "/v2/health/live", headers={"X-Request-ID": "a b\tc"})
    assert forged.headers["x-request-id"] != "a b\tc"
    time.sleep(0.2)
    lines = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
    access = [e for e in lines if e.get("logger") == "dmlserve.access"]
    assert any(e["request_id"] == "trace-123" and e["status"] == 200 for e in access)


def test_keys_never_reach_the_logs() -> None:
    srv = ServerProcess("--api-keys", "sekrit-one,sekrit-two", "--log-level", "DEBUG")
    try:
        ok = httpx.get(srv.url + "/v2", headers={"Authorization": "Bearer sekrit-two"})
        assert ok.status_code == 200
        bad = httpx.get(srv.url + "/v2", headers={"Authorization": "Bearer sekrit-guess"})
        assert bad.status_code == 401 and bad.json() == {"error": "missing or invalid API key"}
    finally:
        srv.stop()
    assert "sekrit" not in srv.logs()


def test_sigterm_lets_the_request_in_flight_finish() -> None:
    srv = ServerProcess()
    op, x = slow_pooling(window=31)
    body, headers = execute_request(op, {"InputTensor": x}, "binary")
    result: dict[str, object] = {}

    def slow_call() -> None:
        result["response"] = httpx.post(
            srv.url + "/v1/execute", content=body, headers=headers, timeout=60
        )

    worker = threading.Thread(target=slow_call)
    worker.start()
    # Wait until the request is being computed, then ask the server to stop.
    for _ in range(300):
        metrics = httpx.get(srv.url + "/metrics").text
        if "dmlserve_inflight_requests 1.0" in metrics:
            break
        time.sleep(0.01)
    srv.terminate()
    time.sleep(0.3)
    refused = False
    try:
        httpx.get(srv.url + "/v2/health/live", timeout=2)
    except httpx.HTTPError:
        refused = True
    worker.join(60)
    code = srv.stop()
    response = result["response"]
    assert isinstance(response, httpx.Response) and response.status_code == 200
    assert refused, "new connections must be refused once shutdown has begun"
    # uvicorn re-raises the signal after its graceful shutdown, so -SIGTERM is a clean stop.
    assert code in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in srv.logs() and '"shut down"' in srv.logs()


def test_environment_and_flags_configure_the_server() -> None:
    env = {"DMLSERVE_MAX_REQUEST_BYTES": "100", "DMLSERVE_API_KEYS": ""}
    srv = ServerProcess("--max-tensor-bytes", "64", env=env)
    try:
        small, h = execute_request(PADDING_OP, {"InputTensor": np.ones((1, 1, 2, 2), np.int8)})
        assert len(small) > 100
        r = httpx.post(srv.url + "/v1/execute", content=small, headers=h)
        assert r.status_code == 413 and "max_request_bytes = 100" in r.json()["detail"]
    finally:
        srv.stop()


def test_requested_backend_that_cannot_start_stops_startup() -> None:
    # On a host without a GPU, --backend cupy must fail loudly, not fall back.
    from dmlserve.kernels._array import cuda_available

    if cuda_available():
        # Where a GPU answers, the same request must start a CuPy server instead.
        srv = ServerProcess("--backend", "cupy")
        srv.stop()
        assert '"backend": "cupy"' in srv.logs()
        return
    proc = subprocess.run(
        [sys.executable, "-m", "dmlserve.service.cli", "serve", "--backend", "cupy", "--port", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "cupy" in proc.stderr and "CUDA" in proc.stderr
