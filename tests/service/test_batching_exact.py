"""A request's output bytes do not depend on the batch it joined: every operator of the table,
every data type family its samples cover, requests of different batch sizes joined together,
against the same requests run one by one. On the NumPy backend here, on CuPy where a GPU
answers (marked `gpu`)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import numpy as np
import pytest

from dmlserve.kernels import DescriptorError
from dmlserve.kernels.dtypes import from_numpy
from dmlserve.kernels.operators import OPERATORS
from dmlserve.kernels.wire import HostTensor
from dmlserve.service.batching import split
from dmlserve.service.binding import bind
from dmlserve.service.device import Device
from dmlserve.service.registry import resolve_for_registration
from dmlserve.service.work import Work
from tests.operator_info import Sample, all_samples, sample_id
from tests.oracles import random_array
from tests.service.batching_helpers import (
    ManualClock,
    metric,
    policy,
    registered,
    started_state,
    submit,
    until,
    with_variable_batch,
)

BATCHES = (1, 3, 2)  # requests of different sizes, joined in this order
BACKENDS = ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)]


def _with_batch_axis(sample: Sample) -> Sample | None:
    """The sample where its first axis can be a variable batch: as it is, or (PADDING) with no
    padding on that axis; None where it cannot (a rank-1 PADDING pads its only axis)."""
    descriptor = dict(sample.descriptor)
    if sample.descriptor["type"] == "PADDING":
        if sample.inputs["InputTensor"].ndim < 2:
            return None
        for field in ("StartPadding", "EndPadding"):
            descriptor[field] = [0, *descriptor[field][1:]]
    try:
        resolve_for_registration(with_variable_batch(descriptor, sample.inputs))
    except DescriptorError:
        return None
    return dataclasses.replace(sample, descriptor=descriptor)


SAMPLES = [(t, s) for t, raw in all_samples() if (s := _with_batch_axis(raw)) is not None]


def test_the_samples_cover_every_operator_and_data_type_family() -> None:
    assert {t for t, _ in SAMPLES} == set(OPERATORS)
    kinds = {(t, s.inputs["InputTensor"].dtype.kind) for t, s in SAMPLES}
    assert {kind for _, kind in kinds} == {"f", "i", "u"}
    assert {("PADDING", k) for k in "fi"} <= kinds and {("FOLD", k) for k in "fiu"} <= kinds


def _values(shape: tuple[int, ...], dtype: Any, rng: np.random.Generator) -> np.ndarray:
    """Integers over their whole range; floats with fractions, so sums round (in an order)."""
    if np.dtype(dtype).kind == "f":
        return (rng.standard_normal(shape) * 3).astype(dtype)
    return random_array(rng, shape, dtype)


def _requests(sample: Sample, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Inputs of len(BATCHES) requests like the sample's: InputTensor with a batch of each
    size in BATCHES; the other inputs (filters, zero points) the sample's own."""
    rng = np.random.default_rng(seed)
    x = sample.inputs["InputTensor"]
    return [
        {**sample.inputs, "InputTensor": _values((n, *x.shape[1:]), x.dtype, rng)} for n in BATCHES
    ]


def _host(inputs: dict[str, np.ndarray]) -> dict[str, HostTensor]:
    return {
        n: HostTensor(from_numpy(a.dtype), a.shape, None, a.reshape(-1)) for n, a in inputs.items()
    }


def _same_bytes(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()


def _unbatched_descriptor(sample: Sample, batch: int) -> dict[str, Any]:
    descriptor = dict(sample.descriptor)
    if "OutputTensor" in descriptor:  # FOLD: the output's batch is the request's
        out = descriptor["OutputTensor"]
        descriptor["OutputTensor"] = {**out, "Sizes": [batch, *out["Sizes"][1:]]}
    return descriptor


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("op_type", "sample"), SAMPLES, ids=sample_id)
def test_each_batch_item_is_computed_on_its_own(backend: str, op_type: str, sample: Sample) -> None:
    """The property batching rests on, for every operator (CONVOLUTION_INTEGER included: its
    filter and zero points are the same for every item): one run over the requests' inputs
    joined along the batch axis, cut back, gives each request its own run's bytes."""
    device = Device(backend)  # type: ignore[arg-type]
    requests = _requests(sample)
    works = []
    for inputs in requests:
        host = _host(inputs)
        descriptor = _unbatched_descriptor(sample, len(inputs["InputTensor"]))
        works.append(Work(bind(descriptor, host), host))
    alone = [device.run(w) for w in works]
    joined = {**requests[0], "InputTensor": np.concatenate([r["InputTensor"] for r in requests])}
    host = _host(joined)
    batch = Work(bind(_unbatched_descriptor(sample, sum(BATCHES)), host), host)
    for got, want in zip(split(device.run(batch), works), alone, strict=True):
        _same_bytes(got, want)


def _constants(sample: Sample) -> dict[str, np.ndarray]:
    """Every input but InputTensor, bound at registration: CONVOLUTION_INTEGER's filter and
    zero points (a request sends only its images)."""
    return {name: a for name, a in sample.inputs.items() if name != "InputTensor"}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("op_type", "sample"), SAMPLES, ids=sample_id)
async def test_batched_requests_get_their_unbatched_bytes(
    backend: str, op_type: str, sample: Sample
) -> None:
    clock = ManualClock()
    state = await started_state(clock, backend=backend, tiny_on_host=False)
    x = sample.inputs["InputTensor"]
    descriptor = with_variable_batch(sample.descriptor, {"InputTensor": x})
    constants = _constants(sample)
    batched = await registered(state, descriptor, "batched", policy(16, 1000), constants)
    plain = await registered(state, descriptor, "plain", None, constants)
    assert batched.variable_batch and batched.batching is not None
    requests = [r["InputTensor"] for r in _requests(sample, seed=1)]
    tasks = [submit(state, batched, r) for r in requests]
    await until(lambda: state.limiter.waiting == len(requests))
    clock.advance(1e-3)
    outs = await asyncio.gather(*tasks)
    assert metric(state, "nv_inference_exec_count", model="batched", version="1") == 1
    assert metric(state, "nv_inference_count", model="batched", version="1") == sum(BATCHES)
    for r, out in zip(requests, outs, strict=True):
        _same_bytes(out, await submit(state, plain, r))
