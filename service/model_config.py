"""A registered operator as Triton's model configuration (the `ModelConfig` of Triton's
model_config.proto, in its JSON form), for `GET /v2/models/{name}/config` and any other
transport that answers a ModelConfig request: the dict uses only the message's field names, so
`google.protobuf.json_format.ParseDict` reads it into `inference.ModelConfig` as it is.

`max_batch_size` is above 0 exactly when the model's batch is variable: every input a request
carries and the output have a -1 batch. Dims then leave the batch out, as Triton's do. Its value
is the registration's `batching.max_batch_size` when dynamic batching is on, else
`DEFAULT_MAX_BATCH_SIZE`. Otherwise it is 0 and the dims are the full sizes (e.g.
CONVOLUTION_INTEGER with a FilterTensor sent with each request).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from dmlserve.kernels import TensorDesc
from dmlserve.service.kserve import PLATFORM
from dmlserve.service.registry import RegisteredOperator, wire

if TYPE_CHECKING:
    from dmlserve.service.state import ServiceState

#: The max_batch_size a model with a variable batch and no `batching` reports: the batch that
#: tools such as perf_analyzer and Model Analyzer may use. The service itself accepts any
#: batch whose tensors fit the request, tensor and output limits.
DEFAULT_MAX_BATCH_SIZE = 256


def data_type(desc: TensorDesc) -> str:
    """Triton's TYPE_* name of a tensor's DataType (TYPE_ and the KServe datatype)."""
    return "TYPE_" + desc.data_type.kserve


def max_batch_size(reg: RegisteredOperator) -> int:
    """The model's max_batch_size (0: no batch dimension of its own)."""
    if not reg.variable_batch:
        return 0
    return reg.batching.max_batch_size if reg.batching else DEFAULT_MAX_BATCH_SIZE


def model_config(
    reg: RegisteredOperator, *, kind: str = "KIND_CPU", count: int = 1, gpus: tuple[int, ...] = ()
) -> dict[str, Any]:
    """The model's configuration; `kind`, `count` and `gpus` describe its instance group (the
    device, the compute slots)."""
    batch = max_batch_size(reg)
    skip = 1 if batch else 0
    out = reg.operator.output_tensor
    assert out is not None
    optional = reg.operator.optional_input_names
    config: dict[str, Any] = {
        "name": reg.name,
        "platform": PLATFORM,
        "backend": PLATFORM,
        "version_policy": {"latest": {"num_versions": 1}},
        "max_batch_size": batch,
        "input": [
            {
                "name": name,
                "data_type": data_type(desc),
                "format": "FORMAT_NONE",
                "dims": list(desc.sizes[skip:]),
                "is_shape_tensor": False,
                "allow_ragged_batch": False,
                "optional": name in optional,
            }
            for name, desc in reg.inputs.items()
        ],
        "output": [
            {
                "name": "OutputTensor",
                "data_type": data_type(out),
                "dims": list(out.sizes[skip:]),
                "label_filename": "",
                "is_shape_tensor": False,
            }
        ],
        "instance_group": [{"name": reg.name, "kind": kind, "count": count, "gpus": list(gpus)}],
        "parameters": {
            # The DirectML descriptor the model runs, for tools that show a model's settings.
            "operator": {"string_value": orjson.dumps(wire(reg.operator)).decode()},
        },
    }
    if reg.batching is not None:
        dynamic: dict[str, Any] = {
            "max_queue_delay_microseconds": reg.batching.max_queue_delay_us,
        }
        if reg.batching.preferred_batch_sizes:
            dynamic["preferred_batch_size"] = list(reg.batching.preferred_batch_sizes)
        config["dynamic_batching"] = dynamic
    return config


def service_model_config(state: ServiceState, reg: RegisteredOperator) -> dict[str, Any]:
    """`model_config` with this service's instance group: its device and compute slots."""
    gpu = state.device is not None and state.device.name == "cupy"
    return model_config(
        reg,
        kind="KIND_GPU" if gpu else "KIND_CPU",
        count=state.settings.max_concurrency,
        gpus=(state.settings.device,) if gpu else (),
    )
