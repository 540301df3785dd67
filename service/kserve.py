"""KServe v2 (Open Inference Protocol) tensors: model metadata, inference inputs and outputs.

Registered operators are models; tensor names are the DirectML field names and datatypes the
KServe names from `kernels.dtypes` (FP32, INT8, ...). Each tensor goes through `kernels.wire`,
the codec `/v1` and the SDK use too; KServe tensors carry no Strides and no `b64`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from starlette.responses import Response

from dmlserve import __version__
from dmlserve.kernels import DescriptorError, OperatorBase
from dmlserve.kernels.dtypes import DataType, from_kserve, from_numpy
from dmlserve.kernels.wire import (
    BinarySection,
    Encoding,
    HostTensor,
    check_layout,
    decode_tensor,
    encode_payload,
)
from dmlserve.service.binding import constant_sent, with_constants
from dmlserve.service.body import Body
from dmlserve.service.codec import BodyExchange, load_json, validate
from dmlserve.service.concurrency import INLINE_BYTES
from dmlserve.service.pipeline import Decoded
from dmlserve.service.registry import RegisteredOperator
from dmlserve.service.responses import tensor_response
from dmlserve.service.schemas import InferInput, InferRequest, InferRequestedOutput
from dmlserve.service.shm import Leases, Region, SharedMemory, ShmRef, shm_ref
from dmlserve.service.work import Outcome

PLATFORM = "dmlserve"
VERSION = "1"
EXTENSIONS = ["binary_tensor_data", "model_repository", "statistics"]


def server_metadata(shared_memory: SharedMemory) -> dict[str, Any]:
    """Name, version and the extensions served (shared memory as the device allows)."""
    extensions = [*EXTENSIONS, *shared_memory.extensions]
    return {"name": "dmlserve", "version": __version__, "extensions": extensions}


def _tensor_meta(name: str, desc: Any) -> dict[str, Any]:
    return {"name": name, "datatype": desc.data_type.kserve, "shape": list(desc.sizes)}


def model_metadata(reg: RegisteredOperator) -> dict[str, Any]:
    """The model's metadata: the inputs a request carries (constants left out), the output."""
    out = reg.operator.output_tensor
    assert out is not None
    return {
        "name": reg.name,
        "versions": [VERSION],
        "platform": PLATFORM,
        "inputs": [_tensor_meta(n, d) for n, d in reg.inputs.items()],
        "outputs": [_tensor_meta("OutputTensor", out)],
    }


def model_statistics(regs: Iterable[RegisteredOperator]) -> dict[str, Any]:
    """Triton's statistics document (`{"model_stats": [...]}`) of the models `regs`."""
    return {"model_stats": [reg.statistics.to_json(reg.name, VERSION) for reg in regs]}


@dataclass
class InferDecoded(Decoded):
    request_id: str | None = None
    binary: dict[str, bool] | None = None  # output name -> sent as binary?
    shm_outputs: dict[str, tuple[Region, ShmRef]] | None = None  # outputs into shared memory

    def output_encoding(self) -> Encoding:
        if "OutputTensor" in (self.shm_outputs or {}):
            return "binary"  # written to shared memory: no text at all
        return "binary" if (self.binary or {}).get("OutputTensor", True) else "json"


class InferExchange(BodyExchange):
    """`POST /v2/models/{name}/infer` on a registered operator; `leases` holds the shared-memory
    regions it uses until the caller releases them."""

    def __init__(
        self, body: Body, max_tensor_bytes: int, registered: RegisteredOperator,
        shared_memory: SharedMemory | None = None,
    ) -> None:  # fmt: skip
        super().__init__(body, max_tensor_bytes, registered)
        self.leases = Leases(shared_memory or SharedMemory(0, 0))
        if self.decode_bytes <= INLINE_BYTES and b"shared_memory_region" in bytes(body.json):
            # A small body may read any amount from shared memory: decode off the event loop.
            self.decode_bytes = INLINE_BYTES + 1

    def decode(self) -> InferDecoded:
        req = validate(InferRequest, load_json(self.body.json))
        binary = wants_binary(req)
        assert self.registered is not None
        op = self.registered.operator
        section = self.body.section()
        inputs = decode_inputs(
            req.inputs, section, op, self.max_tensor_bytes, self.leases, self.registered.constants
        )
        where = {item.name: ("inputs", i) for i, item in enumerate(req.inputs)}
        decoded = InferDecoded(
            op, inputs, input_locs=where, request_id=req.id, binary=binary,
            constants=self.registered.prepared,
        )  # fmt: skip
        return with_shm_outputs(decoded, req.outputs or [], self.leases)

    def encode(self, decoded: InferDecoded, outcome: Outcome) -> tuple[Response, int]:
        outputs = {"OutputTensor": outcome.output}
        assert decoded.binary is not None
        write_shm_outputs(decoded, outputs, self.leases)
        shm = {n: ref for n, (_, ref) in (decoded.shm_outputs or {}).items()}
        return infer_response(self.model, decoded.request_id, outputs, decoded.binary, shm)


def with_shm_outputs(
    decoded: InferDecoded, outputs: Iterable[InferRequestedOutput], leases: Leases
) -> InferDecoded:
    """`decoded` with the outputs that go to shared memory; a CUDA region becomes the sink the
    device copies the output into, and the device holds the request's regions while it runs."""
    chosen: dict[str, tuple[Region, ShmRef]] = {}
    for i, out in enumerate(outputs):
        loc: tuple[str | int, ...] = ("outputs", i)
        if out.name != "OutputTensor":
            msg = f"the model has no output {out.name!r}; its output is OutputTensor"
            raise DescriptorError.at((*loc, "name"), msg)
        ref = shm_ref(out.parameters, loc)
        if ref is not None:
            chosen[out.name] = (leases.take(ref, loc), ref)
    decoded.shm_outputs = chosen
    if leases.regions:
        decoded.pin = leases.held()
    for region, ref in chosen.values():
        if region.kind == "cuda":
            from dmlserve.service.cudashm import CudaRegion, CudaSink

            assert isinstance(region, CudaRegion)
            decoded.sink = CudaSink(region, ref)
    return decoded


