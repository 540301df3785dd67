"""Shared by the transport tests: every operator sample registered as a model, and regions.

Each sample of `tests.operator_info` (oracle outputs, not the server's own path) becomes a
registered model whose tensor descriptors are the sample's, so a transport test sends the
sample's inputs by name and compares the output with the sample's expected array.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import numpy as np
import tritonclient.utils.shared_memory as shm

from dmlserve.kernels.dtypes import from_numpy
from tests.operator_info import Sample, all_samples

SAMPLES: list[tuple[str, Sample]] = [(f"t-{t.lower()}-{s.name}", s) for t, s in all_samples()]


def model_descriptor(sample: Sample) -> dict[str, Any]:
    """The sample's descriptor with each input's tensor descriptor, as registration needs."""
    descriptor = dict(sample.descriptor)
    for name, array in sample.inputs.items():
        descriptor[name] = {"DataType": from_numpy(array.dtype).value, "Sizes": list(array.shape)}
    return descriptor


def register_samples(url: str) -> None:
    for name, sample in SAMPLES:
        body = {"name": name, "operator": model_descriptor(sample)}
        r = httpx.post(url + "/v1/operators", json=body, timeout=60)
        assert r.status_code in (200, 201), r.text


def kserve(array: np.ndarray) -> str:
    return from_numpy(array.dtype).kserve


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@contextmanager
def region(byte_size: int, prefix: str = "dml") -> Iterator[tuple[Any, str, str]]:
    """A client's POSIX shared-memory region: (handle, region name, key), destroyed after."""
    name = unique(prefix)
    key = "/" + name
    handle = shm.create_shared_memory_region(name, key, byte_size)
    try:
        yield handle, name, key
    finally:
        shm.destroy_shared_memory_region(handle)


def shm_path(key: str) -> str:
    return os.path.join("/dev/shm", key.lstrip("/"))
