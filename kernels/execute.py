"""`execute`: validate, bind to the arrays, check limits, then run one backend."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from types import ModuleType
from typing import Any, Literal

import numpy as np
from pydantic import ValidationError

from ._array import cuda_available, is_cupy_array
from .descriptors import (
    AveragePoolingOperator,
    ConvolutionIntegerOperator,
    FoldOperator,
    OperatorBase,
    PaddingMode,
    PaddingOperator,
    TensorDesc,
    UnfoldOperator,
    fill_value,
    parse_operator,
    resolve,
)
from .errors import BackendUnavailableError, DescriptorError, LimitExceededError

BackendName = Literal["auto", "numpy", "cupy"]
_MODULES = {"numpy": "dmlserve.kernels.reference", "cupy": "dmlserve.kernels.cupy_backend"}
log = logging.getLogger(__name__)


def select_backend(name: str = "auto") -> Literal["numpy", "cupy"]:
    """The backend to run: `auto` takes CuPy when a CUDA device answers, else NumPy.

    An explicitly requested backend that cannot run raises BackendUnavailableError.
    """
    if name == "numpy":
        return "numpy"
    if name == "cupy":
        if not cuda_available():
            raise BackendUnavailableError(
                "backend 'cupy' was requested but CuPy cannot reach a CUDA device here "
                "(install dmlserve[gpu] on a host with an NVIDIA GPU and driver)"
            )
        return "cupy"
    if name == "auto":
        return "cupy" if cuda_available() else "numpy"
    raise BackendUnavailableError(f"unknown backend {name!r}; expected auto, numpy or cupy")


def backend_module(name: Literal["numpy", "cupy"]) -> ModuleType:
    """The module holding the five backend functions of `name`."""
    return importlib.import_module(_MODULES[name])


def execute(
    operator: Any,
    inputs: Mapping[str, Any],
    backend: str = "auto",
    *,
    max_output_bytes: int | None = None,
) -> dict[str, Any]:
    """Run `operator` (a descriptor dict or model) on `inputs` (tensor name -> array).

    With backend "auto" the arrays decide (CuPy arrays run on the GPU); "cupy" moves NumPy
    inputs to the device and returns CuPy arrays; "numpy" returns NumPy arrays. The output
    size is checked against `max_output_bytes` before anything is allocated.
    """
    op = parse_operator(operator)
    if backend == "auto":
        chosen: Literal["numpy", "cupy"] = (
            "cupy" if any(is_cupy_array(a) for a in inputs.values()) else "numpy"
        )
    else:
        chosen = select_backend(backend)
    descs = {name: _describe(name, array) for name, array in inputs.items()}
    resolved = resolve(op, descs)
    output = resolved.output_tensor
    assert output is not None
    if max_output_bytes is not None and output.nbytes > max_output_bytes:
        raise LimitExceededError(
            "max_output_bytes", max_output_bytes, output.nbytes, "OutputTensor"
        )
    arrays = {name: _to_backend(array, chosen) for name, array in inputs.items()}
    return {"OutputTensor": run(resolved, arrays, backend_module(chosen))}


def run(op: OperatorBase, arrays: Mapping[str, Any], module: ModuleType) -> Any:
    """Call the backend function for a resolved descriptor (no further validation)."""
    x = arrays["InputTensor"]
    if isinstance(op, PaddingOperator):
        dtype = op.input_tensor.data_type  # type: ignore[union-attr]
        value = (
            fill_value(op, dtype)
            if op.padding_mode == PaddingMode.CONSTANT
            else dtype.numpy.type(0)
        )
        return module.padding(x, op.start_padding, op.end_padding, op.padding_mode.value, value)
    if isinstance(op, UnfoldOperator):
        return module.unfold(
            x, op.window_sizes, op.strides, op.dilations, op.start_padding, op.end_padding
        )
    if isinstance(op, FoldOperator):
        spatial = op.output_tensor.sizes[2:]  # type: ignore[union-attr]
        return module.fold(
            x, spatial, op.window_sizes, op.strides, op.dilations, op.start_padding, op.end_padding
        )
    if isinstance(op, AveragePoolingOperator):
        return module.average_pooling(
            x, op.window_size, op.strides, op.dilations, op.start_padding, op.end_padding,
            op.include_padding,
        )  # fmt: skip
    if isinstance(op, ConvolutionIntegerOperator):
        w = arrays["FilterTensor"]
        x_zp = arrays.get("InputZeroPointTensor")
        w_zp = arrays.get("FilterZeroPointTensor")
        filters = w.shape[0]
        x_zero = int(_host(x_zp).reshape(-1)[0]) if x_zp is not None else 0
        w_zero = (
            np.broadcast_to(_host(w_zp).reshape(-1).astype(np.int32), (filters,)).copy()
            if w_zp is not None
            else np.zeros(filters, np.int32)
        )
        return module.convolution_integer(
            x, w, x_zero, w_zero, op.strides, op.dilations, op.start_padding, op.end_padding,
            op.group_count,
        )  # fmt: skip
    raise DescriptorError.at(("type",), f"unknown operator type {op.type}")


def _describe(name: str, array: Any) -> TensorDesc:
    if not hasattr(array, "dtype") or not hasattr(array, "shape"):
        raise DescriptorError.at((name,), f"{name} must be a NumPy or CuPy array")
    try:
        return TensorDesc.of_array(array)
    except ValidationError as exc:
        msg = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        raise DescriptorError.at((name, "Sizes"), msg) from None
    except ValueError as exc:
        raise DescriptorError.at((name, "DataType"), str(exc)) from None


def _host(array: Any) -> np.ndarray:
    return array.get() if is_cupy_array(array) else np.asarray(array)


def _to_backend(array: Any, backend: str) -> Any:
    if backend == "numpy":
        return _host(array)
    if is_cupy_array(array):
        return array
    import cupy

    return cupy.asarray(array)
