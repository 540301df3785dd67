"""Both backends expose the same five callables, however their modules were imported."""

from __future__ import annotations

import importlib

import pytest

from dmlserve.kernels.execute import backend_module

OPERATORS = ["padding", "unfold", "fold", "average_pooling", "convolution_integer"]


@pytest.mark.parametrize("backend", ["numpy", "cupy"])
def test_backend_functions_stay_callable_after_submodule_imports(backend: str) -> None:
    module = backend_module(backend)  # type: ignore[arg-type]
    for name in OPERATORS:
        importlib.import_module(f"{module.__name__}.{name}")
        assert callable(getattr(module, name)), f"{module.__name__}.{name}"
