"""Request builders and response readers shared by the service tests."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import orjson

from dmlserve.kernels.dtypes import DataType, from_numpy


def wire_tensor(arr: np.ndarray, encoding: str) -> tuple[dict[str, Any], bytes]:
    """A `/v1` tensor value for `arr` and, for binary, the bytes that follow the JSON."""
    dt = from_numpy(arr.dtype)
    entry: dict[str, Any] = {"DataType": dt.value, "Sizes": list(arr.shape)}
    raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
    if encoding == "json":
        entry["data"] = arr.reshape(-1).tolist()
        return entry, b""
    if encoding == "b64":
        entry["b64"] = base64.b64encode(raw).decode()
        return entry, b""
    entry["parameters"] = {"binary_data_size": len(raw)}
    return entry, raw


def execute_request(
    operator: dict[str, Any] | None,
    inputs: dict[str, np.ndarray],
    encoding: str = "json",
    output_encoding: str | None = None,
) -> tuple[bytes, dict[str, str]]:
    """(body, headers) for `/v1/execute` (operator given) or `/v1/operators/{name}/execute`."""
    doc: dict[str, Any] = {} if operator is None else {"operator": operator}
    doc["inputs"] = {}
    blobs = []
    for name, arr in inputs.items():
        doc["inputs"][name], raw = wire_tensor(arr, encoding)
        blobs.append(raw)
    if output_encoding:
        doc["output_encoding"] = output_encoding
    header = orjson.dumps(doc)
    if encoding == "binary":
        headers = {
            "Content-Type": "application/octet-stream",
            "Inference-Header-Content-Length": str(len(header)),
        }
        return header + b"".join(blobs), headers
    return header, {"Content-Type": "application/json"}


def read_outputs(content: bytes, headers: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A `/v1` execute response (any encoding): (JSON document, outputs as arrays)."""
    hlen = headers.get("inference-header-content-length")
    if hlen is not None:
        doc = orjson.loads(content[: int(hlen)])
        rest = memoryview(content)[int(hlen) :]
    else:
        doc, rest = orjson.loads(content), memoryview(b"")
    arrays = {}
    offset = 0
    for name, t in doc["outputs"].items():
        dtype = DataType(t["DataType"]).numpy
        if "data" in t:
            arr = np.asarray(t["data"], dtype=dtype)
        elif "b64" in t:
            arr = np.frombuffer(base64.b64decode(t["b64"]), dtype=dtype)
        else:
            n = t["parameters"]["binary_data_size"]
            arr = np.frombuffer(bytes(rest[offset : offset + n]), dtype=dtype)
            offset += n
        arrays[name] = arr.reshape(t["Sizes"])
    return doc, arrays


def slow_pooling(window: int = 21, size: int = 512) -> tuple[dict[str, Any], np.ndarray]:
    """An AVERAGE_POOLING that keeps the NumPy backend busy for a fraction of a second."""
    op = {"type": "AVERAGE_POOLING", "WindowSize": [window, window]}
    return op, np.ones((1, 1, size, size), np.float32)


PADDING_OP = {
    "type": "PADDING",
    "PaddingMode": "REFLECTION",
    "StartPadding": [0, 0, 1, 2],
    "EndPadding": [0, 0, 3, 4],
}
