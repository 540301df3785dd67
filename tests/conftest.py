from __future__ import annotations

import os

import pytest

from kernels._array import cuda_available


def pytest_configure(config: pytest.Config) -> None:
    # Under compute-sanitizer, CuPy's memory pool would hide out-of-bounds accesses that stay
    # inside a pooled block: DMLSERVE_TEST_CUPY_POOL=off gives every array its own allocation.
    if os.environ.get("DMLSERVE_TEST_CUPY_POOL") == "off" and cuda_available():
        import cupy

        cupy.cuda.set_allocator(None)
        cupy.cuda.set_pinned_memory_allocator(None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device answers on this host")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
