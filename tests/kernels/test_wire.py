"""The tensor codec without a server: extents, layouts, payloads, limits, framing, encoding."""

from __future__ import annotations

import base64
import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dmlserve.kernels import DescriptorError, LimitExceededError
from dmlserve.kernels.dtypes import DataType
from dmlserve.kernels.wire import (
    BinarySection,
    FramingError,
    buffer_extent,
    check_layout,
    decode_tensor,
    encode_payload,
    encode_tensor,
    packed_bytes,
    parse_header_length,
    split_framed,
)


def _extent_by_enumeration(sizes: list[int], strides: list[int]) -> int:
    """The oracle: every addressed offset, highest minus lowest plus one."""
    offsets = [
        sum(i * s for i, s in zip(index, strides, strict=True))
        for index in itertools.product(*(range(n) for n in sizes))
    ]
    return max(offsets) - min(offsets) + 1 if offsets else 0


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(-7, 7)), min_size=1, max_size=4))
def test_buffer_extent_is_the_addressed_span(dims: list[tuple[int, int]]) -> None:
    sizes, strides = [n for n, _ in dims], [s for _, s in dims]
    assert buffer_extent(sizes, strides) == _extent_by_enumeration(sizes, strides)


def test_buffer_extent_without_strides_is_the_element_count() -> None:
    assert buffer_extent([2, 3, 4], None) == 24
    assert buffer_extent([2, 3, 4], [12, 4, 1]) == 24
    assert buffer_extent([2, 3, 4], [0, 0, 1]) == 4  # a broadcast row


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        (("BFLOAT16", [2], None), "t.DataType"),
        (("INT8", "2", None), "t.Sizes"),
        (("INT8", [2.0], None), "t.Sizes"),
        (("INT8", [1] * 9, None), "t.Sizes"),
        (("INT8", [], None), "t.Sizes"),
        (("INT8", [2, 0], None), "t.Sizes"),
        (("INT8", [2, 2], [1]), "t.Strides"),
        (("INT8", [2, 2], [2, -1]), "t.Strides"),
        (("INT8", [2, 2], "x"), "t.Strides"),
    ],
)
def test_layout_rules_name_the_field(fields: tuple, where: str) -> None:
    with pytest.raises(DescriptorError) as err:
        check_layout(*fields, loc=("t",))
    assert str(err.value).startswith(where)
    assert err.value.errors[0]["loc"][:2] == tuple(where.split("."))


def test_layout_limits_are_checked_on_the_logical_size_and_the_extent() -> None:
    with pytest.raises(LimitExceededError) as err:
        check_layout("FLOAT32", [10**9, 10**9], None, ("t",), max_tensor_bytes=1 << 30)
    assert err.value.limit_name == "max_tensor_bytes" and err.value.what == "tensor t"
    # 4 logical elements, but strides that address 4001 of them.
    with pytest.raises(LimitExceededError, match="buffer of t"):
        check_layout("FLOAT32", [2, 2], [2000, 1], ("t",), max_tensor_bytes=1000)
    layout = check_layout("DML_TENSOR_DATA_TYPE_INT16", (2, 3), [0, 1])
    assert layout.data_type == DataType.INT16 and layout.extent == 3 and layout.nbytes == 12


def _decode(**kwargs: object) -> tuple:
    fields = {"data_type": "INT16", "sizes": [2, 3], "strides": [4, 1], **kwargs}
    return decode_tensor(
        fields.pop("data_type"), fields.pop("sizes"), fields.pop("strides"), **fields
    )


@pytest.mark.parametrize("tail", [0, 1, 2, 7])
def test_a_strided_buffer_may_be_longer_never_shorter(tail: int) -> None:
    buffer = np.arange(7 + tail, dtype="<i2")  # extent 7: rows at a pitch of 4
    expected = np.array([[0, 1, 2], [4, 5, 6]], np.int16)
    raw = buffer.tobytes()
    for t, enc in (
        _decode(data=buffer.tolist()),
        _decode(b64=base64.b64encode(raw).decode()),
        _decode(binary_size=len(raw), section=BinarySection(raw)),
    ):
        np.testing.assert_array_equal(t.view(), expected)
        assert t.buffer.size == 7  # cut to the extent
        assert enc in ("json", "b64", "binary")
    short = buffer[:6]
    with pytest.raises(DescriptorError, match="address 7 elements, but data has 6"):
        _decode(data=short.tolist())
    with pytest.raises(DescriptorError, match="address 14 bytes of INT16, but 12"):
        _decode(b64=base64.b64encode(short.tobytes()).decode())
    with pytest.raises(FramingError, match="address 14 bytes of INT16, but 12"):
        _decode(binary_size=12, section=BinarySection(short.tobytes()))


