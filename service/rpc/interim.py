"""Minimal answers for ModelConfig, ModelStatistics and the repository RPCs.

Each is one function returning Triton's JSON form (what the HTTP endpoints of the same
extensions return), which the gRPC handlers convert to protobuf; a fuller implementation
replaces the function without touching the handlers.
"""

from __future__ import annotations

import math
from typing import Any

from dmlserve.service.errors import ServiceError
from dmlserve.service.kserve import PLATFORM, VERSION
from dmlserve.service.registry import RegisteredOperator
from dmlserve.service.state import ServiceState

INT32_MAX = 2**31 - 1


def model_config(reg: RegisteredOperator, max_tensor_bytes: int) -> dict[str, Any]:
    """The model in Triton's model-configuration JSON: batched (`max_batch_size` > 0, dims
    without the batch) exactly when every input and the output have a `-1` batch.

    `max_batch_size` is then the largest batch whose inputs each fit `max_tensor_bytes`.
    """
    descs = reg.operator.tensor_descs()
    batched = all(d.sizes[0] == -1 for d in descs.values())
    max_batch = 0
    if batched:
        per_item = max(
            d.data_type.itemsize * math.prod(d.sizes[1:])
            for n, d in descs.items()
            if n != "OutputTensor"
        )
        max_batch = max(1, min(INT32_MAX, max_tensor_bytes // max(per_item, 1)))

    def tensor(name: str, desc: Any) -> dict[str, Any]:
        dims = list(desc.sizes[1:] if batched else desc.sizes)
        return {"name": name, "data_type": "TYPE_" + desc.data_type.kserve, "dims": dims}

    config: dict[str, Any] = {
        "name": reg.name,
        "platform": PLATFORM,
        "backend": PLATFORM,
        "max_batch_size": max_batch,
        "input": [tensor(n, d) for n, d in descs.items() if n != "OutputTensor"],
        "output": [tensor("OutputTensor", descs["OutputTensor"])],
    }
    if reg.batching is not None:
        config["dynamic_batching"] = {
            "preferred_batch_size": list(reg.batching.preferred_batch_sizes),
            "max_queue_delay_microseconds": reg.batching.max_queue_delay_us,
        }
    return config


def model_statistics(state: ServiceState, name: str) -> dict[str, Any]:
    """Triton's statistics JSON for `name` (every model when empty): the models with no counts."""
    regs = [state.registry.get(name)] if name else state.registry.list()
    zero = {"count": 0, "ns": 0}
    stages = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")
    return {
        "model_stats": [
            {
                "name": reg.name,
                "version": VERSION,
                "last_inference": 0,
                "inference_count": 0,
                "execution_count": 0,
                "inference_stats": {stage: zero for stage in stages},
                "batch_stats": [],
            }
            for reg in regs
        ]
    }


def repository_index(state: ServiceState) -> dict[str, Any]:
    """Every registered operator, ready (the operators registered are the ones served)."""
    return {
        "models": [
            {"name": reg.name, "version": VERSION, "state": "READY"}
            for reg in state.registry.list()
        ]
    }


class NotImplementedServiceError(ServiceError):
    """An RPC this server does not offer (gRPC UNIMPLEMENTED)."""

    status, code, title = 501, "not_implemented", "Not Implemented"


def repository_load(state: ServiceState, name: str) -> None:
    raise NotImplementedServiceError(
        "loading models from a repository is not offered over gRPC; register the operator "
        "with POST /v1/operators"
    )


def repository_unload(state: ServiceState, name: str) -> None:
    raise NotImplementedServiceError(
        "unloading models is not offered over gRPC; remove the operator with "
        "DELETE /v1/operators/{name}"
    )
