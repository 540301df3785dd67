"""Operator descriptors: models with DirectML field names, validation and shape inference."""

from ..directml import PaddingMode
from ..geometry import sliding_count
from ._base import MAX_ELEMENT_COUNT, TensorDesc, wire_name
from .operators import (
    OPERATOR_TYPES,
    AveragePoolingOperator,
    ConvolutionIntegerOperator,
    FoldOperator,
    Operator,
    OperatorBase,
    PaddingOperator,
    UnfoldOperator,
    attr_name,
    parse_operator,
)
from .padding_value import fill_value
from .resolve import resolve

__all__ = [
    "MAX_ELEMENT_COUNT",
    "OPERATOR_TYPES",
    "AveragePoolingOperator",
    "ConvolutionIntegerOperator",
    "FoldOperator",
    "Operator",
    "OperatorBase",
    "PaddingMode",
    "PaddingOperator",
    "TensorDesc",
    "UnfoldOperator",
    "attr_name",
    "fill_value",
    "parse_operator",
    "resolve",
    "sliding_count",
    "wire_name",
]
