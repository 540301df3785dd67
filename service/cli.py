"""`dmlserve serve`: run the service under uvicorn; every setting has a flag."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, get_args

from pydantic import ValidationError

from dmlserve import __version__

try:
    from dmlserve.service.settings import Settings
except ImportError as exc:  # the plain install is the SDK; serving needs the extra
    sys.stderr.write(
        f"dmlserve: the server needs the 'server' extra ({exc.name} is not installed): "
        "pip install 'dmlserve[server]'\n"
    )
    sys.exit(2)

logger = logging.getLogger("dmlserve")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dmlserve",
        description="DirectML operators as an inference service (KServe v2 / Triton compatible).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="run the HTTP service",
        description="Run the HTTP service. Each flag overrides its DMLSERVE_* environment "
        "variable (--max-queue for DMLSERVE_MAX_QUEUE, ...); the defaults shown are the "
        "built-in ones.",
    )
    for name, field in Settings.model_fields.items():
        literal = name in ("backend", "log_level", "model_control")
        choices = get_args(field.annotation) if literal else None
        default = field.default
        shown = ",".join(default) if isinstance(default, tuple) else default
        help_text = f"{field.description} (env DMLSERVE_{name.upper()}; default: {shown!s})"
        kwargs: dict[str, Any] = {"default": argparse.SUPPRESS, "help": help_text}
        if field.annotation is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["metavar"] = "{" + ",".join(choices) + "}" if choices else name.upper()
            if choices:
                kwargs["choices"] = choices
                kwargs["type"] = str.lower
        serve.add_argument(_flag(name), dest=name, **kwargs)
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Environment first, then the flags given on the command line."""
    given = {k: v for k, v in vars(args).items() if k in Settings.model_fields}
    return Settings(**given)


def serve(settings: Settings) -> None:
    import uvicorn

    from dmlserve import kernels
    from dmlserve.service.app import create_app
    from dmlserve.service.observability import configure_logging
    from dmlserve.service.repository import RepositoryError, check_repository

    configure_logging(settings.log_level)
    if settings.cupy_cache_dir:
        # CuPy reads its cache location from the environment; set it before CuPy is imported.
        os.environ["CUPY_CACHE_DIR"] = settings.cupy_cache_dir
    try:
        # Checked here as well as in the lifespan, to stop with one clear line, no traceback.
        kernels.select_backend(settings.backend)
        check_repository(settings)
    except (kernels.BackendUnavailableError, RepositoryError) as exc:
        logger.error("start-up failed", extra={"reason": str(exc)})
        sys.stderr.write(f"dmlserve: {exc}\n")
        sys.exit(2)
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=int(settings.shutdown_timeout_s),
        lifespan="on",
        server_header=False,
    )
    server = uvicorn.Server(config)
    # uvicorn handles SIGTERM/SIGINT: stop accepting, let in-flight requests finish, then
    # run the lifespan shutdown.
    server.run()
    if not server.started:
        sys.exit(3)


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":
        try:
            settings = settings_from_args(args)
        except ValidationError as exc:
            parser.error(
                "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            )
        serve(settings)


if __name__ == "__main__":
    main()
