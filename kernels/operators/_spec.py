"""`OperatorSpec`: everything the project knows about one operator besides its model.

Each module of this package declares one operator: its descriptor model (fields, rules,
output inference) and a `SPEC` that names its reference function, its launchers on other
backends, how a resolved descriptor becomes their arguments, a cost estimate, a warm-up
example and the SDK helper. `OPERATORS` (the package) collects the specs; the rest of the code
iterates that table and never asks which operator it holds.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, TypeVar

import numpy as np
import numpy.typing as npt

from ..descriptors import OperatorBase, TensorDesc, Windowed
from ..errors import BackendUnavailableError
from ..geometry import Window

__all__ = ["BackendFunction", "Constants", "Example", "OperatorSpec", "window_of"]

OpT = TypeVar("OpT", bound=OperatorBase)
P = ParamSpec("P")
BackendFunction = Callable[..., Any]
"""An implementation: the reference function's parameters, a new C-contiguous array back."""


@dataclass(frozen=True)
class Example:
    """A descriptor (DirectML field names) and the descriptors of its input tensors."""

    descriptor: Mapping[str, Any]
    inputs: Mapping[str, TensorDesc]

    def zeros(self) -> dict[str, npt.NDArray[Any]]:
        """The inputs as arrays of zeros."""
        return {name: np.zeros(d.sizes, d.numpy_dtype) for name, d in self.inputs.items()}


@dataclass(eq=False)
class Constants:
    """The inputs of a registered operator that are the same on every call (bound at
    registration), and what the backends derive from them once: the registration keeps both
    for as long as it lives, so nothing here outlives the arrays it was made from."""

    names: frozenset[str]
    cache: dict[Hashable, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class OperatorSpec(Generic[OpT, P]):
    """One operator's declaration; its descriptor `model` holds the DirectML rules."""

    model: type[OpT]
    #: snake_case name: the backend functions' and the SDK method's
    name: str
    #: the NumPy oracle, written for clarity (`kernels.reference`)
    reference: BackendFunction
    #: backend -> "module:function" with the reference's signature, imported on first use;
    #: a backend missing here runs the reference (the "numpy" backend is the fast CPU path,
    #: `kernels.cpu`; the reference stays the oracle)
    launchers: Mapping[str, str]
    #: a resolved descriptor and its arrays (wire names) -> the implementations' arguments
    arguments: Callable[[OpT, Mapping[str, Any]], tuple[Any, ...]]
    #: cost estimate: input elements each output element reads (window taps; 1 for a copy)
    taps: Callable[[OpT], int]
    #: run once at start-up so the first request compiles nothing
    warmup: Example
    #: the SDK helper: NumPy-style arguments -> descriptor and named inputs; its signature and
    #: docstring are the `Client` method's
    helper: Callable[P, tuple[OpT, dict[str, npt.NDArray[Any]]]]
    #: output elements are sums of several products or inputs: float results then depend on
    #: the order of the additions, which differs between backends (integer sums wrap, so any
    #: order gives the same bits); False for data movement
    sums: bool = False
    #: `arguments` for a registered operator's call, given its `Constants`: may reuse what an
    #: earlier call derived from them, and pass a backend keyword arguments for that (None: the
    #: constants change nothing)
    constant_arguments: (
        Callable[[OpT, Mapping[str, Any], str, Constants], tuple[tuple[Any, ...], dict[str, Any]]]
        | None
    ) = None

    @property
    def type(self) -> str:
        """DML_OPERATOR_TYPE without its prefix (`FOLD`)."""
        return str(self.model.model_fields["type"].default)

    def implementation(self, backend: str) -> BackendFunction:
        """The function that runs this operator on `backend` ("numpy", "cupy", ...)."""
        path = self.launchers.get(backend)
        if path is not None:
            return _load(path)
        if backend == "numpy":
            return self.reference
        raise BackendUnavailableError(f"{self.type} has no implementation on backend {backend!r}")

    def run(
        self,
        op: OpT,
        arrays: Mapping[str, Any],
        backend: str = "numpy",
        constants: Constants | None = None,
    ) -> Any:
        """Run a resolved descriptor on `arrays` (no further validation); `constants`: those
        of the registration the call belongs to."""
        if constants is not None and self.constant_arguments is not None:
            args, kwargs = self.constant_arguments(op, arrays, backend, constants)
            return self.implementation(backend)(*args, **kwargs)
        return self.implementation(backend)(*self.arguments(op, arrays))


def window_of(op: Windowed, sizes: Sequence[int]) -> Window:
    """The backends' `Window` of a resolved descriptor (its arrays filled in) whose window has
    ``sizes`` (WindowSizes or WindowSize)."""
    return Window(
        tuple(sizes), op.strides or (), op.dilations or (), op.start_padding or (),
        op.end_padding or (),
    )  # fmt: skip


@functools.cache
def _load(path: str) -> BackendFunction:
    module, _, name = path.partition(":")
    function: BackendFunction = getattr(importlib.import_module(module), name)
    return function
