"""Overload: with the queue full, a request is refused before its body is read.

The compute slots are held by work that waits for the test, so the queue is full however fast
the machine is; a refusal that arrives while the body is still held back by the client proves
the server did not wait for it.
"""

from __future__ import annotations

import socket

from tests.service.conftest import ThreadServer

HEAD = (
    b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: 1000000\r\n\r\n"
)


def _answer_without_body(port: int) -> bytes:
    """The answer to a request whose body never comes (the socket times out otherwise)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(HEAD + b'{"operator": ')
        return s.recv(65536)


def test_a_full_queue_refuses_before_reading_the_body() -> None:
    with ThreadServer(max_concurrency=1, max_queue=0, retry_after_s=2) as srv:
        gate, _ = srv.hold_slots(1)
        reply = _answer_without_body(srv.port)
        gate.set()
    assert reply.startswith(b"HTTP/1.1 429 "), reply[:200]
    assert b"retry-after: 2" in reply.lower()
