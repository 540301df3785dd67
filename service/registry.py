"""Registered operators: validated, shape-inferred and warmed once, then served by name.

Every registered operator is also a KServe v2 model of the same name (version "1"). A
registration may bind some inputs as constants (left out of every execute), turn on dynamic
batching, and come from the model repository (`source`) rather than a runtime request.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import orjson

from dmlserve import kernels
from dmlserve.kernels import OperatorBase, TensorDesc
from dmlserve.kernels.operators import Constants
from dmlserve.kernels.wire import HostTensor
from dmlserve.service.errors import (
    ConflictError,
    InsufficientStorageError,
    NotFoundError,
    UnprocessableError,
)
from dmlserve.service.metrics import ModelStatistics
from dmlserve.service.schemas import Batching

Source = Literal["runtime", "repository"]

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$"
_NAME_RE = re.compile(NAME_PATTERN)


def wire(op: OperatorBase) -> dict[str, Any]:
    """The descriptor as JSON, DirectML names and short enum spellings."""
    return op.model_dump(mode="json", by_alias=True, exclude_none=True)


def fingerprint(
    op: OperatorBase,
    constants: Mapping[str, HostTensor] | None = None,
    batching: Batching | None = None,
) -> str:
    """A stable digest of a registration: the resolved descriptor, the constants' values and
    the batching (the same registration -> the same digest). Constants are read on the host."""
    digest = hashlib.sha256(orjson.dumps(wire(op), option=orjson.OPT_SORT_KEYS))
    for name, tensor in sorted((constants or {}).items()):
        digest.update(orjson.dumps([name, tensor.data_type.value, tensor.sizes]))
        digest.update(np.ascontiguousarray(tensor.view()).tobytes())
    if batching is not None:
        digest.update(orjson.dumps(batching.model_dump(), option=orjson.OPT_SORT_KEYS))
    return digest.hexdigest()


def sent_inputs(op: OperatorBase, constants: Mapping[str, object]) -> dict[str, TensorDesc]:
    """The input descriptors a request carries: every input but the constants."""
    descs = op.tensor_descs()
    return {n: d for n, d in descs.items() if n != "OutputTensor" and n not in constants}


def variable_batch(op: OperatorBase, constants: Mapping[str, object]) -> bool:
    """Whether every input sent at execution and the output have a -1 (variable) batch."""
    sent, out = sent_inputs(op, constants), op.output_tensor
    return (
        bool(sent)
        and out is not None
        and out.has_wildcard_batch
        and all(d.has_wildcard_batch for d in sent.values())
    )


@dataclass(frozen=True)
class RegisteredOperator:
    name: str
    operator: OperatorBase  # resolved; Sizes[0] may be -1 (variable batch)
    digest: str
    constants: Mapping[str, HostTensor] = field(default_factory=dict)  # on the device
    batching: Batching | None = None
    source: Source = "runtime"
    statistics: ModelStatistics = field(default_factory=ModelStatistics, compare=False)
    #: the constants' names and what the backends derive from them once (a prepared filter)
    prepared: Constants = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "prepared", Constants(frozenset(self.constants)))

    @property
    def type(self) -> str:
        return str(self.operator.type)

    @property
    def inputs(self) -> dict[str, TensorDesc]:
        """The inputs a request carries (constants left out), by name."""
        return sent_inputs(self.operator, self.constants)

    @property
    def variable_batch(self) -> bool:
        return variable_batch(self.operator, self.constants)

    @property
    def constant_bytes(self) -> int:
        """Bytes the constants hold (on the device where there is one)."""
        return sum(t.buffer.nbytes for t in self.constants.values())

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"name": self.name, "operator": wire(self.operator)}
        if self.constants:
            doc["constants"] = {
                n: {"DataType": t.data_type.value, "Sizes": list(t.sizes)}
                for n, t in self.constants.items()
            }
        if self.batching is not None:
            doc["batching"] = self.batching.model_dump(exclude_none=True)
        doc["source"] = self.source
        return doc


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

    def find(
        self, op: OperatorBase, name: str | None, digest: str | None = None
    ) -> RegisteredOperator | None:
        """The existing registration this request repeats, if any.

        Without a name, any registration of the same descriptor; with one, that name when it
        holds the same descriptor. A name holding a different descriptor is a 422. `digest`
        is the registration's `fingerprint` (of the descriptor alone when not given).
        """
        digest = digest or fingerprint(op)
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
        self,
        op: OperatorBase,
        name: str | None,
        *,
        digest: str | None = None,
        constants: Mapping[str, HostTensor] | None = None,
        batching: Batching | None = None,
        source: Source = "runtime",
        replace: bool = False,
        cap: int | None = None,
    ) -> tuple[RegisteredOperator, bool]:
        """Register `op` (already resolved and warmed); returns (entry, created).

        With `replace` (a repository model reloaded), a name holding another registration from
        the same source takes the new one; from another source it is a 409. With `cap`, a new
        entry counts against it, and none is made (507) once `cap` counted entries exist.
        """
        digest = digest or fingerprint(op, constants, batching)
        with self._lock:
            if name is None:
                existing = next((r for r in self._by_name.values() if r.digest == digest), None)
                if existing is not None:
                    return existing, False
                name = f"{str(op.type).lower()}-{digest[:12]}"
            existing = self._by_name.get(name)
            if existing is not None and replace and existing.source != source:
                raise ConflictError(
                    f"the name {name!r} is held by a {existing.source} registration; "
                    "remove it first"
                )
            if existing is not None and not (replace and existing.digest != digest):
                if existing.digest == digest:
                    return existing, False
                msg = f"an operator named {name!r} is already registered with another descriptor"
                raise UnprocessableError(msg, errors=[{"loc": ["name"], "msg": msg}])
            if cap is not None:
                self._check_cap(cap)
                self._capped.add(name)
            reg = RegisteredOperator(
                name, op, digest, dict(constants or {}), batching, source,
                ModelStatistics(batched=variable_batch(op, constants or {})),
            )  # fmt: skip
            if name not in self._by_name:
                bisect.insort(self._names, name)
            self._by_name[name] = reg
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

    def peek(self, name: str) -> RegisteredOperator | None:
        """The entry under `name`, or None."""
        return self._by_name.get(name)

    def statistics(self, name: str) -> ModelStatistics | None:
        """The statistics of the model `name` (None once it is gone)."""
        reg = self._by_name.get(name)
        return reg.statistics if reg is not None else None

    def get(self, name: str) -> RegisteredOperator:
        with self._lock:
            reg = self._by_name.get(name)
        if reg is None:
            raise NotFoundError(f"no operator is registered under the name {name!r}")
        return reg

    def remove(self, name: str, *, source: Source | None = None) -> RegisteredOperator:
        """Remove `name`; with `source`, only an entry from there (else 409)."""
        with self._lock:
            reg = self._by_name.get(name)
            if reg is not None and source is not None and reg.source != source:
                raise ConflictError(
                    f"{name!r} is a model of the model repository: unload it with "
                    f"POST /v2/repository/models/{name}/unload"
                )
            if reg is not None:
                del self._by_name[name]
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
