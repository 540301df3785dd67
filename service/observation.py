"""Recording each operator request in the metrics, whatever way it ends.

An `Observation` sees one request through; when it ends, the `Recorder` adds it to plain
numbers kept per operator and per model, on the event loop: an attribute each, where a
Prometheus child's update takes a lock and a few calls. The registry has the recorder write
them into the Prometheus series before every collection (a scrape, `get_sample_value`), so
every reader sees every request. Each model's `ModelStatistics` is recorded at once.

Counts (requests, bytes, inferences, executions, histogram buckets) are integers, exact in any
grouping. Durations (Triton's cumulative ones, the histograms' sums) are summed here in request
order from zero, as the series would sum them, and written whole.
"""

from __future__ import annotations

import bisect
import threading
import time
from typing import TYPE_CHECKING, Any

from dmlserve.service.errors import ServiceError
from dmlserve.service.work import Outcome, Timings

if TYPE_CHECKING:
    from dmlserve.service.metrics import Metrics, ModelStatistics

_VERSION = "1"  # every model has the one version


class _Observed:
    """One histogram child's observations as plain numbers: the count of each bucket, and the
    sum, added in request order from zero as the child adds them; written into the child's own
    values at each flush. prometheus-client has no public call that writes a histogram whole,
    and its `observe` takes two locks and a dozen calls, most of a small request's metrics
    cost; a release that keeps a child's values otherwise gets each observation at once."""

    __slots__ = ("child", "bounds", "counts", "sum", "direct")

    def __init__(self, child: Any) -> None:
        self.child = child
        self.bounds = tuple(getattr(child, "_upper_bounds", ()))
        values = (*getattr(child, "_buckets", ()), getattr(child, "_sum", None))
        self.direct = not self.bounds or not all(hasattr(v, "set") for v in values)
        self.counts = [0] * len(self.bounds)
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        if self.direct:
            self.child.observe(amount)
            return
        self.sum += amount
        i = bisect.bisect_left(self.bounds, amount)
        if i < len(self.bounds) and amount <= self.bounds[i]:  # the child's own test (NaN: none)
            self.counts[i] += 1

    def flush(self) -> None:
        if not self.direct:
            for value, count in zip(self.child._buckets, self.counts, strict=True):
                value.set(count)
            self.child._sum.set(self.sum)


class _ByOperator:
    """An operator's series: histogram children, and counts by status and of bytes (added to
    their counters at each flush: integers, exact in any grouping)."""

    def __init__(self, metrics: Metrics, operator: str) -> None:
        self.metrics, self.operator = metrics, operator
        c = metrics.child
        self.latency = _Observed(c(metrics.latency, operator))
        self.stages: tuple[_Observed, ...] = ()  # made by the first timed request
        self.by_status: dict[int, int] = {}
        self.bytes_in = self.bytes_out = 0
        self._counters = [
            [c(metrics.bytes_in, operator), "bytes_in", 0],
            [c(metrics.bytes_out, operator), "bytes_out", 0],
        ]  # child, attribute or status, what the child holds

    def new_status(self, status: int) -> None:
        m = self.metrics
        self.by_status[status] = 0
        self._counters.append([m.child(m.requests, self.operator, str(status)), status, 0])

    def timed(self) -> tuple[_Observed, ...]:
        m = self.metrics
        self.stages = tuple(_Observed(m.child(m.stage, self.operator, s)) for s in _STAGES)
        return self.stages

    def flush(self) -> None:
        for observed in (self.latency, *self.stages):
            observed.flush()
        for entry in self._counters:
            child, key, flushed = entry
            total = self.by_status[key] if isinstance(key, int) else getattr(self, key)
            if total != flushed:
                child.inc(total - flushed)
                entry[2] = total


_STAGES = ("queue", "transfer", "compute")


class _ByModel:
    """A model's Triton totals (set whole at each flush: the durations summed in request
    order, as the gauges would sum them). A gauge is made by the first request that adds to it,
    as before: a model that never succeeded has no success count yet."""

    _GROUPS = {
        "request": (("request_us", "nv_request_us"),),
        "timed": (("queue_us", "nv_queue_us"), ("input_us", "nv_input_us"),
                  ("infer_us", "nv_infer_us"), ("output_us", "nv_output_us")),
        "ok": (("success", "nv_success"), ("count", "nv_count"), ("executions", "nv_exec")),
    }  # fmt: skip

    def __init__(self, metrics: Metrics, model: str) -> None:
        self.metrics, self.model = metrics, model
        self.request_us = self.queue_us = self.input_us = self.infer_us = self.output_us = 0.0
        self.success = self.count = self.executions = 0
        self.timed = self.ok = False
        self._gauges: list[tuple[str, Any]] = []
        self.make("request")

    def make(self, group: str) -> None:
        m = self.metrics
        for attribute, metric in self._GROUPS[group]:
            self._gauges.append((attribute, m.child(getattr(m, metric), self.model, _VERSION)))

    def flush(self) -> None:
        for attribute, child in self._gauges:
            child.set(getattr(self, attribute))


