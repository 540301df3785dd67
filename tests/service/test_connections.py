"""Connection limits of a real server: header, body and keep-alive deadlines, the connection
cap, and the log lines they write.

Every deadline here is tiny and every wait generous: each test asserts that the server closed
the socket (or what it answered), never how long that took.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from tests.servers import REPO, ServerProcess
from tests.service.conftest import wait_until

WAIT_S = 30.0  # the most any test waits for the server to act


@pytest.fixture(scope="module")
def strict() -> Iterator[ServerProcess]:
    srv = ServerProcess(
        "--header-timeout-s", "0.2", "--body-timeout-s", "0.2", "--keepalive-timeout-s", "0.2",
    )  # fmt: skip
    try:
        yield srv
    finally:
        srv.stop()


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)


def _closed_by_server(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


def _warnings(srv: ServerProcess, message: str) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in srv.logs().splitlines() if line.startswith("{")]
    return [e for e in lines if e.get("level") == "warning" and message in str(e["message"])]


def test_a_connection_that_sends_nothing_is_closed(strict: ServerProcess) -> None:
    with _connect(strict.port) as s:
        assert _closed_by_server(s) == b""
    wait_until(lambda: _warnings(strict, "request headers incomplete after header_timeout_s"))


def test_headers_sent_byte_by_byte_do_not_keep_a_connection(strict: ServerProcess) -> None:
    # Each byte arrives well within the deadline, the headers never end: the deadline counts
    # from the start of the request, not from the last byte, so the server closes.
    head = b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 100_000
    closed = False
    with _connect(strict.port) as s:
        s.settimeout(0.01)
        for byte in head:
            try:
                s.sendall(bytes([byte]))
                if s.recv(1) == b"":
                    closed = True
                    break
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
    assert closed


def test_a_body_shorter_than_its_length_gets_408_and_is_closed(strict: ServerProcess) -> None:
    with _connect(strict.port) as s:
        s.sendall(
            b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"operator": '
        )
        reply = _closed_by_server(s)
    assert reply.startswith(b"HTTP/1.1 408 "), reply[:200]
    assert b"connection: close" in reply.lower() and b"body_timeout_s" in reply


def test_a_body_the_answer_did_not_wait_for_is_bounded_too(strict: ServerProcess) -> None:
    # 404 before the body is read; the rest of the declared body never comes.
    with _connect(strict.port) as s:
        s.sendall(
            b"POST /v1/operators/nobody/execute HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{}"
        )
        reply = _closed_by_server(s)
    assert reply.startswith(b"HTTP/1.1 404 "), reply[:200]
    wait_until(lambda: _warnings(strict, "request body incomplete after body_timeout_s"))


def test_after_an_unread_body_arrives_the_connection_idles_out(strict: ServerProcess) -> None:
    # uvicorn stops its keep-alive wait when the rest of the body comes in; the connection is
    # still closed once idle, and a stray line end between requests does not keep it either.
    with _connect(strict.port) as s:
        s.sendall(
            b"POST /v1/operators/nobody/execute HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 10\r\n\r\n{}"
        )
        reply = s.recv(65536)
        assert reply.startswith(b"HTTP/1.1 404 "), reply[:200]
        s.sendall(b" " * 8 + b"\r\n")
        assert b"HTTP/1.1" not in _closed_by_server(s)


def test_an_idle_keep_alive_connection_is_closed(strict: ServerProcess) -> None:
    with _connect(strict.port) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = _closed_by_server(s)
    assert reply.startswith(b"HTTP/1.1 200 ") and reply.endswith(b'{"live":true}')


def test_connections_past_the_cap_are_answered_503_and_closed() -> None:
    srv = ServerProcess("--max-connections", "4", "--header-timeout-s", "600")
    try:
        idle = [_connect(srv.port) for _ in range(4)]
        with _connect(srv.port) as extra:  # accepted after the four (in order): refused
            refusal = _closed_by_server(extra)
        assert refusal.startswith(b"HTTP/1.1 503 "), refusal[:200]
        head, _, body = refusal.partition(b"\r\n\r\n")
        assert b"retry-after: 1" in head.lower()
        doc = json.loads(body)
        assert doc["status"] == 503 and "max_connections = 4" in doc["detail"] == doc["error"]
        for s in idle:
            s.close()

        def served() -> bool:
            try:
                return httpx.get(srv.url + "/v2/health/live", timeout=WAIT_S).status_code == 200
            except httpx.RemoteProtocolError:
                return False  # still refused: the closed sockets are not counted off yet

        wait_until(served)
    finally:
        srv.stop()
    assert _warnings(srv, "connection refused: max_connections reached")


def test_the_cap_is_lowered_to_fit_the_open_file_limit() -> None:
    code = (
        "import logging, resource, sys\n"
        "logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format='%(message)s')\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))\n"
        "from dmlserve.service.server import connection_cap\n"
        "print(connection_cap(5000), connection_cap(100))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert "max_connections lowered to fit the open-file limit" in out
    assert out.splitlines()[-1] == "960 100"
