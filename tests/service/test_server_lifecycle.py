"""A real server: body limit enforced while reading, graceful shutdown, request ids, logs, CLI."""

from __future__ import annotations

import gc
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref

import httpx
import numpy as np
import pytest

from tests.servers import REPO, ServerProcess
from tests.service.conftest import ThreadServer, app_client, wait_until
from tests.service.helpers import PADDING_OP, execute_request


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

    def logged() -> bool:  # the access line is written after the response has gone out
        lines = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
        access = [e for e in lines if e.get("logger") == "dmlserve.access"]
        return any(e["request_id"] == "trace-123" and e["status"] == 200 for e in access)

    wait_until(logged)


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
    body, headers = execute_request(PADDING_OP, {"InputTensor": np.ones((1, 1, 2, 2), np.int8)})
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    with socket.create_connection(("127.0.0.1", srv.port), timeout=60) as s:
        # The request is in the app once the app asks for its body (uvicorn then answers the
        # Expect with 100 Continue); it is still in flight while the test holds the body back.
        s.sendall(
            f"POST /v1/execute HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n{head}"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
        )
        assert s.recv(65536).startswith(b"HTTP/1.1 100 Continue")
        srv.terminate()
        refused = False
        for _ in range(6000):  # until the listening socket is closed (bounded)
            try:
                httpx.get(srv.url + "/v2/health/live", timeout=2)
            except httpx.HTTPError:
                refused = True
                break
            time.sleep(0.01)
        s.sendall(body)
        reply = b""
        while not reply.endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            reply += chunk
    code = srv.stop()
    assert reply.startswith(b"HTTP/1.1 200 "), reply[:300]
    assert b'"OutputTensor"' in reply
    assert refused, "new connections must be refused once shutdown has begun"
    # uvicorn re-raises the signal after its graceful shutdown, so -SIGTERM is a clean stop.
    assert code in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in srv.logs() and '"shut down"' in srv.logs()


@pytest.mark.parametrize("path", ["/v1/execute", "/v2/models/pad/infer"])
def test_requests_still_queued_when_the_grace_period_ends_get_503(path: str) -> None:
    with ThreadServer(max_concurrency=1, shutdown_timeout_s=0.5, retry_after_s=3) as srv:
        pad = {**PADDING_OP, "InputTensor": {"DataType": "INT8", "Sizes": [1, 1, 2, 2]}}
        assert httpx.post(srv.url + "/v1/operators", json={"name": "pad", "operator": pad})
        x = np.ones((1, 1, 2, 2), np.int8)
        if path.startswith("/v2"):
            doc = {"inputs": [{"name": "InputTensor", "shape": [1, 1, 2, 2], "datatype": "INT8",
                               "data": x.reshape(-1).tolist()}]}  # fmt: skip
            body, headers = json.dumps(doc).encode(), {"Content-Type": "application/json"}
        else:
            body, headers = execute_request(PADDING_OP, {"InputTensor": x})
        gate, held = srv.hold_slots(1)
        queued: dict[str, httpx.Response] = {}
        sender = threading.Thread(
            target=lambda: queued.update(r=httpx.post(srv.url + path, content=body,
                                                      headers=headers, timeout=60)),
        )  # fmt: skip
        sender.start()
        wait_until(lambda: srv.state.limiter.waiting == 1)
        srv.server.should_exit = True  # as SIGTERM does; the slot stays held past the grace
        sender.join(60)
        assert not srv.state.ready  # shutdown turned readiness off
        gate.set()
    r = queued["r"]
    assert r.status_code == 503 and r.headers["retry-after"] == "3"
    if path.startswith("/v2"):
        assert set(r.json()) == {"error"} and "shutting down" in r.json()["error"]
    else:
        assert r.headers["content-type"] == "application/problem+json"
        assert "shutting down" in r.json()["detail"]


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


async def test_start_up_freezes_what_it_made_and_shutdown_thaws_it() -> None:
    """The start-up heap is left out of the collector's full passes (a pause for every
    request in flight otherwise); cycles made while serving are still collected, and after
    shutdown the app itself can be."""

    class Cycle:
        def __init__(self) -> None:
            self.me = self

    before = gc.get_freeze_count()
    async with app_client() as c:
        assert gc.get_freeze_count() > before
        assert (await c.get("/v2/health/ready")).status_code == 200
        made = Cycle()
        made_ref = weakref.ref(made)
        del made
        gc.collect()
        assert made_ref() is None
        app_ref = weakref.ref(c.app)  # type: ignore[attr-defined]
    del c
    gc.collect()
    assert app_ref() is None
