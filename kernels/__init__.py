"""DirectML operators: descriptors, validation, shape inference, NumPy and CuPy backends.

Each operator is declared once, in its module under `operators/`; `OPERATORS` is the table of
those declarations. Importing this package never imports CuPy, FastAPI or anything HTTP.
"""

from .descriptors import MAX_ELEMENT_COUNT, MAX_TENSOR_RANK, OperatorBase, TensorDesc
from .directml import PaddingMode
from .dtypes import DataType
from .errors import BackendUnavailableError, DescriptorError, LimitExceededError
from .execute import execute, select_backend
from .operators import (
    OPERATOR_TYPES,
    OPERATORS,
    Operator,
    OperatorSpec,
    parse_operator,
    spec_of,
)
from .operators.average_pooling import AveragePoolingOperator
from .operators.convolution_integer import ConvolutionIntegerOperator
from .operators.fold import FoldOperator
from .operators.padding import PaddingOperator
from .operators.unfold import UnfoldOperator
from .resolve import resolve

__all__ = [
    "MAX_ELEMENT_COUNT",
    "MAX_TENSOR_RANK",
    "OPERATORS",
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
    "OperatorSpec",
    "PaddingMode",
    "PaddingOperator",
    "TensorDesc",
    "UnfoldOperator",
    "execute",
    "parse_operator",
    "resolve",
    "select_backend",
    "spec_of",
]
