"""The layering of the three packages, read from their sources and proved by importing them.

kernels (operator semantics, the tensor codec) sits at the bottom and imports nothing of the
service or the SDK; the SDK imports kernels but nothing of the service, its web stack or CuPy;
the service imports nothing of the SDK, and its request pipeline no web framework (a gRPC
server calls it without one).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kernels", "service", "clients")
WEB = ("fastapi", "starlette", "uvicorn")

#: package -> import roots it must never name, at module level or inside a function.
FORBIDDEN = {
    "kernels": ("dmlserve.service", "dmlserve.clients", *WEB, "httpx"),
    "clients": ("dmlserve.service", *WEB, "cupy", "cupyx"),
    "service": ("dmlserve.clients",),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    parts = parts[:-1] if parts[-1] == "__init__" else parts
    return ".".join(("dmlserve", *parts))


def imports_of(path: Path) -> set[str]:
    """Every module a source file names in an import, relative imports resolved."""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _names(module: str, roots: tuple[str, ...]) -> bool:
    return any(module == r or module.startswith(r + ".") for r in roots)


@pytest.mark.parametrize("package", PACKAGES)
def test_import_graph(package: str) -> None:
    broken = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for module in imports_of(path)
        if _names(module, FORBIDDEN[package])
    }
    assert not broken, sorted(broken)


def test_the_reader_resolves_relative_imports() -> None:
    found = imports_of(ROOT / "kernels" / "cupy_backend" / "_common.py")
    assert "dmlserve.kernels.wire.buffer_extent" in found
    assert "dmlserve.kernels.wire" in imports_of(ROOT / "clients" / "_framing.py")


def _modules_after_import(statement: str) -> set[str]:
    code = f"{statement}; import sys; print(' '.join(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


@pytest.mark.parametrize(
    ("statement", "absent"),
    [
        ("import dmlserve.kernels, dmlserve.kernels.wire", ("cupy", *WEB, "httpx")),
        ("import dmlserve.clients", ("cupy", *WEB, "dmlserve.service")),
        ("import dmlserve.service.pipeline", WEB),
    ],
)
def test_what_an_import_pulls_in(statement: str, absent: tuple[str, ...]) -> None:
    loaded = _modules_after_import(statement)
    assert not [m for m in loaded if _names(m, absent)]


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
