from __future__ import annotations

import pytest

from kernels._array import cuda_available


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device answers on this host")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
