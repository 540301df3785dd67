"""The sync and async twins expose the same public methods with the same signatures."""

from __future__ import annotations

import inspect

import pytest

from dmlserve.clients import AsyncClient, AsyncRegisteredOperator, Client, RegisteredOperator

SYNC_ONLY = {"__enter__", "__exit__"}
ASYNC_ONLY = {"__aenter__", "__aexit__"}


def _public(cls: type) -> dict[str, inspect.Signature]:
    names = {
        name
        for name, value in inspect.getmembers(cls)
        if callable(value) and (not name.startswith("_") or name in SYNC_ONLY | ASYNC_ONLY)
    }
    return {name: inspect.signature(getattr(cls, name)) for name in names}


def _strip(signature: inspect.Signature) -> inspect.Signature:
    # Return annotations differ by design (Client vs AsyncClient, RegisteredOperator vs Async...)
    params = [
        p.replace(annotation=str(p.annotation).replace("Async", ""))
        for p in signature.parameters.values()
    ]
    return signature.replace(parameters=params, return_annotation=inspect.Signature.empty)


@pytest.mark.parametrize(
    ("sync_cls", "async_cls"),
    [(Client, AsyncClient), (RegisteredOperator, AsyncRegisteredOperator)],
)
def test_twins_have_the_same_public_methods(sync_cls: type, async_cls: type) -> None:
    sync, asyn = _public(sync_cls), _public(async_cls)
    assert set(sync) - SYNC_ONLY == set(asyn) - ASYNC_ONLY
    for name in set(sync) - SYNC_ONLY:
        assert _strip(sync[name]) == _strip(asyn[name]), name
        if name != "__init__":
            assert inspect.iscoroutinefunction(getattr(async_cls, name)), name
            assert not inspect.iscoroutinefunction(getattr(sync_cls, name)), name


def test_return_annotations_match_up_to_the_async_prefix() -> None:
    for name, signature in _public(Client).items():
        if name in SYNC_ONLY:
            continue
        twin = inspect.signature(getattr(AsyncClient, name))
        assert str(signature.return_annotation) == str(twin.return_annotation).replace(
            "Async", ""
        ), name


def test_client_signature_matches_the_documented_one() -> None:
    params = list(inspect.signature(Client).parameters)
    assert params[:5] == ["base_url", "api_key", "timeout", "max_retries", "http_client"]
    helpers = {
        "fold": [
            "x",
            "output_size",
            "window_sizes",
            "strides",
            "dilations",
            "start_padding",
            "end_padding",
        ],
        "unfold": ["x", "window_sizes", "strides", "dilations", "start_padding", "end_padding"],
        "padding": ["x", "start_padding", "end_padding", "mode", "value"],
        "average_pooling": [
            "x",
            "window_size",
            "strides",
            "dilations",
            "start_padding",
            "end_padding",
            "include_padding",
        ],
        "convolution_integer": [
            "x",
            "w",
            "x_zero_point",
            "w_zero_point",
            "strides",
            "dilations",
            "start_padding",
            "end_padding",
            "group_count",
        ],
    }
    for name, expected in helpers.items():
        assert list(inspect.signature(getattr(Client, name)).parameters)[1:] == expected, name