def test_a_packed_buffer_is_exact_up_to_four_byte_rounding() -> None:
    for sent, ok in ((3, True), (4, True), (5, False)):
        raw = bytes(range(sent))
        if ok:
            t, _ = decode_tensor("UINT8", [3], b64=base64.b64encode(raw).decode())
            assert t.view().tolist() == [0, 1, 2]
        else:
            with pytest.raises(DescriptorError, match="need 3 bytes of UINT8, but 5"):
                decode_tensor("UINT8", [3], b64=base64.b64encode(raw).decode())
    with pytest.raises(DescriptorError, match="need 3 elements, but data has 4"):
        decode_tensor("UINT8", [3], data=[1, 2, 3, 4])


def test_every_sent_byte_counts_against_the_limit() -> None:
    long = np.zeros(40, "<i2")  # 80 bytes for an extent of 14
    raw = long.tobytes()
    payloads = {
        "data": lambda: {"data": long.tolist()},
        "b64": lambda: {"b64": base64.b64encode(raw).decode()},
        "binary": lambda: {"binary_size": len(raw), "section": BinarySection(raw)},
    }
    for payload in payloads.values():
        with pytest.raises(LimitExceededError) as err:
            _decode(max_tensor_bytes=79, **payload())
        assert err.value.actual == 80
        t, _ = _decode(max_tensor_bytes=80, **payload())
        assert t.view().shape == (2, 3)


def test_binary_payloads_are_views_of_the_received_bytes() -> None:
    raw = bytearray(np.arange(6, dtype="<f4").tobytes())
    t, enc = decode_tensor(
        "FLOAT32", [2, 3], binary_size=len(raw), section=BinarySection(memoryview(raw))
    )
    assert enc == "binary" and np.shares_memory(t.buffer, np.frombuffer(raw, np.uint8))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "give exactly one payload: data, b64 or parameters.binary_data_size"),
        ({"data": [1], "b64": "AQ=="}, "exactly one payload"),
        ({"b64": "AQ==", "accepts": ("json", "binary")}, "data or parameters.binary_data_size"),
        ({"binary_size": -1}, "binary_data_size: must be a non-negative integer"),
        ({"binary_size": True}, "binary_data_size: must be a non-negative integer"),
        ({"b64": "%%%"}, "not valid base64"),
        ({"b64": 7}, "b64 must be a string"),
        ({"data": "1"}, "JSON array of numbers"),
        ({"data": ["a"]}, "numbers only"),
        ({"data": [[1], [2, 3]]}, "rectangular"),
    ],
)
def test_payload_rules(kwargs: dict, message: str) -> None:
    with pytest.raises(DescriptorError, match=message):
        decode_tensor("INT8", [1], loc=("inputs", "x"), **kwargs)


def test_binary_data_outside_a_framed_body_is_a_framing_error() -> None:
    with pytest.raises(FramingError, match="not binary framed"):
        decode_tensor("INT8", [1], binary_size=1, section=BinarySection(framed=False))
    with pytest.raises(FramingError, match="need 2 bytes after the JSON header, the body has 1"):
        decode_tensor("INT8", [2], binary_size=2, section=BinarySection(b"\x01"))


@pytest.mark.parametrize(
    ("dt", "values", "ok"),
    [
        ("INT64", [-(2**63), 2**63 - 1], True),
        ("UINT64", [2**64 - 1], True),
        ("UINT64", [2**64], False),
        ("INT8", [127, -128.0], True),
        ("INT8", [128], False),
        ("INT8", [1.5], False),
        ("INT8", [1e300], False),
        ("FLOAT32", [3.5e38], False),
        ("FLOAT64", [2**53], True),
        ("FLOAT64", [2**53 + 1], False),
        ("FLOAT16", [65504.0, -0.5], True),
        # A JSON parser reads integer literals past 64 bits as rounded floats: refused.
        ("UINT64", [1.8446744073709552e19], False),
        ("INT64", [-9.223372036854776e18], False),
        ("INT64", [2**63 - 1, 1.0], True),  # exact beside a float
        ("INT32", [True], False),  # a boolean is not a number
        ("FLOAT32", [1, False], False),
    ],
)
def test_json_numbers_stay_exact_or_are_refused(dt: str, values: list, ok: bool) -> None:
    if not ok:
        with pytest.raises(DescriptorError):
            decode_tensor(dt, [len(values)], data=values)
        return
    t, _ = decode_tensor(dt, [len(values)], data=values)
    assert t.view().tolist() == values  # Python ints and floats, compared exactly


@pytest.mark.parametrize("dt", [DataType.FLOAT16, DataType.FLOAT32])
def test_floats_near_the_largest_value_round_or_are_refused_at_their_element(
    dt: DataType,
) -> None:
    largest = float(np.finfo(dt.numpy).max)
    rounds_down = float(np.nextafter(largest, np.inf))  # past it, nearer to it than to inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning on any path
        t, _ = decode_tensor(dt, [5], data=[largest, -rounds_down, np.inf, -np.inf, np.nan])
        got = t.view().astype(np.float64)
        assert got[:4].tolist() == [largest, -largest, np.inf, -np.inf] and np.isnan(got[4])
        with pytest.raises(DescriptorError, match="outside the range") as err:
            decode_tensor(dt, [3], data=[0.5, np.nan, -largest * 2], loc=("inputs", "x"))
    assert err.value.errors[0]["loc"] == ("inputs", "x", "data", 2)


