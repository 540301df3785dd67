"""Whatever a client sends, the descriptor layer answers with DescriptorError or a result."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmlserve.kernels import DescriptorError, TensorDesc, resolve
from dmlserve.kernels.dtypes import DataType

FIELDS = [
    "DimensionCount", "WindowSizes", "WindowSize", "Strides", "Dilations", "StartPadding",
    "EndPadding", "PaddingMode", "PaddingValue", "PaddingValueDataType", "IncludePadding",
    "GroupCount", "InputTensor", "OutputTensor", "FilterTensor", "InputZeroPointTensor",
    "FilterZeroPointTensor", "Unknown",
]  # fmt: skip
TYPES = ["FOLD", "UNFOLD", "PADDING", "AVERAGE_POOLING", "CONVOLUTION_INTEGER", "DML_OPERATOR_FOLD"]

small_ints = st.integers(min_value=-3, max_value=9)
json_scalars = st.one_of(
    st.none(), st.booleans(), small_ints, st.floats(allow_nan=False), st.text(max_size=8),
    st.sampled_from([d.value for d in DataType] + ["REFLECTION", "WRAP", "BOGUS"]),
    st.integers(min_value=-(2**70), max_value=2**70),
)  # fmt: skip
int_lists = st.lists(small_ints, min_size=0, max_size=7)
tensor_json = st.fixed_dictionaries(
    {"DataType": st.sampled_from([d.value for d in DataType] + ["BOOL"]), "Sizes": int_lists},
    optional={"Strides": int_lists},
)
values = st.one_of(json_scalars, int_lists, tensor_json)
operators = st.builds(
    lambda t, fields: {"type": t, **fields},
    st.sampled_from(TYPES),
    st.dictionaries(st.sampled_from(FIELDS), values, max_size=8),
)
tensors = st.dictionaries(
    st.sampled_from(["InputTensor", "FilterTensor", "InputZeroPointTensor", "Other"]),
    st.builds(
        lambda dt, sizes: TensorDesc(data_type=dt, sizes=sizes),
        st.sampled_from(list(DataType)),
        st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=6).map(tuple),
    ),
    max_size=3,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operators, tensors, st.booleans())
def test_resolve_raises_only_descriptor_errors(
    operator: dict[str, Any], inputs: dict[str, TensorDesc], wildcard: bool
) -> None:
    try:
        resolved = resolve(operator, inputs, allow_batch_wildcard=wildcard)
    except DescriptorError as exc:
        assert exc.errors
        for item in exc.errors:
            assert isinstance(item["msg"], str) and item["msg"]
    else:
        assert resolved.output_tensor is not None
