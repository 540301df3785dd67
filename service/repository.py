"""The model repository: `<name>.json` files, each a `POST /v1/operators` body, that every
replica serving the directory registers the same way; Triton's repository extension (index,
load, unload) over it.

Model control as in Triton: `none` registers every file before the service turns ready and a
broken file stops start-up; `explicit` loads what `load` asks for; `poll` loads every file,
then rescans every `repository_poll_s`, loading new and changed files and unloading removed
ones. Outside `none`, a broken file is a load error naming the file and the field, and the
models already loaded keep serving. A file is read only up to `max_request_bytes`, the limit
of the same body sent to `POST /v1/operators`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
import orjson

from dmlserve.kernels.wire import BinarySection
from dmlserve.service.errors import BadRequestError, NotFoundError, ServiceError
from dmlserve.service.registration import (
    Prepared,
    Registration,
    prepare,
    read_registration,
    register_prepared,
    unregister,
)
from dmlserve.service.registry import check_name
from dmlserve.service.settings import ModelControl, Settings
from dmlserve.service.state import ServiceState

logger = logging.getLogger("dmlserve")

SUFFIX = ".json"
State = Literal["READY", "UNAVAILABLE"]
Stamp = tuple[int, int, int]  # (inode, size, mtime in ns) of a file as last read


#: Load parameters that would replace the repository's file; not supported.
_OVERRIDES = ("config",)


def refuse_overrides(parameters: Iterable[str]) -> None:
    """400 for a load parameter that would replace the model's file (`config`, `file:...`)."""
    overrides = [k for k in parameters if k in _OVERRIDES or k.startswith("file:")]
    if overrides:
        raise BadRequestError(
            f"load parameter {overrides[0]!r} is not supported: a model is its repository file"
        )


class RepositoryError(ServiceError):
    """A repository file that cannot be registered; the message names the file and field."""

    status, code, title = 400, "repository_error", "Bad Request"

    def __init__(self, path: Path, detail: str, errors: Any = ()) -> None:
        super().__init__(f"model repository file {path}: {detail}", errors=errors)
        self.path, self.reason = path, detail


@dataclass
class Status:
    """What the index says about one file's model."""

    state: State
    reason: str = ""
    stamp: Stamp | None = None  # the file as last loaded (or found broken)


