"""The perf_analyzer launcher: installs, runs the real binary, tells no network apart, and
runs perf_analyzer against a live server."""

from __future__ import annotations

import os
import re
import socket
import subprocess
from pathlib import Path

import pytest

from tests.service.conftest import ServerProcess
from tests.service.models import write_repository
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


def test_perf_analyzer_runs_against_a_live_server_and_reads_its_statistics(
    tmp_path: Path,
) -> None:
    command = perf_analyzer_command()
    server = ServerProcess("--model-repository", str(write_repository(tmp_path / "models")))
    try:
        done = subprocess.run(
            [*command, "-m", "pool", "-i", "http", "-u", server.url.removeprefix("http://"),
             "-b", "4", "--concurrency-range", "2",
             # Windows of a request count, not of time, and any spread between them accepted:
             # the run completes however busy the machine is.
             "--measurement-mode", "count_windows", "--measurement-request-count", "10",
             "--stability-percentage", "1000"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    finally:
        server.stop()
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    # The server-side section comes from the statistics extension, with Triton's meanings:
    # each request of batch 4 is one execution of four inferences.
    server_side = output.split("  Server: \n", 1)[1]
    counts = dict(re.findall(r"^\s+(Inference count|Execution count|Successful request count): "
                             r"(\d+)$", server_side, re.MULTILINE))  # fmt: skip
    assert int(counts["Execution count"]) > 0, output
    assert int(counts["Inference count"]) == 4 * int(counts["Execution count"])
    assert counts["Successful request count"] == counts["Execution count"]
    assert "Avg request latency" in server_side
