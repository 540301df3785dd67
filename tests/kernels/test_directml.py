"""DirectML's constants, defined once in `kernels.directml`, as every layer sees them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dmlserve.kernels import MAX_TENSOR_RANK, DescriptorError, PaddingMode, TensorDesc, resolve

CUDA = Path(__file__).resolve().parents[2] / "kernels" / "cuda"


def test_padding_modes_are_numbered_as_directml_and_the_kernel_do() -> None:
    # DML_PADDING_MODE: CONSTANT 0, EDGE 1, REFLECTION 2, SYMMETRIC 3, WRAP 4; the CUDA
    # kernel spells the same enum by hand, so read it from the source.
    dml = {"CONSTANT": 0, "EDGE": 1, "REFLECTION": 2, "SYMMETRIC": 3, "WRAP": 4}
    assert {m.value: m.dml_value for m in PaddingMode} == dml
    source = (CUDA / "padding.cu").read_text()
    kernel = {name: int(value) for name, value in re.findall(r"PAD_(\w+) = (\d+)", source)}
    assert kernel == dml


def test_rank_limit_is_directmls() -> None:
    assert MAX_TENSOR_RANK == 8  # DML_TENSOR_DIMENSION_COUNT_MAX1
    TensorDesc(data_type="INT8", sizes=(1,) * MAX_TENSOR_RANK)
    with pytest.raises(ValueError, match="1 to 8 dimensions"):
        TensorDesc(data_type="INT8", sizes=(1,) * (MAX_TENSOR_RANK + 1))


def test_padding_takes_every_rank_up_to_the_limit() -> None:
    for rank in range(1, MAX_TENSOR_RANK + 1):
        op = {"type": "PADDING", "StartPadding": [1] * rank, "EndPadding": [0] * rank}
        out = resolve(op, {"InputTensor": TensorDesc(data_type="INT8", sizes=(2,) * rank)})
        assert out.output_tensor is not None and out.output_tensor.sizes == (3,) * rank
    with pytest.raises(DescriptorError):
        resolve({"type": "PADDING", "StartPadding": [0] * 9, "EndPadding": [0] * 9})
