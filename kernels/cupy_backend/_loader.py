"""The one loader of the CUDA sources: memoized `cupy.RawModule`s, one per instantiation.

Each `.cu` file under `kernels/cuda/` holds templates; a launcher asks for one
instantiation by its C++ name expression (``pad_rows<4,3,1>``) and gets the compiled
`cupy.RawKernel`. Instantiations are compiled lazily and cached in memory here and on
disk by CuPy (``CUPY_CACHE_DIR``), so only the combinations actually used cost a compile.
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import Any

CUDA_DIR = Path(__file__).resolve().parent.parent / "cuda"
BASE_OPTIONS: tuple[str, ...] = ("-std=c++17", f"-I{CUDA_DIR}")

_lock = threading.Lock()


@functools.cache
def _source(name: str) -> str:
    path = CUDA_DIR / name
    # `#line` makes NVRTC's error messages point at the real file.
    return f'#line 1 "{path}"\n' + path.read_text()


@functools.cache
def _module(name: str, expression: str, options: tuple[str, ...]) -> Any:
    import cupy

    module = cupy.RawModule(
        code=_source(name), options=BASE_OPTIONS + options, name_expressions=[expression]
    )
    module.compile()
    return module


def get_kernel(source: str, expression: str, options: tuple[str, ...] = ()) -> Any:
    """The compiled kernel `expression` (a C++ name expression) from `kernels/cuda/<source>`.

    Thread-safe; each (source, expression, options) is compiled once per process.
    """
    with _lock:
        module = _module(source, expression, options)
    return module.get_function(expression)
