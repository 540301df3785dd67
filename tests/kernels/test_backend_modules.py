"""Both backend packages expose every operator's function by its spec's name, however their
modules were imported, and `run` takes a package in place of the backend's name."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from dmlserve import kernels
from dmlserve.kernels import OPERATORS
from dmlserve.kernels.execute import backend_module, run


@pytest.mark.parametrize("backend", ["numpy", "cupy"])
def test_backend_functions_stay_callable_after_submodule_imports(backend: str) -> None:
    module = backend_module(backend)  # type: ignore[arg-type]
    for spec in OPERATORS.values():
        importlib.import_module(f"{module.__name__}.{spec.name}")
        assert callable(getattr(module, spec.name)), f"{module.__name__}.{spec.name}"


def test_run_takes_a_backend_package_for_its_name() -> None:
    x = np.arange(6, dtype=np.int16).reshape(1, 1, 6)
    op = kernels.resolve(
        {"type": "UNFOLD", "WindowSizes": [2]}, {"InputTensor": kernels.TensorDesc.of_array(x)}
    )
    by_package = run(op, {"InputTensor": x}, backend_module("numpy"))
    assert by_package.tolist() == [[[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]]]
    np.testing.assert_array_equal(by_package, run(op, {"InputTensor": x}, "numpy"), strict=True)
