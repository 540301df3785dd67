"""`dmlserve-client` end to end against `dmlserve serve`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.servers import REPO, free_port


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from dmlserve.clients.cli import main; sys.exit(main())",
            *args,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_run_convolution_from_npy_files(server_url: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    x = rng.integers(0, 255, size=(1, 2, 5, 5), dtype=np.uint8)
    w = rng.integers(-128, 127, size=(3, 2, 3, 3), dtype=np.int8)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    op = {"type": "CONVOLUTION_INTEGER", "StartPadding": [1, 1], "EndPadding": [1, 1]}
    (tmp_path / "op.json").write_text(json.dumps(op))
    result = _cli(
        "run",
        "--url",
        server_url,
        "--operator",
        str(tmp_path / "op.json"),
        "--input",
        f"InputTensor={tmp_path / 'x.npy'}",
        "--input",
        f"FilterTensor={tmp_path / 'w.npy'}",
        "--output",
        str(tmp_path / "y.npy"),
    )
    assert result.returncode == 0, result.stderr
    y = np.load(tmp_path / "y.npy")
    assert y.dtype == np.int32 and y.shape == (1, 3, 5, 5)
    xp = np.pad(x.astype(np.int64), [(0, 0), (0, 0), (1, 1), (1, 1)])
    windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    np.testing.assert_array_equal(y, np.einsum("nchwij,mcij->nmhw", windows, w.astype(np.int64)))
    assert "OutputTensor: int32 [1, 3, 5, 5]" in result.stderr


def test_run_reports_a_descriptor_error(server_url: str, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((1, 1, 4, 4), np.float32))
    (tmp_path / "op.json").write_text(json.dumps({"type": "UNFOLD", "WindowSizes": [9, 9]}))
    result = _cli(
        "run",
        "--url",
        server_url,
        "--operator",
        str(tmp_path / "op.json"),
        "--input",
        f"InputTensor={tmp_path / 'x.npy'}",
        "--output",
        str(tmp_path / "y.npy"),
    )
    assert result.returncode == 1
    assert "422" in result.stderr and "WindowSizes" in result.stderr
    assert not (tmp_path / "y.npy").exists()


def test_health(server_url: str) -> None:
    result = _cli("health", "--url", server_url)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"live": True, "ready": True}


def test_health_of_nothing_fails() -> None:
    result = _cli("health", "--url", f"http://127.0.0.1:{free_port()}")
    assert result.returncode == 2 and "Connection error" in result.stderr
