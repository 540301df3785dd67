"""The request pipeline without HTTP: a transport of its own hands it tensors as arrays, as a
gRPC server would, and gets the outcome back through its own encoder."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from dmlserve.kernels.dtypes import from_numpy
from dmlserve.kernels.wire import HostTensor
from dmlserve.service.errors import PayloadTooLargeError, UnavailableError, UnprocessableError
from dmlserve.service.pipeline import Decoded, run
from dmlserve.service.settings import Settings
from dmlserve.service.state import ServiceState
from dmlserve.service.work import Outcome

EDGE = {"type": "PADDING", "PaddingMode": "EDGE", "StartPadding": [0, 1], "EndPadding": [2, 0]}


@dataclass
class ArrayExchange:
    """Arrays in, the output array out; records which thread ran each step."""

    descriptor: Any
    arrays: dict[str, np.ndarray]
    model: str = ""
    operator: str = ""
    received_bytes: int = 0
    decode_bytes: int = 0
    loc: tuple[str | int, ...] = ("operator",)
    steps: list[tuple[str, int]] = field(default_factory=list)

    def decode(self) -> Decoded:
        self.steps.append(("decode", threading.get_ident()))
        inputs = {
            name: HostTensor(from_numpy(a.dtype), a.shape, None, a.reshape(-1))
            for name, a in self.arrays.items()
        }
        return Decoded(self.descriptor, inputs, self.loc)

    def encode(self, decoded: Decoded, outcome: Outcome) -> tuple[np.ndarray, int]:
        self.steps.append(("encode", threading.get_ident()))
        return outcome.output, outcome.output.nbytes


async def _started(**settings: Any) -> ServiceState:
    state = ServiceState(Settings(backend="numpy", warmup=False, **settings))
    await state.start()
    return state


@pytest.fixture
async def state() -> AsyncIterator[ServiceState]:
    yield await _started()


def _metric(state: ServiceState, name: str, **labels: str) -> float:
    return state.metrics.registry.get_sample_value(name, labels) or 0.0


async def test_decode_bind_compute_encode_in_order(state: ServiceState) -> None:
    x = np.arange(6, dtype=np.int16).reshape(2, 3)
    exchange = ArrayExchange(EDGE, {"InputTensor": x}, received_bytes=12)
    out = await run(state, exchange)
    np.testing.assert_array_equal(out, np.pad(x, [(0, 2), (1, 0)], mode="edge"), strict=True)
    assert [step for step, _ in exchange.steps] == ["decode", "encode"]
    labels = {"model": "PADDING", "version": "1"}
    assert _metric(state, "nv_inference_request_success", **labels) == 1
    assert _metric(state, "nv_inference_count", **labels) == 4  # a batch of 4 rows
    assert _metric(state, "dmlserve_request_bytes_total", operator="PADDING") == 12


async def test_big_decoding_and_encoding_leave_the_event_loop(state: ServiceState) -> None:
    loop_thread = threading.get_ident()
    small = ArrayExchange(EDGE, {"InputTensor": np.zeros((2, 3), np.float32)})
    await run(state, small)
    assert {t for _, t in small.steps} == {loop_thread}
    big = ArrayExchange(
        EDGE, {"InputTensor": np.zeros((300, 300), np.float32)}, decode_bytes=1 << 20
    )
    await run(state, big)
    assert all(t != loop_thread for _, t in big.steps)  # 1 MiB of decoding, 360 KB of output


async def test_a_broken_rule_is_422_where_the_exchange_points(state: ServiceState) -> None:
    exchange = ArrayExchange({**EDGE, "EndPadding": [2]}, {"InputTensor": np.zeros((2, 3))})
    with pytest.raises(UnprocessableError) as err:
        await run(state, exchange)
    assert err.value.errors[0]["loc"][0] == "operator"
    assert [step for step, _ in exchange.steps] == ["decode"]
    labels = {"model": "unknown", "version": "1", "reason": "unprocessable"}
    assert _metric(state, "nv_inference_request_failure", **labels) == 1


async def test_the_output_limit_is_checked_before_any_compute() -> None:
    state = await _started(max_output_bytes=100)
    exchange = ArrayExchange(EDGE, {"InputTensor": np.zeros((5, 5), np.float32)}, model="pad")
    with pytest.raises(PayloadTooLargeError, match="OutputTensor"):
        await run(state, exchange)
    # Refused before queueing: nothing pending, no stage timed.
    assert _metric(state, "nv_inference_pending_request_count", model="pad", version="1") == 0
    assert not _metric(
        state, "dmlserve_stage_duration_seconds_count", operator="PADDING", stage="compute"
    )


async def test_nothing_runs_before_the_service_is_ready() -> None:
    state = ServiceState(Settings(backend="numpy", warmup=False))
    with pytest.raises(UnavailableError):
        await run(state, ArrayExchange(EDGE, {"InputTensor": np.zeros((2, 3))}))
