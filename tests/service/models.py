"""Registrations the repository, configuration, statistics and constants tests share, each
with its expected answer from the element-by-element oracles (tests/oracles.py)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from tests.oracles import Geometry, naive_average_pooling, naive_convolution_integer, naive_fold

POOL_INPUT = (3, 8, 8)  # without the batch
POOL = {
    "operator": {
        "type": "AVERAGE_POOLING",
        "WindowSize": [2, 2],
        "Strides": [2, 2],
        "InputTensor": {"DataType": "FLOAT32", "Sizes": [-1, *POOL_INPUT]},
    }
}

# CONVOLUTION_INTEGER with its filter and zero points bound at registration.
CONV_INPUT = (2, 5, 5)
CONV_FILTER = (
    (np.arange(3 * 2 * 2 * 2, dtype=np.int64) % 11 - 5).astype(np.int8).reshape(3, 2, 2, 2)
)
CONV_X_ZERO = 3
CONV_W_ZERO = np.array([1, -2, 0], np.int8)
CONV_CONSTANTS = {
    "FilterTensor": CONV_FILTER,
    "InputZeroPointTensor": np.full((1, 1, 1, 1), CONV_X_ZERO, np.uint8),
    "FilterZeroPointTensor": CONV_W_ZERO.reshape(1, 3, 1, 1),
}
CONV_OPERATOR = {
    "type": "CONVOLUTION_INTEGER",
    "InputTensor": {"DataType": "UINT8", "Sizes": [-1, *CONV_INPUT]},
}
BATCHING = {"max_batch_size": 8, "max_queue_delay_us": 100, "preferred_batch_sizes": [4, 8]}

# FOLD with a variable batch: (N, 3*2*2, 4*4) columns into (N, 3, 8, 8).
FOLD_INPUT = (12, 16)
FOLD = {
    "operator": {
        "type": "FOLD",
        "WindowSizes": [2, 2],
        "Strides": [2, 2],
        "InputTensor": {"DataType": "FLOAT32", "Sizes": [-1, *FOLD_INPUT]},
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [-1, 3, 8, 8]},
    }
}


def wire(array: np.ndarray, encoding: str = "b64") -> dict[str, Any]:
    """A `/v1` tensor value (json or b64 payload)."""
    from dmlserve.kernels.dtypes import from_numpy

    entry: dict[str, Any] = {"DataType": from_numpy(array.dtype).value, "Sizes": [*array.shape]}
    if encoding == "json":
        entry["data"] = array.reshape(-1).tolist()
    else:
        entry["b64"] = base64.b64encode(np.ascontiguousarray(array).tobytes()).decode()
    return entry


def conv_body(encoding: str = "b64", batching: bool = True) -> dict[str, Any]:
    """A `POST /v1/operators` body (and repository file) of the conv model."""
    body: dict[str, Any] = {
        "operator": CONV_OPERATOR,
        "constants": {n: wire(a, encoding) for n, a in CONV_CONSTANTS.items()},
    }
    if batching:
        body["batching"] = BATCHING
    return body


def write_repository(root: Path, **extra: dict[str, Any]) -> Path:
    """A repository of `pool`, `conv` and `fold` (plus `extra` files by name)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, body in {"pool": POOL, "conv": conv_body(), "fold": FOLD, **extra}.items():
        (root / f"{name}.json").write_bytes(orjson.dumps(body))
    return root


def pool_input(batch: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(-8, 9, size=(batch, *POOL_INPUT)).astype(np.float32)


def conv_input(batch: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (batch, *CONV_INPUT), dtype=np.uint8)


def fold_input(batch: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(-8, 9, size=(batch, *FOLD_INPUT)).astype(np.float32)


def expected_pool(x: np.ndarray) -> np.ndarray:
    g = Geometry((8, 8), (2, 2), (2, 2), (1, 1), (0, 0), (0, 0))
    return naive_average_pooling(x, g, include_padding=False).astype(np.float32)


def expected_conv(x: np.ndarray) -> np.ndarray:
    g = Geometry((5, 5), (2, 2), (1, 1), (1, 1), (0, 0), (0, 0))
    return naive_convolution_integer(x, CONV_FILTER, CONV_X_ZERO, CONV_W_ZERO, g, groups=1)


def expected_fold(x: np.ndarray) -> np.ndarray:
    return naive_fold(x, Geometry((8, 8), (2, 2), (2, 2), (1, 1), (0, 0), (0, 0)))
