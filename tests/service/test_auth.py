"""API keys: bearer tokens against the configured keys."""

from __future__ import annotations

import pytest

from dmlserve.service.auth import authorize
from dmlserve.service.errors import UnauthorizedError


def test_no_keys_means_no_auth() -> None:
    authorize((), "")
    authorize((), "Bearer anything")


@pytest.mark.parametrize("header", ["Bearer k1", "bearer k2", "Bearer  k1 "])
def test_any_configured_key_is_accepted(header: str) -> None:
    authorize(("k1", "k2"), header)


@pytest.mark.parametrize("header", ["", "k1", "Basic k1", "Bearer", "Bearer k3", "Bearer k1k2"])
def test_anything_else_is_401_with_a_bearer_challenge(header: str) -> None:
    with pytest.raises(UnauthorizedError) as err:
        authorize(("k1", "k2"), header)
    assert err.value.status == 401 and err.value.headers == {"WWW-Authenticate": "Bearer"}
