"""The NumPy reference backend: DirectML's semantics written for clarity; the oracle.

Every function takes already-validated parameters (one entry per spatial dimension; the
sliding window of UNFOLD, FOLD and AVERAGE_POOLING as one `geometry.Window`) and returns a new
C-contiguous array. Inputs may be any strided view, broadcast views included.
"""

from .average_pooling import average_pooling
from .convolution_integer import convolution_integer
from .fold import fold
from .padding import padding
from .unfold import unfold

__all__ = ["average_pooling", "convolution_integer", "fold", "padding", "unfold"]
