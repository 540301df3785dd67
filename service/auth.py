"""API keys: a bearer token checked against the configured keys in constant time.

Transport-neutral: HTTP routes pass the `Authorization` header, a gRPC server would pass the
`authorization` metadata value.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from dmlserve.service.errors import UnauthorizedError


def authorize(keys: Sequence[str], authorization: str) -> None:
    """401 unless auth is off (no keys) or `authorization` is `Bearer <one of the keys>`."""
    if not keys:
        return
    scheme, _, given = authorization.partition(" ")
    if scheme.lower() != "bearer" or not given:
        raise UnauthorizedError()
    given_b = given.strip().encode()
    # Compare against every key (no early exit) in constant time per key.
    ok = False
    for key in keys:
        ok |= hmac.compare_digest(given_b, key.encode())
    if not ok:
        raise UnauthorizedError()