def write_shm_outputs(
    decoded: InferDecoded, outputs: Mapping[str, np.ndarray], leases: Leases
) -> None:
    """Store the outputs that go to system shared memory (CUDA ones the device wrote)."""
    for name, (region, ref) in (decoded.shm_outputs or {}).items():
        leases.write(region, ref, outputs[name], name)


def _datatype(name: str, loc: tuple[str | int, ...]) -> DataType:
    try:
        return from_kserve(name)
    except ValueError as exc:
        allowed = ", ".join(d.kserve for d in DataType)
        raise DescriptorError.at((*loc, "datatype"), f"{exc}; expected one of {allowed}") from None


def decode_inputs(
    items: Iterable[InferInput],
    section: BinarySection,
    op: OperatorBase,
    max_tensor_bytes: int,
    leases: Leases | None = None,
    constants: Mapping[str, HostTensor] | None = None,
) -> dict[str, HostTensor]:
    """The request's input tensors by name (binary sections taken in request order; inputs
    naming a shared-memory region read from it, through `leases`), with the model's
    `constants` added."""
    leases = leases or Leases(SharedMemory(0, 0))
    constants = constants or {}
    expected = [n for n in op.tensor_descs() if n != "OutputTensor" and n not in constants]
    tensors: dict[str, HostTensor] = {}
    for i, item in enumerate(items):
        loc: tuple[str | int, ...] = ("inputs", i)
        if item.name in constants:
            raise constant_sent(item.name, (*loc, "name"))
        if item.name not in expected:
            msg = f"the model has no input {item.name!r}; its inputs are " + ", ".join(expected)
            raise DescriptorError.at((*loc, "name"), msg)
        if item.name in tensors:
            raise DescriptorError.at((*loc, "name"), f"input {item.name!r} is given twice")
        ref = shm_ref(item.parameters, loc)
        if ref is not None:
            if item.data is not None or "binary_data_size" in (item.parameters or {}):
                msg = "give either shared_memory_region or a payload (data, binary_data_size)"
                raise DescriptorError.at(loc, msg)
            dt = _datatype(item.datatype, loc)
            layout = check_layout(dt, item.shape, None, loc, max_tensor_bytes)
            tensors[item.name] = leases.read(ref, layout, loc)
            continue
        tensors[item.name], _ = decode_tensor(
            _datatype(item.datatype, loc), item.shape,
            data=item.data, binary_size=(item.parameters or {}).get("binary_data_size"),
            section=section, loc=loc, max_tensor_bytes=max_tensor_bytes,
            accepts=("json", "binary"),
        )  # fmt: skip
    section.finish()
    tensors = with_constants(tensors, constants)
    missing = [n for n in op.input_names if n not in tensors]
    if missing:
        raise DescriptorError.at(("inputs",), "missing input(s): " + ", ".join(missing))
    return tensors


def shm_parameters(ref: ShmRef, nbytes: int) -> dict[str, Any]:
    """An output's parameters in a gRPC response when it was written to shared memory."""
    params: dict[str, Any] = {"shared_memory_region": ref.region}
    params["shared_memory_byte_size"] = nbytes
    if ref.offset:
        params["shared_memory_offset"] = ref.offset
    return params


def wants_binary(req: InferRequest) -> dict[str, bool]:
    """Output name -> binary?, from `outputs[].parameters.binary_data` and `binary_data_output`."""
    default = bool((req.parameters or {}).get("binary_data_output", False))
    if not req.outputs:
        return {"OutputTensor": default}
    chosen: dict[str, bool] = {}
    for i, out in enumerate(req.outputs):
        if out.name != "OutputTensor":
            msg = f"the model has no output {out.name!r}; its output is OutputTensor"
            raise DescriptorError.at(("outputs", i, "name"), msg)
        chosen[out.name] = bool((out.parameters or {}).get("binary_data", default))
    return chosen


def infer_response(
    model: str,
    request_id: str | None,
    outputs: Mapping[str, np.ndarray],
    binary: Mapping[str, bool],
    shm: Mapping[str, ShmRef] | None = None,
) -> tuple[Response, int]:
    """The inference response, framed when any output is binary; and its tensor bytes.

    Outputs in `shm` were written to shared memory: their entries carry no data.
    """
    doc: dict[str, Any] = {"model_name": model, "model_version": VERSION}
    if request_id is not None:
        doc["id"] = request_id
    entries = []
    chunks = []
    nbytes = 0
    for name, array in outputs.items():
        if name not in binary:
            continue
        entry: dict[str, Any] = {"name": name, "datatype": from_numpy(array.dtype).kserve}
        entry["shape"] = [*array.shape]
        if name not in (shm or {}):
            # An output written to shared memory is named, typed and shaped only, as Triton
            # answers it (Triton's C++ client reads any `parameters` as binary_data_size's).
            fields, chunk = encode_payload(array, "binary" if binary[name] else "json")
            entry.update(fields)
            if chunk is not None:
                chunks.append(chunk)
        entries.append(entry)
        nbytes += array.nbytes
    doc["outputs"] = entries
    return tensor_response(doc, chunks), nbytes
