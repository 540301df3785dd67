"""One error base class for every way a request can end, and the translation of the operator
layer's errors into it.

Nothing here knows HTTP responses (`responses.py` renders these errors): a transport without
FastAPI maps the same `status` and `code`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dmlserve.kernels import DescriptorError, LimitExceededError
from dmlserve.kernels.wire import FramingError

ErrorItem = dict[str, Any]  # {"loc": [...], "msg": "..."}


class ServiceError(Exception):
    """Base of every error a request can end in; carries the HTTP status and a stable code."""

    status: int = 500
    code: str = "internal_error"
    title: str = "Internal Server Error"
    retryable: bool = False

    def __init__(
        self,
        detail: str,
        *,
        errors: Sequence[Mapping[str, Any]] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors: list[ErrorItem] = [
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", ""))} for e in errors
        ]
        self.headers: dict[str, str] = dict(headers or {})


class BadRequestError(ServiceError):
    status, code, title = 400, "bad_request", "Bad Request"


class RequestTimeoutError(ServiceError):
    """The request body did not arrive within its time limit; the connection is closed."""

    status, code, title, retryable = 408, "request_timeout", "Request Timeout", True

    def __init__(self, detail: str) -> None:
        super().__init__(detail, headers={"Connection": "close"})


class UnauthorizedError(ServiceError):
    status, code, title = 401, "unauthorized", "Unauthorized"

    def __init__(self, detail: str = "missing or invalid API key") -> None:
        super().__init__(detail, headers={"WWW-Authenticate": "Bearer"})


class NotFoundError(ServiceError):
    status, code, title = 404, "not_found", "Not Found"


class MethodNotAllowedError(ServiceError):
    status, code, title = 405, "method_not_allowed", "Method Not Allowed"


class ConflictError(ServiceError):
    """The request conflicts with the current state (a name taken, a resource in use)."""

    status, code, title = 409, "conflict", "Conflict"


class PayloadTooLargeError(ServiceError):
    """A request body, a tensor or an inferred output is over a configured limit."""

    status, code, title = 413, "payload_too_large", "Content Too Large"

    def __init__(
        self,
        limit_name: str,
        limit: int,
        actual: int | None,
        what: str,
        *,
        loc: Sequence[str | int] | None = None,
        hint: str = "",
    ) -> None:
        size = f" ({actual} bytes)" if actual is not None else ""
        super().__init__(
            f"{what}{size} exceeds the limit {limit_name} = {limit} bytes{hint}",
            errors=[{"loc": list(loc or [limit_name]), "msg": f"limit is {limit} bytes{hint}"}],
        )
        self.limit_name, self.limit, self.actual = limit_name, limit, actual


class UnsupportedMediaTypeError(ServiceError):
    status, code, title = 415, "unsupported_media_type", "Unsupported Media Type"


class UnprocessableError(ServiceError):
    """The descriptor or the tensors break a DirectML rule (or the request schema)."""

    status, code, title = 422, "unprocessable", "Unprocessable Content"


class InsufficientStorageError(ServiceError):
    """A configured limit on what the server keeps (registrations, regions) is reached."""

    status, code, title = 507, "insufficient_storage", "Insufficient Storage"


class RetryLaterError(ServiceError):
    """A refusal the client may send again after `retry_after_s` seconds (Retry-After)."""

    retryable = True

    def __init__(self, detail: str, retry_after_s: int) -> None:
        super().__init__(detail, headers={"Retry-After": str(retry_after_s)})


class QueueFullError(RetryLaterError):
    status, code, title = 429, "queue_full", "Too Many Requests"


class UnavailableError(RetryLaterError):
    """Not ready yet, or the device ran out of memory; the server keeps serving."""

    status, code, title = 503, "unavailable", "Service Unavailable"


def host_out_of_memory(retry_after_s: int) -> UnavailableError:
    """The answer to a host allocation that failed: retryable, like the GPU's."""
    return UnavailableError(
        "the host is out of memory for this request; retry later or send less", retry_after_s
    )


class GatewayTimeoutError(ServiceError):
    status, code, title, retryable = 504, "timeout", "Gateway Timeout", True

    @classmethod
    def after(cls, timeout_s: float) -> GatewayTimeoutError:
        """The one wording of a request past its time limit."""
        return cls(f"the request exceeded its time limit of {timeout_s:g} s")


def defect() -> ServiceError:
    """The error a defect is answered with (its details go to the log, never to the client)."""
    return ServiceError("internal error; this is a bug")


BY_STATUS: dict[int, type[ServiceError]] = {
    cls.status: cls
    for cls in (
        BadRequestError,
        RequestTimeoutError,
        UnauthorizedError,
        NotFoundError,
        MethodNotAllowedError,
        ConflictError,
        PayloadTooLargeError,
        UnsupportedMediaTypeError,
        UnprocessableError,
        InsufficientStorageError,
        QueueFullError,
        UnavailableError,
        GatewayTimeoutError,
    )
}


def validation_errors(
    raw: Sequence[Mapping[str, Any]], prefix: Sequence[str | int] = ()
) -> list[ErrorItem]:
    """Pydantic's error list as `{"loc", "msg"}` items (the `body` prefix dropped)."""
    items: list[ErrorItem] = []
    for e in raw:
        loc = [p for p in e.get("loc", ()) if p != "body"]
        items.append({"loc": [*prefix, *loc], "msg": str(e.get("msg", ""))})
    return items


def summarize(errors: Sequence[Mapping[str, Any]]) -> str:
    """One line naming each failing field and its rule, for `detail`."""
    parts = []
    for e in errors[:5]:
        loc = ".".join(str(p) for p in e.get("loc", ()))
        parts.append(f"{loc}: {e.get('msg')}" if loc else str(e.get("msg")))
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(parts) + more


#: The operator layer's errors that a request can end in; `from_kernels` translates them.
KERNEL_ERRORS = (DescriptorError, LimitExceededError, FramingError)


def from_kernels(exc: Exception, loc: tuple[str | int, ...] = ()) -> ServiceError:
    """An error of the operator layer as a service error: the one place they are translated.

    A broken DirectML rule is 422, a size over its limit 413, a binary section that does not
    match its header 400. `loc` is prepended to every location (e.g. `("operator",)`).
    """
    if isinstance(exc, DescriptorError):
        items = [{"loc": [*loc, *e["loc"]], "msg": e["msg"]} for e in exc.errors]
        return UnprocessableError(str(exc.prefixed(*loc)), errors=items)
    if isinstance(exc, LimitExceededError):
        return PayloadTooLargeError(exc.limit_name, exc.limit, exc.actual, exc.what)
    if isinstance(exc, FramingError):
        return BadRequestError(str(exc), errors=exc.errors)
    raise TypeError(f"not an error of the operator layer: {exc!r}")


class kernel_errors:  # lower case: used as a context manager, as contextlib.suppress is
    """`from_kernels` around a block: the operator layer's errors leave it as service errors."""

    def __init__(self, loc: tuple[str | int, ...] = ()) -> None:
        self.loc = loc

    def __enter__(self) -> None:
        pass

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        if isinstance(exc, KERNEL_ERRORS):
            raise from_kernels(exc, self.loc) from None
