"""Binding descriptors to tensors: defaults, given descriptors, batches, output checks, limits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

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


@pytest.mark.parametrize("spec", list(kernels.OPERATORS.values()), ids=lambda s: s.type)
def test_every_operator_registers_with_a_variable_batch(spec: Any) -> None:
    """The warm-up example with -1 as the batch of InputTensor (and a given OutputTensor)."""
    op = dict(spec.warmup.descriptor)
    for name, d in spec.warmup.inputs.items():
        op[name] = {"DataType": d.data_type.value, "Sizes": list(d.sizes)}
    for name in ("InputTensor", "OutputTensor"):
        if name in op:
            op[name] = {**op[name], "Sizes": [-1, *op[name]["Sizes"][1:]]}
    registered = resolve(op, allow_batch_wildcard=True)
    assert registered.output_tensor is not None and registered.output_tensor.sizes[0] == -1
    for batch in (1, 3):
        inputs = spec.warmup.zeros()
        inputs["InputTensor"] = np.zeros(
            (batch, *inputs["InputTensor"].shape[1:]), inputs["InputTensor"].dtype
        )
        out = kernels.execute(registered, inputs)["OutputTensor"]
        assert out.shape == (batch, *registered.output_tensor.sizes[1:])


def test_fold_registers_with_a_variable_batch_and_binds_it_at_execution() -> None:
    # FOLD reads its output's sizes from OutputTensor, so its -1 follows the input's batch.
    op = {
        "type": "FOLD",
        "WindowSizes": [2, 2],
        "Strides": [2, 2],
        "InputTensor": {"DataType": "FLOAT32", "Sizes": [-1, 12, 16]},
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [-1, 3, 8, 8]},
    }
    registered = resolve(op, allow_batch_wildcard=True)
    assert registered.output_tensor.sizes == (-1, 3, 8, 8)
    for batch in (1, 3):
        bound = resolve(registered, {"InputTensor": desc("FLOAT32", batch, 12, 16)})
        assert bound.output_tensor.sizes == (batch, 3, 8, 8)
    # A fixed output batch still has to match the input's.
    fixed = {**op, "OutputTensor": {"DataType": "FLOAT32", "Sizes": [2, 3, 8, 8]}}
    errs = errors_of(fixed, {"InputTensor": desc("FLOAT32", 3, 12, 16)})
    assert locs(errs) == [("InputTensor", "Sizes", 0)] and "(3)" in errs[0]["msg"]


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
