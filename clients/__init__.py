"""Typed Python SDK for dmlserve: `Client` and `AsyncClient`, NumPy in and out.

    from dmlserve.clients import Client

    with Client("http://127.0.0.1:8000") as client:
        y = client.padding(x, start_padding=[0, 0, 1, 1], end_padding=[0, 0, 1, 1])

Importing this package needs neither FastAPI nor CuPy.
"""

from ._async_client import AsyncClient, AsyncRegisteredOperator
from ._base import backoff_delay, operator_json, parse_retry_after
from ._client import Client, RegisteredOperator
from ._constants import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT
from ._exceptions import (
    APIConnectionError,
    APIError,
    APIResponseValidationError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    DmlserveError,
    GatewayTimeoutError,
    InternalServerError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitError,
    ServiceUnavailableError,
    UnprocessableEntityError,
    UnsupportedMediaTypeError,
)

__all__ = [
    "Client",
    "AsyncClient",
    "RegisteredOperator",
    "AsyncRegisteredOperator",
    "DEFAULT_TIMEOUT",
    "DEFAULT_MAX_RETRIES",
    "DmlserveError",
    "APIError",
    "APIConnectionError",
    "APITimeoutError",
    "APIResponseValidationError",
    "APIStatusError",
    "BadRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "PayloadTooLargeError",
    "UnsupportedMediaTypeError",
    "UnprocessableEntityError",
    "RateLimitError",
    "InternalServerError",
    "ServiceUnavailableError",
    "GatewayTimeoutError",
    "backoff_delay",
    "operator_json",
    "parse_retry_after",
]
