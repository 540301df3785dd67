"""dmlserve's HTTP service: the FastAPI app, wire encodings, limits, registry, metrics, CLI."""

__version__ = "0.1.0"

from service.app import create_app  # noqa: E402
from service.settings import Settings, get_settings  # noqa: E402

__all__ = ["Settings", "create_app", "get_settings"]
