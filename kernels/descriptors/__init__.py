"""Descriptor machinery shared by every operator: DirectML field names, tensor descriptors,
error collection, the operator base model and the sliding-window rule.

The operators themselves are declared in `kernels/operators/`, one module each.
"""

from ._base import (
    MAX_ELEMENT_COUNT,
    MAX_TENSOR_RANK,
    DataTypeField,
    DmlModel,
    Errors,
    TensorDesc,
    attr_name,
    wire_name,
)
from .operator import (
    OPERATOR_PREFIX,
    OperatorBase,
    OperatorType,
    PerAxis,
    WindowedOperator,
    strip_prefix,
    validation_errors,
)
from .windows import Windowed, window_counts

__all__ = [
    "MAX_ELEMENT_COUNT",
    "MAX_TENSOR_RANK",
    "OPERATOR_PREFIX",
    "DataTypeField",
    "DmlModel",
    "Errors",
    "OperatorBase",
    "OperatorType",
    "PerAxis",
    "TensorDesc",
    "Windowed",
    "WindowedOperator",
    "attr_name",
    "strip_prefix",
    "validation_errors",
    "window_counts",
    "wire_name",
]
