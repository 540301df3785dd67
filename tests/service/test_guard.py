"""Every request ends in a response of its API's shape, and the connection stays usable."""

from __future__ import annotations

import json
import socket

import httpx

from tests.servers import ServerProcess
from tests.service.conftest import ThreadServer

PAD = {
    "type": "PADDING",
    "StartPadding": [1],
    "EndPadding": [1],
    "InputTensor": {"DataType": "INT8", "Sizes": [2]},
}


def _exchange(s: socket.socket, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send one request on an open connection and read its whole (Content-Length) answer."""
    s.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    while len(body) < int(headers["content-length"]):
        chunk = s.recv(65536)
        assert chunk, "the server closed the connection"
        body += chunk
    return int(lines[0].split()[1]), headers, body


def _post(path: str, doc: object) -> bytes:
    body = json.dumps(doc).encode()
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


LIVE = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"


def test_a_registered_operator_executed_without_its_input_is_422(server: ServerProcess) -> None:
    r = httpx.post(server.url + "/v1/operators", json={"name": "pad-noinput", "operator": PAD})
    assert r.is_success
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        status, headers, body = _exchange(
            s, _post("/v1/operators/pad-noinput/execute", {"inputs": {}})
        )
        assert status == 422 and headers["content-type"] == "application/problem+json"
        doc = json.loads(body)
        assert doc["errors"] == [{"loc": ["inputs"], "msg": "missing input(s): InputTensor"}]
        # The same connection serves the next request.
        assert _exchange(s, LIVE)[0] == 200


def test_a_defect_is_a_500_in_the_api_shape_and_keeps_the_connection() -> None:
    srv = ThreadServer()

    @srv.app.get("/v1/defect")
    async def defect() -> None:
        raise RuntimeError("a secret detail")

    @srv.app.get("/v2/defect")
    async def defect_v2() -> None:
        raise RuntimeError("a secret detail")

    with srv, socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
        status, headers, body = _exchange(s, b"GET /v1/defect HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 500 and headers["content-type"] == "application/problem+json"
        assert "bug" in json.loads(body)["detail"] and b"secret" not in body
        status, _, body = _exchange(s, b"GET /v2/defect HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 500 and set(json.loads(body)) == {"error"}
        assert _exchange(s, LIVE)[0] == 200
