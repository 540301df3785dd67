"""DirectML operators: descriptors, validation, shape inference, NumPy and CuPy backends.

Importing this package never imports CuPy, FastAPI or anything HTTP.
"""

from .descriptors import (
    OPERATOR_TYPES,
    AveragePoolingOperator,
    ConvolutionIntegerOperator,
    FoldOperator,
    Operator,
    OperatorBase,
    PaddingMode,
    PaddingOperator,
    TensorDesc,
    UnfoldOperator,
    parse_operator,
    resolve,
)
from .dtypes import DataType
from .errors import BackendUnavailableError, DescriptorError, LimitExceededError
from .execute import execute, select_backend

__all__ = [
    "OPERATOR_TYPES",
    "AveragePoolingOperator",
    "BackendUnavailableError",
    "ConvolutionIntegerOperator",
    "DataType",
    "DescriptorError",
    "FoldOperator",
    "LimitExceededError",
    "Operator",
    "OperatorBase",
    "PaddingMode",
    "PaddingOperator",
    "TensorDesc",
    "UnfoldOperator",
    "execute",
    "parse_operator",
    "resolve",
    "select_backend",
]
