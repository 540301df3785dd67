"""The CuPy backend: raw CUDA kernels from `kernels/cuda/`, one launcher module per operator.

Same five functions and contract as `kernels.reference`; inputs are CuPy arrays (any
strides), outputs new C-contiguous CuPy arrays, launched on the current stream. Importing
this package does not import CuPy; the launchers do, on first call.
"""

from __future__ import annotations

from typing import Any

from .average_pooling import average_pooling
from .fold import fold
from .padding import padding
from .unfold import unfold

__all__ = ["average_pooling", "convolution_integer", "fold", "padding", "unfold"]


def __getattr__(name: str) -> Any:
    # CONVOLUTION_INTEGER lives in its own module, loaded on first use.
    if name == "convolution_integer":
        from .convolution_integer import convolution_integer

        return convolution_integer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
