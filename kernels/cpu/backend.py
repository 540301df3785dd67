"""The CPU functions with one budget bound, shaped like a backend module.

`kernels.execute.run(op, arrays, module)` calls ``module.padding(...)`` and its four siblings
with the reference's positional parameters; a `Backend` answers those calls with its budget
(working memory, stop check) passed along, so one request's limits reach its computation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .average_pooling import average_pooling
from .budget import DEFAULT_BUDGET, ExecutionBudget
from .convolution_integer import convolution_integer
from .fold import fold
from .padding import padding
from .unfold import unfold

__all__ = ["Backend"]


@dataclass(frozen=True)
class Backend:
    """The five operators of the CPU path under one `ExecutionBudget`."""

    budget: ExecutionBudget = DEFAULT_BUDGET

    def padding(self, *args: Any) -> Any:
        return padding(*args, budget=self.budget)

    def unfold(self, *args: Any) -> Any:
        return unfold(*args, budget=self.budget)

    def fold(self, *args: Any) -> Any:
        return fold(*args, budget=self.budget)

    def average_pooling(self, *args: Any) -> Any:
        return average_pooling(*args, budget=self.budget)

    def convolution_integer(self, *args: Any) -> Any:
        return convolution_integer(*args, budget=self.budget)
