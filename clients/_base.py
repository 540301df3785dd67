"""Everything the sync and async clients share: requests, parsing, errors, retries.

`Client` and `AsyncClient` only send, sleep and close; each public method of theirs is a
`_*_request` builder here (or a helper descriptor from `_helpers`), their one send loop, and
a `_parse_*` here.
"""

from __future__ import annotations

import email.utils
import logging
import math
import random
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from dmlserve.kernels import OperatorBase

from ._constants import (
    BINARY_HEADER_LENGTH,
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    INITIAL_RETRY_DELAY,
    MAX_RETRY_AFTER,
    MAX_RETRY_DELAY,
    REQUEST_ID_HEADER,
    RETRYABLE_STATUSES,
)
from ._exceptions import (
    APIConnectionError,
    APIResponseValidationError,
    APITimeoutError,
    make_status_error,
)
from ._framing import (
    Encoding,
    NDArray,
    decode_outputs,
    encode_body,
    encode_tensor,
    split_body,
)
from ._helpers import ArrayLike

log = logging.getLogger("clients")

_HttpT = TypeVar("_HttpT", httpx.Client, httpx.AsyncClient)
_T = TypeVar("_T")
_ClientT = TypeVar("_ClientT", bound="BaseClient[Any]")

#: An operator: its JSON as a dict (DirectML field names) or a `kernels` descriptor model.
OperatorLike = Mapping[str, Any] | OperatorBase


@dataclass(frozen=True)
class RequestSpec:
    """One logical call: what to send, and which non-2xx statuses the parser reads itself."""

    method: str
    path: str
    content: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    retry: bool = True
    parse_statuses: frozenset[int] = frozenset()


def operator_json(operator: object) -> dict[str, Any]:
    """The wire JSON of an operator given as a `kernels` model or as a dict."""
    dump = getattr(operator, "model_dump", None)
    if callable(dump):
        result = dump(mode="json", by_alias=True, exclude_none=True)
        if isinstance(result, dict):
            return result
    if isinstance(operator, Mapping):
        return dict(operator)
    raise TypeError(
        f"operator must be a dict or a kernels descriptor model, not {type(operator).__name__}"
    )