@given(
    st.sampled_from([DataType.FLOAT16, DataType.FLOAT32]),
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), max_size=20),
)
def test_float_data_is_each_double_rounded_once_or_refused_where_it_overflows(
    dt: DataType, values: list[float]
) -> None:
    wide = np.asarray(values, np.float64)
    with np.errstate(over="ignore"):
        want = wide.astype(dt.numpy)
    overflows = np.isfinite(wide) & ~np.isfinite(want)
    if overflows.any():
        with pytest.raises(DescriptorError, match="outside the range") as err:
            decode_tensor(dt, [len(values)], data=values)
        assert err.value.errors[0]["loc"][-1] == int(np.argmax(overflows))
        return
    if not values:
        return  # a zero size is refused before the data is read
    t, _ = decode_tensor(dt, [len(values)], data=values)
    assert t.buffer.tobytes() == want.tobytes()


def test_nested_data_is_read_row_major() -> None:
    t, _ = decode_tensor("INT32", [2, 2], data=[[1, 2], [3, 4]])
    assert t.view().tolist() == [[1, 2], [3, 4]]


def test_the_binary_section_is_read_in_order_and_wholly() -> None:
    section = BinarySection(b"abcdef")
    assert bytes(section.take(2, ("x",))) == b"ab"
    assert bytes(section.take(3, ("y",))) == b"cde"
    with pytest.raises(FramingError, match="1 bytes after the last binary tensor"):
        section.finish()
    BinarySection(framed=False).finish()  # nothing to account for


def test_framing_header() -> None:
    assert parse_header_length(" 12 ") == 12
    for bad in ("", "x", "-1", "1e3", "²", "1" * 19):
        with pytest.raises(FramingError, match="must be a byte count"):
            parse_header_length(bad)
    header, rest = split_framed(memoryview(b"{}abc"), 2)
    assert bytes(header) == b"{}" and bytes(rest) == b"abc"
    with pytest.raises(FramingError, match="is 6 but the body has only 5 bytes"):
        split_framed(memoryview(b"{}abc"), 6)


@pytest.mark.parametrize("encoding", ["json", "b64", "binary"])
@pytest.mark.parametrize("dt", list(DataType), ids=str)
def test_encode_then_decode_is_the_identity(dt: DataType, encoding: str) -> None:
    rng = np.random.default_rng(5)
    if dt.is_integer:
        info = np.iinfo(dt.numpy)
        x = rng.integers(info.min, info.max, (2, 3, 4), dtype=dt.numpy, endpoint=True)
    else:
        x = rng.standard_normal((2, 3, 4)).astype(dt.numpy)
    tensor, chunk = encode_tensor(x, encoding)  # type: ignore[arg-type]
    assert tensor["DataType"] == dt.value and tensor["Sizes"] == [2, 3, 4]
    data = tensor.get("data")
    t, decoded_as = decode_tensor(
        tensor["DataType"], tensor["Sizes"], tensor.get("Strides"),
        data=data.tolist() if data is not None else None, b64=tensor.get("b64"),
        binary_size=tensor.get("parameters", {}).get("binary_data_size"),
        section=BinarySection(chunk if chunk is not None else b""),
    )  # fmt: skip
    assert decoded_as == encoding
    np.testing.assert_array_equal(t.view(), x, strict=True)


def test_compact_encoding_sends_overlapping_views_with_strides() -> None:
    row = np.arange(5, dtype=np.int16)
    tensor, chunk = encode_tensor(np.broadcast_to(row, (3, 4, 5)), "binary", compact=True)
    assert tensor["Strides"] == [0, 0, 1] and chunk is not None and bytes(chunk) == row.tobytes()
    tensor, chunk = encode_tensor(np.broadcast_to(row, (3, 4, 5)), "binary")
    assert "Strides" not in tensor and chunk is not None and chunk.nbytes == 120
    transposed = np.arange(6, dtype=np.int8).reshape(2, 3).T  # no overlap: packed
    tensor, chunk = encode_tensor(transposed, "binary", compact=True)
    assert "Strides" not in tensor and bytes(chunk or b"") == transposed.tobytes()


def test_big_endian_arrays_go_out_little_endian() -> None:
    x = np.arange(3, dtype=">i4")
    assert bytes(packed_bytes(x)) == np.arange(3, dtype="<i4").tobytes()
    fields, chunk = encode_payload(x, "json")
    assert fields["data"].tolist() == [0, 1, 2] and fields["data"].dtype.isnative
    assert chunk is None
    fields, chunk = encode_payload(x, "binary")
    assert bytes(chunk or b"") == np.arange(3, dtype="<i4").tobytes()
