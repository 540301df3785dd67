"""Working request examples, one per operator, made from the operator table's warm-up examples.

The OpenAPI document carries them (Swagger UI's "Try it out" sends them as they are) and the
landing page shows them as curl commands. Each request body schema gets its own kind of example:
inline execution, registration (with a variable batch), execution by name, KServe v2 inference.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from dmlserve.kernels import OPERATORS, OperatorSpec, TensorDesc

Spec = OperatorSpec[Any, ...]
#: tensors whose batch size a registration may leave open (-1)
_BATCHED = ("InputTensor", "OutputTensor")
#: the paths whose `{name}` is a registered operator (a KServe v2 model)
_NAMED = ("/v1/operators/{name}", "/v2/models/{name}")


def model_name(spec: Spec) -> str:
    """The name the registration example registers the operator under."""
    return f"{spec.name}-example"


def _values(desc: TensorDesc) -> list[int]:
    # small non-negative integers: exact in every DataType, int8 and float16 included
    return [i % 8 for i in range(desc.element_count)]


def _tensor(desc: TensorDesc) -> dict[str, Any]:
    return {"DataType": desc.data_type.value, "Sizes": list(desc.sizes), "data": _values(desc)}


def _inputs(spec: Spec) -> dict[str, Any]:
    return {name: _tensor(desc) for name, desc in spec.warmup.inputs.items()}


def execute_body(spec: Spec) -> dict[str, Any]:
    """`POST /v1/execute`: the descriptor and its input tensors."""
    return {"operator": dict(spec.warmup.descriptor), "inputs": _inputs(spec)}


def register_body(spec: Spec) -> dict[str, Any]:
    """`POST /v1/operators`: the descriptor with its input descriptors, any batch size."""
    operator = dict(spec.warmup.descriptor)
    for name, desc in spec.warmup.inputs.items():
        operator[name] = {"DataType": desc.data_type.value, "Sizes": list(desc.sizes)}
    for name in _BATCHED:
        if name in operator:
            operator[name] = {**operator[name], "Sizes": [-1, *operator[name]["Sizes"][1:]]}
    return {"name": model_name(spec), "operator": operator}


def execute_registered_body(spec: Spec) -> dict[str, Any]:
    """`POST /v1/operators/{name}/execute`: the input tensors of the registered example."""
    return {"inputs": _inputs(spec)}


def infer_body(spec: Spec) -> dict[str, Any]:
    """`POST /v2/models/{name}/infer`: the same tensors as KServe v2 inputs."""
    inputs = [
        {
            "name": name,
            "shape": list(desc.sizes),
            "datatype": desc.data_type.kserve,
            "data": _values(desc),
        }
        for name, desc in spec.warmup.inputs.items()
    ]
    return {"inputs": inputs}


#: request body schema -> the example body of an operator
BODIES: dict[str, Callable[[Spec], dict[str, Any]]] = {
    "ExecuteRequest": execute_body,
    "RegisterRequest": register_body,
    "OperatorExecuteRequest": execute_registered_body,
    "InferRequest": infer_body,
}


def _summary(spec: Spec, schema: str) -> str:
    if schema in ("OperatorExecuteRequest", "InferRequest"):
        return f"{spec.type} (name: {model_name(spec)}, registered by POST /v1/operators)"
    return spec.type


def _operations(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, item in doc.get("paths", {}).items():
        for method, operation in item.items():
            if method != "parameters" and isinstance(operation, dict):
                yield path, operation


def add_examples(doc: dict[str, Any]) -> None:
    """Give the operator request bodies and the operator `{name}` parameters of the OpenAPI
    `doc` working examples."""
    for path, operation in _operations(doc):
        content = operation.get("requestBody", {}).get("content", {}).get("application/json")
        ref = (content or {}).get("schema", {}).get("$ref", "")
        body = BODIES.get(ref.rsplit("/", 1)[-1])
        if content is not None and body is not None:
            schema = ref.rsplit("/", 1)[-1]
            content["examples"] = {
                spec.type: {"summary": _summary(spec, schema), "value": body(spec)}
                for spec in OPERATORS.values()
            }
        if path.startswith(_NAMED):
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "path" and parameter.get("name") == "name":
                    parameter["examples"] = {
                        spec.type: {"summary": spec.type, "value": model_name(spec)}
                        for spec in OPERATORS.values()
                    }


def curl(base: str, spec: Spec) -> str:
    """The inline execution example as a curl command against `base`."""
    body = json.dumps(execute_body(spec), separators=(", ", ": "))
    return f"curl -s {base}/v1/execute -H 'Content-Type: application/json' -d '{body}'"
