"""The seed pages' examples through `kernels.execute.run` with the CPU backend in place of the
reference (the way the service plugs it in), in every data type that holds them; the CPU
package exposes the same five callables as the other backends."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import threadpoolctl

from dmlserve import kernels
from dmlserve.kernels import cpu
from dmlserve.kernels.cpu import Backend, Cancelled, ExecutionBudget
from dmlserve.kernels.execute import run
from dmlserve.kernels.geometry import Window
from tests.seed_examples import SeedExample, typed_examples

from ..test_backend_modules import OPERATORS
from ._support import StopAfter


@pytest.mark.parametrize(
    ("example", "data_type"), typed_examples(), ids=lambda v: getattr(v, "name", v)
)
@pytest.mark.parametrize("backend", [cpu, Backend()], ids=["module", "bound"])
def test_seed_example(example: SeedExample, data_type: str, backend: object) -> None:
    typed = example.as_type(data_type)
    resolved = kernels.resolve(typed.operator)
    out = run(resolved, typed.inputs, backend)
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out, typed.expected, strict=True)


def test_functions_stay_callable_after_submodule_imports() -> None:
    for name in OPERATORS:
        importlib.import_module(f"{cpu.__name__}.{name}")
        assert callable(getattr(cpu, name)), name
        assert callable(getattr(Backend(), name)), name


def test_a_bound_backend_passes_its_stop_check_through_run() -> None:
    example = next(ex for ex, _ in typed_examples() if ex.name.startswith("padding"))
    stop = StopAfter(limit=1)
    backend = Backend(ExecutionBudget(check=stop))
    with pytest.raises(Cancelled):
        run(kernels.resolve(example.operator), example.inputs, backend)
    assert stop.calls == 1


@pytest.mark.parametrize(
    ("slots", "cores", "threads"), [(1, 2, 2), (2, 2, 1), (4, 2, 1), (2, 16, 8), (3, 16, 5)]
)
def test_blas_threads_share_the_cores_among_the_slots(slots: int, cores: int, threads: int) -> None:
    assert cpu.blas_threads_for(slots, cores) == threads
    assert cpu.blas_threads_for(slots, cores) * min(slots, cores) <= max(cores, slots)


def test_configure_threads_sets_the_blas_thread_count() -> None:
    before = threadpoolctl.threadpool_info()
    try:
        assert cpu.configure_threads(2, cores=2) == 1
        blas = [p for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
        assert blas and all(p["num_threads"] == 1 for p in blas)
    finally:
        for pool in before:
            if pool["user_api"] == "blas":
                threadpoolctl.threadpool_limits(pool["num_threads"], user_api="blas")


def test_cancel_after_stops_once_the_clock_reaches_the_deadline() -> None:
    now = [0.0]
    check = cpu.cancel_after(10.0, clock=lambda: now[0])
    x = np.zeros((8, 64, 64, 64), dtype=np.float32)
    budget = ExecutionBudget(memory_bytes=1 << 20, check=check)
    window = Window((2, 2), (2, 2), (1, 1), (0, 0), (0, 0))
    cpu.unfold(x, window, budget=budget)  # before: runs through
    now[0] = 10.0
    with pytest.raises(Cancelled):
        cpu.unfold(x, window, budget=budget)
