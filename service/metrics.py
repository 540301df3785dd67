"""Prometheus metrics, one CollectorRegistry per app (tests run many apps in one process), and
the observation that records each operator request in them, whatever way it ends.

Names follow Triton's where Triton has one (`nv_inference_*`, microsecond counters labelled by
model and version), so existing Triton dashboards read dmlserve; histograms and service-level
counters carry the `dmlserve_` prefix.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from dmlserve.service.errors import ServiceError
from dmlserve.service.work import Outcome, Timings

CONTENT_TYPE = CONTENT_TYPE_LATEST
_VERSION = "1"  # every model has the one version
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    """Every metric the service exports."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        model = ["model", "version"]
        self.requests = Counter(
            "dmlserve_requests", "Requests that ran an operator, by operator and HTTP status",
            ["operator", "status"], registry=r,
        )  # fmt: skip
        self.latency = Histogram(
            "dmlserve_request_duration_seconds", "Whole-request latency of operator requests",
            ["operator"], buckets=_BUCKETS, registry=r,
        )  # fmt: skip
        self.stage = Histogram(
            "dmlserve_stage_duration_seconds",
            "Time in each stage: queue (waiting for a slot), transfer (host<->device), compute",
            ["operator", "stage"], buckets=_BUCKETS, registry=r,
        )  # fmt: skip
        self.bytes_in = Counter(
            "dmlserve_request_bytes", "Request body bytes received", ["operator"], registry=r
        )
        self.bytes_out = Counter(
            "dmlserve_response_bytes", "Tensor bytes returned", ["operator"], registry=r
        )
        self.in_flight = Gauge(
            "dmlserve_inflight_requests", "Operator requests being served", registry=r
        )
        self.queued = Gauge(
            "dmlserve_queued_requests", "Requests waiting for a compute slot", registry=r
        )
        self.gpu_memory = Gauge(
            "dmlserve_gpu_memory_used_bytes", "Device memory held by CuPy's pool", registry=r
        )
        # Triton's names. prometheus-client appends `_total` to every Counter, which would
        # break the names, so these monotonic totals are exported as gauges that only grow.
        self.nv_success = Gauge(
            "nv_inference_request_success", "Successful inference requests", model, registry=r
        )
        self.nv_failure = Gauge(
            "nv_inference_request_failure", "Failed inference requests", [*model, "reason"],
            registry=r,
        )  # fmt: skip
        self.nv_count = Gauge(
            "nv_inference_count", "Inferences performed (a batch of N counts N)", model,
            registry=r,
        )  # fmt: skip
        self.nv_exec = Gauge(
            "nv_inference_exec_count", "Model executions performed", model, registry=r
        )
        self.nv_request_us = Gauge(
            "nv_inference_request_duration_us", "Cumulative request duration (us)", model,
            registry=r,
        )  # fmt: skip
        self.nv_queue_us = Gauge(
            "nv_inference_queue_duration_us", "Cumulative queue duration (us)", model, registry=r
        )
        self.nv_input_us = Gauge(
            "nv_inference_compute_input_duration_us", "Cumulative input transfer duration (us)",
            model, registry=r,
        )  # fmt: skip
        self.nv_infer_us = Gauge(
            "nv_inference_compute_infer_duration_us", "Cumulative compute duration (us)", model,
            registry=r,
        )  # fmt: skip
        self.nv_pending = Gauge(
            "nv_inference_pending_request_count", "Requests waiting for a compute slot", model,
            registry=r,
        )  # fmt: skip
        # Labelled children by label values: `.labels()` costs a lock and a few dict lookups.
        self._children: dict[tuple[Any, ...], Any] = {}

    def bind_gauges(self, queued: Callable[[], int], gpu_bytes: Callable[[], int | None]) -> None:
        """Gauges read at scrape time from the live limiter and backend."""
        self.queued.set_function(lambda: float(queued()))
        self.gpu_memory.set_function(lambda: float(gpu_bytes() or 0))

    def child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, memoized: `.labels()` costs a lock and several lookups."""
        key = (id(metric), *labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def pending(self, model: str) -> Any:
        """The pending-request gauge of `model`."""
        return self.child(self.nv_pending, model, _VERSION)

    def executed(self, model: str) -> None:
        """One execution of a batch of requests (each request is observed on its own)."""
        self.child(self.nv_exec, model, _VERSION).inc()

    def observe(
        self,
        *,
        operator: str,
        model: str,
        status: int,
        seconds: float,
        timings: Timings | None,
        batch: int,
        bytes_in: int,
        bytes_out: int,
        reason: str = "",
        executions: int = 1,
    ) -> None:
        """Record one finished operator request (`executions`: model executions it counts,
        0 when it ran in a batch, which `executed` counts)."""
        c, v = self.child, _VERSION
        c(self.requests, operator, str(status)).inc()
        c(self.latency, operator).observe(seconds)
        c(self.bytes_in, operator).inc(bytes_in)
        c(self.bytes_out, operator).inc(bytes_out)
        c(self.nv_request_us, model, v).inc(seconds * 1e6)
        if timings is not None:
            for stage in ("queue", "transfer", "compute"):
                c(self.stage, operator, stage).observe(getattr(timings, stage))
            c(self.nv_queue_us, model, v).inc(timings.queue * 1e6)
            c(self.nv_input_us, model, v).inc(timings.transfer * 1e6)
            c(self.nv_infer_us, model, v).inc(timings.compute * 1e6)
        if status == 200:
            c(self.nv_success, model, v).inc()
            c(self.nv_count, model, v).inc(batch)
            if executions:
                c(self.nv_exec, model, v).inc(executions)
        else:
            c(self.nv_failure, model, v, reason or str(status)).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class Observation:
    """Records one operator request in the metrics, whatever way it ends."""

    def __init__(self, metrics: Metrics, bytes_in: int, operator: str, model: str) -> None:
        self.metrics = metrics
        self.operator = operator or "unknown"
        self.model = model
        self.bytes_in = bytes_in
        self.bytes_out = 0
        self.batch = 0
        self.executions = 1
        self.timings: Timings | None = None

    def __enter__(self) -> Observation:
        self.start = time.perf_counter()
        self.metrics.in_flight.inc()
        return self

    def finished(self, outcome: Outcome, bytes_out: int) -> None:
        self.timings = outcome.work.timings
        self.bytes_out = bytes_out
        out = outcome.work.operator.output_tensor
        self.batch = out.sizes[0] if out is not None else 1
        self.executions = outcome.executions

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.metrics.in_flight.dec()
        if exc is None:
            status, reason = 200, ""
        elif isinstance(exc, ServiceError):
            status, reason = exc.status, exc.code
        else:
            status, reason = 500, "internal"
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
            executions=self.executions,
        )
