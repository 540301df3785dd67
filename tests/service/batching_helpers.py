"""Pieces the batching tests share: a clock moved by hand, a device held at a gate, requests
that go through the pipeline as a transport hands them over, registered descriptors."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dmlserve.kernels.dtypes import from_numpy
from dmlserve.kernels.wire import HostTensor
from dmlserve.service.batching import Batchers
from dmlserve.service.device import Device
from dmlserve.service.pipeline import Decoded, run
from dmlserve.service.registration import register
from dmlserve.service.registry import RegisteredOperator
from dmlserve.service.schemas import Batching
from dmlserve.service.settings import Settings
from dmlserve.service.state import ServiceState
from dmlserve.service.work import Outcome, Work


@dataclass
class _Timer:
    when: float
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that moves only when the test says: timers fire inside `advance`."""

    def __init__(self) -> None:
        self.time = 0.0
        self.timers: list[_Timer] = []

    def now(self) -> float:
        return self.time

    def call_at(self, when: float, callback: Callable[[], None]) -> _Timer:
        timer = _Timer(when, callback)
        self.timers.append(timer)
        return timer

    def advance(self, seconds: float) -> None:
        self.time += seconds
        due = sorted((t for t in self.timers if t.when <= self.time), key=lambda t: t.when)
        for timer in due:
            self.timers.remove(timer)
            if not timer.cancelled:
                timer.callback()


class GatedDevice(Device):
    """The NumPy device, each run held in its worker thread until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__("numpy")
        self.gate = threading.Event()
        self.started = threading.Event()
        self.batches: list[int] = []  # the batch size of each run

    def run(self, work: Work, *, on_host: bool = False) -> np.ndarray:
        out = work.operator.output_tensor
        assert out is not None
        self.batches.append(out.sizes[0])
        self.started.set()
        assert self.gate.wait(30), "the test never opened the gate"
        return super().run(work, on_host=on_host)


@dataclass
class ArrayExchange:
    """Arrays in, the output array out, for a registered operator (as a transport would)."""

    registered: RegisteredOperator
    arrays: dict[str, np.ndarray]
    received_bytes: int = 0
    decode_bytes: int = 0
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def operator(self) -> str:
        return self.registered.type

    @property
    def model(self) -> str:
        return self.registered.name

    def decode(self) -> Decoded:
        inputs = {**host_tensors(self.arrays), **self.registered.constants}
        return Decoded(self.registered.operator, inputs, ())

    def encode(self, decoded: Decoded, outcome: Outcome) -> tuple[np.ndarray, int]:
        self.outcomes.append(outcome)
        return outcome.output, outcome.output.nbytes


async def started_state(clock: ManualClock, **settings: Any) -> ServiceState:
    settings.setdefault("backend", "numpy")
    state = ServiceState(Settings(warmup=False, **settings))
    state.batchers = Batchers(clock)
    await state.start()
    return state


def with_variable_batch(
    descriptor: dict[str, Any], inputs: dict[str, np.ndarray]
) -> dict[str, Any]:
    """`descriptor` with the tensors of `inputs`: a -1 batch on InputTensor (and on OutputTensor,
    if given), the others as they are."""
    out = dict(descriptor)
    for name, a in inputs.items():
        sizes = [-1, *a.shape[1:]] if name == "InputTensor" else list(a.shape)
        out[name] = {"DataType": from_numpy(a.dtype).value, "Sizes": sizes}
    if "OutputTensor" in out:
        out["OutputTensor"] = {
            **out["OutputTensor"],
            "Sizes": [-1, *out["OutputTensor"]["Sizes"][1:]],
        }
    return out


def policy(max_batch_size: int, delay_us: int, preferred: list[int] | None = None) -> Batching:
    return Batching(
        max_batch_size=max_batch_size,
        max_queue_delay_us=delay_us,
        preferred_batch_sizes=preferred,
    )


async def registered(
    state: ServiceState,
    descriptor: dict[str, Any],
    name: str,
    batching: Batching | None,
    constants: dict[str, np.ndarray] | None = None,
) -> RegisteredOperator:
    reg, created = await register(
        state, descriptor, name, constants=host_tensors(constants or {}), batching=batching
    )
    assert created
    return reg


def host_tensors(arrays: dict[str, np.ndarray]) -> dict[str, HostTensor]:
    return {
        name: HostTensor(from_numpy(a.dtype), a.shape, None, np.ascontiguousarray(a).reshape(-1))
        for name, a in arrays.items()
    }


def submit(state: ServiceState, reg: RegisteredOperator, x: np.ndarray) -> asyncio.Task[Any]:
    """One request for `reg` on input `x`, running as its own task."""
    return asyncio.get_running_loop().create_task(
        run(state, ArrayExchange(reg, {"InputTensor": x}))
    )


async def until(condition: Callable[[], bool], turns: int = 1000) -> None:
    """Let the event loop run until `condition` holds (turns of the loop, not time)."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


def metric(state: ServiceState, name: str, **labels: str) -> float:
    return state.metrics.registry.get_sample_value(name, labels) or 0.0
