"""The long-lived pieces of one app, and how routes reach them.

`ServiceState` is built by `create_app` and started by the lifespan (backend choice, warm-up);
operator routes call `state_of(request)`, the others take the `StateDep` dependency. Nothing of
the request pipeline reads the FastAPI app: a transport hands the pipeline a `ServiceState`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

import anyio.to_thread
from fastapi import Depends, Request

from dmlserve import kernels
from dmlserve.kernels import cpu
from dmlserve.service.batching import Batchers
from dmlserve.service.binding import ResolveCache
from dmlserve.service.concurrency import ComputeLimiter
from dmlserve.service.deadlines import Deadlines
from dmlserve.service.device import Device
from dmlserve.service.errors import UnavailableError
from dmlserve.service.metrics import Metrics
from dmlserve.service.registry import OperatorRegistry
from dmlserve.service.settings import Settings
from dmlserve.service.shm import SharedMemory
from dmlserve.service.warmup import warm_up

if TYPE_CHECKING:
    from dmlserve.service.repository import ModelRepository

logger = logging.getLogger("dmlserve")


@dataclass
class ServiceState:
    """Everything the routes share; one per app, no module globals."""

    settings: Settings
    metrics: Metrics = field(default_factory=Metrics)
    registry: OperatorRegistry = field(default_factory=OperatorRegistry)
    resolved: ResolveCache = field(default_factory=ResolveCache)
    batchers: Batchers = field(default_factory=Batchers)
    body_deadlines: Deadlines = field(default_factory=Deadlines)
    limiter: ComputeLimiter = field(init=False)
    shared_memory: SharedMemory = field(init=False)
    device: Device | None = None
    ready: bool = False
    draining: bool = False  # shutting down: requests still queued at the end get 503
    starting: bool = False  # start-up's own work (repository models) may compute
    repository: ModelRepository | None = None

    def __post_init__(self) -> None:
        s = self.settings
        self.limiter = ComputeLimiter(s.max_concurrency, s.max_queue, s.retry_after_s)
        self.shared_memory = SharedMemory(s.max_shm_regions, s.max_shm_bytes)
        self.metrics.bind_gauges(
            lambda: self.limiter.waiting,
            lambda: self.device.memory_in_use() if self.device else None,
        )

    async def start(self) -> None:
        """Choose the backend, warm every operator up and register the model repository's
        models; then the service is ready."""
        s = self.settings
        name = kernels.select_backend(s.backend)  # raises if an explicit backend cannot run
        if s.backend == "auto":
            logger.info("backend auto-selected", extra={"backend": name})
        else:
            logger.info("backend selected", extra={"backend": name})
        if name == "cupy" and s.cupy_cache_dir:
            logger.info("CuPy kernel cache", extra={"path": s.cupy_cache_dir})
        if name == "numpy":
            # BLAS threads shared by the computations that run at once (kernels.cpu.threads).
            cpu.configure_threads(s.max_concurrency)
        device = Device(name, ordinal=s.device, retry_after_s=s.retry_after_s)
        pci_bus_id = device.pci_bus_id()
        if pci_bus_id is not None:
            self.metrics.watch_gpu(pci_bus_id)
        if s.warmup:
            t0 = time.perf_counter()
            await anyio.to_thread.run_sync(warm_up, device)
            logger.info("warm-up done", extra={"seconds": round(time.perf_counter() - t0, 3)})
        self.device = device
        # CUDA shared memory is served where the kernels run on a CUDA device.
        self.shared_memory.cuda = name == "cupy"
        if self.repository is not None:
            # Every replica serves the repository's models from its first ready answer on.
            self.starting = True
            try:
                await self.repository.start(self)
            finally:
                self.starting = False
        self.ready = True

    def require_ready(self) -> Device:
        """The device, or 503 while the service is not ready (start-up's own work aside; a
        server shutting down is no longer ready, yet still serves the requests it has taken
        in)."""
        if self.device is None or not (self.ready or self.starting or self.draining):
            raise UnavailableError("the service is starting up", self.settings.retry_after_s)
        return self.device

    def check_ready(self) -> None:
        """Readiness: started, not shutting down, and no compute slot held past its time
        limit (a merely busy server stays ready, or a load balancer would drop replicas
        exactly under load)."""
        if not self.ready or self.device is None:
            why = "shutting down" if self.draining else "starting up"
            raise UnavailableError(f"the service is {why}", self.settings.retry_after_s)
        held = self.limiter.overrunning
        if held:
            raise UnavailableError(
                f"{held} compute slot(s) are held by computations past their time limit",
                self.settings.retry_after_s,
            )

    def begin_shutdown(self) -> None:
        """The server stopped taking connections: not ready from now on."""
        self.draining = True
        self.ready = False


def state_of(request: Request) -> ServiceState:
    """The app's state. Operator routes call this directly: a dependency costs far more."""
    state: ServiceState = request.app.state.dmlserve
    return state


async def get_state(request: Request) -> ServiceState:
    # async: FastAPI runs a plain `def` dependency in its thread pool, one thread hop each.
    return state_of(request)


StateDep = Annotated[ServiceState, Depends(get_state)]
