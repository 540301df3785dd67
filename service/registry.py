"""Registered operators: validated, shape-inferred and warmed once, then served by name.

Every registered operator is also a KServe v2 model of the same name (version "1").
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import threading
from dataclasses import dataclass
from typing import Any

import orjson

from dmlserve import kernels
from dmlserve.kernels import OperatorBase
from dmlserve.service.batching import BatchPolicy
from dmlserve.service.errors import NotFoundError, UnprocessableError

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$"
_NAME_RE = re.compile(NAME_PATTERN)


def wire(op: OperatorBase) -> dict[str, Any]:
    """The descriptor as JSON, DirectML names and short enum spellings."""
    return op.model_dump(mode="json", by_alias=True, exclude_none=True)


def fingerprint(op: OperatorBase, batching: BatchPolicy | None = None) -> str:
    """A stable digest of a resolved descriptor and its batching (same ones -> same digest)."""
    doc: Any = wire(op)
    if batching is not None:
        doc = {"operator": doc, "batching": dataclasses.asdict(batching)}
    return hashlib.sha256(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(frozen=True)
class RegisteredOperator:
    name: str
    operator: OperatorBase  # resolved; Sizes[0] may be -1 (variable batch)
    digest: str
    batching: BatchPolicy | None = None

    @property
    def type(self) -> str:
        return str(self.operator.type)

    def to_json(self) -> dict[str, Any]:
        doc = {"name": self.name, "operator": wire(self.operator)}
        if self.batching is not None:
            doc["batching"] = dataclasses.asdict(self.batching)
        return doc


def resolve_for_registration(descriptor: Any) -> OperatorBase:
    """Validate and infer shapes of a descriptor as registration accepts it (-1 batch allowed)."""
    return kernels.resolve(descriptor, allow_batch_wildcard=True)


class OperatorRegistry:
    """Name -> registered operator; thread-safe (warm-ups run in worker threads)."""

    def __init__(self) -> None:
        self._by_name: dict[str, RegisteredOperator] = {}
        self._lock = threading.Lock()

    def find(
        self, op: OperatorBase, name: str | None, batching: BatchPolicy | None = None
    ) -> RegisteredOperator | None:
        """The existing registration this request repeats, if any.

        Without a name, any registration of the same descriptor (and batching); with one, that
        name when it holds the same. A name holding a different one is a 422.
        """
        digest = fingerprint(op, batching)
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
        self, op: OperatorBase, name: str | None, batching: BatchPolicy | None = None
    ) -> tuple[RegisteredOperator, bool]:
        """Register `op` (already resolved and warmed); returns (entry, created)."""
        digest = fingerprint(op, batching)
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
            reg = RegisteredOperator(name, op, digest, batching)
            self._by_name[name] = reg
            return reg, True

    def get(self, name: str) -> RegisteredOperator:
        with self._lock:
            reg = self._by_name.get(name)
        if reg is None:
            raise NotFoundError(f"no operator is registered under the name {name!r}")
        return reg

    def remove(self, name: str) -> RegisteredOperator:
        with self._lock:
            reg = self._by_name.pop(name, None)
        if reg is None:
            raise NotFoundError(f"no operator is registered under the name {name!r}")
        return reg

    def list(self) -> list[RegisteredOperator]:
        with self._lock:
            return sorted(self._by_name.values(), key=lambda r: r.name)


def check_name(name: str) -> str:
    """Names are URL path segments: letters, digits, `_`, `.`, `-`; at most 128 characters."""
    if not _NAME_RE.match(name):
        msg = "a name is 1-128 letters, digits, '_', '.' or '-', starting with a letter or digit"
        raise UnprocessableError(f"name: {msg}", errors=[{"loc": ["name"], "msg": msg}])
    return name
