"""The long-lived pieces of one app and the request pipeline that uses them.

`ServiceState` is built by `create_app` and started by the lifespan (backend choice, warm-up);
routes receive it through the `StateDep` dependency.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
import numpy as np
import orjson
from fastapi import Depends, Request

from dmlserve import kernels
from dmlserve.kernels import DescriptorError, LimitExceededError, OperatorBase
from dmlserve.service.encoding import HostTensor
from dmlserve.service.errors import (
    PayloadTooLargeError,
    ServiceError,
    UnavailableError,
    UnprocessableError,
)
from dmlserve.service.executor import Backend, ComputeLimiter, Timings, t_desc
from dmlserve.service.limits import INLINE_BYTES
from dmlserve.service.metrics import Metrics
from dmlserve.service.registry import OperatorRegistry
from dmlserve.service.settings import Settings

logger = logging.getLogger("dmlserve")


@dataclass
class ServiceState:
    """Everything the routes share; one per app, no module globals."""

    settings: Settings
    metrics: Metrics = field(default_factory=Metrics)
    registry: OperatorRegistry = field(default_factory=OperatorRegistry)
    resolved: ResolveCache = field(default_factory=lambda: ResolveCache())
    limiter: ComputeLimiter = field(init=False)
    backend: Backend | None = None
    ready: bool = False

    def __post_init__(self) -> None:
        s = self.settings
        self.limiter = ComputeLimiter(s.max_concurrency, s.max_queue, s.retry_after_s)
        self.metrics.bind_gauges(
            lambda: self.limiter.waiting,
            lambda: self.backend.memory_in_use() if self.backend else None,
        )

    async def start(self) -> None:
        """Choose the backend and warm every operator up; then the service is ready."""
        s = self.settings
        name = kernels.select_backend(s.backend)  # raises if an explicit backend cannot run
        if s.backend == "auto":
            logger.info("backend auto-selected", extra={"backend": name})
        else:
            logger.info("backend selected", extra={"backend": name})
        if name == "cupy" and s.cupy_cache_dir:
            logger.info("CuPy kernel cache", extra={"path": s.cupy_cache_dir})
        backend = Backend(name, device=s.device, retry_after_s=s.retry_after_s)
        if s.warmup:
            t0 = time.perf_counter()
            await anyio.to_thread.run_sync(backend.warm_up)
            logger.info("warm-up done", extra={"seconds": round(time.perf_counter() - t0, 3)})
        self.backend = backend
        self.ready = True

    def require_ready(self) -> Backend:
        if not self.ready or self.backend is None:
            raise UnavailableError("the service is starting up", self.settings.retry_after_s)
        return self.backend


def state_of(request: Request) -> ServiceState:
    """The app's state. Operator routes call this directly: a dependency costs far more."""
    state: ServiceState = request.app.state.dmlserve
    return state


async def get_state(request: Request) -> ServiceState:
    # async: FastAPI runs a plain `def` dependency in its thread pool, one thread hop each.
    return state_of(request)


StateDep = Annotated[ServiceState, Depends(get_state)]


@dataclass
class Outcome:
    """A computed output with what produced it."""

    operator: OperatorBase  # resolved against the actual inputs
    output: np.ndarray
    timings: Timings


class ResolveCache:
    """Recently resolved descriptors, keyed by the descriptor and the tensors' types and sizes.

    `kernels.resolve` is a pure function of exactly these, so a repeated request (the same
    descriptor on same-shaped tensors) reuses the first one's result; every new pair is still
    fully validated. Only successes are kept; bounded (least recently used goes first).
    """

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[Any, ...], tuple[Any, OperatorBase]] = OrderedDict()

    def resolve(self, op: Any, inputs: Mapping[str, HostTensor]) -> OperatorBase:
        shapes = tuple((name, t.data_type, t.sizes) for name, t in inputs.items())
        if isinstance(op, dict):
            try:
                # The exact JSON text (1 and 1.0, key order) identifies the parsed values.
                ident: Any = orjson.dumps(op)
            except orjson.JSONEncodeError:
                return self._resolve(op, inputs)
        else:
            ident = id(op)  # a model: the entry holds it, so the id is not reused meanwhile
        key = (ident, shapes)
        hit = self._entries.get(key)
        if hit is not None and (isinstance(op, dict) or hit[0] is op):
            self._entries.move_to_end(key)
            return hit[1]
        resolved = self._resolve(op, inputs)
        self._entries[key] = (op if not isinstance(op, dict) else None, resolved)
        if len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return resolved

    @staticmethod
    def _resolve(op: Any, inputs: Mapping[str, HostTensor]) -> OperatorBase:
        return kernels.resolve(op, {name: t_desc(t) for name, t in inputs.items()})


def bind(
    op: Any,
    inputs: Mapping[str, HostTensor],
    loc: tuple[str | int, ...] = (),
    cache: ResolveCache | None = None,
) -> OperatorBase:
    """Resolve a descriptor (dict or model) against the request's tensors: 422 on a rule."""
    try:
        if cache is not None:
            return cache.resolve(op, inputs)
        return ResolveCache._resolve(op, inputs)
    except DescriptorError as exc:
        raise as_unprocessable(exc, loc) from None