class ModelRepository:
    """One directory of registrations, and the state of each of its models in this replica."""

    def __init__(self, root: Path, control: ModelControl, settings: Settings) -> None:
        self.root = root
        self.control = control
        self.max_file_bytes = settings.max_request_bytes
        self.max_tensor_bytes = settings.max_tensor_bytes
        self.poll_s = settings.repository_poll_s
        self._status: dict[str, Status] = {}
        # One load, unload or rescan at a time: each reads files and changes the registry.
        self._lock = anyio.Lock()

    # ---- files ---------------------------------------------------------------------------

    def files(self) -> dict[str, Path]:
        """`<name>.json` -> path, for every file the directory holds now (hidden ones, such as
        a mounted ConfigMap's `..data`, left out)."""
        try:
            entries = sorted(self.root.iterdir())
        except OSError as exc:
            raise RepositoryError(self.root, f"cannot list the directory: {exc.strerror}") from None
        return {
            p.name.removesuffix(SUFFIX): p
            for p in entries
            if p.name.endswith(SUFFIX) and not p.name.startswith(".") and p.is_file()
        }

    def read(self, name: str, path: Path) -> Prepared:
        """The registration `path` holds, validated (no device needed)."""
        try:
            with path.open("rb") as f:
                info = os.fstat(f.fileno())
                if info.st_size > self.max_file_bytes:
                    raise RepositoryError(
                        path, f"{info.st_size} bytes exceeds the limit max_request_bytes = "
                        f"{self.max_file_bytes} bytes",
                    )  # fmt: skip
                raw = f.read(self.max_file_bytes + 1)
        except OSError as exc:
            raise RepositoryError(path, f"cannot be read: {exc.strerror}") from None
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise RepositoryError(path, f"not valid JSON: {exc}") from None
        try:
            check_name(name)
            reg = read_registration(doc, BinarySection(framed=False), self.max_tensor_bytes)
            if reg.name is not None and reg.name != name:
                msg = f"must be the file's name {name!r} (or left out), got {reg.name!r}"
                raise BadRequestError(f"name: {msg}", errors=[{"loc": ["name"], "msg": msg}])
            prepared = prepare(Registration(reg.descriptor, name, reg.constants, reg.batching))
        except ServiceError as exc:
            raise RepositoryError(path, exc.detail, exc.errors) from None
        return prepared

    def require_directory(self) -> None:
        if not self.root.is_dir():
            raise RepositoryError(self.root, "is not a directory")

    def check(self) -> list[RepositoryError]:
        """Every file validated without a device (as start-up would register it)."""
        errors = []
        for name, path in self.files().items():
            try:
                self.read(name, path)
            except RepositoryError as exc:
                errors.append(exc)
        return errors

    # ---- model control -------------------------------------------------------------------

    async def start(self, state: ServiceState) -> None:
        """Start-up: every file registered (`none`, `poll`) or none (`explicit`).

        With `none`, the first broken file raises RepositoryError; otherwise it is logged and
        the rest load.
        """
        self.require_directory()
        if self.control == "explicit":
            return
        async with self._lock:
            for name, path in self.files().items():
                await self._load(state, name, path, strict=self.control == "none")

    async def load(self, state: ServiceState, name: str) -> None:
        """Load (or reload) `name` from its file; 400 naming file and field if it is broken."""
        self._controllable()
        async with self._lock:
            path = self.files().get(name)
            if path is None:
                raise BadRequestError(
                    f"failed to load {name!r}: the model repository {self.root} has no "
                    f"{name}{SUFFIX}"
                )
            await self._load(state, name, path, strict=True)

    async def unload(self, state: ServiceState, name: str) -> None:
        """Stop serving `name` (a repository model, or a runtime registration)."""
        self._controllable()
        async with self._lock:
            known = name in self._status
            if state.registry.peek(name) is not None:
                unregister(state, name)
            elif not known:
                raise NotFoundError(f"no model named {name!r} is loaded or in the repository")
            if known:
                self._status[name].state, self._status[name].reason = "UNAVAILABLE", "unloaded"

    async def poll(self, state: ServiceState) -> None:
        """One rescan: new and changed files loaded, removed files' models unloaded."""
        async with self._lock:
            files = self.files()
            for name, path in files.items():
                status = self._status.get(name)
                if status is None or status.stamp != _stamp(path):
                    await self._load(state, name, path, strict=False)
            for name in [n for n in self._status if n not in files]:
                reg = state.registry.peek(name)
                if reg is not None and reg.source == "repository":
                    unregister(state, name)
                    logger.info("model unloaded: its file is gone", extra={"model": name})
                del self._status[name]

    async def poll_forever(
        self, state: ServiceState, sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    ) -> None:
        """Rescan every `repository_poll_s` until cancelled; a failed rescan is logged and the
        next one tries again (a model whose file did not load is retried when it changes, or
        at once after a 503 such as the GPU out of memory)."""
        while True:
            await sleep(self.poll_s)
            try:
                await self.poll(state)
            except ServiceError as exc:
                logger.error("model repository rescan failed", extra={"reason": exc.detail})
            except Exception:
                logger.exception("model repository rescan failed")

    def entries(self) -> dict[str, dict[str, Any]]:
        """The index entry of every file's model."""
        if not self.root.is_dir():
            return {}
        entries = {}
        for name in self.files():
            status = self._status.get(name, Status("UNAVAILABLE", "not loaded"))
            entries[name] = _entry(name, status.state, status.reason)
        return entries

    # ---- internals -----------------------------------------------------------------------

    def _controllable(self) -> None:
        if self.control == "none":
            raise BadRequestError(
                "explicit model load and unload are not allowed with model control 'none' "
                "(DMLSERVE_MODEL_CONTROL=explicit or poll allows them)"
            )

    async def _load(self, state: ServiceState, name: str, path: Path, *, strict: bool) -> None:
        stamp = _stamp(path)  # before reading: a change meanwhile is seen by the next rescan
        try:
            prepared = await anyio.to_thread.run_sync(self.read, name, path)
            await register_prepared(state, prepared, source="repository", replace=True)
        except ServiceError as exc:
            if exc.status == 503:
                raise  # out of device memory or shutting down: worth a retry, not the file
            error = exc if isinstance(exc, RepositoryError) else RepositoryError(path, exc.detail)
            self._status[name] = Status("UNAVAILABLE", error.reason, stamp)
            logger.error("model not loaded", extra={"model": name, "reason": error.detail})
            if strict:
                raise error from None
            return
        self._status[name] = Status("READY", "", stamp)
        logger.info("model loaded", extra={"model": name, "file": str(path)})


def check_repository(settings: Settings) -> None:
    """With model control `none`, every file of the repository validated before start-up
    (no device needed); raises the first broken file's RepositoryError."""
    if settings.model_repository is None or settings.model_control != "none":
        return
    repository = ModelRepository(settings.model_repository, "none", settings)
    repository.require_directory()
    errors = repository.check()
    if errors:
        more = f" (and {len(errors) - 1} more broken files)" if len(errors) > 1 else ""
        raise RepositoryError(errors[0].path, errors[0].reason + more)


def repository_of(state: ServiceState) -> ModelRepository:
    """The service's model repository; 400 when none is configured."""
    if state.repository is None:
        raise BadRequestError(
            "no model repository is configured (DMLSERVE_MODEL_REPOSITORY / --model-repository)"
        )
    return state.repository


def index(state: ServiceState, ready_only: bool = False) -> list[dict[str, Any]]:
    """Triton's repository index: every file's model, and every registration (all READY)."""
    entries = state.repository.entries() if state.repository is not None else {}
    for reg in state.registry.list():
        entries[reg.name] = _entry(reg.name, "READY")
    found = [entries[n] for n in sorted(entries)]
    return [e for e in found if e["state"] == "READY"] if ready_only else found


def _stamp(path: Path) -> Stamp | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def _entry(name: str, state: State, reason: str = "") -> dict[str, Any]:
    return {"name": name, "version": "1", "state": state, "reason": reason}
