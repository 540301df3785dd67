"""The synchronous client."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, TypeVar

import httpx

from ._base import BaseClient, BaseRegisteredOperator, OperatorLike, RequestSpec
from ._framing import Encoding, NDArray
from ._helpers import ArrayLike, OperatorMethods

__all__ = ["Client", "RegisteredOperator"]

_T = TypeVar("_T")


class Client(OperatorMethods, BaseClient[httpx.Client]):
    """A dmlserve client over httpx; a context manager.

    `http_client` injects a configured `httpx.Client` (proxies, mTLS, an in-process
    transport); the client closes only an httpx client it created itself.
    """

    #: How a retry waits its delay (tests replace it to drive the time themselves).
    _sleep = staticmethod(time.sleep)

    def _new_http(self, timeout: float | httpx.Timeout | None) -> httpx.Client:
        return httpx.Client(timeout=timeout)

    # ---- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the underlying httpx client if this client created it."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ---- the one send loop ---------------------------------------------------------------

    def _request(self, spec: RequestSpec, parse: Callable[[httpx.Response], _T]) -> _T:
        request_id = self._new_request_id()  # one per logical call, kept across retries
        attempt = 0
        while True:
            request = self._build_request(spec, request_id)
            outcome: httpx.Response | httpx.TransportError
            try:
                outcome = self._http.send(request)
            except httpx.TransportError as err:
                outcome = err
            delay = self._next_delay(spec, request, outcome, attempt)
            if delay is None:
                return self._outcome(spec, request, outcome, parse)
            if isinstance(outcome, httpx.Response):
                outcome.close()
            self._sleep(delay)
            attempt += 1

    # ---- operators -----------------------------------------------------------------------

    def execute(
        self,
        operator: OperatorLike,
        inputs: Mapping[str, ArrayLike],
        *,
        encoding: Encoding | None = None,
    ) -> dict[str, NDArray]:
        """Run one operator (a dict or a `kernels` descriptor model) on `inputs`.

        Returns the outputs by name (`{"OutputTensor": array}`), typed as DirectML says.
        """
        spec = self._execute_request("v1/execute", operator, inputs, encoding)
        return self._request(spec, self._parse_outputs)

    # ---- registry ------------------------------------------------------------------------

    def register(
        self,
        operator: OperatorLike,
        name: str | None = None,
        *,
        constants: Mapping[str, ArrayLike] | None = None,
        batching: Mapping[str, Any] | None = None,
    ) -> RegisteredOperator:
        """Register (validate, resolve, compile once) an operator; returns its handle.

        `constants` binds inputs at registration (e.g. `{"FilterTensor": w}`): they are kept
        by the service and left out of every `execute`. `batching` (`max_batch_size`,
        `max_queue_delay_us`, optional `preferred_batch_sizes`) turns on dynamic batching.
        Registering the same operator and constants again returns the same name.
        """
        spec = self._register_request(operator, name, constants, batching)
        registered, resolved = self._request(spec, self._parse_registration)
        return RegisteredOperator(self, registered, resolved)

    def get_operator(self, name: str) -> RegisteredOperator:
        """The handle of an operator registered earlier; NotFoundError if there is none."""
        name, resolved = self._request(self._operator_request(name), self._parse_registration)
        return RegisteredOperator(self, name, resolved)

    def operators(self) -> list[dict[str, Any]]:
        """Every registered operator: `{"name", "operator"}` objects, in name order."""
        items: list[dict[str, Any]] = []
        after: str | None = None
        while True:  # page by page, each page one request
            spec = self._operators_request(after)
            page, after = self._request(spec, self._parse_operator_list)
            items += page
            if after is None:
                return items

    # ---- health --------------------------------------------------------------------------

    def health(self) -> bool:
        """True when the service process answers (KServe `/v2/health/live`)."""
        return self._request(self._health_request("live"), self._parse_ok)

    def ready(self) -> bool:
        """True when the service accepts work (KServe `/v2/health/ready`); False on 503."""
        return self._request(self._health_request("ready"), self._parse_ok)


class RegisteredOperator(BaseRegisteredOperator["Client"]):
    """A registered operator: `execute(inputs)` runs it without resending the descriptor."""

    def execute(
        self, inputs: Mapping[str, ArrayLike], *, encoding: Encoding | None = None
    ) -> dict[str, NDArray]:
        """Run the operator on `inputs`; returns `{"OutputTensor": array}`."""
        client = self._client
        spec = client._registered_execute_request(self.name, inputs, encoding)
        return client._request(spec, client._parse_outputs)

    def metadata(self) -> dict[str, Any]:
        """The service's record of this operator (`{"name", "operator", ...}`)."""
        client = self._client
        result: dict[str, Any] = client._request(
            client._operator_request(self.name), client._parse_json
        )
        return result

    def delete(self) -> None:
        """Remove the operator from the service."""
        client = self._client
        client._request(client._operator_request(self.name, "DELETE"), client._parse_ok)
