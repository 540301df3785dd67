"""Execution controls of the CPU path: a working-memory budget and cooperative cancellation.

Every CPU operator computes in bounded slices. Between two slices it calls `check`, so a caller
holding a deadline (or any other reason to stop) can end the work by raising from it; the
operator lets that exception through and leaves nothing behind but garbage. The temporaries
of one slice stay within `memory_bytes`, except the smallest unit an operator can split to
(one output row of one image), which is always computed.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_BUDGET",
    "Cancelled",
    "ExecutionBudget",
    "HostMemoryError",
    "cancel_after",
    "leading_chunks",
    "spans",
]

Check = Callable[[], None]

# Work between two checks, and a size whose temporaries stay in the outer caches.
SLICE_BYTES = 4 << 20


class Cancelled(Exception):
    """The computation was stopped between two slices (its deadline passed)."""


class HostMemoryError(MemoryError):
    """The host could not allocate memory for a computation: retryable, like device OOM."""


@dataclass(frozen=True)
class ExecutionBudget:
    """Limits of one computation: temporary bytes beside inputs and output, and a stop check.

    `check` is called between slices; whatever it raises (typically `Cancelled`) ends the
    computation and propagates to the caller.
    """

    memory_bytes: int = 256 << 20
    check: Check | None = None

    def checkpoint(self) -> None:
        """Give the caller a chance to stop the work."""
        if self.check is not None:
            self.check()

    def slice_bytes(self, preferred: int = SLICE_BYTES) -> int:
        """The temporaries one slice may hold: the preferred size within the budget."""
        return max(1, min(self.memory_bytes, preferred))


DEFAULT_BUDGET = ExecutionBudget()


def cancel_after(deadline: float, clock: Callable[[], float] = time.monotonic) -> Check:
    """A check that raises `Cancelled` once `clock()` reaches `deadline`."""

    def check() -> None:
        if clock() >= deadline:
            raise Cancelled("the computation passed its deadline")

    return check


def spans(total: int, step: int) -> Iterator[tuple[int, int]]:
    """``[lo, hi)`` ranges of at most ``step`` (at least 1) covering ``range(total)``."""
    step = max(1, step)
    for lo in range(0, total, step):
        yield lo, min(total, lo + step)


def leading_chunks(
    shape: tuple[int, ...], unit_bytes: int, limit: int
) -> Iterator[tuple[Any, ...]]:
    """Index tuples splitting an array of ``shape`` (``unit_bytes`` per element) into pieces.

    Each piece is whole along the trailing axes and at most ``limit`` bytes, unless a single
    element of the last axis is already larger. Pieces cover the array once, in order; an
    empty array has none.
    """
    if not shape:
        yield ()
        return
    if 0 in shape:
        return
    trailing = unit_bytes
    sizes = [0] * len(shape)
    for axis in range(len(shape) - 1, -1, -1):
        sizes[axis] = trailing  # bytes of one index along `axis`
        trailing *= shape[axis]
    axis = next((a for a, b in enumerate(sizes) if b <= limit), len(shape) - 1)
    step = max(1, limit // sizes[axis])
    bounds = list(spans(shape[axis], step))
    for outer in itertools.product(*map(range, shape[:axis])):
        for lo, hi in bounds:
            yield (*outer, slice(lo, hi))
