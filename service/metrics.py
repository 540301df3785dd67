"""Prometheus metrics, one CollectorRegistry per app (tests run many apps in one process); each
operator request is recorded in them by an `observation.Observation`.

Names follow Triton's where Triton has one (`nv_inference_*`, microsecond counters labelled by
model and version), so existing Triton dashboards read dmlserve; histograms and service-level
counters carry the `dmlserve_` prefix. Each model's `ModelStatistics` (Triton's statistics
extension) is recorded by the same observation, with Triton's meanings: `inference_count`
counts batch items, `execution_count` executions (a dynamic batch counts once, see
`Work.executions`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric

from dmlserve.service.observation import Pending, Recorder
from dmlserve.service.work import Timings

CONTENT_TYPE = CONTENT_TYPE_LATEST
_VERSION = "1"  # every model has the one version
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    """Every metric the service exports."""

    def __init__(self) -> None:
        self.registry = _Registry(self.flush)
        r = self.registry
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
        def per_model(name: str, documentation: str, *labels: str) -> Gauge:
            return Gauge(name, documentation, ["model", "version", *labels], registry=r)

        self.nv_success = per_model("nv_inference_request_success", "Successful inference requests")
        self.nv_failure = per_model(
            "nv_inference_request_failure", "Failed inference requests", "reason"
        )
        self.nv_count = per_model(
            "nv_inference_count", "Inferences performed (a batch of N counts N)"
        )
        self.nv_exec = per_model("nv_inference_exec_count", "Model executions performed")
        self.nv_request_us = per_model(
            "nv_inference_request_duration_us", "Cumulative request duration (us)"
        )
        self.nv_queue_us = per_model(
            "nv_inference_queue_duration_us", "Cumulative queue duration (us)"
        )
        self.nv_input_us = per_model(
            "nv_inference_compute_input_duration_us",
            "Cumulative duration of decoding inputs and copying them to the device (us)",
        )
        self.nv_infer_us = per_model(
            "nv_inference_compute_infer_duration_us", "Cumulative compute duration (us)"
        )
        self.nv_output_us = per_model(
            "nv_inference_compute_output_duration_us",
            "Cumulative duration of copying outputs from the device and encoding them (us)",
        )
        self.nv_pending = per_model(
            "nv_inference_pending_request_count", "Requests waiting for a compute slot"
        )
        # Labelled children by label values: `.labels()` costs a lock and a few dict lookups.
        self._children: dict[tuple[Any, ...], Any] = {}
        # What each request records, written into the series above at each collection.
        self.recorder = Recorder(self)

    def bind_gauges(self, queued: Callable[[], int], gpu_bytes: Callable[[], int | None]) -> None:
        """Gauges read at scrape time from the live limiter and backend."""
        self.queued.set_function(lambda: float(queued()))
        self.gpu_memory.set_function(lambda: float(gpu_bytes() or 0))

    def watch_gpu(self, pci_bus_id: str) -> bool:
        """Export the GPU's own metrics (NVML, Triton's `nv_gpu_*`); False where NVML does
        not answer, and then there are none."""
        from dmlserve.service.gpu_metrics import gpu_collector

        collector = gpu_collector(pci_bus_id)
        if collector is not None:
            self.registry.register(collector)
        return collector is not None

    def child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, memoized: `.labels()` costs a lock and several lookups."""
        key = (id(metric), *labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def pending(self, model: str) -> Pending:
        """The count of `model`'s requests waiting for a compute slot (its gauge)."""
        return self.recorder.pending(model)

    def flush(self) -> None:
        """Write what requests recorded into the series (before every collection)."""
        self.recorder.flush()

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def remove_model(self, model: str) -> None:
        """Drop every series labelled with `model` (it was deleted): what the metrics hold
        stays bounded by the models that exist."""
        self.flush()  # its requests stay counted by operator
        self.recorder.forget(model)
        labelled = self._by_model()
        for metric in labelled:
            metric.remove_by_labels({"model": model})
        ids = {id(m) for m in labelled}
        for key in [k for k in self._children if k[0] in ids and k[1] == model]:
            del self._children[key]

    def _by_model(self) -> list[Any]:
        """Every metric with a `model` label (found, so a metric added later is not missed)."""
        return [m for m in vars(self).values() if "model" in getattr(m, "_labelnames", ())]


class _Registry(CollectorRegistry):
    """A registry that has `before_collect` run first whenever it is collected."""

    def __init__(self, before_collect: Callable[[], None]) -> None:
        super().__init__(auto_describe=True)
        self._before_collect = before_collect

    def collect(self) -> Iterator[Metric]:
        self._before_collect()
        yield from super().collect()


#: Distinct batch sizes a model's `batch_stats` keeps (a client chooses them; the table must
#: stay bounded): executions of sizes beyond the first this many are counted everywhere else.
MAX_BATCH_STATS = 64


@dataclass
class Duration:
    """Triton's `$duration_stat`: a count and a cumulative duration."""

    count: int = 0
    ns: int = 0

    def add(self, seconds: float) -> None:
        self.count += 1
        self.ns += int(seconds * 1e9)

    def to_json(self) -> dict[str, int]:
        return {"count": self.count, "ns": self.ns}


@dataclass
class ModelStatistics:
    """One model's counters in Triton's statistics extension (`/v2/models/{name}/stats`).

    Recorded only by `Metrics.observe`; `batched` tells whether the model's batch dimension is
    variable (a request's inference count is its batch size) or not (one per request).
    """

    batched: bool = True
    success: Duration = field(default_factory=Duration)
    fail: Duration = field(default_factory=Duration)
    queue: Duration = field(default_factory=Duration)
    compute_input: Duration = field(default_factory=Duration)
    compute_infer: Duration = field(default_factory=Duration)
    compute_output: Duration = field(default_factory=Duration)
    inference_count: int = 0
    execution_count: int = 0
    last_inference_ms: int = 0
    batches: dict[int, tuple[Duration, Duration, Duration]] = field(default_factory=dict)

    def record(
        self,
        ok: bool,
        seconds: float,
        timings: Timings | None,
        batch: int,
        executions: int,
        execution_batch: int,
    ) -> None:
        if not ok or timings is None:
            self.fail.add(seconds)
            return
        self.success.add(seconds)
        self.queue.add(timings.queue)
        self.compute_input.add(timings.compute_input)
        self.compute_infer.add(timings.compute)
        self.compute_output.add(timings.compute_output)
        self.inference_count += batch
        self.execution_count += executions
        self.last_inference_ms = int(time.time() * 1000)
        if executions:
            stats = self.batches.get(execution_batch)
            if stats is None and len(self.batches) < MAX_BATCH_STATS:
                stats = self.batches[execution_batch] = (Duration(), Duration(), Duration())
            if stats is not None:
                stats[0].add(timings.compute_input)
                stats[1].add(timings.compute)
                stats[2].add(timings.compute_output)

    def to_json(self, name: str, version: str) -> dict[str, Any]:
        """Triton's `$model_stat` object."""
        stages = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")
        inference = {stage: getattr(self, stage).to_json() for stage in stages}
        # No response cache: perf_analyzer reads both entries all the same.
        inference["cache_hit"] = inference["cache_miss"] = Duration().to_json()
        batches = [
            {
                "batch_size": size,
                "compute_input": stats[0].to_json(),
                "compute_infer": stats[1].to_json(),
                "compute_output": stats[2].to_json(),
            }
            for size, stats in sorted(self.batches.items())
        ]
        return {
            "name": name,
            "version": version,
            "last_inference": self.last_inference_ms,
            "inference_count": self.inference_count,
            "execution_count": self.execution_count,
            "inference_stats": inference,
            "batch_stats": batches,
        }
