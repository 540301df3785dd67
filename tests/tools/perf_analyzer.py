"""Triton's perf_analyzer for tests: the command that runs it, installed on first use."""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("perf-analyzer")
# The script's exit status when its first run cannot download the wheel or the runtime.
NETWORK_UNAVAILABLE = 75
# A cold install downloads about 15 MB and a package index; a warm one only execs.
INSTALL_TIMEOUT_S = 600


def prepare(env: Mapping[str, str] | None = None) -> list[str]:
    """Install perf_analyzer if needed and return the command prefix that runs it.

    Skips the calling test only when the download finds no network; any other failure fails it.
    """
    done = subprocess.run(
        [str(SCRIPT), "--version"],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        env=None if env is None else {**os.environ, **env},
        check=False,
    )
    if done.returncode == NETWORK_UNAVAILABLE:
        reason = done.stderr.strip().splitlines()[-1]
        pytest.skip(f"perf_analyzer is not installed and cannot be downloaded here ({reason})")
    # perf_analyzer prints its version on stderr.
    if done.returncode != 0 or "Perf Analyzer Version" not in done.stderr:
        pytest.fail(
            f"{SCRIPT} --version exited {done.returncode}:\n{done.stdout}{done.stderr}",
            pytrace=False,
        )
    return [str(SCRIPT)]


@functools.cache
def _prepared() -> tuple[str, ...]:
    return tuple(prepare())


def perf_analyzer_command() -> list[str]:
    """The command prefix that runs perf_analyzer (installed once per test session)."""
    return list(_prepared())
