"""The CUDA sources compile with exactly what CuPy hands NVRTC at run time.

Needs the `gpu` extra (CuPy, and NVRTC plus the CUDA runtime headers from NVIDIA's wheels) but
no device: NVRTC compiles for a named architecture without one. This is the run-time compile
path of `cupy.RawModule`, so a source that includes a header the wheels do not ship fails
here, on any machine with the extra installed, rather than at a GPU server's start-up.
Skipped where CuPy or NVRTC is not installed.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from dmlserve.kernels.cupy_backend import _loader

pytest.importorskip("cupy", reason="needs the gpu extra (pip install 'dmlserve[gpu]')")

SOURCES = sorted(p.name for p in _loader.CUDA_DIR.glob("*.cu"))
# The lowest architecture the kernels support; the templates are parsed, not instantiated,
# so this checks that every include resolves and the non-template code compiles.
ARCH = "-arch=sm_80"
SYSTEM_INCLUDE = re.compile(r"^\s*#\s*include\s*<([^>]+)>", re.MULTILINE)


@pytest.fixture(scope="module")
def nvrtc() -> tuple[Any, Any]:
    """CuPy's option assembly and NVRTC program wrapper (private CuPy API, as RawModule uses)."""
    from cuda.pathfinder import DynamicLibNotFoundError, load_nvidia_dynamic_lib

    try:
        load_nvidia_dynamic_lib("nvrtc")
    except DynamicLibNotFoundError:
        pytest.skip("NVRTC is not installed (the gpu extra installs it)")
    from cupy._core import core
    from cupy.cuda import compiler

    return core.assemble_cupy_compiler_options, compiler._NVRTCProgram


def compile_source(nvrtc: tuple[Any, Any], name: str, options: tuple[str, ...]) -> bytes:
    _, program = nvrtc
    cubin, _ = program(_loader._source(name), name, method="cubin").compile(options)
    return bytes(cubin)


def test_sources_are_found() -> None:
    assert len(SOURCES) >= 6, SOURCES


@pytest.mark.parametrize("name", SOURCES)
def test_every_source_compiles_with_cupys_options(nvrtc: tuple[Any, Any], name: str) -> None:
    assemble, _ = nvrtc
    assert compile_source(nvrtc, name, assemble(_loader.BASE_OPTIONS + (ARCH,)))


def test_cuda_headers_come_from_the_directory_cupy_passes(nvrtc: tuple[Any, Any]) -> None:
    # NVRTC has no default include path: without the CUDA header directory CuPy adds (found
    # by cuda-pathfinder, NVIDIA's wheels first), a source including <cuda_fp16.h> must fail.
    from cuda.pathfinder import find_nvidia_header_directory
    from cupy.cuda.compiler import CompileException

    header_dir = find_nvidia_header_directory("cudart")
    assert header_dir is not None
    assemble, _ = nvrtc
    options = assemble(_loader.BASE_OPTIONS + (ARCH,))
    assert f"-I{header_dir}" in options
    without = tuple(o for o in options if o != f"-I{header_dir}")
    users = [n for n in SOURCES if "cuda_fp16.h" in SYSTEM_INCLUDE.findall(_loader._source(n))]
    assert users, "no source includes <cuda_fp16.h>: pick another CUDA header to check"
    with pytest.raises(CompileException, match="cuda_fp16.h"):
        compile_source(nvrtc, users[0], without)
