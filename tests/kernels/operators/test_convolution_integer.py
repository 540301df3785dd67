"""CONVOLUTION_INTEGER's descriptor rules: output shape and type, groups, zero points."""

from __future__ import annotations

from typing import Any

import pytest

from dmlserve.kernels import TensorDesc, resolve
from tests.kernels.descriptor_helpers import conv_tensors, desc, errors_of, locs


def test_convolution_output_shape_and_type() -> None:
    op = {
        "type": "CONVOLUTION_INTEGER",
        "Strides": [2, 1],
        "StartPadding": [1, 0],
        "EndPadding": [1, 2],
        "GroupCount": 2,
    }
    out = resolve(op, conv_tensors((2, 4, 7, 5), (6, 2, 3, 3))).output_tensor
    assert out == desc("INT32", 2, 6, 4, 5)


def test_one_dimensional_convolution() -> None:
    out = resolve({"type": "CONVOLUTION_INTEGER"}, conv_tensors((1, 3, 9), (4, 3, 2))).output_tensor
    assert out.sizes == (1, 4, 8)


@pytest.mark.parametrize(
    ("tensors", "extra", "loc"),
    [
        (conv_tensors((1, 4, 5, 5), (4, 3, 3, 3)), {}, ("FilterTensor", "Sizes", 1)),
        (conv_tensors((1, 4, 5, 5), (3, 2, 3, 3)), {"GroupCount": 2}, ("GroupCount",)),
        (conv_tensors((1, 4, 5, 5), (4, 4, 3, 3), xt="INT16"), {}, ("InputTensor", "DataType")),
        (conv_tensors((1, 4, 5, 5), (4, 4, 3), xt="INT8"), {}, ("FilterTensor", "Sizes")),
        (conv_tensors((1, 4, 5, 5, 5), (4, 4, 3, 3, 3)), {}, ("InputTensor", "Sizes")),
        (conv_tensors((1, 4, 2, 2), (4, 4, 3, 3)), {}, ("FilterTensor", "Sizes", 2)),
        (
            {
                **conv_tensors((1, 4, 5, 5), (4, 4, 3, 3)),
                "InputZeroPointTensor": desc("INT8", 1, 1, 1, 1),
            },
            {},
            ("InputZeroPointTensor", "DataType"),
        ),
        (
            {
                **conv_tensors((1, 4, 5, 5), (4, 4, 3, 3)),
                "InputZeroPointTensor": desc("UINT8", 1, 2, 1, 1),
            },
            {},
            ("InputZeroPointTensor", "Sizes"),
        ),
        (
            {
                **conv_tensors((1, 4, 5, 5), (4, 4, 3, 3)),
                "FilterZeroPointTensor": desc("INT8", 1, 3, 1, 1),
            },
            {},
            ("FilterZeroPointTensor", "Sizes"),
        ),
        (
            {
                **conv_tensors((1, 4, 5, 5), (4, 4, 3, 3)),
                "InputZeroPointTensor": desc("UINT8", 1, 1, 1, 1),
                "FilterZeroPointTensor": desc("INT8", 4),
            },
            {},
            ("FilterZeroPointTensor", "Sizes"),
        ),
    ],
)
def test_convolution_rules(
    tensors: dict[str, TensorDesc], extra: dict[str, Any], loc: tuple[Any, ...]
) -> None:
    assert loc in locs(errors_of({"type": "CONVOLUTION_INTEGER", **extra}, tensors))


def test_per_channel_filter_zero_point_shapes() -> None:
    for sizes in [(1, 4, 1, 1), (4,), (1, 4), (1, 1, 1, 1), (1,)]:
        tensors = {
            **conv_tensors((1, 4, 5, 5), (4, 4, 3, 3)),
            "FilterZeroPointTensor": desc("INT8", *sizes),
        }
        assert resolve({"type": "CONVOLUTION_INTEGER"}, tensors).output_tensor is not None


def _registered_call() -> tuple[Any, dict[str, Any]]:
    """A convolution whose filter and zero points are constants, with its arrays."""
    import numpy as np

    from dmlserve.kernels.operators import parse_operator

    rng = np.random.default_rng(3)
    arrays = {
        "InputTensor": rng.integers(0, 256, (2, 16, 7, 6)).astype(np.uint8),
        "FilterTensor": rng.integers(-128, 128, (8, 16, 3, 3)).astype(np.int8),
        "InputZeroPointTensor": np.full((1, 1, 1, 1), 131, np.uint8),
        "FilterZeroPointTensor": rng.integers(-128, 128, (1, 8, 1, 1)).astype(np.int8),
    }
    descs = {name: TensorDesc.of_array(a) for name, a in arrays.items()}
    descriptor = {"type": "CONVOLUTION_INTEGER", "StartPadding": [1, 1], "EndPadding": [1, 1]}
    op = resolve(parse_operator(descriptor), descs)
    return op, arrays


@pytest.mark.parametrize("backend", ["numpy", "reference"])
def test_constants_are_read_once_and_change_nothing(backend: str) -> None:
    import numpy as np

    from dmlserve.kernels.operators import Constants, spec_of

    op, arrays = _registered_call()
    spec = spec_of(op)
    plain = spec.run(op, arrays, "numpy")
    want = spec.reference(*spec.arguments(op, arrays))
    np.testing.assert_array_equal(plain, want)
    names = frozenset({"FilterTensor", "InputZeroPointTensor", "FilterZeroPointTensor"})
    constants = Constants(names)
    for _ in range(2):
        if backend == "numpy":
            got = spec.run(op, arrays, "numpy", constants)
        else:
            args, kwargs = spec.constant_arguments(op, arrays, "numpy", constants)  # type: ignore[misc]
            assert kwargs == {}  # a host backend derives nothing else from the filter
            got = spec.reference(*args)
        np.testing.assert_array_equal(got, want)
    assert constants.cache["x_zero"] == 131
    np.testing.assert_array_equal(
        constants.cache["w_zero"], arrays["FilterZeroPointTensor"].reshape(-1)
    )
    # Constants never change for a registration: what was read is what runs (these arrays,
    # were they read, would give another answer).
    changed = {**arrays, "InputZeroPointTensor": arrays["InputZeroPointTensor"] - 1,
               "FilterZeroPointTensor": arrays["FilterZeroPointTensor"] + 1}  # fmt: skip
    np.testing.assert_array_equal(spec.run(op, changed, "numpy", constants), want)
    assert not np.array_equal(spec.run(op, changed, "numpy"), want)
