"""The seed pages' examples on the CuPy backend: through each launcher, and through
`kernels.execute` for every data type the page allows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dmlserve import kernels
from dmlserve.kernels.geometry import Window
from tests.seed_examples import SEED_EXAMPLES, SeedExample, typed_examples

from ._support import assert_matches, launcher

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("example", SEED_EXAMPLES, ids=lambda e: e.name)
def test_launchers(example: Any) -> None:
    import cupy

    op = example.operator
    x = cupy.asarray(example.inputs["InputTensor"])
    window = (
        Window(
            op["WindowSizes"], op["Strides"], op["Dilations"], op["StartPadding"], op["EndPadding"]
        )
        if "WindowSizes" in op
        else None
    )
    if op["type"] == "PADDING":
        mode = op["PaddingMode"].removeprefix("DML_PADDING_MODE_")
        got = launcher("padding").padding(
            x, op["StartPadding"], op["EndPadding"], mode, np.float32(op.get("PaddingValue", 0))
        )
    elif op["type"] == "UNFOLD":
        got = launcher("unfold").unfold(x, window)
    else:
        sizes = op["OutputTensor"]["Sizes"][2:]
        got = launcher("fold").fold(x, sizes, window)
    assert_matches(got, example.expected)


@pytest.mark.parametrize(
    ("example", "data_type"), typed_examples(), ids=lambda v: getattr(v, "name", v)
)
def test_execute(example: SeedExample, data_type: str) -> None:
    import cupy

    typed = example.as_type(data_type)
    inputs = {name: cupy.asarray(a) for name, a in typed.inputs.items()}
    out = kernels.execute(typed.operator, inputs)["OutputTensor"]
    assert isinstance(out, cupy.ndarray)
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out.get(), typed.expected, strict=True)


def test_numpy_inputs_come_back_as_cupy_arrays() -> None:
    import cupy

    example = typed_examples()[0][0]
    out = kernels.execute(example.operator, example.inputs, backend="cupy")["OutputTensor"]
    assert isinstance(out, cupy.ndarray)
    np.testing.assert_array_equal(out.get(), example.expected)
