"""JSON response text: a small document is written in one call, byte for byte as the general
path (the document with a marker per array, each array's numbers written on their own)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dmlserve.kernels.dtypes import DataType
from dmlserve.service import responses
from dmlserve.service.responses import render_json


def _general(doc: Any, monkeypatch: pytest.MonkeyPatch) -> bytes:
    with monkeypatch.context() as m:
        m.setattr(responses, "_as_is", lambda array: False)
        return b"".join(render_json(doc))


def _values(dtype: np.dtype[Any], n: int, rng: np.random.Generator) -> np.ndarray:
    if dtype.kind == "f":
        big = 4 if dtype.itemsize == 2 else 30  # FLOAT16 ends at 65504
        return (rng.standard_normal(n) * 10.0 ** rng.integers(-big, big, n)).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("data_type", list(DataType))
@pytest.mark.parametrize("n", [0, 1, 36, 2048, 2049])
def test_every_type_and_size_is_written_as_the_general_path_writes_it(
    data_type: DataType, n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(n)
    x = _values(data_type.numpy, n, rng)
    doc = {"outputs": {"OutputTensor": {"DataType": data_type.value, "data": x}}, "id": "a"}
    general = _general(doc, monkeypatch)
    assert b"".join(render_json(doc)) == general
    assert b"".join(render_json(doc, [x])) == general  # the arrays named by the caller


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_floats_keep_their_literals(
    value: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = np.array([1.5, value, -0.0], np.float32)
    doc = {"outputs": [{"data": x}, {"data": np.arange(3, dtype=np.int16)}]}
    text = b"".join(render_json(doc))
    assert text == _general(doc, monkeypatch)
    assert b"".join(render_json(doc, [x, doc["outputs"][1]["data"]])) == text
    literal = {"nan": b"NaN", "inf": b"Infinity", "-inf": b"-Infinity"}[str(value)]
    assert b"[1.5," + literal + b",-0.0]" in text
    # A null of the document's own (a client's id) beside finite numbers: written as it is.
    doc = {"id": "null", "parameters": None, "outputs": [{"data": np.ones(2, np.float32)}]}
    assert (
        b"".join(render_json(doc))
        == b'{"id":"null","parameters":null,"outputs":[{"data":[1.0,1.0]}]}'
    )


def test_views_are_written_as_their_elements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for array in (x, x[:, 1], x.ravel()[::2]):
        doc = {"data": array, "more": [array.ravel()]}
        assert b"".join(render_json(doc)) == _general(doc, monkeypatch)
