"""Importing the SDK pulls in neither the service's web stack nor CuPy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_clients_needs_no_fastapi_starlette_or_cupy() -> None:
    code = (
        "import clients, sys; "
        "bad = [m for m in ('fastapi', 'starlette', 'cupy', 'uvicorn') if m in sys.modules]; "
        "assert not bad, bad"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


def test_package_ships_py_typed() -> None:
    assert (ROOT / "clients" / "py.typed").is_file()
