"""The seed pages' examples on the CuPy backend, through `kernels.execute`."""

from __future__ import annotations

import numpy as np
import pytest

from dmlserve import kernels
from tests.seed_examples import SeedExample, typed_examples

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(
    ("example", "data_type"), typed_examples(), ids=lambda v: getattr(v, "name", v)
)
def test_seed_example_on_gpu(example: SeedExample, data_type: str) -> None:
    import cupy

    typed = example.as_type(data_type)
    inputs = {name: cupy.asarray(a) for name, a in typed.inputs.items()}
    out = kernels.execute(typed.operator, inputs)["OutputTensor"]
    assert isinstance(out, cupy.ndarray)
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out.get(), typed.expected, strict=True)


def test_numpy_inputs_on_the_cupy_backend_come_back_as_cupy_arrays() -> None:
    import cupy

    example = typed_examples()[0][0]
    out = kernels.execute(example.operator, example.inputs, backend="cupy")["OutputTensor"]
    assert isinstance(out, cupy.ndarray)
    np.testing.assert_array_equal(out.get(), example.expected)
