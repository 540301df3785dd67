"""Every example of the seed pages (FOLD 1-3, UNFOLD 1-2, PADDING 1-4), exactly.

The pages use FLOAT32; the same integer-valued data also runs through every other data type
that holds it exactly, with the result's type checked.
"""

from __future__ import annotations

import numpy as np
import pytest

from dmlserve import kernels
from dmlserve.kernels import reference
from dmlserve.kernels.execute import run
from tests.seed_examples import SeedExample, typed_examples


@pytest.mark.parametrize(
    ("example", "data_type"), typed_examples(), ids=lambda v: getattr(v, "name", v)
)
def test_seed_example(example: SeedExample, data_type: str) -> None:
    typed = example.as_type(data_type)
    resolved = kernels.resolve(typed.operator)
    out = run(resolved, typed.inputs, reference)
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out, typed.expected, strict=True)


def test_padding_value_is_used_only_in_constant_mode() -> None:
    x = np.arange(4, dtype=np.int16)
    for mode in ("EDGE", "REFLECTION", "SYMMETRIC", "WRAP"):
        out = reference.padding(x, (2,), (2,), mode, np.int16(9))
        assert 9 not in out
