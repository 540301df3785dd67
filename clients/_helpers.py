"""The typed operator helpers of both clients (`fold`, `padding`, ...), made from the operators.

Each operator module in `kernels.operators` declares its helper: the NumPy-style signature
(snake_case, DirectML's defaults), its docstring, and how the arguments become one descriptor
plus its named inputs. Here each helper becomes a method that sends that through `execute` and
returns the output: `OperatorMethods` for `Client`, `AsyncOperatorMethods` (coroutines) for
`AsyncClient`. The signatures carry through to type checkers and `inspect`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Concatenate, ParamSpec, Protocol

from dmlserve.kernels import OperatorBase, OperatorSpec
from dmlserve.kernels.operators import (
    ArrayLike,
    Dims,
    average_pooling,
    convolution_integer,
    fold,
    padding,
    unfold,
)

from ._framing import NDArray

__all__ = ["ArrayLike", "AsyncOperatorMethods", "Dims", "OperatorMethods"]

P = ParamSpec("P")


class _Executes(Protocol):
    def execute(
        self, operator: OperatorBase, inputs: Mapping[str, NDArray]
    ) -> dict[str, NDArray]: ...


class _AsyncExecutes(Protocol):
    async def execute(
        self, operator: OperatorBase, inputs: Mapping[str, NDArray]
    ) -> dict[str, NDArray]: ...


def _as_method(method: Callable[..., Any], spec: OperatorSpec[Any, Any]) -> None:
    """Give `method` the operator's name and the helper's docstring and signature (with `self`)."""
    signature = inspect.signature(spec.helper)
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    method.__name__ = method.__qualname__ = spec.name
    method.__doc__ = spec.helper.__doc__
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[self_param, *signature.parameters.values()], return_annotation="NDArray"
    )


def operator_method(
    spec: OperatorSpec[Any, P],
) -> Callable[Concatenate[_Executes, P], NDArray]:
    """A `Client` method running the operator through its SDK helper; returns the output."""

    def method(self: _Executes, /, *args: P.args, **kwargs: P.kwargs) -> NDArray:
        op, inputs = spec.helper(*args, **kwargs)
        return self.execute(op, inputs)["OutputTensor"]

    _as_method(method, spec)
    return method


def async_operator_method(
    spec: OperatorSpec[Any, P],
) -> Callable[Concatenate[_AsyncExecutes, P], Coroutine[Any, Any, NDArray]]:
    """The `AsyncClient` twin of `operator_method`."""

    async def method(self: _AsyncExecutes, /, *args: P.args, **kwargs: P.kwargs) -> NDArray:
        op, inputs = spec.helper(*args, **kwargs)
        return (await self.execute(op, inputs))["OutputTensor"]

    _as_method(method, spec)
    return method


class OperatorMethods:
    """`Client`'s typed operator methods, one per operator module."""

    fold = operator_method(fold.SPEC)
    unfold = operator_method(unfold.SPEC)
    padding = operator_method(padding.SPEC)
    average_pooling = operator_method(average_pooling.SPEC)
    convolution_integer = operator_method(convolution_integer.SPEC)


class AsyncOperatorMethods:
    """`AsyncClient`'s typed operator methods, one per operator module."""

    fold = async_operator_method(fold.SPEC)
    unfold = async_operator_method(unfold.SPEC)
    padding = async_operator_method(padding.SPEC)
    average_pooling = async_operator_method(average_pooling.SPEC)
    convolution_integer = async_operator_method(convolution_integer.SPEC)
