"""Binding descriptors to tensors: defaults, given descriptors, batches, output checks, limits."""

from __future__ import annotations

import numpy as np

from dmlserve import kernels
from dmlserve.kernels import resolve
from tests.kernels.descriptor_helpers import desc, errors_of, locs


def test_defaults_are_filled_by_resolve() -> None:
    op = resolve(
        {"type": "UNFOLD", "WindowSizes": [2, 3]}, {"InputTensor": desc("FLOAT32", 1, 2, 5, 6)}
    )
    assert op.strides == (1, 1) and op.dilations == (1, 1)
    assert op.start_padding == (0, 0) and op.end_padding == (0, 0)
    assert op.dimension_count == 2
    assert op.output_tensor == desc("FLOAT32", 1, 12, 16)


def test_given_output_tensor_must_equal_inferred() -> None:
    op = {
        "type": "UNFOLD",
        "WindowSizes": [3, 3],
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 9, 8]},
    }
    errs = errors_of(op, {"InputTensor": desc("FLOAT32", 1, 1, 5, 5)})
    assert locs(errs) == [("OutputTensor", "Sizes")]
    assert "[1, 9, 9]" in errs[0]["msg"]


def test_unknown_and_missing_input_tensors() -> None:
    errs = errors_of(
        {"type": "CONVOLUTION_INTEGER"},
        {"InputTensor": desc("INT8", 1, 1, 3, 3), "Bias": desc("INT8", 1)},
    )
    assert set(locs(errs)) == {("Bias",), ("FilterTensor",)}


def test_given_input_descriptor_must_agree_with_tensor() -> None:
    op = {
        "type": "UNFOLD",
        "WindowSizes": [2],
        "InputTensor": {"DataType": "INT8", "Sizes": [1, 1, 4]},
    }
    errs = errors_of(op, {"InputTensor": desc("UINT8", 1, 1, 5)})
    assert set(locs(errs)) == {("InputTensor", "DataType"), ("InputTensor", "Sizes")}


def test_variable_batch_only_when_registering_then_bound_at_execution() -> None:
    op = {
        "type": "UNFOLD",
        "WindowSizes": [2],
        "InputTensor": {"DataType": "INT8", "Sizes": [-1, 2, 4]},
    }
    assert locs(errors_of(op)) == [("InputTensor", "Sizes", 0)]
    registered = resolve(op, allow_batch_wildcard=True)
    assert registered.output_tensor.sizes == (-1, 4, 3)
    for batch in (1, 5):
        x = np.arange(batch * 8, dtype=np.int8).reshape(batch, 2, 4)
        out = kernels.execute(registered, {"InputTensor": x})["OutputTensor"]
        assert out.shape == (batch, 4, 3)


def test_a_variable_batch_output_takes_the_input_batch_when_bound() -> None:
    # FOLD names its output's sizes; the rules compare that batch with the input's.
    op = {
        "type": "FOLD",
        "WindowSizes": [2],
        "InputTensor": {"DataType": "INT16", "Sizes": [-1, 4, 3]},
        "OutputTensor": {"DataType": "INT16", "Sizes": [-1, 2, 4]},
    }
    registered = resolve(op, allow_batch_wildcard=True)
    assert registered.output_tensor.sizes == (-1, 2, 4)
    for batch in (1, 3):
        x = np.arange(batch * 12, dtype=np.int16).reshape(batch, 4, 3)
        out = kernels.execute(registered, {"InputTensor": x})["OutputTensor"]
        assert out.shape == (batch, 2, 4)
        fixed = {"type": "FOLD", "WindowSizes": [2],
                 "OutputTensor": {"DataType": "INT16", "Sizes": [batch, 2, 4]}}  # fmt: skip
        once = kernels.execute(fixed, {"InputTensor": x})["OutputTensor"]
        np.testing.assert_array_equal(out, once, strict=True)


def test_filter_cannot_have_variable_batch() -> None:
    tensors = {"InputTensor": desc("INT8", 1, 1, 3, 3)}
    op = {
        "type": "CONVOLUTION_INTEGER",
        "FilterTensor": {"DataType": "INT8", "Sizes": [-1, 1, 1, 1]},
    }
    assert ("FilterTensor", "Sizes", 0) in locs(errors_of(op, tensors, allow_batch_wildcard=True))


def test_overlapping_output_strides_are_refused() -> None:
    op = {
        "type": "UNFOLD",
        "WindowSizes": [2],
        "OutputTensor": {"DataType": "INT8", "Sizes": [1, 2, 3], "Strides": [6, 0, 1]},
    }
    assert locs(errors_of(op, {"InputTensor": desc("INT8", 1, 1, 4)})) == [
        ("OutputTensor", "Strides")
    ]


def test_element_count_limit() -> None:
    op = {"type": "UNFOLD", "WindowSizes": [64, 64]}
    errs = errors_of(op, {"InputTensor": desc("INT8", 1, 1024, 2048, 2048)})
    assert ("OutputTensor", "Sizes") in locs(errs)
