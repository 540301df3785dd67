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


#: Bounds of `batching`: Triton's ModelConfig holds max_batch_size in an int32, and a request
#: never waits longer than this for a batch to fill.
MAX_BATCH_SIZE = (1 << 31) - 1
MAX_QUEUE_DELAY_US = 1_000_000
MAX_PREFERRED_BATCH_SIZES = 32


class Batching(_Strict):
    """Dynamic batching of a model whose inputs and output have a variable (-1) batch."""

    max_batch_size: int = Field(ge=1, le=MAX_BATCH_SIZE, description="largest batch executed")
    max_queue_delay_us: int = Field(
        ge=0, le=MAX_QUEUE_DELAY_US, description="longest a request waits for a batch to fill"
    )
    preferred_batch_sizes: list[int] | None = Field(
        None,
        max_length=MAX_PREFERRED_BATCH_SIZES,
        description="batch sizes to form when possible, each at most max_batch_size",
    )

    @model_validator(mode="after")
    def _check_preferred(self) -> Batching:
        for size in self.preferred_batch_sizes or ():
            if not 1 <= size <= self.max_batch_size:
                raise ValueError(
                    f"preferred_batch_sizes: {size} is not in [1, max_batch_size = "
                    f"{self.max_batch_size}]"
                )
        return self


class RegisterRequest(_Strict):
    name: str | None = Field(None, description="optional; generated from the descriptor if absent")
    operator: dict[str, Any] = Field(
        description="operator descriptor; Sizes[0] may be -1 for a variable batch"
    )
    constants: dict[str, WireTensor] | None = Field(
        None,
        description="input tensors bound at registration (e.g. FilterTensor), left out of every "
        "execute",
    )
    batching: Batching | None = Field(
        None, description="dynamic batching; needs a -1 batch on every input sent and the output"
    )


class ConstantDescriptor(BaseModel):
    data_type: str = Field(alias="DataType")
    sizes: list[int] = Field(alias="Sizes")


class RegisteredResponse(BaseModel):
    name: str
    operator: dict[str, Any]
    constants: dict[str, ConstantDescriptor] | None = Field(
        None, description="the constant inputs' descriptors (their values are not echoed)"
    )
    batching: Batching | None = None
    source: Literal["runtime", "repository"] = Field(
        "runtime", description="a runtime registration, or a model of the model repository"
    )


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


# --- Triton's extensions: model repository, statistics ----------------------------------------


class RepositoryIndexRequest(_Open):
    ready: bool = Field(False, description="only the models ready for inference")


class RepositoryIndexEntry(BaseModel):
    name: str
    version: str | None = None
    state: Literal["READY", "UNAVAILABLE"]
    reason: str = ""


class RepositoryModelRequest(_Open):
    parameters: dict[str, Any] | None = None


class DurationStat(BaseModel):
    count: int
    ns: int


class InferenceStats(BaseModel):
    success: DurationStat
    fail: DurationStat
    queue: DurationStat
    compute_input: DurationStat
    compute_infer: DurationStat
    compute_output: DurationStat
    cache_hit: DurationStat
    cache_miss: DurationStat


class BatchStat(BaseModel):
    batch_size: int
    compute_input: DurationStat
    compute_infer: DurationStat
    compute_output: DurationStat


class ModelStat(BaseModel):
    name: str
    version: str
    last_inference: int = Field(description="milliseconds since the epoch; 0 before any")
    inference_count: int = Field(description="successful inferences; a batch of N counts N")
    execution_count: int = Field(description="executions; a dynamic batch counts once")
    inference_stats: InferenceStats
    batch_stats: list[BatchStat]


class ModelStatsResponse(BaseModel):
    model_stats: list[ModelStat]
