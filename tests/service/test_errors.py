"""The one translation of the operator layer's errors into service errors."""

from __future__ import annotations

import pytest

from dmlserve.kernels import DescriptorError, LimitExceededError
from dmlserve.kernels.wire import FramingError
from dmlserve.service.errors import (
    BadRequestError,
    PayloadTooLargeError,
    ServiceError,
    UnprocessableError,
    kernel_errors,
)


def _translate(exc: Exception, loc: tuple[str | int, ...] = ()) -> ServiceError:
    with pytest.raises(ServiceError) as err, kernel_errors(loc):
        raise exc
    return err.value


def test_a_broken_rule_is_422_with_the_location_prefixed() -> None:
    exc = DescriptorError([{"loc": ("Strides",), "msg": "bad"}, {"loc": (), "msg": "worse"}])
    err = _translate(exc, ("operator",))
    assert isinstance(err, UnprocessableError) and err.status == 422
    assert err.errors == [
        {"loc": ["operator", "Strides"], "msg": "bad"},
        {"loc": ["operator"], "msg": "worse"},
    ]
    assert err.detail == "operator.Strides: bad; operator: worse"
    assert _translate(exc).detail == "Strides: bad; worse"


def test_a_limit_is_413_naming_the_limit_and_what_exceeded_it() -> None:
    err = _translate(LimitExceededError("max_tensor_bytes", 10, 12, "buffer of inputs.x"))
    assert isinstance(err, PayloadTooLargeError) and err.status == 413
    assert (
        err.detail == "buffer of inputs.x (12 bytes) exceeds the limit max_tensor_bytes = 10 bytes"
    )


def test_a_framing_mismatch_is_400() -> None:
    err = _translate(FramingError("short", [{"loc": ("inputs", "x"), "msg": "short"}]))
    assert isinstance(err, BadRequestError) and err.status == 400
    assert err.errors == [{"loc": ["inputs", "x"], "msg": "short"}]


def test_anything_else_passes_through() -> None:
    with pytest.raises(KeyError), kernel_errors():
        raise KeyError("a defect stays a defect")
