"""DirectML's own constants and enums that every layer checks against.

Descriptors, both backends, the service's wire formats and the SDK import these names; no
other module spells out the numbers or the mode names.
"""

from __future__ import annotations

import enum

__all__ = ["MAX_ELEMENT_COUNT", "MAX_TENSOR_RANK", "PaddingMode"]

MAX_TENSOR_RANK = 8  # DML_TENSOR_DIMENSION_COUNT_MAX1
MAX_ELEMENT_COUNT = 2**32 - 1  # a tensor's element count must fit in a UINT32


class PaddingMode(enum.StrEnum):
    """DML_PADDING_MODE without its prefix."""

    # in DirectML's enum order: `dml_value` is the position
    CONSTANT = "CONSTANT"
    EDGE = "EDGE"
    REFLECTION = "REFLECTION"
    SYMMETRIC = "SYMMETRIC"
    WRAP = "WRAP"

    @property
    def dml_value(self) -> int:
        """The DML_PADDING_MODE value (CONSTANT = 0 ... WRAP = 4), as the kernels number it."""
        return list(PaddingMode).index(self)
