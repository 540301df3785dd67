"""Both backend packages expose every operator's function under its spec's name, however
their modules were imported, and `run` takes such a package in place of a backend's name."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from dmlserve import kernels
from dmlserve.kernels.execute import backend_module, run

# The function names every backend package exposes, from the operator table.
OPERATORS = [spec.name for spec in kernels.OPERATORS.values()]


@pytest.mark.parametrize("backend", ["numpy", "cupy"])
def test_backend_functions_stay_callable_after_submodule_imports(backend: str) -> None:
    module = backend_module(backend)  # type: ignore[arg-type]
    for name in OPERATORS:
        importlib.import_module(f"{module.__name__}.{name}")
        assert callable(getattr(module, name)), f"{module.__name__}.{name}"


@pytest.mark.parametrize("backend", ["numpy", "cupy"])
def test_packages_hold_the_functions_the_table_names(backend: str) -> None:
    module = backend_module(backend)  # type: ignore[arg-type]
    for spec in kernels.OPERATORS.values():
        assert getattr(module, spec.name) is spec.implementation(backend), spec.type


def test_run_takes_a_backend_package_in_place_of_its_name() -> None:
    x = np.arange(6, dtype=np.int16).reshape(1, 1, 6)
    desc = kernels.TensorDesc.of_array(x)
    op = kernels.resolve({"type": "UNFOLD", "WindowSizes": [2]}, {"InputTensor": desc})
    by_package = run(op, {"InputTensor": x}, backend_module("numpy"))
    assert by_package.tolist() == [[[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]]]
    np.testing.assert_array_equal(by_package, run(op, {"InputTensor": x}, "numpy"), strict=True)
