"""Descriptor parsing, defaults, shape inference and every DirectML rule's error."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dmlserve import kernels
from dmlserve.kernels import DataType, DescriptorError, TensorDesc, parse_operator, resolve
from tests.seed_examples import SEED_EXAMPLES


def desc(dtype: str, *sizes: int) -> TensorDesc:
    return TensorDesc(data_type=dtype, sizes=sizes)


def errors_of(op: Any, tensors: dict[str, TensorDesc] | None = None, **kw: Any) -> list[Any]:
    with pytest.raises(DescriptorError) as info:
        resolve(op, tensors, **kw)
    return info.value.errors


def locs(errors: list[Any]) -> list[tuple[Any, ...]]:
    return [tuple(e["loc"]) for e in errors]


# --- seed examples through the whole descriptor layer ------------------------------------


@pytest.mark.parametrize("example", SEED_EXAMPLES, ids=lambda e: e.name)
def test_seed_example_descriptor_resolves_to_its_output(example: Any) -> None:
    resolved = resolve(example.operator)
    assert resolved.output_tensor.sizes == example.expected.shape
    out = kernels.execute(example.operator, example.inputs, backend="numpy")["OutputTensor"]
    np.testing.assert_array_equal(out, example.expected, strict=True)


@pytest.mark.parametrize("example", SEED_EXAMPLES, ids=lambda e: e.name)
def test_seed_example_without_tensor_descriptors(example: Any) -> None:
    bare = {k: v for k, v in example.operator.items() if not k.endswith("Tensor")}
    if example.operator["type"] == "FOLD":  # FOLD's output size is known only from OutputTensor
        bare["OutputTensor"] = example.operator["OutputTensor"]
    out = kernels.execute(bare, example.inputs)["OutputTensor"]
    np.testing.assert_array_equal(out, example.expected, strict=True)


# --- names and spellings -------------------------------------------------------------------


def test_prefixed_enum_spellings_are_accepted_and_short_names_returned() -> None:
    op = parse_operator(
        {
            "type": "DML_OPERATOR_PADDING",
            "PaddingMode": "DML_PADDING_MODE_WRAP",
            "InputTensor": {"DataType": "DML_TENSOR_DATA_TYPE_INT8", "Sizes": [2, 3]},
            "StartPadding": [1, 1],
            "EndPadding": [0, 2],
        }
    )
    wire = resolve(op).model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["type"] == "PADDING"
    assert wire["PaddingMode"] == "WRAP"
    assert wire["InputTensor"]["DataType"] == "INT8"
    assert wire["OutputTensor"] == {"DataType": "INT8", "Sizes": [3, 6]}


def test_snake_case_construction_equals_wire_parsing() -> None:
    by_name = kernels.UnfoldOperator(window_sizes=(2, 2), strides=(2, 2))
    by_wire = parse_operator({"type": "UNFOLD", "WindowSizes": [2, 2], "Strides": [2, 2]})
    assert by_name == by_wire


def test_defaults_are_filled_by_resolve() -> None:
    op = resolve(
        {"type": "UNFOLD", "WindowSizes": [2, 3]}, {"InputTensor": desc("FLOAT32", 1, 2, 5, 6)}
    )
    assert op.strides == (1, 1) and op.dilations == (1, 1)
    assert op.start_padding == (0, 0) and op.end_padding == (0, 0)
    assert op.dimension_count == 2
    assert op.output_tensor == desc("FLOAT32", 1, 12, 16)


@pytest.mark.parametrize(
    ("operator", "loc"),
    [
        ({"type": "NOPE"}, ("type",)),
        ({"WindowSizes": [1]}, ("type",)),
        ({"type": "UNFOLD"}, ("WindowSizes",)),
        ({"type": "UNFOLD", "WindowSizes": [2], "Windowsizes": [2]}, ("Windowsizes",)),
        ({"type": "PADDING", "PaddingMode": "MIRROR"}, ("PaddingMode",)),
        ({"type": "UNFOLD", "WindowSizes": [2, 0]}, ("WindowSizes", 1)),
        ({"type": "UNFOLD", "WindowSizes": [2, 2], "Strides": [1]}, ("Strides",)),
        ({"type": "FOLD", "WindowSizes": [1] * 7}, ("DimensionCount",)),
        ({"type": "UNFOLD", "WindowSizes": [2], "DimensionCount": 2}, ("WindowSizes",)),
        ({"type": "PADDING", "StartPadding": [-1], "EndPadding": [0]}, ("StartPadding", 0)),
        ({"type": "AVERAGE_POOLING", "WindowSize": [2, 2, 2, 2]}, ("DimensionCount",)),
        ({"type": "CONVOLUTION_INTEGER", "GroupCount": 0}, ("GroupCount",)),
        (
            {"type": "PADDING", "InputTensor": {"DataType": "BOOL", "Sizes": [1]}},
            ("InputTensor", "DataType"),
        ),
        (
            {"type": "PADDING", "InputTensor": {"DataType": "INT8", "Sizes": [0]}},
            ("InputTensor", "Sizes"),
        ),
    ],
)
def test_structural_errors_name_the_field(operator: dict[str, Any], loc: tuple[Any, ...]) -> None:
    with pytest.raises(DescriptorError) as info:
        parse_operator(operator)
    assert loc in locs(info.value.errors), info.value.errors


# --- FOLD / UNFOLD -------------------------------------------------------------------------


def test_unfold_window_must_fit_padded_input() -> None:
    errs = errors_of(
        {"type": "UNFOLD", "WindowSizes": [3, 4], "Dilations": [1, 2]},
        {"InputTensor": desc("FLOAT32", 1, 1, 5, 6)},
    )
    assert locs(errs) == [("WindowSizes", 1)]
    assert "Dilations[1]" in errs[0]["msg"] and "7" in errs[0]["msg"]


def test_fold_needs_output_tensor() -> None:
    errs = errors_of(
        {"type": "FOLD", "WindowSizes": [2]}, {"InputTensor": desc("FLOAT32", 1, 2, 3)}
    )
    assert locs(errs) == [("OutputTensor",)]


@pytest.mark.parametrize(
    ("input_sizes", "loc"),
    [
        ((1, 9, 4, 1), ("InputTensor", "Sizes")),  # column tensor is 3-D
        ((2, 9, 4), ("InputTensor", "Sizes", 0)),  # N equal
        ((1, 8, 4), ("InputTensor", "Sizes", 1)),  # C * prod(K)
        ((1, 9, 5), ("InputTensor", "Sizes", 2)),  # BlockCount
    ],
)
def test_fold_column_rules(input_sizes: tuple[int, ...], loc: tuple[Any, ...]) -> None:
    op = {
        "type": "FOLD",
        "WindowSizes": [3, 3],
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 4]},
    }
    assert loc in locs(errors_of(op, {"InputTensor": desc("FLOAT32", *input_sizes)}))


def test_fold_data_types_must_match() -> None:
    op = {
        "type": "FOLD",
        "WindowSizes": [3, 3],
        "OutputTensor": {"DataType": "INT32", "Sizes": [1, 1, 4, 4]},
    }
    assert ("OutputTensor", "DataType") in locs(
        errors_of(op, {"InputTensor": desc("FLOAT32", 1, 9, 4)})
    )


def test_given_output_tensor_must_equal_inferred() -> None:
    op = {
        "type": "UNFOLD",
        "WindowSizes": [3, 3],
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 9, 8]},
    }
    errs = errors_of(op, {"InputTensor": desc("FLOAT32", 1, 1, 5, 5)})
    assert locs(errs) == [("OutputTensor", "Sizes")]
    assert "[1, 9, 9]" in errs[0]["msg"]


def test_six_spatial_dimensions_unfold() -> None:
    op = resolve(
        {"type": "UNFOLD", "WindowSizes": [2] * 6}, {"InputTensor": desc("INT16", 1, 1, *([3] * 6))}
    )
    assert op.output_tensor.sizes == (1, 64, 64)


# --- PADDING ---------------------------------------------------------------------------------


def test_padding_dimension_count_must_equal_rank() -> None:
    errs = errors_of(
        {"type": "PADDING", "StartPadding": [1], "EndPadding": [1]},
        {"InputTensor": desc("INT8", 2, 2)},
    )
    assert locs(errs) == [("DimensionCount",)]


@pytest.mark.parametrize(
    ("dtype", "value", "typed"),
    [
        ("UINT8", -1, False),
        ("UINT8", 256, False),
        ("INT8", 300, False),
        ("INT8", -129, True),
        ("UINT16", 65535.5, True),
        ("FLOAT16", 70000.0, False),
        ("INT32", 1e39, False),
        ("UINT64", 2**64, True),
    ],
)
def test_out_of_range_padding_value_is_refused(dtype: str, value: float, typed: bool) -> None:
    op: dict[str, Any] = {
        "type": "PADDING",
        "StartPadding": [1],
        "EndPadding": [1],
        "PaddingValue": value,
    }
    if typed:
        op["PaddingValueDataType"] = dtype
    assert locs(errors_of(op, {"InputTensor": desc(dtype, 3)})) == [("PaddingValue",)]


@pytest.mark.parametrize(
    ("dtype", "value", "typed", "expected"),
    [
        ("INT32", 10.6, False, 10),
        ("INT32", -7.9, False, -7),
        ("INT64", 123456789, False, 123456792),  # a FLOAT32 cannot hold it
        ("INT64", 123456789, True, 123456789),  # PADDING1: exact
        ("UINT64", 2**64 - 1, True, 2**64 - 1),
        ("INT64", -(2**63), True, -(2**63)),
        ("FLOAT64", 0.1, False, float(np.float32(0.1))),
        ("FLOAT64", 0.1, True, 0.1),
        ("FLOAT16", 0.1, False, float(np.float16(0.1))),
    ],
)
def test_padding_value_conversion(dtype: str, value: float, typed: bool, expected: float) -> None:
    op: dict[str, Any] = {
        "type": "PADDING",
        "StartPadding": [1],
        "EndPadding": [0],
        "PaddingValue": value,
    }
    if typed:
        op["PaddingValueDataType"] = dtype
    x = np.ones(2, dtype=DataType(dtype).numpy)
    out = kernels.execute(op, {"InputTensor": x})["OutputTensor"]
    assert out.dtype == x.dtype
    assert out[0] == DataType(dtype).numpy.type(expected)


def test_padding_value_data_type_must_equal_tensor_type() -> None:
    op = {
        "type": "PADDING",
        "StartPadding": [1],
        "EndPadding": [1],
        "PaddingValueDataType": "INT16",
    }
    assert locs(errors_of(op, {"InputTensor": desc("INT8", 3)})) == [("PaddingValueDataType",)]


def test_padding_value_is_ignored_outside_constant_mode() -> None:
    op = {
        "type": "PADDING",
        "PaddingMode": "EDGE",
        "StartPadding": [1],
        "EndPadding": [1],
        "PaddingValue": -5,
    }
    assert resolve(op, {"InputTensor": desc("UINT8", 3)}).output_tensor.sizes == (5,)


# --- AVERAGE_POOLING -------------------------------------------------------------------------


def test_pooling_output_size_uses_the_dilated_window() -> None:
    op = {"type": "AVERAGE_POOLING", "WindowSize": [3], "Dilations": [2], "Strides": [2]}
    assert resolve(op, {"InputTensor": desc("FLOAT32", 1, 1, 11)}).output_tensor.sizes == (1, 1, 4)


@pytest.mark.parametrize("dtype", ["INT8", "FLOAT64", "INT32"])
def test_pooling_data_types(dtype: str) -> None:
    op = {"type": "AVERAGE_POOLING", "WindowSize": [2, 2]}
    assert ("InputTensor", "DataType") in locs(
        errors_of(op, {"InputTensor": desc(dtype, 1, 1, 4, 4)})
    )


@pytest.mark.parametrize(
    ("size", "window", "stride", "dilation", "start", "end"),
    [
        (4, 2, 1, 1, 2, 0),  # first window wholly before the input
        (4, 2, 3, 1, 0, 5),  # last window starts past the input
        (2, 2, 1, 5, 2, 3),  # dilation jumps over the input
    ],
)
def test_window_wholly_in_padding_is_refused_without_include_padding(
    size: int, window: int, stride: int, dilation: int, start: int, end: int
) -> None:
    op = {
        "type": "AVERAGE_POOLING",
        "WindowSize": [window],
        "Strides": [stride],
        "Dilations": [dilation],
        "StartPadding": [start],
        "EndPadding": [end],
    }
    assert locs(errors_of(op, {"InputTensor": desc("FLOAT32", 1, 1, size)})) == [
        ("IncludePadding",)
    ]
    with_padding = resolve(
        {**op, "IncludePadding": True}, {"InputTensor": desc("FLOAT32", 1, 1, size)}
    )
    assert with_padding.output_tensor is not None


def test_window_in_padding_rule_matches_brute_force() -> None:
    from dmlserve.kernels.geometry import sliding_count
    from dmlserve.kernels.operators.average_pooling import first_window_in_padding

    for size in range(1, 6):
        for window in range(1, 4):
            for stride in range(1, 4):
                for dilation in range(1, 8):
                    for start in range(0, 8):
                        for end in range(0, 6):
                            n = sliding_count(size, window, stride, dilation, start, end)
                            if n is None:
                                continue
                            bad = [
                                o
                                for o in range(n)
                                if not any(
                                    0 <= o * stride - start + t * dilation < size
                                    for t in range(window)
                                )
                            ]
                            got = first_window_in_padding(size, window, stride, dilation, start, n)
                            assert (got is None) == (not bad), (
                                size,
                                window,
                                stride,
                                dilation,
                                start,
                                end,
                            )


# --- CONVOLUTION_INTEGER -----------------------------------------------------------------------


def conv_tensors(
    x: tuple[int, ...], w: tuple[int, ...], xt: str = "UINT8", wt: str = "INT8"
) -> dict[str, TensorDesc]:
    return {"InputTensor": desc(xt, *x), "FilterTensor": desc(wt, *w)}


def test_convolution_output_shape_and_type() -> None:
    op = {
        "type": "CONVOLUTION_INTEGER",
        "Strides": [2, 1],
        "StartPadding": [1, 0],
        "EndPadding": [1, 2],
        "GroupCount": 2,
    }
    out = resolve(op, conv_tensors((2, 4, 7, 5), (6, 2, 3, 3))).output_tensor
    assert out == desc("INT32", 2, 6, 4, 5)


def test_one_dimensional_convolution() -> None:
    out = resolve({"type": "CONVOLUTION_INTEGER"}, conv_tensors((1, 3, 9), (4, 3, 2))).output_tensor
    assert out.sizes == (1, 4, 8)


@pytest.mark.parametrize(
    ("tensors", "extra", "loc"),
    [
        (conv_tensors((1, 4, 5, 5), (4, 3, 3, 3)), {}, ("FilterTensor", "Sizes", 1)),
        (conv_tensors((1, 4, 5, 5), (3, 2, 3, 3)), {"GroupCount": 2}, ("GroupCount",)),
        (conv_tensors((1, 4, 5, 5), (4, 4, 3, 3), xt="INT16"), {}, ("InputTensor", "DataType")),
        (conv_tensors((1, 4, 5, 5), (4, 4, 3), xt="INT8"), {}, ("FilterTensor", "Sizes")),
        (conv_tensors((1, 4, 5, 5, 5), (4, 4, 3, 3, 3)), {}, ("DimensionCount",)),
        (conv_tensors((1, 4, 2, 2), (4, 4, 3, 3)), {}, ("FilterTensor.Sizes[2:]", 0)),
        (
            {
                **conv_tensors((1, 4, 5, 5), (4, 4, 3, 3)),
                "InputZeroPointTensor": desc("INT8", 1, 1, 1, 1),
            },
            {},
            ("InputZeroPointTensor", "DataType"),
        ),
        (
            {
                **conv_tensors((1, 4, 5, 5), (4, 4, 3, 3)),
                "InputZeroPointTensor": desc("UINT8", 1, 2, 1, 1),
            },
            {},
            ("InputZeroPointTensor", "Sizes"),
        ),
        (
            {
                **conv_tensors((1, 4, 5, 5), (4, 4, 3, 3)),
                "FilterZeroPointTensor": desc("INT8", 1, 3, 1, 1),
            },
            {},
            ("FilterZeroPointTensor", "Sizes"),
        ),
        (
            {
                **conv_tensors((1, 4, 5, 5), (4, 4, 3, 3)),
                "InputZeroPointTensor": desc("UINT8", 1, 1, 1, 1),
                "FilterZeroPointTensor": desc("INT8", 4),
            },
            {},
            ("FilterZeroPointTensor", "Sizes"),
        ),
    ],
)
def test_convolution_rules(
    tensors: dict[str, TensorDesc], extra: dict[str, Any], loc: tuple[Any, ...]
) -> None:
    assert loc in locs(errors_of({"type": "CONVOLUTION_INTEGER", **extra}, tensors))


def test_per_channel_filter_zero_point_shapes() -> None:
    for sizes in [(1, 4, 1, 1), (4,), (1, 4), (1, 1, 1, 1), (1,)]:
        tensors = {
            **conv_tensors((1, 4, 5, 5), (4, 4, 3, 3)),
            "FilterZeroPointTensor": desc("INT8", *sizes),
        }
        assert resolve({"type": "CONVOLUTION_INTEGER"}, tensors).output_tensor is not None


# --- tensors, batches, limits ------------------------------------------------------------------


def test_unknown_and_missing_input_tensors() -> None:
    errs = errors_of(
        {"type": "CONVOLUTION_INTEGER"},
        {"InputTensor": desc("INT8", 1, 1, 3, 3), "Bias": desc("INT8", 1)},
    )
    assert set(locs(errs)) == {("Bias",), ("FilterTensor",)}


def test_given_input_descriptor_must_agree_with_tensor() -> None:
    op = {
        "type": "UNFOLD",
        "WindowSizes": [2],
        "InputTensor": {"DataType": "INT8", "Sizes": [1, 1, 4]},
    }
    errs = errors_of(op, {"InputTensor": desc("UINT8", 1, 1, 5)})
    assert set(locs(errs)) == {("InputTensor", "DataType"), ("InputTensor", "Sizes")}


def test_variable_batch_only_when_registering_then_bound_at_execution() -> None:
    op = {
        "type": "UNFOLD",
        "WindowSizes": [2],
        "InputTensor": {"DataType": "INT8", "Sizes": [-1, 2, 4]},
    }
    assert locs(errors_of(op)) == [("InputTensor", "Sizes", 0)]
    registered = resolve(op, allow_batch_wildcard=True)
    assert registered.output_tensor.sizes == (-1, 4, 3)
    for batch in (1, 5):
        x = np.arange(batch * 8, dtype=np.int8).reshape(batch, 2, 4)
        out = kernels.execute(registered, {"InputTensor": x})["OutputTensor"]
        assert out.shape == (batch, 4, 3)


def test_filter_cannot_have_variable_batch() -> None:
    tensors = {"InputTensor": desc("INT8", 1, 1, 3, 3)}
    op = {
        "type": "CONVOLUTION_INTEGER",
        "FilterTensor": {"DataType": "INT8", "Sizes": [-1, 1, 1, 1]},
    }
    assert ("FilterTensor", "Sizes", 0) in locs(errors_of(op, tensors, allow_batch_wildcard=True))


def test_overlapping_output_strides_are_refused() -> None:
    op = {
        "type": "UNFOLD",
        "WindowSizes": [2],
        "OutputTensor": {"DataType": "INT8", "Sizes": [1, 2, 3], "Strides": [6, 0, 1]},
    }
    assert locs(errors_of(op, {"InputTensor": desc("INT8", 1, 1, 4)})) == [
        ("OutputTensor", "Strides")
    ]


def test_element_count_limit() -> None:
    op = {"type": "UNFOLD", "WindowSizes": [64, 64]}
    errs = errors_of(op, {"InputTensor": desc("INT8", 1, 1024, 2048, 2048)})
    assert ("OutputTensor", "Sizes") in locs(errs)


def test_output_bytes_limit_is_checked_before_allocation() -> None:
    x = np.broadcast_to(np.float32(1), (1, 4, 64, 64))  # a 4-byte buffer
    with pytest.raises(kernels.LimitExceededError) as info:
        kernels.execute(
            {"type": "UNFOLD", "WindowSizes": [8, 8]}, {"InputTensor": x}, max_output_bytes=1 << 20
        )
    assert info.value.limit_name == "max_output_bytes"
    assert info.value.actual == 4 * 4 * 64 * 57 * 57


def test_non_array_and_unsupported_dtype_inputs() -> None:
    with pytest.raises(DescriptorError) as info:
        kernels.execute({"type": "PADDING"}, {"InputTensor": np.zeros(3, dtype=bool)})
    assert locs(info.value.errors) == [("InputTensor", "DataType")]
    with pytest.raises(DescriptorError):
        kernels.execute({"type": "PADDING"}, {"InputTensor": [1, 2, 3]})


def test_select_backend() -> None:
    assert kernels.select_backend("numpy") == "numpy"
    assert kernels.select_backend("auto") in ("numpy", "cupy")
    with pytest.raises(kernels.BackendUnavailableError):
        kernels.select_backend("tpu")


def test_import_kernels_does_not_import_cupy_or_http() -> None:
    import subprocess
    import sys

    code = (
        "import dmlserve.kernels, sys; "
        "bad = {'cupy', 'fastapi', 'starlette', 'httpx'} & set(sys.modules); assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
