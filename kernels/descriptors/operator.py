"""The base of every operator descriptor: shared fields, structural rules, DimensionCount.

Each operator's model derives from `OperatorBase` in its own module (`kernels/operators/`),
naming its tensors, its per-axis arrays and how its output follows from its inputs. Nothing
here knows any operator by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import BeforeValidator, ConfigDict, ValidationError

from ..directml import MAX_TENSOR_RANK
from ..errors import DescriptorError, ErrorItem
from ._base import DmlModel, Errors, TensorDesc, attr_name, wire_name

__all__ = [
    "OPERATOR_PREFIX",
    "OperatorBase",
    "OperatorType",
    "PerAxis",
    "WindowedOperator",
    "strip_prefix",
    "validation_errors",
]

OPERATOR_PREFIX = "DML_OPERATOR_"
PerAxis = tuple[int, ...]
"""One entry per (spatial) dimension, in DirectML's struct order."""

# attributes checked by every operator that has them
_AT_LEAST_ONE = ("window_sizes", "window_size", "strides", "dilations")
_NON_NEGATIVE = ("start_padding", "end_padding")


def strip_prefix(prefix: str) -> Any:
    """A validator accepting DirectML's prefixed enum spelling (`DML_OPERATOR_FOLD`) too."""

    def strip(value: Any) -> Any:
        return value.removeprefix(prefix) if isinstance(value, str) else value

    return BeforeValidator(strip)


_T = TypeVar("_T")
OperatorType = Annotated[_T, strip_prefix(OPERATOR_PREFIX)]
"""A model's `type` field: `OperatorType[Literal["FOLD"]]` takes `FOLD` or `DML_OPERATOR_FOLD`."""


def _document_tensors(schema: dict[str, Any], model: type[Any]) -> None:
    """The JSON schema of an operator, its tensors described by their layouts."""
    properties = schema.get("properties", {})
    for name, layout in model.tensor_layouts.items():
        if name in properties:
            properties[name]["description"] = layout
    lo, hi = model.dimension_count_range
    axes = "dimensions" if model.leading_axes == 0 else "spatial dimensions"
    sizes = "; ".join(f"{name}: {layout}" for name, layout in model.tensor_layouts.items())
    arrays = [wire_name(a) for a in model.dimension_arrays]
    schema["description"] = (
        f"{schema.get('description', '')}\n\nTensor Sizes. {sizes}. DimensionCount, the number "
        f"of {axes}, is {lo} to {hi}; {', '.join(arrays[:-1])} and {arrays[-1]} have one entry "
        f"per {axes[:-1]}."
    )


