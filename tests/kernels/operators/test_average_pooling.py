"""AVERAGE_POOLING's descriptor rules: output size, data types, windows wholly in padding."""

from __future__ import annotations

import pytest

from dmlserve.kernels import resolve
from tests.kernels.descriptor_helpers import desc, errors_of, locs


def test_pooling_output_size_uses_the_dilated_window() -> None:
    op = {"type": "AVERAGE_POOLING", "WindowSize": [3], "Dilations": [2], "Strides": [2]}
    assert resolve(op, {"InputTensor": desc("FLOAT32", 1, 1, 11)}).output_tensor.sizes == (1, 1, 4)


@pytest.mark.parametrize("dtype", ["INT8", "FLOAT64", "INT32"])
def test_pooling_data_types(dtype: str) -> None:
    op = {"type": "AVERAGE_POOLING", "WindowSize": [2, 2]}
    assert ("InputTensor", "DataType") in locs(
        errors_of(op, {"InputTensor": desc(dtype, 1, 1, 4, 4)})
    )


@pytest.mark.parametrize(
    ("size", "window", "stride", "dilation", "start", "end"),
    [
        (4, 2, 1, 1, 2, 0),  # first window wholly before the input
        (4, 2, 3, 1, 0, 5),  # last window starts past the input
        (2, 2, 1, 5, 2, 3),  # dilation jumps over the input
    ],
)
def test_window_wholly_in_padding_is_refused_without_include_padding(
    size: int, window: int, stride: int, dilation: int, start: int, end: int
) -> None:
    op = {
        "type": "AVERAGE_POOLING",
        "WindowSize": [window],
        "Strides": [stride],
        "Dilations": [dilation],
        "StartPadding": [start],
        "EndPadding": [end],
    }
    assert locs(errors_of(op, {"InputTensor": desc("FLOAT32", 1, 1, size)})) == [
        ("IncludePadding",)
    ]
    with_padding = resolve(
        {**op, "IncludePadding": True}, {"InputTensor": desc("FLOAT32", 1, 1, size)}
    )
    assert with_padding.output_tensor is not None


def test_window_in_padding_rule_matches_brute_force() -> None:
    from dmlserve.kernels.geometry import sliding_count
    from dmlserve.kernels.operators.average_pooling import first_window_in_padding

    for size in range(1, 6):
        for window in range(1, 4):
            for stride in range(1, 4):
                for dilation in range(1, 8):
                    for start in range(0, 8):
                        for end in range(0, 6):
                            n = sliding_count(size, window, stride, dilation, start, end)
                            if n is None:
                                continue
                            bad = [
                                o
                                for o in range(n)
                                if not any(
                                    0 <= o * stride - start + t * dilation < size
                                    for t in range(window)
                                )
                            ]
                            got = first_window_in_padding(size, window, stride, dilation, start, n)
                            assert (got is None) == (not bad), (
                                size,
                                window,
                                stride,
                                dilation,
                                start,
                                end,
                            )
