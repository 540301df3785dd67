"""The fast CPU backend: the reference's five functions, computed in bounded, cancellable slices.

Same parameters and results as `kernels.reference` (bit-identical for integers, data movement
and FOLD; AVERAGE_POOLING within rounding), plus a keyword-only `budget` (working memory and a
cancellation check). Matrix products go through NumPy's BLAS; see `threads` for thread counts.

Where a backend module is expected (``run(op, arrays, module)``), pass this package, or
``Backend(ExecutionBudget(memory_bytes=..., check=cancel_after(deadline)))`` to give one
computation its own limits. A check that raises stops the work between two slices; a host
allocation failure surfaces as `HostMemoryError` (retryable: 503).
"""

from .average_pooling import average_pooling
from .backend import Backend
from .budget import DEFAULT_BUDGET, Cancelled, ExecutionBudget, HostMemoryError, cancel_after
from .convolution_integer import convolution_integer
from .fold import fold
from .padding import padding
from .threads import blas_threads_for, configure_threads
from .unfold import unfold

__all__ = [
    "Backend",
    "DEFAULT_BUDGET",
    "Cancelled",
    "ExecutionBudget",
    "HostMemoryError",
    "average_pooling",
    "blas_threads_for",
    "cancel_after",
    "configure_threads",
    "convolution_integer",
    "fold",
    "padding",
    "unfold",
]
