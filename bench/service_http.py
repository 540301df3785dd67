"""Load-generation pieces for bench/service_load.py: a lean HTTP/1.1 keep-alive client,
a bounded closed-loop load runner, and a wrk runner.

The client is hand-rolled over asyncio streams (stdlib only) because a general-purpose
client (httpx) costs more CPU per request than the servers under test, and on a small
machine the generator shares the cores with the server. Loopback only.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path


def check_loopback(host: str) -> None:
    """Refuse any target that is not this machine."""
    addrs = {info[4][0] for info in socket.getaddrinfo(host, None)}
    if not addrs or not all(ipaddress.ip_address(a).is_loopback for a in addrs):
        raise SystemExit(f"refusing to load {host!r}: loopback addresses only")


def build_request(host: str, port: int, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    """One POST's head (the body is sent after it, unchanged)."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class Connection:
    """One keep-alive connection; responses must carry Content-Length or be chunked."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer)

    async def post(self, head: bytes, body: bytes) -> tuple[int, dict[str, str], bytes]:
        self.writer.write(head)
        if body:
            self.writer.write(body)
        await self.writer.drain()
        raw = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = raw.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        headers = {}
        for line in header_lines:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        if "content-length" in headers:
            data = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while size := int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16):
                parts.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
            await self.reader.readuntil(b"\r\n")
            data = b"".join(parts)
        else:
            raise RuntimeError("response without Content-Length or chunked encoding")
        return status, headers, data

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except OSError:
            pass


def post_blocking(
    host: str, port: int, head: bytes, body: bytes, timeout_s: float = 300.0
) -> tuple[int, bytes]:
    """One POST on a fresh blocking socket, the response read into one preallocated buffer.

    For large bodies: no per-chunk Python objects beyond the kernel's recv calls, so the
    client costs as little as Python allows and the server dominates the time.
    """
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(head)
        sock.sendall(body)
        raw = b""
        while b"\r\n\r\n" not in raw:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed before the response head")
            raw += chunk
        head_bytes, _, rest = raw.partition(b"\r\n\r\n")
        lines = head_bytes.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length = next(
            int(v) for k, _, v in (ln.partition(":") for ln in lines[1:])
            if k.strip().lower() == "content-length"
        )  # fmt: skip
        buf = bytearray(length)
        view = memoryview(buf)
        view[: len(rest)] = rest
        got = len(rest)
        while got < length:
            n = sock.recv_into(view[got:], min(length - got, 1 << 22))
            if not n:
                raise ConnectionError("connection closed mid-response")
            got += n
        return status, bytes(buf)


@dataclass
class LoadResult:
    client: str
    connections: int
    requests: int
    errors: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    statuses: dict[int, int] = field(default_factory=dict)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=1000, method="inclusive")[round(q * 10) - 1]


async def closed_loop(
    host: str,
    port: int,
    head: bytes,
    body: bytes,
    *,
    connections: int,
    max_requests: int,
    duration_s: float,
    warmup_s: float,
    timeout_s: float = 30.0,
) -> LoadResult:
    """`connections` clients, each sending its next request when the previous one answers.

    Bounded: stops after `max_requests` measured requests or `duration_s` seconds, whichever
    comes first; requests of the first `warmup_s` seconds are not measured.
    """
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    errors = 0
    start = time.perf_counter()
    measure_from = start + warmup_s
    deadline = measure_from + duration_s
    last_done = measure_from
    issued = 0

    async def worker() -> None:
        nonlocal errors, last_done, issued
        conn = await Connection.open(host, port)
        try:
            while issued < max_requests and time.perf_counter() < deadline:
                t0 = time.perf_counter()
                measured = t0 >= measure_from
                issued += measured
                try:
                    status, _, _ = await asyncio.wait_for(conn.post(head, body), timeout_s)
                except (OSError, asyncio.IncompleteReadError, TimeoutError):
                    errors += measured
                    await conn.close()
                    conn = await Connection.open(host, port)
                    continue
                t1 = time.perf_counter()
                if measured:
                    statuses[status] = statuses.get(status, 0) + 1
                    if status == 200:
                        latencies.append(t1 - t0)
                        last_done = max(last_done, t1)
                    else:
                        errors += 1
        finally:
            await conn.close()

    await asyncio.gather(*(worker() for _ in range(connections)))
    seconds = max(last_done - measure_from, 1e-9)
    ms = [x * 1e3 for x in latencies]
    return LoadResult(
        client="python",
        connections=connections,
        requests=len(latencies),
        errors=errors,
        seconds=seconds,
        rps=len(latencies) / seconds,
        p50_ms=percentile(ms, 50),
        p99_ms=percentile(ms, 99),
        statuses=statuses,
    )


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


def _ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()  # type: ignore[union-attr]
    return float(value) * _UNITS[unit]


def run_wrk(
    url: str,
    body: bytes,
    content_type: str,
    connections: int,
    duration_s: float,
    warmup_s: float = 0.0,
) -> LoadResult:
    """wrk with a Lua script that POSTs `body`; bounded by its duration (after an unmeasured
    run of `warmup_s`, whole seconds)."""
    with tempfile.TemporaryDirectory() as tmp:
        body_file = Path(tmp, "body")
        body_file.write_bytes(body)
        script = Path(tmp, "post.lua")
        script.write_text(
            'wrk.method = "POST"\n'
            f'wrk.headers["Content-Type"] = "{content_type}"\n'
            f'local f = assert(io.open("{body_file}", "rb"))\n'
            "wrk.body = f:read('*a')\n"
            "f:close()\n"
        )
        threads = min(2, connections)
        base = ["wrk", f"-t{threads}", f"-c{connections}"]
        tail = ["--timeout", "30s", "--latency", "-s", str(script), url]
        if int(warmup_s) > 0:
            warm = [*base, f"-d{int(warmup_s)}s", *tail]
            subprocess.run(warm, capture_output=True, timeout=warmup_s + 60, check=True)
        cmd = [*base, f"-d{int(duration_s)}s", *tail]
        out = subprocess.run(
            cmd, capture_output=True, text=True, timeout=duration_s + 60, check=True
        ).stdout
    total = int(re.search(r"(\d+) requests in ([\d.]+)(\w+)", out).group(1))  # type: ignore[union-attr]
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    dist = dict(re.findall(r"^\s+(50|99)%\s+([\d.]+\w+)", out, re.M))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = (int(non2xx.group(1)) if non2xx else 0) + (
        sum(int(g) for g in sock.groups()) if sock else 0
    )
    return LoadResult(
        client="wrk",
        connections=connections,
        requests=total,
        errors=errors,
        seconds=duration_s,
        rps=rps,
        p50_ms=_ms(dist["50"]),
        p99_ms=_ms(dist["99"]),
    )
