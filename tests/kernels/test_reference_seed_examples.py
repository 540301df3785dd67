"""Every example of the seed pages (FOLD 1-3, UNFOLD 1-2, PADDING 1-4), exactly.

The arrays are the pages' literals. The pages use FLOAT32; the same integer-valued data is also
run through every other data type that holds it exactly, with the result's type checked.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from kernels import reference
from kernels.dtypes import DataType

ALL_TYPES = [dt.numpy for dt in DataType]
# Every type that holds the integers 0..675 exactly (the largest FOLD example value).
WIDE_TYPES = [dt for dt in ALL_TYPES if dt.itemsize > 1]

IMAGE_5X5 = np.arange(25).reshape(1, 1, 5, 5)

UNFOLD_1 = [
    [0, 1, 2, 5, 6, 7, 10, 11, 12],
    [1, 2, 3, 6, 7, 8, 11, 12, 13],
    [2, 3, 4, 7, 8, 9, 12, 13, 14],
    [5, 6, 7, 10, 11, 12, 15, 16, 17],
    [6, 7, 8, 11, 12, 13, 16, 17, 18],
    [7, 8, 9, 12, 13, 14, 17, 18, 19],
    [10, 11, 12, 15, 16, 17, 20, 21, 22],
    [11, 12, 13, 16, 17, 18, 21, 22, 23],
    [12, 13, 14, 17, 18, 19, 22, 23, 24],
]

UNFOLD_2 = [
    [0, 0, 0, 0, 1, 2, 5, 6, 7, 10, 11, 12, 15, 16, 17],
    [0, 0, 0, 1, 2, 3, 6, 7, 8, 11, 12, 13, 16, 17, 18],
    [0, 0, 0, 2, 3, 4, 7, 8, 9, 12, 13, 14, 17, 18, 19],
    [0, 1, 2, 5, 6, 7, 10, 11, 12, 15, 16, 17, 20, 21, 22],
    [1, 2, 3, 6, 7, 8, 11, 12, 13, 16, 17, 18, 21, 22, 23],
    [2, 3, 4, 7, 8, 9, 12, 13, 14, 17, 18, 19, 22, 23, 24],
    [5, 6, 7, 10, 11, 12, 15, 16, 17, 20, 21, 22, 0, 0, 0],
    [6, 7, 8, 11, 12, 13, 16, 17, 18, 21, 22, 23, 0, 0, 0],
    [7, 8, 9, 12, 13, 14, 17, 18, 19, 22, 23, 24, 0, 0, 0],
]

FOLD_1 = [
    [0, 5, 13, 9],
    [14, 38, 54, 32],
    [38, 86, 102, 56],
    [26, 57, 65, 35],
]

FOLD_2 = [
    [26, 70, 102, 60],
    [78, 183, 231, 129],
    [84, 195, 243, 135],
    [82, 182, 214, 116],
]

FOLD_3_CHANNEL_1 = [
    [170, 358, 390, 204],
    [294, 615, 663, 345],
    [300, 627, 675, 351],
    [226, 470, 502, 260],
]

PADDING_INPUT = [[[[1, 2, 3, 4], [5, 6, 7, 8], [1, 2, 3, 4], [5, 6, 7, 8]]]]

PADDING_EXAMPLES = {
    "CONSTANT": [
        [9, 9, 9, 9, 9, 9, 9, 9, 9, 9],
        [9, 9, 1, 2, 3, 4, 9, 9, 9, 9],
        [9, 9, 5, 6, 7, 8, 9, 9, 9, 9],
        [9, 9, 1, 2, 3, 4, 9, 9, 9, 9],
        [9, 9, 5, 6, 7, 8, 9, 9, 9, 9],
        [9, 9, 9, 9, 9, 9, 9, 9, 9, 9],
        [9, 9, 9, 9, 9, 9, 9, 9, 9, 9],
        [9, 9, 9, 9, 9, 9, 9, 9, 9, 9],
    ],
    "EDGE": [
        [1, 1, 1, 2, 3, 4, 4, 4, 4, 4],
        [1, 1, 1, 2, 3, 4, 4, 4, 4, 4],
        [5, 5, 5, 6, 7, 8, 8, 8, 8, 8],
        [1, 1, 1, 2, 3, 4, 4, 4, 4, 4],
        [5, 5, 5, 6, 7, 8, 8, 8, 8, 8],
        [5, 5, 5, 6, 7, 8, 8, 8, 8, 8],
        [5, 5, 5, 6, 7, 8, 8, 8, 8, 8],
        [5, 5, 5, 6, 7, 8, 8, 8, 8, 8],
    ],
    "REFLECTION": [
        [7, 6, 5, 6, 7, 8, 7, 6, 5, 6],
        [3, 2, 1, 2, 3, 4, 3, 2, 1, 2],
        [7, 6, 5, 6, 7, 8, 7, 6, 5, 6],
        [3, 2, 1, 2, 3, 4, 3, 2, 1, 2],
        [7, 6, 5, 6, 7, 8, 7, 6, 5, 6],
        [3, 2, 1, 2, 3, 4, 3, 2, 1, 2],
        [7, 6, 5, 6, 7, 8, 7, 6, 5, 6],
        [3, 2, 1, 2, 3, 4, 3, 2, 1, 2],
    ],
    "SYMMETRIC": [
        [2, 1, 1, 2, 3, 4, 4, 3, 2, 1],
        [2, 1, 1, 2, 3, 4, 4, 3, 2, 1],
        [6, 5, 5, 6, 7, 8, 8, 7, 6, 5],
        [2, 1, 1, 2, 3, 4, 4, 3, 2, 1],
        [6, 5, 5, 6, 7, 8, 8, 7, 6, 5],
        [6, 5, 5, 6, 7, 8, 8, 7, 6, 5],
        [2, 1, 1, 2, 3, 4, 4, 3, 2, 1],
        [6, 5, 5, 6, 7, 8, 8, 7, 6, 5],
    ],
}


def _expect(result: npt.NDArray[Any], expected: Any, dtype: np.dtype[Any]) -> None:
    assert result.dtype == dtype
    assert result.flags.c_contiguous
    np.testing.assert_array_equal(result, np.asarray(expected, dtype=dtype), strict=True)


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=str)
def test_unfold_example_1(dtype: np.dtype[Any]) -> None:
    x = IMAGE_5X5.astype(dtype)
    out = reference.unfold(x, (3, 3), (1, 1), (1, 1), (0, 0), (0, 0))
    _expect(out, [UNFOLD_1], dtype)


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=str)
def test_unfold_example_2(dtype: np.dtype[Any]) -> None:
    x = IMAGE_5X5.astype(dtype)
    out = reference.unfold(x, (3, 3), (1, 1), (1, 1), (1, 0), (1, 0))
    _expect(out, [UNFOLD_2], dtype)


@pytest.mark.parametrize("dtype", WIDE_TYPES, ids=str)
def test_fold_example_1(dtype: np.dtype[Any]) -> None:
    x = np.arange(36).reshape(1, 9, 4).astype(dtype)
    out = reference.fold(x, (4, 4), (3, 3), (1, 1), (1, 1), (0, 0), (0, 0))
    _expect(out, [[FOLD_1]], dtype)


@pytest.mark.parametrize("dtype", WIDE_TYPES, ids=str)
def test_fold_example_2(dtype: np.dtype[Any]) -> None:
    x = np.arange(72).reshape(1, 9, 8).astype(dtype)
    out = reference.fold(x, (4, 4), (3, 3), (1, 1), (1, 1), (1, 0), (1, 0))
    _expect(out, [[FOLD_2]], dtype)


@pytest.mark.parametrize("dtype", WIDE_TYPES, ids=str)
def test_fold_example_3(dtype: np.dtype[Any]) -> None:
    x = np.arange(144).reshape(1, 18, 8).astype(dtype)
    out = reference.fold(x, (4, 4), (3, 3), (1, 1), (1, 1), (1, 0), (1, 0))
    _expect(out, [[FOLD_2, FOLD_3_CHANNEL_1]], dtype)


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=str)
@pytest.mark.parametrize("mode", list(PADDING_EXAMPLES))
def test_padding_examples_1_to_4(mode: str, dtype: np.dtype[Any]) -> None:
    x = np.asarray(PADDING_INPUT, dtype=dtype)
    # PaddingValue 9 is given in every mode: only CONSTANT may use it.
    out = reference.padding(x, (0, 0, 1, 2), (0, 0, 3, 4), mode, dtype.type(9))
    _expect(out, [[PADDING_EXAMPLES[mode]]], dtype)
