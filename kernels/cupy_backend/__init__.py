"""The CuPy backend: raw CUDA kernels from `kernels/cuda/`, one launcher module per operator.

Same five functions and contract as `kernels.reference`; inputs are CuPy arrays (any
strides), outputs new C-contiguous CuPy arrays, launched on the current stream. Importing
this package does not import CuPy; the launchers do, on first call.
"""

from __future__ import annotations

from .average_pooling import average_pooling
from .convolution_integer import convolution_integer
from .fold import fold
from .padding import padding
from .unfold import unfold

__all__ = ["average_pooling", "convolution_integer", "fold", "padding", "unfold"]
