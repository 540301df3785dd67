"""The operators, one module each, and `OPERATORS`, the table every other layer iterates.

A module declares its descriptor model (fields, DirectML rules, output inference) and a
`SPEC` (`OperatorSpec`: reference function, backend launchers, argument mapping, cost
estimate, warm-up example, SDK helper). Adding an operator: its module here, listed in
`_MODULES`; its reference in `kernels/reference/`, its launcher and `.cu` in
`kernels/cupy_backend/` and `kernels/cuda/`; its typed SDK methods in `clients/_helpers.py`;
its samples in `tests/operator_info.py`.
"""

from __future__ import annotations

import functools
import operator as _operator
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias

from pydantic import Discriminator, Tag, TypeAdapter, ValidationError

from ..descriptors import OPERATOR_PREFIX, Errors, OperatorBase, validation_errors
from ..errors import DescriptorError
from . import average_pooling, convolution_integer, fold, padding, unfold
from ._sdk import ArrayLike, Dims
from ._spec import BackendFunction, Constants, Example, OperatorSpec

__all__ = [
    "ArrayLike",
    "Dims",
    "OPERATORS",
    "OPERATOR_TYPES",
    "BackendFunction",
    "Constants",
    "Example",
    "Operator",
    "OperatorSpec",
    "parse_operator",
    "spec_of",
]

_MODULES = (fold, unfold, padding, average_pooling, convolution_integer)

OPERATORS: Mapping[str, OperatorSpec[Any, ...]] = {m.SPEC.type: m.SPEC for m in _MODULES}
"""DML_OPERATOR_TYPE (without prefix) -> the operator's declaration."""

OPERATOR_TYPES: Mapping[str, type[OperatorBase]] = {t: s.model for t, s in OPERATORS.items()}
"""DML_OPERATOR_TYPE -> descriptor model."""


def spec_of(op: OperatorBase) -> OperatorSpec[Any, ...]:
    """The declaration of a parsed descriptor's operator."""
    return OPERATORS[op.type]


def _operator_tag(value: Any) -> str | None:
    tag = value.get("type") if isinstance(value, Mapping) else getattr(value, "type", None)
    return tag.removeprefix(OPERATOR_PREFIX) if isinstance(tag, str) else None


if TYPE_CHECKING:
    Operator: TypeAlias = OperatorBase
else:
    Operator = Annotated[
        functools.reduce(_operator.or_, [Annotated[s.model, Tag(t)] for t, s in OPERATORS.items()]),
        Discriminator(
            _operator_tag,
            custom_error_type="invalid_operator_type",
            custom_error_message="type must be one of " + ", ".join(OPERATORS),
        ),
    ]
"""Any operator's descriptor, told apart by `type` (a tagged union of the table's models)."""

_OPERATOR_ADAPTER: TypeAdapter[OperatorBase] = TypeAdapter(Operator)


def parse_operator(operator: Any) -> OperatorBase:
    """Validate the structure of an operator given as JSON-like dict or as a model.

    Raises DescriptorError naming every broken field. Tensor descriptors may be absent.
    """
    if isinstance(operator, OperatorBase):
        model = operator
    else:
        if not isinstance(operator, Mapping):
            raise DescriptorError.at((), "an operator is a JSON object with a 'type' field")
        if "type" not in operator:
            raise DescriptorError.at(("type",), "type is required: one of " + ", ".join(OPERATORS))
        try:
            model = _OPERATOR_ADAPTER.validate_python(operator)
        except ValidationError as exc:
            raise validation_errors(exc, OPERATORS) from None
    errors = Errors()
    model.structure_errors(errors)
    errors.raise_if_any()
    return model
