"""FOLD's descriptor rules: OutputTensor required, the column tensor's shape, data types."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kernels.descriptor_helpers import desc, errors_of, locs


def test_fold_needs_output_tensor() -> None:
    errs = errors_of(
        {"type": "FOLD", "WindowSizes": [2]}, {"InputTensor": desc("FLOAT32", 1, 2, 3)}
    )
    assert locs(errs) == [("OutputTensor",)]


@pytest.mark.parametrize(
    ("input_sizes", "loc"),
    [
        ((1, 9, 4, 1), ("InputTensor", "Sizes")),  # column tensor is 3-D
        ((2, 9, 4), ("InputTensor", "Sizes", 0)),  # N equal
        ((1, 8, 4), ("InputTensor", "Sizes", 1)),  # C * prod(K)
        ((1, 9, 5), ("InputTensor", "Sizes", 2)),  # BlockCount
    ],
)
def test_fold_column_rules(input_sizes: tuple[int, ...], loc: tuple[Any, ...]) -> None:
    op = {
        "type": "FOLD",
        "WindowSizes": [3, 3],
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 4]},
    }
    assert loc in locs(errors_of(op, {"InputTensor": desc("FLOAT32", *input_sizes)}))


def test_fold_data_types_must_match() -> None:
    op = {
        "type": "FOLD",
        "WindowSizes": [3, 3],
        "OutputTensor": {"DataType": "INT32", "Sizes": [1, 1, 4, 4]},
    }
    assert ("OutputTensor", "DataType") in locs(
        errors_of(op, {"InputTensor": desc("FLOAT32", 1, 9, 4)})
    )
