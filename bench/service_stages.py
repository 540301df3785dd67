"""Per-stage timers for `service_profile.py --stages`: where a request's microseconds go.

Each stage function of the request path is wrapped with a wall-clock timer while the in-process
driver runs; the report gives each stage's own time per request (its time less the stages it
calls). The stages are found by name, the first of each stage's names that exists, so the same
report runs on older trees of the service (`PYTHONPATH=<tree>/src`). A wrapper costs about a
microsecond, counted in the stage that calls it; the timings are of the request path as it runs
among everything else, caches shared, not of each piece alone.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import time
from collections.abc import Callable
from typing import Any

#: stage -> names to try, "module:attribute.path" (patched where the caller looks it up).
STAGES: dict[str, tuple[str, ...]] = {
    "app": ("dmlserve.service.app:ServiceApp.__call__", "fastapi.applications:FastAPI.__call__"),
    "endpoint": ("dmlserve.service.routes.v1:_execute",),
    "read_body": ("dmlserve.service.routes.v1:read_body",),
    "pipeline": ("dmlserve.service.routes.v1:run",),
    "decode": ("dmlserve.service.codec:V1Exchange.decode",),
    "bind": ("dmlserve.service.pipeline:bind",),
    "compute": ("dmlserve.service.pipeline:compute",),
    "device": ("dmlserve.service.device:Device.run",),
    "encode": ("dmlserve.service.codec:V1Exchange.encode",),
    "metrics_enter": (
        "dmlserve.service.observation:Observation.__enter__",
        "dmlserve.service.metrics:Observation.__enter__",
    ),
    "metrics_exit": (
        "dmlserve.service.observation:Observation.__exit__",
        "dmlserve.service.metrics:Observation.__exit__",
    ),
}

#: The report's lines: a label and its own time, from the stages' inclusive times `t`.
LINES: tuple[tuple[str, Callable[[dict[str, float]], float]], ...] = (
    ("service middleware, dispatch, API key, response sending",
     lambda t: t["app"] - t["endpoint"]),
    ("reading the body (headers, deadline, receive)", lambda t: t["read_body"]),
    ("decoding (JSON, envelope validation, tensors)", lambda t: t["decode"]),
    ("binding (resolve cache, Work)", lambda t: t["bind"]),
    ("queue, slot, placement around the device call", lambda t: t["compute"] - t["device"]),
    ("the device call (the operator's NumPy work)", lambda t: t["device"]),
    ("encoding the response", lambda t: t["encode"]),
    ("metrics", lambda t: t["metrics_enter"] + t["metrics_exit"]),
    ("the rest of the pipeline", lambda t: t["pipeline"] - sum(
        t[k] for k in ("decode", "bind", "compute", "encode", "metrics_enter", "metrics_exit"))),
    ("the rest of the endpoint (queue check, exchange)",
     lambda t: t["endpoint"] - t["read_body"] - t["pipeline"]),
)  # fmt: skip


class StageTimers:
    """Wraps each stage found; `report(n)` gives microseconds per request for `n` requests."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.found: dict[str, str] = {}
        self._patched: list[tuple[Any, str, Any]] = []
        for stage, names in STAGES.items():
            for name in names:
                owner, attr = _resolve(name)
                if owner is not None:
                    self._wrap(stage, owner, attr)
                    self.found[stage] = name
                    break

    def _wrap(self, stage: str, owner: Any, attr: str) -> None:
        original = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
        self.seconds[stage] = 0.0
        seconds = self.seconds
        clock = time.perf_counter

        if inspect.iscoroutinefunction(original):

            @functools.wraps(original)
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                t0 = clock()
                try:
                    return await original(*args, **kwargs)
                finally:
                    seconds[stage] += clock() - t0

            wrapper: Any = timed_async
        else:

            @functools.wraps(original)
            def timed(*args: Any, **kwargs: Any) -> Any:
                t0 = clock()
                try:
                    return original(*args, **kwargs)
                finally:
                    seconds[stage] += clock() - t0

            wrapper = timed
        setattr(owner, attr, wrapper)
        self._patched.append((owner, attr, original))

    def reset(self) -> None:
        for stage in self.seconds:
            self.seconds[stage] = 0.0

    def report(self, requests: int) -> list[tuple[str, float]]:
        per = {stage: self.seconds.get(stage, 0.0) / requests * 1e6 for stage in STAGES}
        return [(label, own(per)) for label, own in LINES]


def _resolve(name: str) -> tuple[Any, str]:
    module_name, _, path = name.partition(":")
    try:
        owner: Any = importlib.import_module(module_name)
    except ImportError:
        return None, ""
    *parents, attr = path.split(".")
    for part in parents:
        owner = getattr(owner, part, None)
        if owner is None:
            return None, ""
    if not hasattr(owner, attr):
        return None, ""
    return owner, attr
