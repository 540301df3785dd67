"""Helpers every CPU operator shares: plane chunks of the (N, C) axes, memory errors."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

from .budget import HostMemoryError, leading_chunks

__all__ = ["host_memory", "plane_chunks"]

P = ParamSpec("P")
R = TypeVar("R")


def plane_chunks(n: int, c: int, plane_bytes: int, limit: int) -> Iterator[tuple[Any, Any]]:
    """``(N, C)`` slice pairs of at most ``limit`` bytes each (one plane at least)."""
    for index in leading_chunks((n, c), max(1, plane_bytes), limit):
        full = [i if isinstance(i, slice) else slice(i, i + 1) for i in index]
        full += [slice(None)] * (2 - len(full))
        yield full[0], full[1]


def host_memory(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn a host allocation failure into `HostMemoryError` (the service's 503)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except HostMemoryError:
            raise
        except MemoryError as exc:
            raise HostMemoryError(
                f"the host could not allocate memory for {fn.__name__}: {exc}"
            ) from None

    return wrapper
