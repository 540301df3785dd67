from __future__ import annotations

import importlib.abc
import os
import sys

import pytest
from hypothesis import settings

from dmlserve.kernels._array import cuda_available


class _BareImportGuard(importlib.abc.MetaPathFinder):
    """Refuses `import kernels` (and service, clients): pytest puts the repository root on
    sys.path, where the folders would import as second copies beside `dmlserve.*`."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] in ("kernels", "service", "clients"):
            raise ImportError(f"import dmlserve.{name}, not {name}")


sys.meta_path.insert(0, _BareImportGuard())

# No example may fail for taking long: this suite runs on shared, busy machines, and a test
# must not depend on how fast they are.
settings.register_profile("dmlserve", deadline=None)
settings.load_profile("dmlserve")

# Servers started by the tests (in process or as subprocesses, which inherit this) leave the
# gRPC port closed unless a test asks for one: parallel runs must not contend for port 8001.
os.environ.setdefault("DMLSERVE_GRPC_PORT", "0")


def pytest_configure(config: pytest.Config) -> None:
    # Under compute-sanitizer, CuPy's memory pool would hide out-of-bounds accesses that stay
    # inside a pooled block: DMLSERVE_TEST_CUPY_POOL=off gives every array its own allocation.
    if os.environ.get("DMLSERVE_TEST_CUPY_POOL") == "off" and cuda_available():
        import cupy

        cupy.cuda.set_allocator(None)
        cupy.cuda.set_pinned_memory_allocator(None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Where no CUDA device answers, the GPU tests are deselected and counted in one line of the
    # summary rather than listed as hundreds of skips; real skips stay visible.
    if cuda_available():
        return
    gpu = [item for item in items if "gpu" in item.keywords]
    if gpu:
        items[:] = [item for item in items if "gpu" not in item.keywords]
        config.hook.pytest_deselected(items=gpu)
        config.stash[_GPU_DESELECTED] = len(gpu)


_GPU_DESELECTED = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    count = terminalreporter.config.stash.get(_GPU_DESELECTED, 0)
    if count:
        terminalreporter.write_line(
            f"{count} GPU tests deselected: no CUDA device answers on this host "
            "(they run with `-m gpu` where one does)"
        )
