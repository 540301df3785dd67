"""The one loader of the CUDA sources: memoized `cupy.RawModule`s, one per instantiation.

Each `.cu` file under `kernels/cuda/` holds templates in the namespace ``dml``; a launcher
asks for one instantiation by name and template arguments (``kernel("padding.cu",
"pad_rows", 2, 3, "int")`` -> ``dml::pad_rows<2, 3, int>``) and gets the compiled
`cupy.RawKernel`. Element types are spelled through the dtype table (`kernels.dtypes`).
Instantiations are compiled lazily and cached in memory here and on disk by CuPy
(``CUPY_CACHE_DIR``), so only the combinations actually used cost a compile.
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..dtypes import from_numpy

__all__ = ["CUDA_DIR", "NAMESPACE", "kernel", "name_expression", "template_argument"]

CUDA_DIR = Path(__file__).resolve().parent.parent / "cuda"
BASE_OPTIONS: tuple[str, ...] = ("-std=c++17", f"-I{CUDA_DIR}")
NAMESPACE = "dml"
# Above this many bytes of dynamic shared memory a kernel must opt in (cudaFuncSetAttribute).
DEFAULT_DYNAMIC_SHARED = 48 * 1024

_lock = threading.Lock()


def template_argument(value: object) -> str:
    """The C++ spelling of one template argument: a dtype through the dtype table, a bool as
    ``true``/``false``, an int as itself, a string (an index type such as ``long long``) as is."""
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, np.dtype):
        return from_numpy(value).info.cpp
    if isinstance(value, str):
        return value
    raise TypeError(f"no C++ template argument for {value!r}")


def name_expression(name: str, *args: object) -> str:
    """``dml::name<args...>`` (``dml::name`` without `args`), the name CuPy compiles and
    looks up."""
    if not args:
        return f"{NAMESPACE}::{name}"
    return f"{NAMESPACE}::{name}<{', '.join(template_argument(a) for a in args)}>"


@functools.cache
def _source(name: str) -> str:
    path = CUDA_DIR / name
    # `#line` makes NVRTC's error messages point at the real file.
    return f'#line 1 "{path}"\n' + path.read_text()


@functools.cache
def _function(name: str, expression: str, options: tuple[str, ...]) -> Any:
    import cupy

    module = cupy.RawModule(
        code=_source(name), options=BASE_OPTIONS + options, name_expressions=[expression]
    )
    module.compile()
    return module.get_function(expression)


def kernel(
    source: str, name: str, *args: object, shared_mem: int = 0, options: tuple[str, ...] = ()
) -> Any:
    """The compiled kernel ``dml::name<args...>`` from `kernels/cuda/<source>`.

    Thread-safe; each (source, expression, options) is compiled once per process. A kernel
    that needs more than the default dynamic shared memory is opted in here.
    """
    expression = name_expression(name, *args)
    with _lock:
        function = _function(source, expression, options)
        if shared_mem > max(DEFAULT_DYNAMIC_SHARED, function.max_dynamic_shared_size_bytes):
            function.max_dynamic_shared_size_bytes = shared_mem
    return function
