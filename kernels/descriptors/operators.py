"""The five operator descriptors, as tagged pydantic models with DirectML field names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Discriminator, Tag, TypeAdapter, ValidationError

from ..directml import MAX_TENSOR_RANK, PaddingMode
from ..errors import DescriptorError, ErrorItem
from ._base import DataTypeField, DmlModel, Errors, TensorDesc, wire_name

_OPERATOR_PREFIX = "DML_OPERATOR_"
_PADDING_MODE_PREFIX = "DML_PADDING_MODE_"


def _strip(prefix: str) -> Any:
    def strip(value: Any) -> Any:
        return value.removeprefix(prefix) if isinstance(value, str) else value

    return BeforeValidator(strip)


PaddingModeField = Annotated[PaddingMode, _strip(_PADDING_MODE_PREFIX)]
Dims = tuple[int, ...]

# (attribute, rule) pairs checked by every operator that has the attribute
_AT_LEAST_ONE = ("window_sizes", "window_size", "strides", "dilations")
_NON_NEGATIVE = ("start_padding", "end_padding")


class OperatorBase(DmlModel):
    """Fields and checks common to the five descriptors."""

    type: str
    input_tensor: TensorDesc | None = None
    output_tensor: TensorDesc | None = None
    dimension_count: int | None = None

    input_names: ClassVar[tuple[str, ...]] = ("InputTensor",)
    optional_input_names: ClassVar[tuple[str, ...]] = ()
    # arrays with one entry per (spatial) dimension, in DirectML's struct order
    dimension_arrays: ClassVar[tuple[str, ...]] = ()
    dimension_count_range: ClassVar[tuple[int, int]] = (1, MAX_TENSOR_RANK)

    def tensor_descs(self) -> dict[str, TensorDesc]:
        """The tensor descriptors present, by wire name (OutputTensor last)."""
        names = (*self.input_names, *self.optional_input_names, "OutputTensor")
        descs = {name: getattr(self, attr_name(name)) for name in names}
        return {name: desc for name, desc in descs.items() if desc is not None}

    def given_dimension_count(self) -> int | None:
        """DimensionCount, or the length of the first array given, or None."""
        if self.dimension_count is not None:
            return self.dimension_count
        for name in self.dimension_arrays:
            value = getattr(self, name)
            if value is not None:
                return len(value)
        return None

    def structure_errors(self, errors: Errors) -> None:
        """Rules that need no tensor: array lengths, value ranges."""
        lo, hi = self.dimension_count_range
        count = self.given_dimension_count()
        if count is not None:
            errors.check(
                lo <= count <= hi,
                ("DimensionCount",),
                f"DimensionCount must be in the range [{lo}, {hi}] for {self.type}, got {count}",
            )
        for name in self.dimension_arrays:
            value = getattr(self, name)
            if value is None:
                continue
            wire = wire_name(name)
            errors.check(
                len(value) == count,
                (wire,),
                f"{wire} has {len(value)} entries; it must have DimensionCount ({count}) entries",
            )
            if name in _AT_LEAST_ONE:
                for i, v in enumerate(value):
                    errors.check(v >= 1, (wire, i), f"{wire}[{i}] must be at least 1, got {v}")
            if name in _NON_NEGATIVE:
                for i, v in enumerate(value):
                    errors.check(v >= 0, (wire, i), f"{wire}[{i}] is a UINT: it cannot be {v}")


class _WindowedOperator(OperatorBase):
    strides: Dims | None = None
    dilations: Dims | None = None
    start_padding: Dims | None = None
    end_padding: Dims | None = None


class FoldOperator(_WindowedOperator):
    """DML_FOLD_OPERATOR_DESC: sums sliding-window columns back into an image (col2im)."""

    type: Annotated[Literal["FOLD"], _strip(_OPERATOR_PREFIX)] = "FOLD"
    window_sizes: Dims
    dimension_arrays: ClassVar[tuple[str, ...]] = (
        "window_sizes",
        "strides",
        "dilations",
        "start_padding",
        "end_padding",
    )
    dimension_count_range: ClassVar[tuple[int, int]] = (1, 6)


class UnfoldOperator(_WindowedOperator):
    """DML_UNFOLD_OPERATOR_DESC: extracts sliding local blocks as columns (im2col)."""

    type: Annotated[Literal["UNFOLD"], _strip(_OPERATOR_PREFIX)] = "UNFOLD"
    window_sizes: Dims
    dimension_arrays: ClassVar[tuple[str, ...]] = FoldOperator.dimension_arrays
    dimension_count_range: ClassVar[tuple[int, int]] = (1, 6)


class PaddingOperator(OperatorBase):
    """DML_PADDING_OPERATOR_DESC / DML_PADDING1_OPERATOR_DESC, with WRAP (feature level 6.4)."""

    type: Annotated[Literal["PADDING"], _strip(_OPERATOR_PREFIX)] = "PADDING"
    padding_mode: PaddingModeField = PaddingMode.CONSTANT
    padding_value: int | float = 0
    padding_value_data_type: DataTypeField | None = None
    start_padding: Dims | None = None
    end_padding: Dims | None = None
    dimension_arrays: ClassVar[tuple[str, ...]] = ("start_padding", "end_padding")


class AveragePoolingOperator(OperatorBase):
    """DML_AVERAGE_POOLING1_OPERATOR_DESC (AVERAGE_POOLING with Dilations)."""

    type: Annotated[Literal["AVERAGE_POOLING"], _strip(_OPERATOR_PREFIX)] = "AVERAGE_POOLING"
    strides: Dims | None = None
    window_size: Dims
    start_padding: Dims | None = None
    end_padding: Dims | None = None
    dilations: Dims | None = None
    include_padding: bool = False
    dimension_arrays: ClassVar[tuple[str, ...]] = (
        "strides",
        "window_size",
        "start_padding",
        "end_padding",
        "dilations",
    )
    dimension_count_range: ClassVar[tuple[int, int]] = (1, 3)


class ConvolutionIntegerOperator(_WindowedOperator):
    """DML_CONVOLUTION_INTEGER_OPERATOR_DESC: integer cross-correlation with zero points."""

    type: Annotated[Literal["CONVOLUTION_INTEGER"], _strip(_OPERATOR_PREFIX)] = (
        "CONVOLUTION_INTEGER"
    )
    input_zero_point_tensor: TensorDesc | None = None
    filter_tensor: TensorDesc | None = None
    filter_zero_point_tensor: TensorDesc | None = None
    group_count: int = 1
    input_names: ClassVar[tuple[str, ...]] = ("InputTensor", "FilterTensor")
    optional_input_names: ClassVar[tuple[str, ...]] = (
        "InputZeroPointTensor",
        "FilterZeroPointTensor",
    )
    dimension_arrays: ClassVar[tuple[str, ...]] = (
        "strides",
        "dilations",
        "start_padding",
        "end_padding",
    )
    dimension_count_range: ClassVar[tuple[int, int]] = (1, 2)

    def structure_errors(self, errors: Errors) -> None:
        super().structure_errors(errors)
        errors.check(
            self.group_count >= 1,
            ("GroupCount",),
            f"GroupCount must be at least 1, got {self.group_count}",
        )


OPERATOR_TYPES: dict[str, type[OperatorBase]] = {
    "FOLD": FoldOperator,
    "UNFOLD": UnfoldOperator,
    "PADDING": PaddingOperator,
    "AVERAGE_POOLING": AveragePoolingOperator,
    "CONVOLUTION_INTEGER": ConvolutionIntegerOperator,
}


def _operator_tag(value: Any) -> str | None:
    tag = value.get("type") if isinstance(value, Mapping) else getattr(value, "type", None)
    return tag.removeprefix(_OPERATOR_PREFIX) if isinstance(tag, str) else None


Operator = Annotated[
    Annotated[FoldOperator, Tag("FOLD")]
    | Annotated[UnfoldOperator, Tag("UNFOLD")]
    | Annotated[PaddingOperator, Tag("PADDING")]
    | Annotated[AveragePoolingOperator, Tag("AVERAGE_POOLING")]
    | Annotated[ConvolutionIntegerOperator, Tag("CONVOLUTION_INTEGER")],
    Discriminator(
        _operator_tag,
        custom_error_type="invalid_operator_type",
        custom_error_message="type must be one of " + ", ".join(OPERATOR_TYPES),
    ),
]
"""Any of the five descriptors, told apart by `type`."""

_OPERATOR_ADAPTER: TypeAdapter[OperatorBase] = TypeAdapter(Operator)


def attr_name(wire: str) -> str:
    """DirectML field name -> snake_case attribute (`InputZeroPointTensor` -> ...)."""
    out = []
    for i, ch in enumerate(wire):
        if ch.isupper() and i:
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


def validation_errors(exc: ValidationError) -> DescriptorError:
    """A pydantic ValidationError in our error shape, without the union tag in locations."""
    items: list[ErrorItem] = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        if loc and loc[0] in OPERATOR_TYPES:
            loc = loc[1:]
        if err["type"] == "invalid_operator_type":
            loc = ("type",)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            msg = f"{loc[-1] if loc else 'field'} is required"
        elif err["type"] == "extra_forbidden":
            msg = (
                f"unknown field {loc[-1]!r} for this operator (DirectML field names are PascalCase)"
            )
        items.append({"loc": loc, "msg": msg})
    return DescriptorError(items)


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
            raise DescriptorError.at(
                ("type",), "type is required: one of " + ", ".join(OPERATOR_TYPES)
            )
        try:
            model = _OPERATOR_ADAPTER.validate_python(operator)
        except ValidationError as exc:
            raise validation_errors(exc) from None
    errors = Errors()
    model.structure_errors(errors)
    errors.raise_if_any()
    return model
