"""`dmlserve` as a newcomer meets it: --version, and help that shows defaults and choices."""

from __future__ import annotations

import subprocess
import sys

from dmlserve import __version__


def _dmlserve(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from dmlserve.service.cli import main; main(sys.argv[1:])"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60
    )


def test_version() -> None:
    result = _dmlserve("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"dmlserve {__version__}"


def test_serve_help_shows_defaults_environment_and_choices() -> None:
    result = _dmlserve("serve", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "--backend {auto,cupy,numpy}" in text
    assert "env DMLSERVE_MAX_QUEUE; default: 64" in text
    assert "--log-level {debug,info,warning,error,critical}" in text
