"""A tensor of the wrong rank is told the operator's layout, at the field the user gave.

Driven by the operator table: each operator's warm-up example, with the tensor that sets
DimensionCount (the input; FOLD's OutputTensor) reshaped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dmlserve.kernels import OPERATORS, DescriptorError, TensorDesc, resolve
from dmlserve.kernels.descriptors import wire_name

SPECS = list(OPERATORS.values())
WINDOWED = [s for s in SPECS if s.model.leading_axes]
Sizes = tuple[int, ...]


def _rank_sizes(spec: Any) -> Sizes:
    """The Sizes of the warm-up example's tensor that sets DimensionCount."""
    name = spec.model.rank_tensors[0]
    if name in spec.warmup.inputs:
        return tuple(spec.warmup.inputs[name].sizes)
    return tuple(spec.warmup.descriptor[name]["Sizes"])


def _case(
    spec: Any, reshape: Callable[[Sizes], Sizes]
) -> tuple[dict[str, Any], dict[str, TensorDesc]]:
    """The warm-up example with that tensor's Sizes replaced by `reshape(Sizes)`."""
    name = spec.model.rank_tensors[0]
    descriptor, inputs = dict(spec.warmup.descriptor), dict(spec.warmup.inputs)
    if name in inputs:
        inputs[name] = inputs[name].model_copy(update={"sizes": reshape(inputs[name].sizes)})
    else:
        descriptor[name] = {**descriptor[name], "Sizes": list(reshape(_rank_sizes(spec)))}
    return descriptor, inputs


def _errors(descriptor: dict[str, Any], inputs: dict[str, TensorDesc]) -> list[Any]:
    with pytest.raises(DescriptorError) as info:
        resolve(descriptor, inputs)
    return info.value.errors


def _arrays(spec: Any) -> list[str]:
    return [wire_name(a) for a in spec.model.dimension_arrays]


@pytest.mark.parametrize("spec", WINDOWED, ids=lambda s: s.type)
def test_a_plain_image_is_told_the_batch_and_channel_layout(spec: Any) -> None:
    """An [H, W] image where { BatchCount, ChannelCount, H, W } is expected: the error is at the
    tensor's Sizes (the user set no DimensionCount), quotes the layout and shows the fix."""
    model, name = spec.model, spec.model.rank_tensors[0]
    spatial = _rank_sizes(spec)[model.leading_axes :]
    errors = _errors(*_case(spec, lambda sizes: sizes[model.leading_axes :]))
    assert [tuple(e["loc"]) for e in errors] == [(name, "Sizes")]
    msg = errors[0]["msg"]
    assert f"{spec.type}'s {name} is {model.tensor_layouts[name]}" in msg
    assert "DimensionCount" not in msg
    assert f"Sizes {[1] * model.leading_axes + list(spatial)}" in msg


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.type)
def test_arrays_longer_than_the_tensor_name_the_array_and_the_layout(spec: Any) -> None:
    """The tensor has one dimension fewer than the arrays have entries: the error is at the
    array DimensionCount was taken from, and quotes the tensor's layout."""
    descriptor, inputs = _case(spec, lambda sizes: sizes[:-1])
    if not set(_arrays(spec)) & set(descriptor):
        dims = len(_rank_sizes(spec)) - spec.model.leading_axes
        descriptor["Strides"] = [1] * dims
    field = next(a for a in _arrays(spec) if a in descriptor)
    errors = _errors(descriptor, inputs)
    assert [tuple(e["loc"]) for e in errors] == [(field,)]
    name = spec.model.rank_tensors[0]
    assert errors[0]["msg"].startswith(f"{field} has ")
    assert spec.model.tensor_layouts[name] in errors[0]["msg"]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.type)
def test_a_dimension_count_the_user_gave_is_named(spec: Any) -> None:
    descriptor, inputs = _case(spec, lambda sizes: sizes[:-1])
    descriptor["DimensionCount"] = len(_rank_sizes(spec)) - spec.model.leading_axes
    errors = _errors(descriptor, inputs)
    assert [tuple(e["loc"]) for e in errors] == [("DimensionCount",)]
    assert spec.model.tensor_layouts[spec.model.rank_tensors[0]] in errors[0]["msg"]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.type)
def test_every_tensor_has_a_layout_in_the_schema(spec: Any) -> None:
    model = spec.model
    assert set(model.tensor_layouts) == {
        *model.input_names, *model.optional_input_names, "OutputTensor"
    }  # fmt: skip
    schema = model.model_json_schema(by_alias=True)
    for name, layout in model.tensor_layouts.items():
        assert schema["properties"][name]["description"] == layout
        assert f"{name}: {layout}" in schema["description"]


def test_the_readme_table_is_the_declared_layouts() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    rows = re.findall(r"^\| ([A-Z_]+) \| (\d+)–(\d+) \| (\w+) \| `(.+)` \|$", readme, re.M)
    declared = [
        (t, str(s.model.dimension_count_range[0]), str(s.model.dimension_count_range[1]), n, lay)
        for t, s in OPERATORS.items()
        for n, lay in s.model.tensor_layouts.items()
    ]
    assert rows == declared
