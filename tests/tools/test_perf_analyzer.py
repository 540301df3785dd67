"""The perf_analyzer launcher: installs, runs the real binary, and tells no network apart."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from tests.tools.perf_analyzer import NETWORK_UNAVAILABLE, SCRIPT, perf_analyzer_command, prepare


def closed_port() -> int:
    """A loopback port with no listener: connecting to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_runs_the_real_binary_with_every_argument_passed_through() -> None:
    url = f"127.0.0.1:{closed_port()}"
    done = subprocess.run(
        [*perf_analyzer_command(), "-m", "pool", "-i", "grpc", "-u", url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = done.stdout + done.stderr
    # perf_analyzer itself ran, took the address it was given, and found no server there.
    assert done.returncode == 99, output
    assert "failed to get model metadata" in output
    assert url in output


def test_an_unreachable_index_reads_as_no_network_and_skips(tmp_path: Path) -> None:
    env = {
        "DMLSERVE_PERF_ANALYZER_CACHE": str(tmp_path / "cache"),
        "DMLSERVE_PERF_ANALYZER_WHEELS": str(tmp_path / "no-wheels"),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_INDEX_URL": f"http://127.0.0.1:{closed_port()}/simple/",
        "PIP_EXTRA_INDEX_URL": "",
        "PIP_FIND_LINKS": "",
    }
    done = subprocess.run(
        [str(SCRIPT), "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
        check=False,
    )
    assert done.returncode == NETWORK_UNAVAILABLE, done.stderr
    assert "network unavailable" in done.stderr
    with pytest.raises(pytest.skip.Exception, match="cannot be downloaded"):
        prepare(env)
