"""ModelInfer: a gRPC request through the request pipeline, as `/v2/models/{name}/infer` is.

Tensors come as `raw_input_contents` (bytes, in the order of the inputs that use them), typed
`contents`, or a shared-memory region; each is decoded by `kserve.decode_inputs` and so by
`kernels.wire`. Outputs go back as `raw_output_contents`, or into a shared-memory region.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dmlserve.kernels.dtypes import from_numpy
from dmlserve.kernels.wire import BinarySection, FramingError, packed_bytes
from dmlserve.service.concurrency import INLINE_BYTES
from dmlserve.service.kserve import (
    VERSION,
    InferDecoded,
    decode_inputs,
    shm_parameters,
    with_shm_outputs,
    write_shm_outputs,
)
from dmlserve.service.registry import RegisteredOperator
from dmlserve.service.rpc.third_party.triton import grpc_service_pb2 as pb
from dmlserve.service.schemas import InferInput, InferRequestedOutput
from dmlserve.service.shm import Leases, SharedMemory
from dmlserve.service.work import Outcome

# The typed `contents` field of each KServe datatype (FP16 has none: it is sent raw).
CONTENTS = {
    "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents", "UINT16": "uint_contents", "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents", "FP64": "fp64_contents",
}  # fmt: skip


def parameters(params: Mapping[str, Any]) -> dict[str, Any]:
    """A protobuf `map<string, InferParameter>` as plain values."""
    out: dict[str, Any] = {}
    for key, param in params.items():
        which = param.WhichOneof("parameter_choice")
        out[key] = getattr(param, which) if which else None
    return out


def set_parameters(target: Any, values: Mapping[str, Any]) -> None:
    """Fill a `map<string, InferParameter>` from plain values (str, int, bool)."""
    for key, value in values.items():
        if isinstance(value, bool):
            target[key].bool_param = value
        elif isinstance(value, int):
            target[key].int64_param = value
        else:
            target[key].string_param = str(value)


class RawContents(BinarySection):
    """`raw_input_contents`, handed out whole, one entry per input that uses them, in order."""

    def __init__(self, contents: Sequence[bytes]) -> None:
        super().__init__(framed=True)
        self.contents = contents
        self.index = 0

    def take(self, size: int, loc: tuple[str | int, ...]) -> memoryview:
        chunk = memoryview(self.contents[self.index])
        self.index += 1
        return chunk

    def finish(self) -> None:
        if self.index != len(self.contents):
            raise FramingError(
                f"raw_input_contents has {len(self.contents)} entries, but {self.index} "
                "input(s) take their bytes from it"
            )


class GrpcInferExchange:
    """One ModelInfer call on a registered operator; `leases` as `kserve.InferExchange`'s."""

    def __init__(
        self,
        request: pb.ModelInferRequest,
        registered: RegisteredOperator,
        max_tensor_bytes: int,
        shared_memory: SharedMemory,
    ) -> None:
        self.request = request
        self.registered = registered
        self.max_tensor_bytes = max_tensor_bytes
        self.leases = Leases(shared_memory)
        # Read once: each access of a bytes field makes a new Python object.
        self.raw = list(request.raw_input_contents)
        self.received_bytes = request.ByteSize()
        self.decode_bytes = sum(len(r) for r in self.raw)
        if any("shared_memory_region" in t.parameters for t in request.inputs):
            self.decode_bytes += INLINE_BYTES + 1  # any amount read from shared memory
        self.operator = registered.type
        self.model = registered.name

    def decode(self) -> InferDecoded:
        request = self.request
        items: list[InferInput] = []
        given = 0
        for tensor in request.inputs:
            params = parameters(tensor.parameters)
            data: list[Any] | None = None
            if tensor.HasField("contents"):
                field = CONTENTS.get(tensor.datatype, "bytes_contents")
                data = list(getattr(tensor.contents, field))
            elif "shared_memory_region" not in params and given < len(self.raw):
                params["binary_data_size"] = len(self.raw[given])
                given += 1
            items.append(
                InferInput.model_construct(
                    name=tensor.name,
                    shape=list(tensor.shape),
                    datatype=tensor.datatype,
                    parameters=params,
                    data=data,
                )  # fmt: skip
            )
        op = self.registered.operator
        section = RawContents(self.raw)
        inputs = decode_inputs(
            items, section, op, self.max_tensor_bytes, self.leases, self.registered.constants
        )
        outputs = [
            InferRequestedOutput.model_construct(name=o.name, parameters=parameters(o.parameters))
            for o in request.outputs
        ]
        where = {t.name: ("inputs", i) for i, t in enumerate(request.inputs)}
        decoded = InferDecoded(
            op, inputs, input_locs=where, request_id=request.id, binary={"OutputTensor": True},
            constants=self.registered.prepared,
        )  # fmt: skip
        return with_shm_outputs(decoded, outputs, self.leases)

    def encode(self, decoded: InferDecoded, outcome: Outcome) -> tuple[pb.ModelInferResponse, int]:
        outputs = {"OutputTensor": outcome.output}
        write_shm_outputs(decoded, outputs, self.leases)
        shm = decoded.shm_outputs or {}
        response = pb.ModelInferResponse(
            model_name=self.model, model_version=VERSION, id=self.request.id
        )
        for name, array in outputs.items():
            datatype = from_numpy(array.dtype).kserve
            out = response.outputs.add(name=name, datatype=datatype, shape=array.shape)
            if name in shm:
                set_parameters(out.parameters, shm_parameters(shm[name][1], array.nbytes))
                # One entry per output, as Triton sends: its C++ client indexes them by output.
                response.raw_output_contents.append(b"")
            else:
                response.raw_output_contents.append(bytes(packed_bytes(array)))
        return response, outcome.output.nbytes
