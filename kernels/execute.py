"""`execute`: validate, bind to the arrays, check limits, then run one backend."""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Mapping
from types import ModuleType
from typing import Any, Literal

from pydantic import ValidationError

from ._array import cuda_available, is_cupy_array, to_host
from .descriptors import OperatorBase, TensorDesc
from .errors import BackendUnavailableError, DescriptorError, LimitExceededError
from .operators import Constants, parse_operator, spec_of
from .resolve import resolve

BackendName = Literal["auto", "numpy", "cupy"]
_MODULES = {"numpy": "dmlserve.kernels.cpu", "cupy": "dmlserve.kernels.cupy_backend"}
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


@functools.cache
def backend_module(name: Literal["numpy", "cupy"]) -> ModuleType:
    """The package holding one function per operator for backend `name` (as `run` takes);
    looked up once (the import machinery costs microseconds on every request)."""
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
    return {"OutputTensor": run(resolved, arrays, chosen)}


def run(
    op: OperatorBase,
    arrays: Mapping[str, Any],
    backend: str | object = "numpy",
    constants: Constants | None = None,
) -> Any:
    """Run a resolved descriptor on `arrays` (no further validation: `op` must come from
    `resolve` against these arrays).

    `backend` names a backend ("numpy", "cupy"), whose function the operator's spec gives;
    or it holds one function per operator, named as the spec's `name`: a backend package
    (`backend_module`) or a backend bound to its own limits. `constants`: those of the
    registered operator the call runs (what the backend derived from them is reused).
    """
    spec = spec_of(op)
    if isinstance(backend, str):
        return spec.run(op, arrays, backend, constants)
    return getattr(backend, spec.name)(*spec.arguments(op, arrays))


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


def _to_backend(array: Any, backend: str) -> Any:
    if backend == "numpy":
        return to_host(array)
    if is_cupy_array(array):
        return array
    import cupy

    return cupy.asarray(array)