def as_unprocessable(exc: DescriptorError, loc: tuple[str | int, ...] = ()) -> UnprocessableError:
    items = [{"loc": [*loc, *e["loc"]], "msg": e["msg"]} for e in exc.errors]
    return UnprocessableError(str(exc.prefixed(*loc)) if loc else str(exc), errors=items)


async def compute(
    state: ServiceState, op: OperatorBase, inputs: Mapping[str, HostTensor], model: str = ""
) -> Outcome:
    """Run a resolved operator under the limiter, with every limit checked before allocating."""
    backend = state.require_ready()
    s = state.settings
    out_desc = op.output_tensor
    assert out_desc is not None
    if out_desc.nbytes > s.max_output_bytes:
        raise PayloadTooLargeError(
            "max_output_bytes", s.max_output_bytes, out_desc.nbytes, "OutputTensor"
        )
    timings = Timings()

    def work() -> np.ndarray:
        try:
            return backend.run(op, inputs, timings)
        except LimitExceededError as exc:
            raise PayloadTooLargeError(
                exc.limit_name, exc.limit, exc.actual, "OutputTensor"
            ) from None
        except DescriptorError as exc:
            raise as_unprocessable(exc) from None

    pending = state.metrics.pending(model or str(op.type))
    pending.inc()
    # Tiny NumPy work costs less than the thread hand-offs around it; CuPy work always runs
    # in a worker thread (each worker owns a CUDA stream).
    inline = backend.name == "numpy" and is_tiny(op, inputs)
    run = state.limiter.run_inline if inline else state.limiter.run
    output = await run(work, s.request_timeout_s, timings, on_dequeue=pending.dec)
    return Outcome(op, output, timings)


# Work under both bounds runs on the event loop (NumPy backend). Bytes: what the operator
# reads and writes, the output counted once per window tap; taps: the reference backend's
# Python-level loop runs once per window offset.
INLINE_WORK_BYTES = 64 << 10
INLINE_TAPS = 64


def is_tiny(op: OperatorBase, inputs: Mapping[str, HostTensor]) -> bool:
    """Whether running `op` on `inputs` is small enough not to stall the event loop."""
    out = op.output_tensor
    assert out is not None
    taps = kernels.spec_of(op).taps(op)
    if taps > INLINE_TAPS:
        return False
    touched = sum(t.buffer.nbytes for t in inputs.values()) + out.nbytes * taps
    return touched <= INLINE_WORK_BYTES


async def warm_registered(state: ServiceState, op: OperatorBase) -> None:
    """Run a newly registered operator once on zeros (batch 1), compiling its kernels."""
    state.require_ready()
    descs = op.tensor_descs()
    inputs: dict[str, HostTensor] = {}
    for name, desc in descs.items():
        if name == "OutputTensor":
            continue
        sizes = (1, *desc.sizes[1:]) if desc.has_wildcard_batch else desc.sizes
        dt = desc.data_type
        inputs[name] = HostTensor(dt, sizes, None, np.zeros(math.prod(sizes), dt.numpy))
    bound = bind(op, inputs)
    assert bound.output_tensor is not None
    budget = state.settings.max_output_bytes
    if bound.output_tensor.nbytes > budget or sum(t.nbytes for t in inputs.values()) > budget:
        logger.info("warm-up skipped: operator too large", extra={"operator": str(op.type)})
        return
    await compute(state, bound, inputs)


R = TypeVar("R")


async def offload(size: int, fn: Callable[..., R], *args: Any) -> R:
    """`fn(*args)` inline when `size` bytes of work is small, else in a worker thread.

    Decoding JSON numbers or base64 and encoding large outputs would otherwise block the
    event loop (and every other request) for as long as they take.
    """
    if size <= INLINE_BYTES:
        return fn(*args)
    return await anyio.to_thread.run_sync(fn, *args)


def error_status(exc: BaseException) -> int:
    return exc.status if isinstance(exc, ServiceError) else 500


class Observation:
    """Records one operator request in the metrics, whatever way it ends."""

    def __init__(self, state: ServiceState, bytes_in: int = 0) -> None:
        self.metrics = state.metrics
        self.operator = "unknown"
        self.model = ""
        self.bytes_in = bytes_in
        self.bytes_out = 0
        self.batch = 0
        self.timings: Timings | None = None

    def __enter__(self) -> Observation:
        self.start = time.perf_counter()
        self.metrics.in_flight.inc()
        return self

    def finished(self, outcome: Outcome, bytes_out: int) -> None:
        self.timings = outcome.timings
        self.bytes_out = bytes_out
        out = outcome.operator.output_tensor
        self.batch = out.sizes[0] if out is not None else 1

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.metrics.in_flight.dec()
        status = 200 if exc is None else error_status(exc)
        reason = exc.code if isinstance(exc, ServiceError) else ("" if exc is None else "internal")
        self.metrics.observe(
            operator=self.operator,
            model=self.model or self.operator,
            status=status,
            seconds=time.perf_counter() - self.start,
            timings=self.timings if status == 200 else None,
            batch=self.batch,
            bytes_in=self.bytes_in,
            bytes_out=self.bytes_out,
            reason=reason,
        )
