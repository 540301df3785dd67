"""Recording requests in the metrics: what a scrape shows is byte for byte what updating each
Prometheus child at once, request by request, shows; and no request is lost to a scrape taken
from another thread while requests are recorded."""

from __future__ import annotations

import threading
from typing import Any

from prometheus_client import generate_latest

from dmlserve.service.metrics import Metrics
from dmlserve.service.observation import _Observed
from dmlserve.service.work import Timings

_V = "1"


def _text(m: Metrics) -> list[bytes]:
    """The exposition, less the `_created` samples (the wall-clock time each child was made)."""
    return [line for line in m.render().splitlines() if b"_created{" not in line]


def _at_once(m: Metrics, r: dict[str, Any]) -> None:
    """The oracle: each child updated as the request ends (prometheus-client's own sums)."""
    op, model, status, seconds, t = r["operator"], r["model"], r["status"], r["seconds"], r["t"]
    m.requests.labels(op, str(status)).inc()
    m.latency.labels(op).observe(seconds)
    m.bytes_in.labels(op).inc(r["bytes_in"])
    m.bytes_out.labels(op).inc(r["bytes_out"])
    m.nv_request_us.labels(model, _V).inc(seconds * 1e6)
    if t is not None:
        for stage in ("queue", "transfer", "compute"):
            m.stage.labels(op, stage).observe(getattr(t, stage))
        m.nv_queue_us.labels(model, _V).inc(t.queue * 1e6)
        m.nv_input_us.labels(model, _V).inc(t.compute_input * 1e6)
        m.nv_infer_us.labels(model, _V).inc(t.compute * 1e6)
        m.nv_output_us.labels(model, _V).inc(t.compute_output * 1e6)
    if status == 200:
        m.nv_success.labels(model, _V).inc()
        m.nv_count.labels(model, _V).inc(r["batch"])
        m.nv_exec.labels(model, _V).inc(r["executions"])
    else:
        m.nv_failure.labels(model, _V, r["reason"]).inc()


#: Durations on the histograms' bucket bounds, between them and past the last one.
_EDGES = (0.0, 0.0005, 0.001, 0.0025, 0.2500001, 10.0, 30.0, 31.0, 1e9)


def _requests(n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        ok = i % 7 != 3
        t = Timings(queue=_EDGES[i % 9] if i % 5 == 0 else i * 1.1e-5, transfer=0.0,
                    compute=3.3e-5 / (i + 1), decode=1e-5 * i, encode=7.7e-6)  # fmt: skip
        out.append({
            "operator": ("PADDING", "FOLD")[i % 2], "model": ("PADDING", "FOLD", "pad")[i % 3],
            "status": 200 if ok else (422, 504)[i % 2], "reason": "" if ok else "invalid",
            "seconds": _EDGES[i % 9] if i % 4 == 0 else 0.001 * (i % 11) + 1e-7 * i,
            "t": t if ok else None,
            "batch": 1 + i % 4, "executions": i % 2, "bytes_in": 100 + i, "bytes_out": 3 * i,
        })  # fmt: skip
    return out


def _record(m: Metrics, r: dict[str, Any]) -> None:
    m.recorder.observe(
        operator=r["operator"], model=r["model"], status=r["status"], seconds=r["seconds"],
        timings=r["t"], batch=r["batch"], bytes_in=r["bytes_in"], bytes_out=r["bytes_out"],
        reason=r["reason"], executions=r["executions"],
    )  # fmt: skip


def test_a_scrape_shows_what_updating_each_child_at_once_shows() -> None:
    recorded, oracle = Metrics(), Metrics()
    requests = _requests(200)
    for i, r in enumerate(requests):
        _record(recorded, r)
        _at_once(oracle, r)
        if i in (0, 1, 50, 51, 199):  # scrapes between requests, and twice in a row
            assert _text(recorded) == _text(oracle)
            lines = generate_latest(recorded.registry).splitlines()
            assert [line for line in lines if b"_created{" not in line] == _text(oracle)
    # A model's removal keeps its requests counted by operator, as before.
    recorded.remove_model("pad")
    oracle.remove_model("pad")
    for r in requests[:20]:
        _record(recorded, r)
        _at_once(oracle, r)
    assert _text(recorded) == _text(oracle)
    value = recorded.registry.get_sample_value
    assert value("dmlserve_requests_total", {"operator": "FOLD", "status": "200"}) == sum(
        1 for r in requests + requests[:20] if r["operator"] == "FOLD" and r["status"] == 200
    )


def test_scrapes_from_another_thread_lose_no_request() -> None:
    m = Metrics()
    n = 3000
    requests = _requests(n)
    done = threading.Event()
    seen: list[float] = []

    def scrape() -> None:
        while not done.is_set():
            seen.append(m.registry.get_sample_value("dmlserve_request_bytes_total",
                                                    {"operator": "PADDING"}) or 0.0)  # fmt: skip

    scraper = threading.Thread(target=scrape)
    scraper.start()
    try:
        for r in requests:
            _record(m, r)
    finally:
        done.set()
        scraper.join()
    assert seen == sorted(seen)  # counters only grow, whatever moment a scrape falls on
    by_status: dict[tuple[str, int], int] = {}
    for r in requests:
        key = (r["operator"], r["status"])
        by_status[key] = by_status.get(key, 0) + 1
    for (op, status), count in by_status.items():
        labels = {"operator": op, "status": str(status)}
        assert m.registry.get_sample_value("dmlserve_requests_total", labels) == count
    expected = sum(r["bytes_in"] for r in requests if r["operator"] == "PADDING")
    got = m.registry.get_sample_value("dmlserve_request_bytes_total", {"operator": "PADDING"})
    assert got == expected


def test_requests_in_flight_are_counted_at_the_scrape() -> None:
    m = Metrics()
    m.recorder.in_flight += 2
    assert m.registry.get_sample_value("dmlserve_inflight_requests") == 2
    m.recorder.in_flight -= 2
    assert m.registry.get_sample_value("dmlserve_inflight_requests") == 0


def test_a_histogram_child_that_keeps_its_values_otherwise_gets_each_observation() -> None:
    seen: list[float] = []

    class Child:  # no bucket values of its own to write
        def observe(self, amount: float) -> None:
            seen.append(amount)

    observed = _Observed(Child())
    observed.observe(0.5)
    observed.observe(2.0)
    observed.flush()
    assert observed.direct and seen == [0.5, 2.0]
