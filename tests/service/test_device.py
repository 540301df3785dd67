"""The device: bound work on host tensors in, the output on the host out, stages timed."""

from __future__ import annotations

import numpy as np
import pytest

from dmlserve.kernels.dtypes import DataType
from dmlserve.kernels.wire import HostTensor
from dmlserve.service.binding import bind
from dmlserve.service.device import Device
from dmlserve.service.work import Work

EDGE = {"type": "PADDING", "PaddingMode": "EDGE", "StartPadding": [1, 0], "EndPadding": [0, 2]}


def _strided_work() -> tuple[Work, np.ndarray]:
    # A (3, 4) tensor over a buffer with a row pitch of 6 and a broadcast-free layout.
    buffer = np.arange(16, dtype=np.float32)
    inputs = {"InputTensor": HostTensor(DataType.FLOAT32, (3, 4), (6, 1), buffer)}
    logical = np.stack([buffer[r * 6 : r * 6 + 4] for r in range(3)])
    return Work(bind(EDGE, inputs), inputs), np.pad(logical, [(1, 0), (0, 2)], mode="edge")


def test_numpy_runs_on_the_host_views_and_times_the_compute() -> None:
    device = Device("numpy")
    work, expected = _strided_work()
    out = device.run(work)
    np.testing.assert_array_equal(out, expected, strict=True)
    assert device.runs_on_host and device.memory_in_use() is None
    assert work.timings.compute > 0 and work.timings.transfer == 0


@pytest.mark.gpu
def test_cupy_stages_strided_inputs_and_brings_the_output_home() -> None:
    device = Device("cupy")
    work, expected = _strided_work()
    out = device.run(work)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, expected, strict=True)
    assert not device.runs_on_host and device.memory_in_use() is not None
    assert work.timings.compute > 0 and work.timings.transfer > 0


@pytest.mark.gpu
def test_cupy_reuses_its_staging_buffers_without_aliasing_results() -> None:
    import cupy

    from dmlserve.service.staging import STAGING_BYTES

    device = Device("cupy")
    pool = cupy.get_default_memory_pool()
    rng = np.random.default_rng(3)
    results = []
    # Growing, shrinking, then beyond the reused buffers (its own pool blocks).
    for rows in (4, 300, 2, (STAGING_BYTES // 4 // 64) + 1):
        x = rng.standard_normal((rows, 64)).astype(np.float32)
        inputs = {"InputTensor": HostTensor(DataType.FLOAT32, x.shape, None, x.reshape(-1))}
        work = Work(bind(EDGE, inputs), inputs)
        used = pool.used_bytes()
        out = device.run(work)
        assert pool.used_bytes() == used  # the request's device arrays are back in the pool
        assert work.timings.compute > 0 and work.timings.transfer > 0
        results.append((out, np.pad(x, [(1, 0), (0, 2)], mode="edge")))
    for out, expected in results:  # each result is its own: later requests did not overwrite it
        np.testing.assert_array_equal(out, expected, strict=True)
    staging = device._staging()
    assert staging._host_in is not None and staging._host_in.nbytes <= STAGING_BYTES
