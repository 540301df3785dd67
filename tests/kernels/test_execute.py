"""`kernels.execute`: seed examples end to end, limits before allocation, bad inputs, backends."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dmlserve import kernels
from dmlserve.kernels import DescriptorError, resolve
from tests.kernels.descriptor_helpers import locs
from tests.seed_examples import SEED_EXAMPLES


@pytest.mark.parametrize("example", SEED_EXAMPLES, ids=lambda e: e.name)
def test_seed_example_descriptor_resolves_to_its_output(example: Any) -> None:
    resolved = resolve(example.operator)
    assert resolved.output_tensor.sizes == example.expected.shape
    out = kernels.execute(example.operator, example.inputs, backend="numpy")["OutputTensor"]
    np.testing.assert_array_equal(out, example.expected, strict=True)


@pytest.mark.parametrize("example", SEED_EXAMPLES, ids=lambda e: e.name)
def test_seed_example_without_tensor_descriptors(example: Any) -> None:
    bare = {k: v for k, v in example.operator.items() if not k.endswith("Tensor")}
    if example.operator["type"] == "FOLD":  # FOLD's output size is known only from OutputTensor
        bare["OutputTensor"] = example.operator["OutputTensor"]
    out = kernels.execute(bare, example.inputs)["OutputTensor"]
    np.testing.assert_array_equal(out, example.expected, strict=True)


def test_output_bytes_limit_is_checked_before_allocation() -> None:
    x = np.broadcast_to(np.float32(1), (1, 4, 64, 64))  # a 4-byte buffer
    with pytest.raises(kernels.LimitExceededError) as info:
        kernels.execute(
            {"type": "UNFOLD", "WindowSizes": [8, 8]}, {"InputTensor": x}, max_output_bytes=1 << 20
        )
    assert info.value.limit_name == "max_output_bytes"
    assert info.value.actual == 4 * 4 * 64 * 57 * 57


def test_non_array_and_unsupported_dtype_inputs() -> None:
    with pytest.raises(DescriptorError) as info:
        kernels.execute({"type": "PADDING"}, {"InputTensor": np.zeros(3, dtype=bool)})
    assert locs(info.value.errors) == [("InputTensor", "DataType")]
    with pytest.raises(DescriptorError):
        kernels.execute({"type": "PADDING"}, {"InputTensor": [1, 2, 3]})


def test_select_backend() -> None:
    assert kernels.select_backend("numpy") == "numpy"
    assert kernels.select_backend("auto") in ("numpy", "cupy")
    with pytest.raises(kernels.BackendUnavailableError):
        kernels.select_backend("tpu")


def test_import_kernels_does_not_import_cupy_or_http() -> None:
    import subprocess
    import sys

    code = (
        "import dmlserve.kernels, sys; "
        "bad = {'cupy', 'fastapi', 'starlette', 'httpx'} & set(sys.modules); assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
