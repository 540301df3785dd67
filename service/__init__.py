"""dmlserve's HTTP service.

A request walks through these modules once, in order: `routes` (thin) -> `body` (read,
decompress, split the framing) -> `pipeline` (the walk, transport-neutral) -> `codec` / `kserve`
(decode the `/v1` / `/v2` request; each tensor through `kernels.wire`) -> `binding` (resolve the
descriptor) -> `concurrency` (queue, slot, event loop or thread; `cost` says what is tiny) ->
`device` (NumPy, or CuPy streams and copies) -> `codec` / `kserve` (encode) -> `responses`.
`work` is the unit passed from binding to the device; `errors` the error classes and the one
translation of the operator layer's errors; `metrics` the Prometheus series and the observation
of each request. Around them: `app` (create_app), `state` (what the app holds, StateDep),
`auth`, `observability` (logs, request ids), `compression`, `registry` and `registration`,
`warmup`, `schemas` (with `examples`, the OpenAPI request examples), `settings`, `cli`, and
`landing` (`GET /` and the 404 of an unknown route).

Needs the `server` extra (`pip install 'dmlserve[server]'`). The package itself imports
nothing, so `dmlserve serve` can say what is missing instead of failing on an import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dmlserve.service.app import create_app
    from dmlserve.service.settings import Settings, get_settings

__all__ = ["Settings", "create_app", "get_settings"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from dmlserve.service.app import create_app

        return create_app
    if name in ("Settings", "get_settings"):
        from dmlserve.service import settings

        return getattr(settings, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
