"""The registry of operators: names, repeats, conflicts, listing, removal."""

from __future__ import annotations

import pytest

from dmlserve import kernels
from dmlserve.kernels import OperatorBase
from dmlserve.service.errors import NotFoundError, UnprocessableError
from dmlserve.service.registry import (
    OperatorRegistry,
    check_name,
    fingerprint,
    resolve_for_registration,
)

PAD = {
    "type": "PADDING",
    "StartPadding": [0, 1],
    "EndPadding": [0, 1],
    "InputTensor": {"DataType": "FLOAT32", "Sizes": [-1, 3]},
}


def _op(**changes: object) -> OperatorBase:
    return resolve_for_registration({**PAD, **changes})


def test_fingerprint_is_the_resolved_descriptor() -> None:
    # Spelled differently, resolved the same: one fingerprint.
    spelled = {**PAD, "type": "DML_OPERATOR_PADDING", "PaddingMode": "DML_PADDING_MODE_CONSTANT"}
    assert fingerprint(_op()) == fingerprint(resolve_for_registration(spelled))
    assert fingerprint(_op()) != fingerprint(_op(EndPadding=[0, 2]))


def test_generated_names_and_repeats() -> None:
    registry = OperatorRegistry()
    reg, created = registry.add(_op(), None)
    assert created and reg.name == f"padding-{fingerprint(_op())[:12]}"
    again, created = registry.add(_op(), None)
    assert again is reg and not created
    assert registry.find(_op(), None) is reg
    assert registry.find(_op(EndPadding=[0, 2]), None) is None


def test_a_name_holds_one_descriptor() -> None:
    registry = OperatorRegistry()
    reg, _ = registry.add(_op(), "pad")
    assert registry.find(_op(), "pad") is reg and registry.add(_op(), "pad") == (reg, False)
    with pytest.raises(UnprocessableError, match="already registered with another descriptor"):
        registry.find(_op(EndPadding=[0, 2]), "pad")
    with pytest.raises(UnprocessableError, match="already registered with another descriptor"):
        registry.add(_op(EndPadding=[0, 2]), "pad")
    # The same descriptor under a second name is a second registration.
    assert registry.add(_op(), "pad2")[1]


def test_read_list_and_remove() -> None:
    registry = OperatorRegistry()
    for name in ("b", "a", "c"):
        registry.add(_op(EndPadding=[0, ord(name)]), name)
    assert [r.name for r in registry.list()] == ["a", "b", "c"]
    assert registry.get("b").to_json()["operator"]["EndPadding"] == [0, ord("b")]
    assert registry.remove("b").name == "b"
    with pytest.raises(NotFoundError):
        registry.get("b")
    with pytest.raises(NotFoundError):
        registry.remove("b")


@pytest.mark.parametrize("name", ["a", "A.b-c_9", "x" * 128])
def test_valid_names(name: str) -> None:
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["", "-a", ".a", "a/b", "a b", "x" * 129, "é"])
def test_invalid_names(name: str) -> None:
    with pytest.raises(UnprocessableError) as err:
        check_name(name)
    assert err.value.errors[0]["loc"] == ["name"]


def test_registration_allows_a_variable_batch_and_execution_does_not() -> None:
    assert _op().input_tensor.sizes[0] == -1  # type: ignore[union-attr]
    with pytest.raises(kernels.DescriptorError):
        kernels.resolve(PAD)
