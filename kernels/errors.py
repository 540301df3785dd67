"""Errors of the operator layer. The service maps each to one HTTP status."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypedDict

Loc = tuple[str | int, ...]


class ErrorItem(TypedDict):
    loc: Loc
    msg: str


class DescriptorError(ValueError):
    """A descriptor or tensor breaks a DirectML rule. `errors` names each field and rule."""

    def __init__(self, errors: Sequence[ErrorItem]) -> None:
        self.errors: list[ErrorItem] = list(errors)
        super().__init__(self._summary())

    @classmethod
    def at(cls, loc: Loc, msg: str) -> DescriptorError:
        return cls([{"loc": loc, "msg": msg}])

    def prefixed(self, *prefix: str | int) -> DescriptorError:
        """The same errors with `prefix` prepended to every location."""
        return self.relocated(lambda loc: (*prefix, *loc))

    def relocated(self, where: Callable[[Loc], Loc]) -> DescriptorError:
        """The same errors, each location mapped through `where`."""
        return DescriptorError([{"loc": where(e["loc"]), "msg": e["msg"]} for e in self.errors])

    def _summary(self) -> str:
        parts = []
        for e in self.errors:
            where = ".".join(str(p) for p in e["loc"])
            parts.append(f"{where}: {e['msg']}" if where else e["msg"])
        return "; ".join(parts)


class LimitExceededError(ValueError):
    """A size limit would be exceeded; raised before anything is allocated."""

    def __init__(self, limit_name: str, limit: int, actual: int, what: str) -> None:
        self.limit_name = limit_name
        self.limit = limit
        self.actual = actual
        self.what = what
        super().__init__(f"{what} is {actual} bytes, over the {limit_name} limit of {limit} bytes")


class BackendUnavailableError(RuntimeError):
    """The requested compute backend cannot run on this host."""
