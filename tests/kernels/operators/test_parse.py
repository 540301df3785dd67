"""Parsing descriptors: DirectML spellings, snake_case construction, structural errors."""

from __future__ import annotations

from typing import Any

import pytest

from dmlserve import kernels
from dmlserve.kernels import DescriptorError, parse_operator, resolve
from tests.kernels.descriptor_helpers import locs


def test_prefixed_enum_spellings_are_accepted_and_short_names_returned() -> None:
    op = parse_operator(
        {
            "type": "DML_OPERATOR_PADDING",
            "PaddingMode": "DML_PADDING_MODE_WRAP",
            "InputTensor": {"DataType": "DML_TENSOR_DATA_TYPE_INT8", "Sizes": [2, 3]},
            "StartPadding": [1, 1],
            "EndPadding": [0, 2],
        }
    )
    wire = resolve(op).model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["type"] == "PADDING"
    assert wire["PaddingMode"] == "WRAP"
    assert wire["InputTensor"]["DataType"] == "INT8"
    assert wire["OutputTensor"] == {"DataType": "INT8", "Sizes": [3, 6]}


def test_snake_case_construction_equals_wire_parsing() -> None:
    by_name = kernels.UnfoldOperator(window_sizes=(2, 2), strides=(2, 2))
    by_wire = parse_operator({"type": "UNFOLD", "WindowSizes": [2, 2], "Strides": [2, 2]})
    assert by_name == by_wire


@pytest.mark.parametrize(
    ("operator", "loc"),
    [
        ({"type": "NOPE"}, ("type",)),
        ({"WindowSizes": [1]}, ("type",)),
        ({"type": "UNFOLD"}, ("WindowSizes",)),
        ({"type": "UNFOLD", "WindowSizes": [2], "Windowsizes": [2]}, ("Windowsizes",)),
        ({"type": "PADDING", "PaddingMode": "MIRROR"}, ("PaddingMode",)),
        ({"type": "UNFOLD", "WindowSizes": [2, 0]}, ("WindowSizes", 1)),
        ({"type": "UNFOLD", "WindowSizes": [2, 2], "Strides": [1]}, ("Strides",)),
        ({"type": "FOLD", "WindowSizes": [1] * 7}, ("WindowSizes",)),
        ({"type": "UNFOLD", "WindowSizes": [2], "DimensionCount": 2}, ("WindowSizes",)),
        ({"type": "PADDING", "StartPadding": [-1], "EndPadding": [0]}, ("StartPadding", 0)),
        ({"type": "AVERAGE_POOLING", "WindowSize": [2, 2, 2, 2]}, ("WindowSize",)),
        ({"type": "AVERAGE_POOLING", "WindowSize": [2], "DimensionCount": 4}, ("DimensionCount",)),
        ({"type": "CONVOLUTION_INTEGER", "GroupCount": 0}, ("GroupCount",)),
        (
            {"type": "PADDING", "InputTensor": {"DataType": "BOOL", "Sizes": [1]}},
            ("InputTensor", "DataType"),
        ),
        (
            {"type": "PADDING", "InputTensor": {"DataType": "INT8", "Sizes": [0]}},
            ("InputTensor", "Sizes"),
        ),
    ],
)
def test_structural_errors_name_the_field(operator: dict[str, Any], loc: tuple[Any, ...]) -> None:
    with pytest.raises(DescriptorError) as info:
        parse_operator(operator)
    assert loc in locs(info.value.errors), info.value.errors
