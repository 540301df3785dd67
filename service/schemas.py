"""Request and response envelopes of `/v1` and `/v2` (validation and the OpenAPI document).

The operator descriptor itself is validated by `kernels` (one schema, shared with the SDK);
here it is an opaque JSON object. Tensor payloads (`data`) stay untyped so that large arrays
are not walked element by element by the validator; NumPy checks them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dmlserve.kernels.directml import MAX_TENSOR_RANK
from dmlserve.kernels.dtypes import DataType

OutputEncoding = Literal["json", "b64", "binary"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class BinaryParameters(BaseModel):
    model_config = ConfigDict(extra="allow")
    binary_data_size: int | None = Field(None, ge=0)


class WireTensor(_Strict):
    """A tensor value: DataType, Sizes, optional element Strides, and exactly one payload."""

    data_type: str = Field(
        alias="DataType", json_schema_extra={"enum": [d.value for d in DataType]}
    )
    sizes: list[int] = Field(alias="Sizes", max_length=MAX_TENSOR_RANK)
    strides: list[int] | None = Field(None, alias="Strides", max_length=MAX_TENSOR_RANK)
    data: Any = Field(None, description="flat row-major JSON array of numbers")
    b64: str | None = Field(None, description="base64 of the raw little-endian bytes")
    parameters: BinaryParameters | None = Field(
        None, description="{binary_data_size: n}: the bytes follow the JSON in a binary body"
    )


class ExecuteRequest(_Strict):
    operator: dict[str, Any] = Field(description="operator descriptor, DirectML field names")
    inputs: dict[str, WireTensor]
    output_encoding: OutputEncoding | None = None


class OperatorExecuteRequest(_Strict):
    inputs: dict[str, WireTensor]
    output_encoding: OutputEncoding | None = None


class ExecuteResponse(BaseModel):
    outputs: dict[str, WireTensor]
    backend: Literal["cupy", "numpy"]


#: Upper bounds of a batching policy (a batch is also bounded by max_output_bytes).
MAX_BATCH_SIZE = 1 << 16
MAX_QUEUE_DELAY_US = 10_000_000


class Batching(_Strict):
    """Dynamic batching (Triton's `dynamic_batching`): concurrent requests run as one batch."""

    max_batch_size: int = Field(
        ge=1, le=MAX_BATCH_SIZE, description="most batch items (summed over requests) per run"
    )
    max_queue_delay_us: int = Field(
        0, ge=0, le=MAX_QUEUE_DELAY_US,
        description="longest a request waits for others to join its batch, in microseconds",
    )  # fmt: skip
    preferred_batch_sizes: list[int] = Field(
        default_factory=list, max_length=64,
        description="batch sizes run as soon as the queue can make one",
    )  # fmt: skip

    @model_validator(mode="after")
    def _preferred_within_max(self) -> Batching:
        for size in self.preferred_batch_sizes:
            if not 1 <= size <= self.max_batch_size:
                raise ValueError(
                    f"preferred_batch_sizes: {size} is outside 1..max_batch_size "
                    f"({self.max_batch_size})"
                )
        return self


class RegisterRequest(_Strict):
    name: str | None = Field(None, description="optional; generated from the descriptor if absent")
    operator: dict[str, Any] = Field(
        description="operator descriptor; Sizes[0] may be -1 for a variable batch"
    )
    batching: Batching | None = Field(
        None, description="dynamic batching; needs a -1 batch on every input and the output"
    )


class RegisteredResponse(BaseModel):
    name: str
    operator: dict[str, Any]
    batching: Batching | None = None


class OperatorList(BaseModel):
    operators: list[RegisteredResponse]


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[dict[str, Any]]


# --- KServe v2 -------------------------------------------------------------------------------


class _Open(BaseModel):
    # KServe clients may send parameters this server does not use; ignore them.
    model_config = ConfigDict(extra="ignore")


class InferInput(_Open):
    name: str
    shape: list[int] = Field(max_length=MAX_TENSOR_RANK)
    datatype: str
    parameters: dict[str, Any] | None = None
    data: Any = None


class InferRequestedOutput(_Open):
    name: str
    parameters: dict[str, Any] | None = None


class InferRequest(_Open):
    id: str | None = None
    parameters: dict[str, Any] | None = None
    inputs: list[InferInput]
    outputs: list[InferRequestedOutput] | None = None


class InferOutput(BaseModel):
    name: str
    datatype: str
    shape: list[int]
    parameters: dict[str, Any] | None = None
    data: list[Any] | None = None


class InferResponse(BaseModel):
    model_name: str
    model_version: str
    id: str | None = None
    outputs: list[InferOutput]


class TensorMetadata(BaseModel):
    name: str
    datatype: str
    shape: list[int]


class ModelMetadata(BaseModel):
    name: str
    versions: list[str]
    platform: str
    inputs: list[TensorMetadata]
    outputs: list[TensorMetadata]


class ServerMetadata(BaseModel):
    name: str
    version: str
    extensions: list[str]


class V2Error(BaseModel):
    error: str


# --- KServe v2 shared-memory extensions ------------------------------------------------------


class SystemSharedMemoryRegister(_Strict):
    key: str = Field(description="POSIX shared-memory name, as given to shm_open ('/name')")
    offset: int = Field(0, ge=0, description="where the region starts in the object, in bytes")
    byte_size: int = Field(ge=0, description="bytes of the region")


class SystemSharedMemoryStatus(BaseModel):
    name: str
    key: str
    offset: int
    byte_size: int


class RawHandle(_Strict):
    b64: str = Field(description="base64 of the 64-byte cudaIpcMemHandle_t")


class CudaSharedMemoryRegister(_Strict):
    raw_handle: RawHandle
    device_id: int = Field(ge=0, description="CUDA device of the buffer")
    byte_size: int = Field(ge=0, description="bytes of the region")


class CudaSharedMemoryStatus(BaseModel):
    name: str
    device_id: int
    byte_size: int
