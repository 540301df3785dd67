"""The typed operator helpers of both clients (`fold`, `padding`, ...), made from the operators.

Each operator module in `kernels.operators` declares its helper: the NumPy-style signature
(snake_case, DirectML's defaults), its docstring, and how the arguments become one descriptor
plus its named inputs. Here each helper becomes a method that sends that through `execute` and
returns the output, on `Client` a function and on `AsyncClient` a coroutine, both from one
`OperatorMethods`. The signatures carry through to type checkers and `inspect`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Mapping
from types import MethodType
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, overload

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

__all__ = ["ArrayLike", "Dims", "OperatorMethods"]

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


def _sync_method(spec: OperatorSpec[Any, P]) -> Callable[Concatenate[_Executes, P], NDArray]:
    def method(self: _Executes, /, *args: P.args, **kwargs: P.kwargs) -> NDArray:
        op, inputs = spec.helper(*args, **kwargs)
        return self.execute(op, inputs)["OutputTensor"]

    _as_method(method, spec)
    return method


def _async_method(
    spec: OperatorSpec[Any, P],
) -> Callable[Concatenate[_AsyncExecutes, P], Coroutine[Any, Any, NDArray]]:
    async def method(self: _AsyncExecutes, /, *args: P.args, **kwargs: P.kwargs) -> NDArray:
        op, inputs = spec.helper(*args, **kwargs)
        return (await self.execute(op, inputs))["OutputTensor"]

    _as_method(method, spec)
    return method


class OperatorMethod(Generic[P]):
    """An operator's method on both clients: it runs the operator through its SDK helper and
    returns the output; on a client whose `execute` is a coroutine, it is one too."""

    def __init__(self, spec: OperatorSpec[Any, P]) -> None:
        self._sync = _sync_method(spec)
        self._async = _async_method(spec)

    @overload
    def __get__(
        self, obj: _AsyncExecutes, owner: type[Any] | None = None
    ) -> Callable[P, Coroutine[Any, Any, NDArray]]: ...

    @overload
    def __get__(self, obj: _Executes, owner: type[Any] | None = None) -> Callable[P, NDArray]: ...

    @overload
    def __get__(
        self, obj: None, owner: type[Any] | None = None
    ) -> Callable[Concatenate[Any, P], Any]: ...

    def __get__(self, obj: Any, owner: type[Any] | None = None) -> Any:
        cls = owner if owner is not None else type(obj)
        method = self._async if inspect.iscoroutinefunction(cls.execute) else self._sync
        return method if obj is None else MethodType(method, obj)


class OperatorMethods:
    """The typed operator methods of `Client` and `AsyncClient`, one per operator module."""

    fold = OperatorMethod(fold.SPEC)
    unfold = OperatorMethod(unfold.SPEC)
    padding = OperatorMethod(padding.SPEC)
    average_pooling = OperatorMethod(average_pooling.SPEC)
    convolution_integer = OperatorMethod(convolution_integer.SPEC)
