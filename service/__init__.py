"""dmlserve's HTTP service: the FastAPI app, wire encodings, limits, registry, metrics, CLI.

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
