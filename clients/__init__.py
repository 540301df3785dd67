"""Typed Python SDK for dmlserve: `Client` and `AsyncClient`, NumPy in and out.

    from dmlserve.clients import Client

    with Client("http://127.0.0.1:8000") as client:
        y = client.padding(x, start_padding=[0, 0, 1, 1], end_padding=[0, 0, 1, 1])

Importing this package needs neither FastAPI nor CuPy.
"""

from . import _exceptions
from ._async_client import AsyncClient, AsyncRegisteredOperator
from ._base import backoff_delay, operator_json, parse_retry_after
from ._client import Client, RegisteredOperator
from ._constants import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT
from ._exceptions import *  # noqa: F403 - the error classes, listed once in _exceptions

__all__ = [
    "Client",
    "AsyncClient",
    "RegisteredOperator",
    "AsyncRegisteredOperator",
    "DEFAULT_TIMEOUT",
    "DEFAULT_MAX_RETRIES",
    "backoff_delay",
    "operator_json",
    "parse_retry_after",
]
__all__ += _exceptions.__all__
