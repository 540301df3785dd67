"""Triton's perf_analyzer for tests: the command that runs it, installed on first use."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import zipfile
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


# perf_analyzer's shared-memory modes dlopen "libcudart.so" (even for system shared memory). A
# CUDA runtime from the site-packages (the gpu extra's) or the system serves; elsewhere the
# runtime wheel below (3.5 MB) is fetched once into the cache.
CUDA_RUNTIME_WHEEL = "nvidia-cuda-runtime-cu12==12.9.79"
NETWORK_ERRORS = (
    r"connection refused|failed to establish a new connection|network is unreachable"
    r"|temporary failure in name resolution|name or service not known|timed out"
)


def _cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(root) / "dmlserve" / "perf-analyzer-cudart"


def _installed_cuda_runtime() -> Path | None:
    roots = [Path(p) for p in sys.path if p and Path(p).is_dir()]
    roots += [Path("/usr/local/cuda/lib64"), Path("/usr/lib/x86_64-linux-gnu")]
    for root in roots:
        for pattern in ("nvidia/*/lib/libcudart.so.*", "nvidia/*/*/lib/libcudart.so.*",
                        "libcudart.so.*"):  # fmt: skip
            found = sorted(root.glob(pattern))
            if found:
                return found[-1]
    return None


@functools.cache
def cuda_runtime_library_path() -> str:
    """A folder with a `libcudart.so` for DMLSERVE_PERF_ANALYZER_LIBRARY_PATH.

    Skips the calling test only when the runtime must be downloaded and no network answers.
    """
    folder = _cache_dir()
    link = folder / "libcudart.so"
    if link.exists():
        return str(folder)
    library = _installed_cuda_runtime()
    if library is None:
        wheels = folder / "wheel"
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary",
             ":all:", "--dest", str(wheels), CUDA_RUNTIME_WHEEL],
            capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            if re.search(NETWORK_ERRORS, done.stderr, re.IGNORECASE):
                pytest.skip("no CUDA runtime here for perf_analyzer and no network to fetch one")
            pytest.fail(f"pip download {CUDA_RUNTIME_WHEEL} failed:\n{done.stderr}")
        (wheel,) = wheels.glob("*.whl")
        with zipfile.ZipFile(wheel) as archive:
            member = next(n for n in archive.namelist() if n.endswith("/libcudart.so.12"))
            library = folder / "libcudart.so.12"
            library.write_bytes(archive.read(member))
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".libcudart.so.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(library)
    tmp.replace(link)  # atomic: parallel workers agree on one link
    return str(folder)