class OperatorBase(DmlModel):
    """Fields and checks common to every descriptor; subclasses add their own."""

    model_config = ConfigDict(json_schema_extra=_document_tensors)

    type: str
    input_tensor: TensorDesc | None = None
    output_tensor: TensorDesc | None = None
    dimension_count: int | None = None

    input_names: ClassVar[tuple[str, ...]] = ("InputTensor",)
    optional_input_names: ClassVar[tuple[str, ...]] = ()
    # arrays with one entry per (spatial) dimension, in DirectML's struct order
    dimension_arrays: ClassVar[tuple[str, ...]] = ()
    dimension_count_range: ClassVar[tuple[int, int]] = (1, MAX_TENSOR_RANK)
    # DimensionCount is the rank of the first of these tensors given, less `leading_axes`
    rank_tensors: ClassVar[tuple[str, ...]] = ("InputTensor", "FilterTensor")
    leading_axes: ClassVar[int] = 2
    #: tensor -> its layout in DirectML's notation (`{ BatchCount, ChannelCount, ... }`); the
    #: OpenAPI description and the layout errors quote it
    tensor_layouts: ClassVar[Mapping[str, str]] = {}

    def tensor_descs(self) -> dict[str, TensorDesc]:
        """The tensor descriptors present, by wire name (OutputTensor last)."""
        names = (*self.input_names, *self.optional_input_names, "OutputTensor")
        descs = {name: getattr(self, attr_name(name)) for name in names}
        return {name: desc for name, desc in descs.items() if desc is not None}

    def dimension_count_field(self) -> str | None:
        """The field DimensionCount is read from: itself, else the first array given."""
        if self.dimension_count is not None:
            return "DimensionCount"
        given = (n for n in self.dimension_arrays if getattr(self, n) is not None)
        return next((wire_name(n) for n in given), None)

    def given_dimension_count(self) -> int | None:
        """DimensionCount, or the length of the first array given, or None."""
        field = self.dimension_count_field()
        if field is None:
            return None
        value = getattr(self, attr_name(field))
        return value if isinstance(value, int) else len(value)

    def rank_tensor(self, inputs: Mapping[str, TensorDesc]) -> tuple[str, TensorDesc] | None:
        """The tensor whose rank DimensionCount follows (None when no tensor tells)."""
        tensors = {**inputs, "OutputTensor": self.output_tensor}
        for name in self.rank_tensors:
            desc = tensors.get(name)
            if desc is not None:
                return name, desc
        return None

    def derived_dimension_count(self, inputs: Mapping[str, TensorDesc]) -> int | None:
        """DimensionCount as the tensors imply it (None when no tensor tells)."""
        ranked = self.rank_tensor(inputs)
        return None if ranked is None else ranked[1].rank - self.leading_axes

    def structure_errors(self, errors: Errors) -> None:
        """Rules that need no tensor: array lengths, value ranges."""
        lo, hi = self.dimension_count_range
        count = self.given_dimension_count()
        field = self.dimension_count_field()
        axis = "dimension" if self.leading_axes == 0 else "spatial dimension"
        if count is not None and not lo <= count <= hi:
            errors.add(
                (field or "DimensionCount",),
                f"DimensionCount must be in the range [{lo}, {hi}] for {self.type}, got {count}"
                if field == "DimensionCount"
                else f"{field} has {count} entries, one per {axis}; {self.type} takes {lo} to "
                f"{hi} (DimensionCount)",
            )
        for name in self.dimension_arrays:
            value = getattr(self, name)
            if value is None:
                continue
            wire = wire_name(name)
            source = "" if field == "DimensionCount" else f", as {field} has"
            errors.check(
                len(value) == count,
                (wire,),
                f"{wire} has {len(value)} entries; it must have DimensionCount ({count}{source}) "
                f"entries, one per {axis}",
            )
            if name in _AT_LEAST_ONE:
                for i, v in enumerate(value):
                    errors.check(v >= 1, (wire, i), f"{wire}[{i}] must be at least 1, got {v}")
            if name in _NON_NEGATIVE:
                for i, v in enumerate(value):
                    errors.check(v >= 0, (wire, i), f"{wire}[{i}] is a UINT: it cannot be {v}")

    def infer_output(self, errors: Errors) -> TensorDesc | None:
        """The output descriptor of a descriptor with every input bound and default filled.

        Adds each broken tensor rule to `errors`; None when no output can be inferred.
        """
        raise NotImplementedError(f"{type(self).__name__} does not infer its output")


class WindowedOperator(OperatorBase):
    """The sliding-window arrays of FOLD, UNFOLD and CONVOLUTION_INTEGER."""

    strides: PerAxis | None = None
    dilations: PerAxis | None = None
    start_padding: PerAxis | None = None
    end_padding: PerAxis | None = None
    dimension_arrays: ClassVar[tuple[str, ...]] = (
        "strides",
        "dilations",
        "start_padding",
        "end_padding",
    )


def validation_errors(exc: ValidationError, tags: Any) -> DescriptorError:
    """A pydantic ValidationError in our error shape, without the union `tags` in locations."""
    items: list[ErrorItem] = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        if loc and loc[0] in tags:
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
