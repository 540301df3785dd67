"""Dynamic batching in the pipeline: who joins a batch and when, exact answers, and every limit
(queue bound, time limit, cancellation) kept per request. Time is a clock moved by hand."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from dmlserve.service.errors import GatewayTimeoutError, QueueFullError
from tests.service.batching_helpers import (
    GatedDevice,
    ManualClock,
    metric,
    policy,
    registered,
    started_state,
    submit,
    until,
)

PAD = {"type": "PADDING", "PaddingMode": "REFLECTION", "StartPadding": [0, 0, 1, 2],
       "EndPadding": [0, 0, 2, 1]}  # fmt: skip


def _pad_model(x: np.ndarray) -> dict[str, Any]:
    return {**PAD, "InputTensor": {"DataType": "FLOAT32", "Sizes": [-1, *x.shape[1:]]}}


def _expected(x: np.ndarray) -> np.ndarray:
    return np.pad(x, [(0, 0), (0, 0), (1, 2), (2, 1)], mode="reflect")


def _inputs(*batches: int, size: int = 4) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.standard_normal((n, 1, size, size)).astype(np.float32) for n in batches]


def _label(name: str) -> dict[str, str]:
    return {"model": name, "version": "1"}


async def test_requests_of_different_sizes_wait_for_the_delay_then_run_as_one() -> None:
    clock = ManualClock()
    state = await started_state(clock)
    xs = _inputs(1, 3, 2)
    reg = await registered(state, _pad_model(xs[0]), "pad", policy(8, 500))
    tasks = [submit(state, reg, x) for x in xs]
    await until(lambda: state.limiter.waiting == 3)
    for _ in range(50):
        await asyncio.sleep(0)
    assert not any(t.done() for t in tasks)  # 6 items < 8, and the delay has not passed
    assert metric(state, "nv_inference_pending_request_count", **_label("pad")) == 3
    clock.advance(499e-6)
    await asyncio.sleep(0)
    assert not any(t.done() for t in tasks)
    clock.advance(1e-6)
    outs = await asyncio.gather(*tasks)
    for x, out in zip(xs, outs, strict=True):
        np.testing.assert_array_equal(out, _expected(x), strict=True)
    labels = _label("pad")
    assert metric(state, "nv_inference_exec_count", **labels) == 1
    assert metric(state, "nv_inference_count", **labels) == 6
    assert metric(state, "nv_inference_request_success", **labels) == 3
    assert metric(state, "nv_inference_pending_request_count", **labels) == 0
    assert state.limiter.waiting == 0 and state.limiter.running == 0


async def test_a_full_batch_runs_at_once_and_never_exceeds_max_batch_size() -> None:
    clock = ManualClock()
    state = await started_state(clock)
    xs = _inputs(2, 3, 2, 1, 4)
    reg = await registered(state, _pad_model(xs[0]), "pad", policy(7, 1_000_000))
    state.device = device = GatedDevice()
    device.gate.set()
    tasks = [submit(state, reg, x) for x in xs]
    # 2+3+2 = 7 items: due without waiting; the next batch (1+4) is not full.
    await until(lambda: device.batches == [7])
    await asyncio.gather(*tasks[:3])
    assert not tasks[3].done() and not tasks[4].done()
    clock.advance(1.0)  # the delay of the oldest left (its request arrived at time 0)
    outs = await asyncio.gather(*tasks)
    assert device.batches == [7, 5]
    for x, out in zip(xs, outs, strict=True):
        np.testing.assert_array_equal(out, _expected(x), strict=True)
    assert metric(state, "nv_inference_exec_count", **_label("pad")) == 2
    assert metric(state, "nv_inference_count", **_label("pad")) == 12


async def test_preferred_batch_sizes_run_as_soon_as_the_queue_makes_one() -> None:
    clock = ManualClock()
    state = await started_state(clock)
    xs = _inputs(1, 1, 1, 2)
    reg = await registered(state, _pad_model(xs[0]), "pad", policy(8, 1_000_000, [2, 5]))
    state.device = device = GatedDevice()
    device.gate.set()
    first = [submit(state, reg, x) for x in xs[:2]]  # 1 + 1 = 2: preferred
    await asyncio.gather(*first)
    assert device.batches == [2]
    rest = [submit(state, reg, x) for x in xs[2:]]  # 1 + 2 = 3: not preferred, under 8
    for _ in range(50):
        await asyncio.sleep(0)
    assert not any(t.done() for t in rest)
    clock.advance(1.0)
    await asyncio.gather(*rest)
    assert device.batches == [2, 3]


async def test_a_batch_takes_whoever_arrived_while_it_waited_for_a_slot() -> None:
    clock = ManualClock()
    state = await started_state(clock, max_concurrency=1)
    xs = _inputs(1, 1, 1)
    reg = await registered(state, _pad_model(xs[0]), "pad", policy(8, 0))
    state.device = device = GatedDevice()
    holder = object()
    await state.limiter.acquire(holder)  # every slot busy
    tasks = [submit(state, reg, x) for x in xs]
    await until(lambda: state.limiter.waiting == 3)
    state.limiter.release(holder)
    device.gate.set()
    await asyncio.gather(*tasks)
    assert device.batches == [3]


async def test_a_request_past_its_time_limit_leaves_the_queue_alone() -> None:
    clock = ManualClock()
    state = await started_state(clock, max_concurrency=1, request_timeout_s=5)
    xs = _inputs(1, 2)
    reg = await registered(state, _pad_model(xs[0]), "pad", policy(8, 0))
    holder = object()
    await state.limiter.acquire(holder)
    late = submit(state, reg, xs[0])
    await until(lambda: state.limiter.waiting == 1)
    clock.advance(3)
    other = submit(state, reg, xs[1])
    await until(lambda: state.limiter.waiting == 2)
    clock.advance(2)  # the first request's 5 s are up; the second has 2 s left
    with pytest.raises(GatewayTimeoutError, match="time limit of 5 s"):
        await late
    assert state.limiter.waiting == 1
    state.limiter.release(holder)
    np.testing.assert_array_equal(await other, _expected(xs[1]), strict=True)
    labels = _label("pad")
    assert metric(state, "nv_inference_exec_count", **labels) == 1
    assert metric(state, "nv_inference_count", **labels) == 2  # the one that ran
    assert metric(state, "nv_inference_request_failure", reason="timeout", **labels) == 1


@pytest.mark.parametrize("how", ["time limit", "cancelled"])
async def test_a_request_dropped_mid_batch_leaves_the_others_their_answers(how: str) -> None:
    clock = ManualClock()
    state = await started_state(clock, max_concurrency=1, request_timeout_s=5)
    xs = _inputs(2, 1, 3, size=96)  # big enough to run in a worker thread
    reg = await registered(state, _pad_model(xs[0]), "pad", policy(6, 1_000_000))
    state.device = device = GatedDevice()
    dropped = submit(state, reg, xs[0])
    await until(lambda: state.limiter.waiting == 1)
    clock.advance(0.5)  # within the first request's 1 s delay
    kept = [submit(state, reg, x) for x in xs[1:]]  # 2 + 1 + 3 = 6: a full batch
    await asyncio.to_thread(device.started.wait, 30)
    assert device.batches == [6] and state.limiter.running == 1
    if how == "time limit":
        clock.advance(4.5)  # 5 s for the first request, 4.5 s for the others
        with pytest.raises(GatewayTimeoutError):
            await dropped
    else:
        dropped.cancel()
        with pytest.raises(asyncio.CancelledError):
            await dropped
    assert not any(t.done() for t in kept) and state.limiter.running == 1
    device.gate.set()
    outs = await asyncio.gather(*kept)
    for x, out in zip(xs[1:], outs, strict=True):
        np.testing.assert_array_equal(out, _expected(x), strict=True)
    await until(lambda: state.limiter.running == 0)  # the batch's slot is free again
    labels = _label("pad")
    assert metric(state, "nv_inference_exec_count", **labels) == 1
    assert metric(state, "nv_inference_count", **labels) == 4
    assert metric(state, "nv_inference_request_success", **labels) == 2


async def test_a_cancelled_request_leaves_the_queue_and_counts_nowhere() -> None:
    clock = ManualClock()
    state = await started_state(clock)
    xs = _inputs(1, 1)
    reg = await registered(state, _pad_model(xs[0]), "pad", policy(4, 1000))
    gone, stays = submit(state, reg, xs[0]), submit(state, reg, xs[1])
    await until(lambda: state.limiter.waiting == 2)
    gone.cancel()
    await until(lambda: state.limiter.waiting == 1)
    clock.advance(1e-3)
    np.testing.assert_array_equal(await stays, _expected(xs[1]), strict=True)
    labels = _label("pad")
    assert metric(state, "nv_inference_pending_request_count", **labels) == 0
    assert metric(state, "nv_inference_count", **labels) == 1
    assert gone.cancelled()


async def test_batched_requests_count_against_the_one_queue_bound() -> None:
    clock = ManualClock()
    state = await started_state(clock, max_concurrency=1, max_queue=2, retry_after_s=3)
    xs = _inputs(1, 1, 1)
    reg = await registered(state, _pad_model(xs[0]), "pad", policy(8, 0))
    plain = await registered(state, _pad_model(xs[0]), "plain", None)
    holder = object()
    await state.limiter.acquire(holder)
    queued = [submit(state, reg, xs[0]), submit(state, plain, xs[1])]
    await until(lambda: state.limiter.waiting == 2)
    for model in (reg, plain):
        with pytest.raises(QueueFullError) as refused:
            await submit(state, model, xs[2])
        assert refused.value.headers["Retry-After"] == "3"
    state.limiter.release(holder)
    await asyncio.gather(*queued)
    assert state.limiter.waiting == 0
    for name in ("pad", "plain"):
        labels = _label(name)
        assert metric(state, "nv_inference_request_failure", reason="queue_full", **labels) == 1
        assert metric(state, "nv_inference_pending_request_count", **labels) == 0


async def test_a_request_larger_than_max_batch_size_runs_on_its_own() -> None:
    clock = ManualClock()
    state = await started_state(clock)
    (x,) = _inputs(5)
    reg = await registered(state, _pad_model(x), "pad", policy(4, 1_000_000))
    np.testing.assert_array_equal(await submit(state, reg, x), _expected(x), strict=True)
    labels = _label("pad")
    assert metric(state, "nv_inference_exec_count", **labels) == 1
    assert metric(state, "nv_inference_count", **labels) == 5


async def test_a_batch_stays_within_max_output_bytes() -> None:
    clock = ManualClock()
    xs = _inputs(1, 1, 1, size=8)
    one_output = _expected(xs[0]).nbytes
    state = await started_state(clock, max_output_bytes=2 * one_output)
    reg = await registered(state, _pad_model(xs[0]), "pad", policy(8, 1_000_000))
    state.device = device = GatedDevice()
    device.gate.set()
    tasks = [submit(state, reg, x) for x in xs]
    await until(lambda: state.limiter.waiting == 3)
    clock.advance(1.0)
    await asyncio.gather(*tasks)
    assert device.batches == [2, 1]
