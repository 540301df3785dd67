"""Every operator's reference, driven by the operator table: the samples of
`tests.operator_info` against their element-by-element oracles, the seed pages' examples, and
strided or broadcast inputs (never written, same answers as contiguous copies)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dmlserve import kernels
from dmlserve.kernels import OPERATORS
from dmlserve.kernels.execute import run
from tests.operator_info import Sample, all_samples, assert_matches, sample_id
from tests.oracles import Array
from tests.seed_examples import SeedExample, typed_examples

SAMPLES = all_samples()


def _reference(sample_type: str, sample: Sample, inputs: dict[str, Array]) -> Any:
    """The spec's reference function on `inputs`, for the descriptor resolved against them."""
    descs = {name: kernels.TensorDesc.of_array(a) for name, a in inputs.items()}
    resolved = kernels.resolve(sample.descriptor, descs)
    spec = OPERATORS[sample_type]
    return spec.reference(*spec.arguments(resolved, inputs))


@pytest.mark.parametrize(("op_type", "sample"), SAMPLES, ids=sample_id)
def test_reference_matches_the_oracle(op_type: str, sample: Sample) -> None:
    out = _reference(op_type, sample, sample.inputs)
    assert out.flags.c_contiguous
    assert_matches(out, sample)


@pytest.mark.parametrize(("op_type", "sample"), SAMPLES, ids=sample_id)
def test_inferred_output_descriptor_is_what_the_reference_returns(
    op_type: str, sample: Sample
) -> None:
    descs = {name: kernels.TensorDesc.of_array(a) for name, a in sample.inputs.items()}
    output = kernels.resolve(sample.descriptor, descs).output_tensor
    assert output is not None
    assert output.sizes == sample.expected.shape
    assert output.numpy_dtype == sample.expected.dtype


def _views(base: Array) -> list[Array]:
    """Non-contiguous views holding the same logical shape as ``base``."""
    shape = base.shape
    views = [
        np.broadcast_to(base[:1], shape),  # 0 stride on the first axis
        np.broadcast_to(base[..., :1], shape),  # 0 stride on the last axis
        np.repeat(base, 2, axis=-1)[..., 1::2],  # every other element of a bigger buffer
        np.moveaxis(np.ascontiguousarray(np.moveaxis(base, 0, -1)), -1, 0),  # axes permuted
    ]
    return [v for v in views if not v.flags.c_contiguous]


@pytest.mark.parametrize(("op_type", "sample"), SAMPLES, ids=sample_id)
def test_strided_and_broadcast_inputs_match_contiguous_copies(op_type: str, sample: Sample) -> None:
    for name, base in sample.inputs.items():
        if base.size == 1:
            continue  # a zero point: nothing to stride
        for view in _views(base):
            before = view.copy()
            inputs = {**sample.inputs, name: view}
            copies = {**sample.inputs, name: view.copy()}
            result = _reference(op_type, sample, inputs)
            assert result.flags.c_contiguous
            np.testing.assert_array_equal(result, _reference(op_type, sample, copies), strict=True)
            np.testing.assert_array_equal(view, before)  # inputs are never written


@pytest.mark.parametrize(
    ("example", "data_type"), typed_examples(), ids=lambda v: getattr(v, "name", v)
)
def test_seed_example(example: SeedExample, data_type: str) -> None:
    # The pages use FLOAT32; the same integer-valued data runs through every data type
    # that holds it exactly, the result's type checked too.
    typed = example.as_type(data_type)
    resolved = kernels.resolve(typed.operator)
    out = run(resolved, typed.inputs, "numpy")
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out, typed.expected, strict=True)