class BaseClient(Generic[_HttpT]):
    """Configuration and all I/O-free logic of the twin clients."""

    def __init__(
        self,
        base_url: str | httpx.URL,
        api_key: str | None = None,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        http_client: _HttpT | None = None,
        *,
        encoding: Encoding = "binary",
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be 0 (no retries) or more")
        if encoding not in ("binary", "json"):
            raise ValueError(f"encoding must be 'binary' or 'json', not {encoding!r}")
        url = httpx.URL(str(base_url))
        # A trailing slash makes relative paths extend the base path instead of replacing it.
        self.base_url = (
            url if url.raw_path.endswith(b"/") else url.copy_with(raw_path=url.raw_path + b"/")
        )
        self.api_key = api_key
        self.timeout = timeout
        self.max_retries = max_retries
        self.encoding: Encoding = encoding
        self._default_headers = dict(default_headers or {})
        self._owns_http = http_client is None
        self._http: _HttpT = http_client if http_client is not None else self._new_http(timeout)

    def _new_http(self, timeout: float | httpx.Timeout | None) -> _HttpT:
        """The httpx client this client creates (and closes) when none is injected."""
        raise NotImplementedError

    def __repr__(self) -> str:
        # Never the API key: reprs end up in logs and tracebacks.
        return f"{type(self).__name__}(base_url={str(self.base_url)!r})"

    # ---- requests ------------------------------------------------------------------------

    def _headers(self, spec: RequestSpec, request_id: str) -> dict[str, str]:
        headers = {"Accept": "application/json, application/octet-stream"}
        headers.update(self._default_headers)
        if self.api_key is not None:
            headers["Authorization"] = f"Bearer {self.api_key}"
        headers[REQUEST_ID_HEADER] = request_id
        headers.update(spec.headers)
        return headers

    def _build_request(self, spec: RequestSpec, request_id: str) -> httpx.Request:
        return self._http.build_request(
            spec.method,
            self.base_url.join(spec.path.lstrip("/")),
            content=spec.content,
            headers=self._headers(spec, request_id),
            timeout=self.timeout,
        )

    @staticmethod
    def _new_request_id() -> str:
        return uuid.uuid4().hex

    def _execute_request(
        self,
        path: str,
        operator: OperatorLike | None,
        inputs: Mapping[str, ArrayLike],
        encoding: Encoding | None,
    ) -> RequestSpec:
        encoding = encoding or self.encoding
        payload: dict[str, Any] = {}
        if operator is not None:
            payload["operator"] = operator_json(operator)
        payload["inputs"], buffers = self._tensors(inputs, encoding)
        payload["output_encoding"] = "binary" if encoding == "binary" else "b64"
        content, headers = encode_body(payload, buffers, encoding)
        return RequestSpec("POST", path, content, headers)

    @staticmethod
    def _tensors(
        arrays: Mapping[str, ArrayLike], encoding: Encoding
    ) -> tuple[dict[str, Any], list[memoryview]]:
        """Wire tensors by name, and the binary bytes that follow the JSON, in its order."""
        tensors: dict[str, Any] = {}
        buffers = []
        for name, value in arrays.items():
            tensors[name], buffer = encode_tensor(value, encoding)
            if buffer is not None:
                buffers.append(buffer)
        return tensors, buffers

    def _json_request(self, method: str, path: str, payload: Mapping[str, Any]) -> RequestSpec:
        content, headers = encode_body(payload, [], "json")
        return RequestSpec(method, path, content, headers)

    @staticmethod
    def _operator_path(name: str, suffix: str = "") -> str:
        return f"v1/operators/{quote(name, safe='')}{suffix}"

    def _operator_request(self, name: str, method: str = "GET") -> RequestSpec:
        """The record of registered operator `name` (GET), or its removal (DELETE)."""
        return RequestSpec(method, self._operator_path(name))

    def _registered_execute_request(
        self, name: str, inputs: Mapping[str, ArrayLike], encoding: Encoding | None
    ) -> RequestSpec:
        return self._execute_request(self._operator_path(name, "/execute"), None, inputs, encoding)

    @staticmethod
    def _health_request(probe: str) -> RequestSpec:
        """KServe's `/v2/health/{probe}`: never retried, and a 503 is an answer (False)."""
        return RequestSpec(
            "GET", f"v2/health/{probe}", retry=False, parse_statuses=frozenset({503})
        )

    def _register_request(
        self,
        operator: OperatorLike,
        name: str | None,
        constants: Mapping[str, ArrayLike] | None = None,
        batching: Mapping[str, Any] | None = None,
    ) -> RequestSpec:
        payload: dict[str, Any] = {"operator": operator_json(operator)}
        if name is not None:
            payload["name"] = name
        buffers: list[memoryview] = []
        if constants:
            payload["constants"], buffers = self._tensors(constants, self.encoding)
        if batching is not None:
            payload["batching"] = dict(batching)
        content, headers = encode_body(payload, buffers, self.encoding if buffers else "json")
        return RequestSpec("POST", "v1/operators", content, headers)

    # ---- responses -----------------------------------------------------------------------

    def _process_response(
        self, spec: RequestSpec, response: httpx.Response, parse: Callable[[httpx.Response], _T]
    ) -> _T:
        """The parsed body of a 2xx (or an expected status); the typed error otherwise."""
        if not (response.is_success or response.status_code in spec.parse_statuses):
            raise make_status_error(response)
        try:
            return parse(response)
        except (ValueError, KeyError, TypeError) as err:
            raise APIResponseValidationError(
                f"cannot read the {response.status_code} response: {err}", response
            ) from err

    @staticmethod
    def _parse_json(response: httpx.Response) -> Any:
        return response.json()

    @staticmethod
    def _parse_outputs(response: httpx.Response) -> dict[str, NDArray]:
        body, section = split_body(response.content, response.headers.get(BINARY_HEADER_LENGTH))
        return decode_outputs(body, section)

    @staticmethod
    def _parse_registration(response: httpx.Response) -> tuple[str, dict[str, Any]]:
        body = response.json()
        name, operator = body["name"], body["operator"]
        if not isinstance(name, str) or not isinstance(operator, dict):
            raise ValueError("a registration answer has a string `name` and an `operator` object")
        return name, operator

    @staticmethod
    def _operators_request(after: str | None) -> RequestSpec:
        """One page of the operator listing, after the name `after`."""
        query = "" if after is None else "?after=" + quote(after, safe="")
        return RequestSpec("GET", "v1/operators" + query)

    @staticmethod
    def _parse_operator_list(response: httpx.Response) -> tuple[list[dict[str, Any]], str | None]:
        """A page of the operator listing, and the `after` of the next page (None: last)."""
        body = response.json()
        items = body.get("operators") if isinstance(body, dict) else body
        if not isinstance(items, list):
            raise ValueError("the operator list is not a JSON list")
        following = body.get("next") if isinstance(body, dict) else None
        if following is not None and not isinstance(following, str):
            raise ValueError("the operator list's `next` is not a name")
        return [item for item in items if isinstance(item, dict)], following

    @staticmethod
    def _parse_ok(response: httpx.Response) -> bool:
        return response.is_success

    # ---- retries -------------------------------------------------------------------------

    def _next_delay(
        self,
        spec: RequestSpec,
        request: httpx.Request,
        outcome: httpx.Response | httpx.TransportError,
        attempt: int,
    ) -> float | None:
        """Seconds to wait before sending attempt number `attempt + 1` after `outcome` (a
        response or a transport failure), or None when `outcome` ends the call."""
        if isinstance(outcome, httpx.TransportError):
            if not self._should_retry_error(spec, outcome, attempt):
                return None
            delay, why = self._retry_delay(attempt, None), type(outcome).__name__
        else:
            if not self._should_retry_response(spec, outcome, attempt):
                return None
            delay, why = self._retry_delay(attempt, outcome), str(outcome.status_code)
        self._log_retry(request, delay, why)
        return delay

    def _outcome(
        self,
        spec: RequestSpec,
        request: httpx.Request,
        outcome: httpx.Response | httpx.TransportError,
        parse: Callable[[httpx.Response], _T],
    ) -> _T:
        """What the call returns after its last `outcome`, or the error that outcome means."""
        if isinstance(outcome, httpx.TransportError):
            raise self._transport_error(outcome, request) from outcome
        return self._process_response(spec, outcome, parse)

    def _should_retry_response(
        self, spec: RequestSpec, response: httpx.Response, attempt: int
    ) -> bool:
        return (
            spec.retry
            and attempt < self.max_retries
            and response.status_code in RETRYABLE_STATUSES
            and response.status_code not in spec.parse_statuses
        )

    def _should_retry_error(
        self, spec: RequestSpec, error: httpx.TransportError, attempt: int
    ) -> bool:
        # A read timeout means the service took the request and is still working on it:
        # sending it again would only double its load. Everything else never reached it, or
        # broke the connection, and execution is idempotent, so sending again is safe.
        return (
            spec.retry and attempt < self.max_retries and not isinstance(error, httpx.ReadTimeout)
        )

    def _retry_delay(self, attempt: int, response: httpx.Response | None) -> float:
        """Seconds before retry number `attempt + 1`."""
        retry_after = parse_retry_after(response.headers) if response is not None else None
        if retry_after is not None and 0 <= retry_after <= MAX_RETRY_AFTER:
            return retry_after
        return backoff_delay(attempt)

    @staticmethod
    def _transport_error(error: httpx.TransportError, request: httpx.Request) -> APIConnectionError:
        if isinstance(error, httpx.TimeoutException):
            return APITimeoutError(request)
        return APIConnectionError(request, f"Connection error: {error}")

    def _log_retry(self, request: httpx.Request, delay: float, why: str) -> None:
        log.info("retrying %s %s in %.2f s (%s)", request.method, request.url, delay, why)


class BaseRegisteredOperator(Generic[_ClientT]):
    """What the twins' registered-operator handles share: the client, the name, the descriptor."""

    def __init__(self, client: _ClientT, name: str, operator: dict[str, Any]) -> None:
        self._client = client
        self.name = name
        #: The resolved descriptor the service answered with (OutputTensor filled in).
        self.operator = operator

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, type={self.operator.get('type')!r})"


def backoff_delay(attempt: int, rand: Callable[[], float] = random.random) -> float:
    """Exponential backoff with jitter: 0.5 s, 1 s, 2 s ... capped at 8 s, each times (0.75, 1]."""
    base = min(INITIAL_RETRY_DELAY * 2.0**attempt, MAX_RETRY_DELAY)
    return base * (1.0 - 0.25 * rand())


def parse_retry_after(headers: httpx.Headers) -> float | None:
    """Retry-After (seconds or an HTTP date; `retry-after-ms` first) in seconds, or None."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return float(millis) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        return max(float(email.utils.mktime_tz(parsed)) - time.time(), 0.0)
    return seconds if math.isfinite(seconds) else None