class Pending:
    """A model's requests waiting for a compute slot, set in its gauge at each flush."""

    __slots__ = ("count", "gauge")

    def __init__(self, gauge: Any) -> None:
        self.count, self.gauge = 0, gauge

    def inc(self) -> None:
        self.count += 1

    def dec(self) -> None:
        self.count -= 1


class Recorder:
    """The numbers requests add to, and their flush into the metrics' series."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.in_flight = 0  # requests being served
        self._operators: dict[str, _ByOperator] = {}
        self._models: dict[str, _ByModel] = {}
        self._pending: dict[str, Pending] = {}
        self._flushing = threading.Lock()

    def pending(self, model: str) -> Pending:
        """The waiting requests of `model` (its gauge is made with the first request)."""
        found = self._pending.get(model)
        if found is None:
            m = self.metrics
            gauge = m.child(m.nv_pending, model, _VERSION)
            found = self._pending[model] = Pending(gauge)
        return found

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
        execution_batch: int = 0,
        statistics: ModelStatistics | None = None,
    ) -> None:
        """Record one finished operator request (in the model's statistics too, if given)."""
        if statistics is not None:
            statistics.record(status == 200, seconds, timings, batch, executions, execution_batch)
        m = self.metrics
        op = self._operators.get(operator)
        if op is None:
            op = self._operators[operator] = _ByOperator(m, operator)
        totals = self._models.get(model)
        if totals is None:
            totals = self._models[model] = _ByModel(m, model)
        if status not in op.by_status:
            op.new_status(status)
        op.by_status[status] += 1
        op.latency.observe(seconds)
        op.bytes_in += bytes_in
        op.bytes_out += bytes_out
        totals.request_us += seconds * 1e6
        if timings is not None:
            queue, transfer, compute = op.stages or op.timed()
            queue.observe(timings.queue)
            transfer.observe(timings.transfer)
            compute.observe(timings.compute)
            if not totals.timed:
                totals.timed = True
                totals.make("timed")
            totals.queue_us += timings.queue * 1e6
            totals.input_us += timings.compute_input * 1e6
            totals.infer_us += timings.compute * 1e6
            totals.output_us += timings.compute_output * 1e6
        if status == 200:
            if not totals.ok:
                totals.ok = True
                totals.make("ok")
            totals.success += 1
            totals.count += batch
            totals.executions += executions
        else:
            m.child(m.nv_failure, model, _VERSION, reason or str(status)).inc()

    def flush(self) -> None:
        """Write what requests recorded into the metrics' series (from any thread)."""
        with self._flushing:
            self.metrics.in_flight.set(self.in_flight)
            for by_operator in list(self._operators.values()):
                by_operator.flush()
            for by_model in list(self._models.values()):
                by_model.flush()
            for pending in list(self._pending.values()):
                pending.gauge.set(pending.count)

    def forget(self, model: str) -> None:
        """Drop the totals of a deleted model (after a flush: its requests stay counted by
        operator)."""
        self._models.pop(model, None)
        self._pending.pop(model, None)


class Observation:
    """Records one operator request in the metrics, whatever way it ends."""

    def __init__(
        self,
        metrics: Metrics,
        bytes_in: int,
        operator: str,
        model: str,
        statistics: ModelStatistics | None = None,
    ) -> None:
        self.recorder = metrics.recorder
        self.operator = operator or "unknown"
        self.model = model
        self.statistics = statistics
        self.bytes_in = bytes_in
        self.bytes_out = 0
        self.batch = 0
        self.executions = 1
        self.execution_batch = 0
        self.timings: Timings | None = None

    def __enter__(self) -> Observation:
        self.start = time.perf_counter()
        self.recorder.in_flight += 1
        return self

    def finished(self, outcome: Outcome, bytes_out: int) -> None:
        work = outcome.work
        self.timings = work.timings
        self.bytes_out = bytes_out
        out = work.operator.output_tensor
        # A model without a variable batch runs one inference per request, as in Triton.
        batched = self.statistics is None or self.statistics.batched
        self.batch = out.sizes[0] if out is not None and batched else 1
        self.executions = work.executions
        self.execution_batch = work.execution_batch or self.batch

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.recorder.in_flight -= 1
        if exc is None:
            status, reason = 200, ""
        elif isinstance(exc, ServiceError):
            status, reason = exc.status, exc.code
        else:
            status, reason = 500, "internal"
        self.recorder.observe(
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
            execution_batch=self.execution_batch,
            statistics=self.statistics,
        )
