"""Shared pieces of the descriptor models: wire aliases, tensor descriptors, error collection."""

from __future__ import annotations

import math
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, field_validator, model_validator

from ..directml import MAX_ELEMENT_COUNT, MAX_TENSOR_RANK
from ..dtypes import DataType, parse_data_type
from ..errors import DescriptorError, ErrorItem, Loc

__all__ = [
    "MAX_ELEMENT_COUNT",
    "MAX_TENSOR_RANK",
    "DataTypeField",
    "DmlModel",
    "Errors",
    "TensorDesc",
    "attr_name",
    "wire_name",
]


def wire_name(name: str) -> str:
    """snake_case attribute -> DirectML field name (`window_sizes` -> `WindowSizes`)."""
    if name == "type":
        return name
    return "".join(part.capitalize() for part in name.split("_"))


def attr_name(wire: str) -> str:
    """DirectML field name -> snake_case attribute (`InputZeroPointTensor` -> ...)."""
    out = []
    for i, ch in enumerate(wire):
        if ch.isupper() and i:
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


class DmlModel(BaseModel):
    """Frozen, strict-about-extras model with DirectML field names on the wire."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=wire_name,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        use_enum_values=False,
    )


DataTypeField = Annotated[DataType, BeforeValidator(parse_data_type)]


class TensorDesc(DmlModel):
    """DML_BUFFER_TENSOR_DESC: DataType, Sizes and optional element Strides (0 broadcasts).

    A first size of -1 marks a variable batch; only registered operators may use it.
    """

    data_type: DataTypeField
    sizes: tuple[int, ...]
    strides: tuple[int, ...] | None = None

    @field_validator("sizes")
    @classmethod
    def _check_sizes(cls, sizes: tuple[int, ...]) -> tuple[int, ...]:
        if not 1 <= len(sizes) <= MAX_TENSOR_RANK:
            raise ValueError(f"a tensor has 1 to {MAX_TENSOR_RANK} dimensions, got {len(sizes)}")
        for i, s in enumerate(sizes):
            if s < 1 and not (i == 0 and s == -1):
                raise ValueError(
                    f"Sizes[{i}] is {s}: a size of zero or less is invalid "
                    "(only the batch size, Sizes[0], may be -1 for a variable batch)"
                )
        return sizes

    @model_validator(mode="after")
    def _check_strides(self) -> TensorDesc:
        if self.strides is not None:
            if len(self.strides) != len(self.sizes):
                raise ValueError(
                    f"Strides has {len(self.strides)} entries but Sizes has {len(self.sizes)}: "
                    "they must have DimensionCount entries each"
                )
            if any(s < 0 for s in self.strides):
                raise ValueError("Strides are element counts and cannot be negative")
        return self

    @classmethod
    def of_array(cls, array: Any) -> TensorDesc:
        """The descriptor of a NumPy or CuPy array (its strides are not recorded)."""
        from ..dtypes import from_numpy

        return cls(data_type=from_numpy(array.dtype), sizes=tuple(int(s) for s in array.shape))

    @property
    def rank(self) -> int:
        return len(self.sizes)

    @property
    def numpy_dtype(self) -> np.dtype:
        return self.data_type.numpy

    @property
    def element_count(self) -> int:
        return math.prod(self.sizes)

    @property
    def nbytes(self) -> int:
        """Bytes of the packed tensor."""
        return self.element_count * self.data_type.itemsize

    @property
    def has_wildcard_batch(self) -> bool:
        return self.sizes[0] == -1


class Errors:
    """Collects every broken rule, so one response names them all."""

    def __init__(self) -> None:
        self.items: list[ErrorItem] = []

    def add(self, loc: Loc, msg: str) -> None:
        self.items.append({"loc": loc, "msg": msg})

    def check(self, ok: bool, loc: Loc, msg: str) -> bool:
        if not ok:
            self.add(loc, msg)
        return ok

    def raise_if_any(self) -> None:
        if self.items:
            raise DescriptorError(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)
