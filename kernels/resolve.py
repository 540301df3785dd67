"""Binding descriptors to tensors: defaults, output-shape inference and every DirectML rule.

`resolve` turns a structurally valid descriptor into a complete one — every input
descriptor present, arrays filled with their defaults, OutputTensor inferred — or raises
DescriptorError naming each broken field and rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .descriptors import MAX_ELEMENT_COUNT, Errors, OperatorBase, TensorDesc, attr_name
from .operators import parse_operator

__all__ = ["resolve"]


def resolve(
    operator: Any,
    tensors: Mapping[str, TensorDesc] | None = None,
    *,
    allow_batch_wildcard: bool = False,
) -> OperatorBase:
    """The complete descriptor for `operator` applied to `tensors` (actual input tensors).

    Omitted input descriptors are taken from `tensors`; given ones must agree with them.
    With `allow_batch_wildcard`, InputTensor/OutputTensor may have Sizes[0] == -1 (a
    registered operator); resolving such a descriptor with real tensors binds the batch.
    """
    op = parse_operator(operator)
    errors = Errors()
    inputs = _bind_inputs(op, tensors or {}, errors, allow_batch_wildcard)
    errors.raise_if_any()

    update: dict[str, Any] = {attr_name(k): v for k, v in inputs.items()}
    dims = _dimension_count(op, inputs, errors)
    errors.raise_if_any()
    update["dimension_count"] = dims
    for name in op.dimension_arrays:
        if getattr(op, name) is None:
            default = 1 if name in ("strides", "dilations") else 0
            update[name] = (default,) * dims
    filled = op.model_copy(update=update)

    output = filled.infer_output(errors)
    errors.raise_if_any()
    assert output is not None
    _check_output(filled.output_tensor, output, errors)
    for name, desc in {**inputs, "OutputTensor": output}.items():
        count = math.prod(abs(s) for s in desc.sizes)
        errors.check(
            count <= MAX_ELEMENT_COUNT,
            (name, "Sizes"),
            f"{name} has {count} elements; DirectML tensors hold at most 2^32 - 1",
        )
    errors.raise_if_any()
    return filled.model_copy(update={"output_tensor": _merge_output(filled.output_tensor, output)})


def _bind_inputs(
    op: OperatorBase, tensors: Mapping[str, TensorDesc], errors: Errors, wildcard: bool
) -> dict[str, TensorDesc]:
    known = (*op.input_names, *op.optional_input_names)
    for name in tensors:
        errors.check(
            name in known,
            (name,),
            f"{op.type} has no input tensor {name!r}; its inputs are " + ", ".join(known),
        )
    bound: dict[str, TensorDesc] = {}
    for name in known:
        given: TensorDesc | None = getattr(op, attr_name(name))
        actual = tensors.get(name)
        if given is None and actual is None:
            if name in op.input_names:
                errors.add((name,), f"{name} is required: give its descriptor or the tensor")
            continue
        if given is not None and given.has_wildcard_batch and not wildcard and actual is None:
            errors.add(
                (name, "Sizes", 0),
                "a batch size of -1 is allowed only when registering an operator",
            )
            continue
        if given is not None and given.has_wildcard_batch and name not in ("InputTensor",):
            errors.add(
                (name, "Sizes", 0), f"only InputTensor and OutputTensor may have -1 ({name})"
            )
            continue
        if given is None:
            assert actual is not None
            bound[name] = actual
        elif actual is None:
            bound[name] = given
        else:
            bound[name] = _agree(name, given, actual, errors)
    out = op.output_tensor
    if out is not None and out.has_wildcard_batch:
        in_desc = op.input_tensor
        errors.check(
            in_desc is not None and in_desc.has_wildcard_batch,
            ("OutputTensor", "Sizes", 0),
            "OutputTensor may have a batch size of -1 only when InputTensor has one",
        )
    return bound


def _agree(name: str, given: TensorDesc, actual: TensorDesc, errors: Errors) -> TensorDesc:
    errors.check(
        given.data_type == actual.data_type,
        (name, "DataType"),
        f"the {name} tensor is {actual.data_type.value} but its descriptor says "
        f"{given.data_type.value}",
    )
    expected = given.sizes
    if given.has_wildcard_batch:
        expected = (actual.sizes[0], *given.sizes[1:])
    errors.check(
        expected == actual.sizes,
        (name, "Sizes"),
        f"the {name} tensor has Sizes {list(actual.sizes)} but its descriptor says "
        f"{list(given.sizes)}",
    )
    return given.model_copy(update={"sizes": actual.sizes})


def _dimension_count(op: OperatorBase, inputs: Mapping[str, TensorDesc], errors: Errors) -> int:
    given, field = op.given_dimension_count(), op.dimension_count_field()
    lo, hi = op.dimension_count_range
    ranked = op.rank_tensor(inputs)
    derived = None
    if ranked is not None:
        name, desc = ranked
        derived = desc.rank - op.leading_axes
        if not errors.check(lo <= derived <= hi, (name, "Sizes"), _rank_rule(op, name, desc)):
            return derived
    if given is None:
        given = derived
    if given is None:
        errors.add(("DimensionCount",), "DimensionCount cannot be inferred: give the tensors")
        return 0
    if not errors.check(
        lo <= given <= hi,
        ("DimensionCount",),
        f"DimensionCount must be in the range [{lo}, {hi}] for {op.type}, got {given}",
    ):
        return given
    if ranked is not None and given != derived:
        name, desc = ranked
        axes = "dimensions" if op.leading_axes == 0 else "spatial dimensions"
        stated = (
            f"DimensionCount ({given}) must equal the number of {axes} of {name} ({derived})"
            if field == "DimensionCount"
            else f"{field} has {given} entries, one per {axes[:-1]}, but {name} has {derived} "
            f"{axes}"
        )
        errors.add(
            (field or "DimensionCount",),
            f"{stated}: {op.type}'s {name} is {op.tensor_layouts[name]}, and its Sizes are "
            f"{list(desc.sizes)}",
        )
    return given


def _rank_rule(op: OperatorBase, name: str, desc: TensorDesc) -> str:
    """The message for a tensor with too few or too many dimensions for the operator."""
    lo, hi = (n + op.leading_axes for n in op.dimension_count_range)
    msg = (
        f"{op.type}'s {name} is {op.tensor_layouts[name]}: {lo} to {hi} dimensions, got "
        f"{desc.rank} (Sizes {list(desc.sizes)})"
    )
    if op.leading_axes and desc.rank < lo:
        batched = [1] * op.leading_axes + list(desc.sizes)
        msg += f"; a lone {list(desc.sizes)} is Sizes {batched} (one batch, one channel)"
    return msg


def _check_output(given: TensorDesc | None, inferred: TensorDesc, errors: Errors) -> None:
    if given is None:
        return
    errors.check(
        given.data_type == inferred.data_type,
        ("OutputTensor", "DataType"),
        f"OutputTensor.DataType must be {inferred.data_type.value}, got {given.data_type.value}",
    )
    same = len(given.sizes) == len(inferred.sizes) and all(
        g == i or (k == 0 and -1 in (g, i))
        for k, (g, i) in enumerate(zip(given.sizes, inferred.sizes, strict=True))
    )
    errors.check(
        same,
        ("OutputTensor", "Sizes"),
        f"OutputTensor.Sizes must be {list(inferred.sizes)} (computed from the descriptor), "
        f"got {list(given.sizes)}",
    )
    if given.strides is not None:
        _check_output_strides(given, errors)


def _check_output_strides(desc: TensorDesc, errors: Errors) -> None:
    assert desc.strides is not None
    dims = sorted((st, sz) for st, sz in zip(desc.strides, desc.sizes, strict=True) if sz != 1)
    extent = 1
    for stride, size in dims:
        if stride < extent:
            errors.add(
                ("OutputTensor", "Strides"),
                "OutputTensor Strides must not make elements overlap (a 0 stride broadcasts, "
                "which an output cannot)",
            )
            return
        extent = stride * size


def _merge_output(given: TensorDesc | None, inferred: TensorDesc) -> TensorDesc:
    if given is None:
        return inferred
    return given.model_copy(update={"sizes": inferred.sizes})
