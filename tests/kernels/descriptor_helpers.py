"""Shorthands of the descriptor tests: tensor descriptors and the errors `resolve` raises."""

from __future__ import annotations

from typing import Any

import pytest

from dmlserve.kernels import DescriptorError, TensorDesc, resolve


def desc(dtype: str, *sizes: int) -> TensorDesc:
    return TensorDesc(data_type=dtype, sizes=sizes)


def errors_of(op: Any, tensors: dict[str, TensorDesc] | None = None, **kw: Any) -> list[Any]:
    with pytest.raises(DescriptorError) as info:
        resolve(op, tensors, **kw)
    return info.value.errors


def locs(errors: list[Any]) -> list[tuple[Any, ...]]:
    return [tuple(e["loc"]) for e in errors]


def conv_tensors(
    x: tuple[int, ...], w: tuple[int, ...], xt: str = "UINT8", wt: str = "INT8"
) -> dict[str, TensorDesc]:
    return {"InputTensor": desc(xt, *x), "FilterTensor": desc(wt, *w)}
