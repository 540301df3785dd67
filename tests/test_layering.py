"""Importing the SDK pulls in neither the service's web stack nor CuPy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_clients_needs_no_fastapi_starlette_or_cupy() -> None:
    code = (
        "import dmlserve.clients, sys; "
        "bad = [m for m in ('fastapi', 'starlette', 'cupy', 'uvicorn') if m in sys.modules]; "
        "assert not bad, bad"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


def test_package_ships_py_typed() -> None:
    assert (ROOT / "clients" / "py.typed").is_file()


def test_only_dmlserve_is_importable_after_install(tmp_path: Path) -> None:
    # Outside the repository (no root on sys.path) the folders are reachable only as
    # dmlserve.kernels, dmlserve.service and dmlserve.clients.
    code = (
        "import importlib.util as u, dmlserve.kernels, dmlserve.clients; "
        "bare = [n for n in ('kernels', 'service', 'clients') if u.find_spec(n)]; "
        "assert not bare, bare"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
