"""Registered operators: validated, shape-inferred and warmed once, then served by name.

Every registered operator is also a KServe v2 model of the same name (version "1").
"""

from __future__ import annotations

import bisect
import hashlib
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from dmlserve import kernels
from dmlserve.kernels import OperatorBase
from dmlserve.service.errors import InsufficientStorageError, NotFoundError, UnprocessableError

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$"
_NAME_RE = re.compile(NAME_PATTERN)


def wire(op: OperatorBase) -> dict[str, Any]:
    """The descriptor as JSON, DirectML names and short enum spellings."""
    return op.model_dump(mode="json", by_alias=True, exclude_none=True)


def fingerprint(op: OperatorBase) -> str:
    """A stable digest of a resolved descriptor (same descriptor -> same digest)."""
    return hashlib.sha256(orjson.dumps(wire(op), option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(frozen=True)
class RegisteredOperator:
    name: str
    operator: OperatorBase  # resolved; Sizes[0] may be -1 (variable batch)
    digest: str

    @property
    def type(self) -> str:
        return str(self.operator.type)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "operator": wire(self.operator)}


def resolve_for_registration(descriptor: Any) -> OperatorBase:
    """Validate and infer shapes of a descriptor as registration accepts it (-1 batch allowed)."""
    return kernels.resolve(descriptor, allow_batch_wildcard=True)


class OperatorRegistry:
    """Name -> registered operator; thread-safe (warm-ups run in worker threads).

    Names are also kept sorted, so a page of the listing costs its own length, not the
    registry's. Registrations made with a `cap` count against it (those of the API); the
    others (the model repository's, bounded by the repository itself) do not.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, RegisteredOperator] = {}
        self._names: list[str] = []  # sorted
        self._capped: set[str] = set()
        self._lock = threading.Lock()

    def find(self, op: OperatorBase, name: str | None) -> RegisteredOperator | None:
        """The existing registration this request repeats, if any.

        Without a name, any registration of the same descriptor; with one, that name when it
        holds the same descriptor. A name holding a different descriptor is a 422.
        """
        digest = fingerprint(op)
        with self._lock:
            if name is None:
                for reg in self._by_name.values():
                    if reg.digest == digest:
                        return reg
                return None
            existing = self._by_name.get(name)
        if existing is None:
            return None
        if existing.digest != digest:
            msg = f"an operator named {name!r} is already registered with another descriptor"
            raise UnprocessableError(msg, errors=[{"loc": ["name"], "msg": msg}])
        return existing

    def add(
        self, op: OperatorBase, name: str | None, cap: int | None = None
    ) -> tuple[RegisteredOperator, bool]:
        """Register `op` (already resolved and warmed); returns (entry, created).

        With `cap`, a new entry counts against it, and none is made (507) once `cap` counted
        entries exist.
        """
        digest = fingerprint(op)
        with self._lock:
            if name is None:
                existing = next((r for r in self._by_name.values() if r.digest == digest), None)
                if existing is not None:
                    return existing, False
                name = f"{str(op.type).lower()}-{digest[:12]}"
            existing = self._by_name.get(name)
            if existing is not None:
                if existing.digest == digest:
                    return existing, False
                msg = f"an operator named {name!r} is already registered with another descriptor"
                raise UnprocessableError(msg, errors=[{"loc": ["name"], "msg": msg}])
            if cap is not None:
                self._check_cap(cap)
                self._capped.add(name)
            reg = RegisteredOperator(name, op, digest)
            self._by_name[name] = reg
            bisect.insort(self._names, name)
            return reg, True

    def check_room(self, cap: int) -> None:
        """507 when `cap` counted registrations exist already."""
        with self._lock:
            self._check_cap(cap)

    def _check_cap(self, cap: int) -> None:
        if len(self._capped) >= cap:
            msg = (
                f"{len(self._capped)} operators are registered, the limit max_operators = {cap}; "
                "delete one (DELETE /v1/operators/{name}) or serve it from the model repository"
            )
            raise InsufficientStorageError(msg, errors=[{"loc": ["max_operators"], "msg": msg}])

    def get(self, name: str) -> RegisteredOperator:
        with self._lock:
            reg = self._by_name.get(name)
        if reg is None:
            raise NotFoundError(f"no operator is registered under the name {name!r}")
        return reg

    def remove(self, name: str) -> RegisteredOperator:
        with self._lock:
            reg = self._by_name.pop(name, None)
            if reg is not None:
                del self._names[bisect.bisect_left(self._names, name)]
                self._capped.discard(name)
        if reg is None:
            raise NotFoundError(f"no operator is registered under the name {name!r}")
        return reg

    def list(self) -> list[RegisteredOperator]:
        with self._lock:
            return [self._by_name[n] for n in self._names]

    def page(
        self, limit: int, after: str | None = None
    ) -> tuple[Sequence[RegisteredOperator], bool]:
        """Up to `limit` registrations in name order, after the name `after` (exclusive), and
        whether more follow."""
        with self._lock:
            start = bisect.bisect_right(self._names, after) if after is not None else 0
            names = self._names[start : start + limit + 1]
            return [self._by_name[n] for n in names[:limit]], len(names) > limit


def check_name(name: str) -> str:
    """Names are URL path segments: letters, digits, `_`, `.`, `-`; at most 128 characters."""
    if not _NAME_RE.fullmatch(name):  # `match` with `$` would let a final newline through
        msg = "a name is 1-128 letters, digits, '_', '.' or '-', starting with a letter or digit"
        raise UnprocessableError(f"name: {msg}", errors=[{"loc": ["name"], "msg": msg}])
    return name
