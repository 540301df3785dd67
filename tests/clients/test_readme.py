"""The README's Python example runs as written against a real server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_example_runs(server_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md has no Python example"
    code = blocks[0].replace('"http://127.0.0.1:8000"', repr(server_url))
    namespace: dict[str, object] = {}
    exec(compile(code, str(README), "exec"), namespace)  # noqa: S102 - our own README
    assert capsys.readouterr().out.startswith("422 ")
    assert namespace["y"].tolist() == [[[[-4, -4], [-4, -4]]]]  # type: ignore[attr-defined]
    assert namespace["out"].tolist() == [2, 3, 0, 1, 2, 3]  # type: ignore[attr-defined]
    assert namespace["z"].shape == (4, 3, 4, 4)  # type: ignore[attr-defined]
