"""The examples of the DirectML seed pages (FOLD 1-3, UNFOLD 1-2, PADDING 1-4) as data.

Each example is the descriptor exactly as the page gives it (DirectML field names, FLOAT32
tensors), its input tensors and the page's output. Every layer's tests run them: the
reference backend, `kernels.execute`, the CuPy backend, the service and the SDK.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dmlserve.kernels.dtypes import DataType

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


@dataclass(frozen=True)
class SeedExample:
    name: str
    operator: dict[str, Any]
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    expected: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def holds(self, data_type: str) -> bool:
        """Whether every value of the example fits `data_type` exactly."""
        info = DataType(data_type).numpy
        values = [self.expected, *self.inputs.values()]
        return all(np.array_equal(v.astype(info).astype(np.float64), v) for v in values)

    def as_type(self, data_type: str) -> SeedExample:
        """The same example with every tensor in `data_type`."""
        dtype = DataType(data_type).numpy
        operator = {
            key: {**value, "DataType": data_type} if key.endswith("Tensor") else value
            for key, value in self.operator.items()
        }
        inputs = {name: a.astype(dtype) for name, a in self.inputs.items()}
        return SeedExample(self.name, operator, inputs, self.expected.astype(dtype))


def typed_examples() -> list[tuple[SeedExample, str]]:
    """Every (example, data type) pair whose values the type holds exactly."""
    return [(ex, dt.value) for ex in SEED_EXAMPLES for dt in DataType if ex.holds(dt.value)]


def _f32(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def _windowed(kind: str, start: list[int], end: list[int], **tensors: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "DimensionCount": 2,
        "WindowSizes": [3, 3],
        "Strides": [1, 1],
        "Dilations": [1, 1],
        "StartPadding": start,
        "EndPadding": end,
        **tensors,
    }


def _desc(sizes: list[int]) -> dict[str, Any]:
    return {"DataType": "FLOAT32", "Sizes": sizes}


SEED_EXAMPLES: list[SeedExample] = [
    SeedExample(
        "unfold-1",
        _windowed(
            "UNFOLD", [0, 0], [0, 0], InputTensor=_desc([1, 1, 5, 5]), OutputTensor=_desc([1, 9, 9])
        ),
        {"InputTensor": _f32(IMAGE_5X5)},
        _f32([UNFOLD_1]),
    ),
    SeedExample(
        "unfold-2",
        _windowed(
            "UNFOLD",
            [1, 0],
            [1, 0],
            InputTensor=_desc([1, 1, 5, 5]),
            OutputTensor=_desc([1, 9, 15]),
        ),
        {"InputTensor": _f32(IMAGE_5X5)},
        _f32([UNFOLD_2]),
    ),
    SeedExample(
        "fold-1",
        _windowed(
            "FOLD", [0, 0], [0, 0], InputTensor=_desc([1, 9, 4]), OutputTensor=_desc([1, 1, 4, 4])
        ),
        {"InputTensor": _f32(np.arange(36).reshape(1, 9, 4))},
        _f32([[FOLD_1]]),
    ),
    SeedExample(
        "fold-2",
        _windowed(
            "FOLD", [1, 0], [1, 0], InputTensor=_desc([1, 9, 8]), OutputTensor=_desc([1, 1, 4, 4])
        ),
        {"InputTensor": _f32(np.arange(72).reshape(1, 9, 8))},
        _f32([[FOLD_2]]),
    ),
    SeedExample(
        "fold-3",
        _windowed(
            "FOLD", [1, 0], [1, 0], InputTensor=_desc([1, 18, 8]), OutputTensor=_desc([1, 2, 4, 4])
        ),
        {"InputTensor": _f32(np.arange(144).reshape(1, 18, 8))},
        _f32([[FOLD_2, FOLD_3_CHANNEL_1]]),
    ),
] + [
    SeedExample(
        f"padding-{i}-{mode.lower()}",
        {
            "type": "PADDING",
            "InputTensor": _desc([1, 1, 4, 4]),
            "OutputTensor": _desc([1, 1, 8, 10]),
            "PaddingMode": f"DML_PADDING_MODE_{mode}",
            **({"PaddingValue": 9} if mode == "CONSTANT" else {}),
            "StartPadding": [0, 0, 1, 2],
            "EndPadding": [0, 0, 3, 4],
        },
        {"InputTensor": _f32(PADDING_INPUT)},
        _f32([[rows]]),
    )
    for i, (mode, rows) in enumerate(PADDING_EXAMPLES.items(), start=1)
]
