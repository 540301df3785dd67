"""`dmlserve serve` in a subprocess, for the tests that need a real server process.

On a free loopback port and the test backend; ready once `/v2/health/ready` answers 200;
stopped with SIGTERM, then killed if it does not exit.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.backend import TEST_BACKEND

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"


# A server process binds its port some time after the test picked it, so two pytest-xdist
# workers must never pick the same one: each takes ports from a slice of its own, below the
# kernel's ephemeral range (where port-0 binds and outgoing connections land).
_PORTS_BASE, _PORTS_PER_WORKER = 20000, 600
_next_port = itertools.count()


def free_port() -> int:
    """A loopback port nothing listens on right now, of this test process's own slice."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    first = _PORTS_BASE + (int(worker) if worker.isdigit() else 0) * _PORTS_PER_WORKER
    for _ in range(_PORTS_PER_WORKER):
        port = first + next(_next_port) % _PORTS_PER_WORKER
        with socket.socket() as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {first}..{first + _PORTS_PER_WORKER - 1}")


class ServerProcess:
    """`python -m dmlserve.service.cli serve ...` on a free port, ready when `/v2/health/ready`
    is. `flags` come after the test backend and address (a later flag wins); `env` adds to the
    inherited environment, from which `clean_env` first drops every `DMLSERVE_` setting."""

    def __init__(
        self, *flags: str, env: dict[str, str] | None = None, clean_env: bool = False
    ) -> None:
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="dmlserve-", suffix=".log", delete=False)
        cmd = [sys.executable, "-m", "dmlserve.service.cli", "serve", "--backend", TEST_BACKEND,
               "--host", HOST, "--port", str(self.port), *flags]  # fmt: skip
        inherited = {
            k: v for k, v in os.environ.items() if not (clean_env and k.startswith("DMLSERVE_"))
        }
        src = str(REPO / "src")
        pythonpath = os.pathsep.join(filter(None, [src, inherited.get("PYTHONPATH")]))
        full_env = {**inherited, "PYTHONPATH": pythonpath, **(env or {})}
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, env=full_env, stdout=self.log, stderr=subprocess.STDOUT
        )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.logs()}")
            try:
                if httpx.get(self.url + "/v2/health/ready", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server not ready in {timeout} s:\n{self.logs()}")

    def logs(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self) -> int:
        self.terminate()
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
        finally:
            self.log.close()

    def close(self) -> int:
        """`stop`, then remove the log."""
        code = self.stop()
        Path(self.log.name).unlink(missing_ok=True)
        return code
