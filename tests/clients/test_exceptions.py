"""Status -> exception mapping and the fields each error carries, from real httpx responses."""

from __future__ import annotations

import httpx
import pytest

from dmlserve import clients
from dmlserve.clients._exceptions import make_status_error

REQUEST = httpx.Request("POST", "http://dmlserve.test/v1/execute", headers={"X-Request-ID": "sent"})


def _response(status: int, **kwargs: object) -> httpx.Response:
    return httpx.Response(status, request=REQUEST, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, clients.BadRequestError),
        (401, clients.AuthenticationError),
        (403, clients.PermissionDeniedError),
        (404, clients.NotFoundError),
        (413, clients.PayloadTooLargeError),
        (415, clients.UnsupportedMediaTypeError),
        (422, clients.UnprocessableEntityError),
        (429, clients.RateLimitError),
        (500, clients.InternalServerError),
        (502, clients.InternalServerError),
        (503, clients.ServiceUnavailableError),
        (504, clients.GatewayTimeoutError),
        (409, clients.APIStatusError),
    ],
)
def test_each_status_has_its_class(status: int, cls: type[clients.APIStatusError]) -> None:
    err = make_status_error(_response(status, json={"detail": "why"}))
    assert type(err) is cls
    assert isinstance(err, clients.APIStatusError) and isinstance(err, clients.DmlserveError)
    assert err.status_code == status and err.detail == "why"
    assert str(status) in str(err) and "why" in str(err)


def test_5xx_family_shares_internal_server_error() -> None:
    assert issubclass(clients.ServiceUnavailableError, clients.InternalServerError)
    assert issubclass(clients.GatewayTimeoutError, clients.InternalServerError)
    assert not issubclass(clients.RateLimitError, clients.InternalServerError)


def test_problem_json_fields() -> None:
    problem = {
        "type": "https://dmlserve.dev/problems/unprocessable",
        "title": "Unprocessable Content",
        "status": 422,
        "detail": "operator.WindowSizes: has 1 entries",
        "errors": [{"loc": ["operator", "WindowSizes"], "msg": "has 1 entries"}],
    }
    response = _response(
        422,
        json=problem,
        headers={"Content-Type": "application/problem+json", "X-Request-ID": "answered"},
    )
    err = make_status_error(response)
    assert err.code == "unprocessable" and err.title == "Unprocessable Content"
    assert err.detail == problem["detail"] and err.errors == problem["errors"]
    assert err.request_id == "answered" and err.response is response and err.body == problem


def test_explicit_code_wins_and_request_id_falls_back_to_the_sent_one() -> None:
    err = make_status_error(_response(429, json={"code": "queue_full", "type": "about:blank"}))
    assert err.code == "queue_full" and err.request_id == "sent"
    assert make_status_error(_response(429, json={"type": "about:blank"})).code is None
    urn = make_status_error(_response(404, json={"type": "urn:dmlserve:problem:not_found"}))
    assert urn.code == "not_found"


def test_v2_error_shape_becomes_detail() -> None:
    err = make_status_error(_response(404, json={"error": "model 'x' not found"}))
    assert isinstance(err, clients.NotFoundError)
    assert err.detail == "model 'x' not found" and err.errors == [] and err.title is None


def test_non_json_body_is_kept_as_text() -> None:
    err = make_status_error(_response(502, text="<html>bad gateway</html>"))
    assert isinstance(err, clients.InternalServerError)
    assert err.body == "<html>bad gateway</html>" and err.detail is None
    assert "bad gateway" in str(err)
