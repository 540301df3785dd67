"""Service configuration: one `Settings` class, environment variables prefixed `DMLSERVE_`."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

MIB = 1 << 20
GIB = 1 << 30

BackendName = Literal["auto", "cupy", "numpy"]
LogLevel = Literal["debug", "info", "warning", "error", "critical"]
ModelControl = Literal["none", "explicit", "poll"]


class Settings(BaseSettings):
    """Everything an operator of the service can tune; `dmlserve serve` mirrors each field."""

    model_config = SettingsConfigDict(env_prefix="DMLSERVE_", frozen=True, extra="ignore")

    backend: BackendName = Field(
        default="auto", description="auto picks CuPy when a CUDA device answers"
    )
    host: str = Field(default="127.0.0.1", description="address to listen on")
    port: int = Field(default=8000, ge=0, le=65535, description="TCP port to listen on")
    grpc_port: int = Field(
        default=8001, ge=0, le=65535, description="gRPC port (KServe v2 inference service); 0: off"
    )
    device: int = Field(default=0, ge=0, description="CUDA device ordinal (cupy backend)")
    api_keys: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(), description="comma-separated bearer keys; empty disables auth"
    )
    max_request_bytes: int = Field(
        default=64 * MIB, ge=1, description="request body limit, decoded"
    )
    max_tensor_bytes: int = Field(
        default=GIB, ge=1, description="limit on one input tensor's bytes"
    )
    max_output_bytes: int = Field(
        default=GIB, ge=1, description="limit on one output tensor's bytes"
    )
    max_text_output_bytes: int = Field(
        default=64 * MIB,
        ge=1,
        description="limit on an output's text encoding (data or b64) at its longest; "
        "binary has no such limit",
    )
    max_concurrency: int = Field(default=2, ge=1, description="operators computing at once")
    max_queue: int = Field(default=64, ge=0, description="requests waiting for a compute slot")
    request_timeout_s: float = Field(default=60.0, gt=0, description="per-request time limit (504)")
    retry_after_s: int = Field(default=1, ge=0, description="Retry-After on 429 and 503")
    log_level: LogLevel = Field(default="info", description="log level of the JSON logs")
    cupy_cache_dir: str | None = Field(
        default=None, description="CuPy kernel cache (CUPY_CACHE_DIR)"
    )
    warmup: bool = Field(default=True, description="run every operator once at start-up")
    tiny_on_host: bool = Field(
        default=True,
        description="on a GPU, compute tiny requests on the host where its answer is the "
        "device's bit for bit (data movement, integer sums)",
    )
    max_shm_regions: int = Field(
        default=64, ge=0, description="shared-memory regions registered at once (system and CUDA)"
    )
    max_shm_bytes: int = Field(
        default=64 * GIB,
        ge=0,
        description="total byte_size of registered shared-memory regions",
    )
    shutdown_timeout_s: float = Field(
        default=30.0, gt=0, description="grace period for in-flight work"
    )
    max_operators: int = Field(
        default=1000, ge=0, description="runtime registrations kept at once (507 past it)"
    )
    keepalive_timeout_s: float = Field(
        default=5.0, gt=0, description="an idle keep-alive connection is closed after this"
    )
    header_timeout_s: float = Field(
        default=10.0, gt=0, description="a connection must complete its request headers within this"
    )
    body_timeout_s: float = Field(
        default=60.0, gt=0, description="a request body must arrive whole within this (408)"
    )
    max_connections: int = Field(
        default=1000, ge=1, description="open connections; past it a new one gets 503 and is closed"
    )
    model_repository: Path | None = Field(
        default=None, description="directory of <name>.json registrations every replica serves"
    )
    model_control: ModelControl = Field(
        default="none",
        description="none: load every model at start-up, a broken file stops it; explicit: "
        "load on request (/v2/repository/models/{name}/load); poll: load all, then rescan",
    )
    repository_poll_s: float = Field(
        default=15.0, gt=0, description="seconds between rescans of the repository (poll)"
    )

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(k.strip() for k in value.split(",") if k.strip())
        return value

    @field_validator("log_level", "model_control", mode="before")
    @classmethod
    def _lower_level(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    def __repr_args__(self):  # type: ignore[no-untyped-def]
        # Keys never reach a log line or a traceback.
        for name, value in super().__repr_args__():
            yield name, ("***" if name == "api_keys" and value else value)


@functools.cache
def get_settings() -> Settings:
    """The settings read from the environment (once per process)."""
    return Settings()
