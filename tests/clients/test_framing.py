"""Tensor encoding and the binary framing, without a server: encode, then decode what was sent."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from dmlserve.clients._framing import (
    decode_outputs,
    decode_tensor,
    encode_body,
    encode_tensor,
    split_body,
    to_host_array,
)
from dmlserve.kernels.dtypes import DataType
from dmlserve.kernels.wire import BinarySection

ALL_DTYPES = [dt.numpy for dt in DataType]


def _round_trip(array: np.ndarray, encoding: str) -> tuple[dict, np.ndarray]:
    """Encode as a request would, frame it, split it as a server would, decode the tensor."""
    tensor, buffer = encode_tensor(array, encoding)  # type: ignore[arg-type]
    payload = {"outputs": {"OutputTensor": tensor}}
    body, headers = encode_body(payload, [buffer] if buffer is not None else [], encoding)  # type: ignore[arg-type]
    header, section = split_body(body, headers.get("Inference-Header-Content-Length"))
    return tensor, decode_outputs(header, section)["OutputTensor"]


def _values(dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(7)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("encoding", ["binary", "json"])
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_contiguous_round_trip_every_dtype(dtype: np.dtype, encoding: str) -> None:
    x = _values(dtype, (2, 3, 4))
    tensor, y = _round_trip(x, encoding)
    assert tensor["DataType"] == DataType[tensor["DataType"]].value
    assert tensor["Sizes"] == [2, 3, 4] and "Strides" not in tensor
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_array_equal(y, x)
    assert y.flags.c_contiguous and y.flags.writeable


def test_integer_extremes_are_bit_exact() -> None:
    x = np.array([np.iinfo(np.int64).min, -1, 0, np.iinfo(np.int64).max], dtype=np.int64)
    for encoding in ("binary", "json"):
        _, y = _round_trip(x, encoding)
        assert y.tolist() == x.tolist()


@pytest.mark.parametrize("encoding", ["binary", "json"])
def test_transposed_and_sliced_views_are_packed(encoding: str) -> None:
    base = _values(np.dtype(np.float32), (4, 6, 8))
    for view in (base.transpose(2, 0, 1), base[:, ::2, 1::3], base[::-1]):
        tensor, y = _round_trip(view, encoding)
        assert "Strides" not in tensor  # no overlap: packing costs no more bytes
        np.testing.assert_array_equal(y, view)


@pytest.mark.parametrize("encoding", ["binary", "json"])
def test_broadcast_view_is_sent_with_strides_over_the_minimal_buffer(encoding: str) -> None:
    row = np.arange(5, dtype=np.int16)
    view = np.broadcast_to(row, (3, 4, 5))
    tensor, y = _round_trip(view, encoding)
    assert tensor["Sizes"] == [3, 4, 5]
    assert tensor["Strides"] == [0, 0, 1]
    if encoding == "binary":
        assert tensor["parameters"]["binary_data_size"] == row.nbytes
    np.testing.assert_array_equal(y, view)


def test_sliding_window_view_overlaps_and_round_trips() -> None:
    x = np.arange(10, dtype=np.uint8)
    view = np.lib.stride_tricks.sliding_window_view(x, 4)  # (7, 4), strides (1, 1)
    tensor, y = _round_trip(view, "binary")
    assert tensor["Strides"] == [1, 1]
    assert tensor["parameters"]["binary_data_size"] == 10
    np.testing.assert_array_equal(y, view)


def test_big_endian_input_goes_out_little_endian() -> None:
    x = np.arange(6, dtype=">i4").reshape(2, 3)
    assert to_host_array(x).dtype == np.dtype("<i4")
    _, y = _round_trip(x, "binary")
    np.testing.assert_array_equal(y, x)


def test_unsupported_dtype_is_refused() -> None:
    with pytest.raises(ValueError, match="no DirectML tensor data type"):
        encode_tensor(np.zeros(3, dtype=bool), "binary")


def test_binary_header_length_and_content_type() -> None:
    tensor, buffer = encode_tensor(np.ones((2, 2), np.float32), "binary")
    body, headers = encode_body({"inputs": {"InputTensor": tensor}}, [buffer], "binary")  # type: ignore[list-item]
    length = int(headers["Inference-Header-Content-Length"])
    assert headers["Content-Type"] == "application/octet-stream"
    assert json.loads(body[:length])["inputs"]["InputTensor"]["parameters"] == {
        "binary_data_size": 16
    }
    assert body[length:] == np.ones((2, 2), np.float32).tobytes()


def test_data_payload_is_decoded() -> None:
    tensor = {"DataType": "FLOAT16", "Sizes": [2, 2], "data": [1, 2.5, -3, 4]}
    y = decode_tensor(tensor, BinarySection(framed=False), "t")
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, np.array([[1, 2.5], [-3, 4]], np.float16))


def test_response_strides_are_applied() -> None:
    tensor = {"DataType": "INT32", "Sizes": [2, 3], "Strides": [1, 2], "data": list(range(6))}
    y = decode_tensor(tensor, BinarySection(framed=False), "t")
    np.testing.assert_array_equal(y, np.arange(6, dtype=np.int32).reshape(3, 2).T)
    assert y.flags.c_contiguous and y.flags.writeable


@pytest.mark.parametrize("payload", ["data", "b64", "binary"])
def test_a_strided_buffer_may_be_longer_than_its_extent(payload: str) -> None:
    # Rows of 3 elements at a pitch of 4 (DirectML pads rows), and a tail past the last row.
    buffer = np.arange(10, dtype=np.int16)
    tensor: dict = {"DataType": "INT16", "Sizes": [2, 3], "Strides": [4, 1]}
    section = BinarySection(framed=False)
    if payload == "data":
        tensor["data"] = buffer.tolist()
    elif payload == "b64":
        tensor["b64"] = base64.b64encode(buffer.tobytes()).decode()
    else:
        tensor["parameters"] = {"binary_data_size": buffer.nbytes}
        section = BinarySection(buffer.tobytes())
    y = decode_tensor(tensor, section, "t")
    np.testing.assert_array_equal(y, np.array([[0, 1, 2], [4, 5, 6]], np.int16))
    section.finish()  # every sent byte belongs to the tensor


def test_a_packed_buffer_is_exact_up_to_four_byte_rounding() -> None:
    for sent, ok in ((3, True), (4, True), (5, False)):
        tensor = {"DataType": "UINT8", "Sizes": [3], "b64": base64.b64encode(bytes(sent)).decode()}
        if ok:
            assert decode_tensor(tensor, BinarySection(framed=False), "t").shape == (3,)
        else:
            with pytest.raises(ValueError, match="3 bytes of UINT8, but 5 bytes were sent"):
                decode_tensor(tensor, BinarySection(framed=False), "t")


@pytest.mark.parametrize(
    ("tensor", "binary", "message"),
    [
        ({"DataType": "FLOAT32", "Sizes": [3], "b64": "AAAA"}, b"", "need 12 bytes"),
        (
            {"DataType": "FLOAT32", "Sizes": [1], "parameters": {"binary_data_size": 8}},
            b"1234",
            "need 8 bytes after the JSON header, the body has 4",
        ),
        ({"DataType": "FLOAT32", "Sizes": [1]}, b"", "exactly one payload"),
        ({"DataType": "BOOL", "Sizes": [1], "data": [1]}, b"", "unknown DataType"),
        ({"DataType": "INT8", "Sizes": [2, -1], "data": [1]}, b"", "t.Sizes"),
        ({"DataType": "INT8", "Sizes": [2], "b64": "@@"}, b"", "base64"),
        ({"DataType": "INT8", "Sizes": [4], "Strides": [2], "data": [1, 2]}, b"", "address 7"),
        (
            {
                "DataType": "INT8",
                "Sizes": [4],
                "Strides": [2],
                "parameters": {"binary_data_size": 6},
            },
            b"123456",
            "address 7 bytes of INT8, but 6 bytes were sent",
        ),
    ],
)
def test_malformed_tensors_are_reported(tensor: dict, binary: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_tensor(tensor, BinarySection(binary), "t")


def test_trailing_bytes_and_bad_header_length_are_reported() -> None:
    tensor = {"DataType": "UINT8", "Sizes": [2], "parameters": {"binary_data_size": 2}}
    with pytest.raises(ValueError, match="1 bytes after the last binary tensor"):
        decode_outputs({"outputs": {"y": tensor}}, BinarySection(b"abc"))
    with pytest.raises(ValueError, match="is 10 but the body has only 2 bytes"):
        split_body(b"{}", "10")
    with pytest.raises(ValueError, match="must be a byte count"):
        split_body(b"{}", "x")
    with pytest.raises(ValueError, match="outputs"):
        decode_outputs({"nothing": 1}, BinarySection(b""))
