"""Backoff and Retry-After arithmetic, with the jitter's random source pinned."""

from __future__ import annotations

import email.utils
import time

import httpx
import pytest

from dmlserve.clients import Client, backoff_delay, parse_retry_after
from dmlserve.clients._constants import INITIAL_RETRY_DELAY, MAX_RETRY_DELAY


def test_backoff_doubles_and_caps() -> None:
    no_jitter = [backoff_delay(a, rand=lambda: 0.0) for a in range(8)]
    assert no_jitter[:5] == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert no_jitter[0] == INITIAL_RETRY_DELAY and max(no_jitter) == MAX_RETRY_DELAY


def test_jitter_shortens_by_at_most_a_quarter() -> None:
    assert backoff_delay(2, rand=lambda: 1.0) == pytest.approx(1.5)
    for attempt in range(6):
        delay = backoff_delay(attempt)
        top = min(INITIAL_RETRY_DELAY * 2**attempt, MAX_RETRY_DELAY)
        assert 0.75 * top <= delay <= top


def test_retry_after_forms() -> None:
    assert parse_retry_after(httpx.Headers({"Retry-After": "3"})) == 3.0
    assert parse_retry_after(httpx.Headers({"Retry-After": "0.25"})) == 0.25
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "150", "Retry-After": "9"})) == 0.15
    assert parse_retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    assert parse_retry_after(httpx.Headers({"Retry-After": "inf"})) is None
    assert parse_retry_after(httpx.Headers()) is None
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (parse_retry_after(httpx.Headers({"Retry-After": date})) or 0) <= 30


def test_retry_after_is_honoured_up_to_a_minute() -> None:
    client = Client("http://dmlserve.test")
    request = httpx.Request("GET", "http://dmlserve.test/")

    def delay(header: str, attempt: int = 0) -> float:
        response = httpx.Response(503, headers={"Retry-After": header}, request=request)
        return client._retry_delay(attempt, response)

    assert delay("2") == 2.0 and delay("0") == 0.0
    assert 0.75 * 2.0 <= delay("3600", attempt=2) <= 2.0  # absurd: back off instead
    client.close()


def test_max_retries_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        Client("http://dmlserve.test", max_retries=-1)
