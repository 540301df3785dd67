"""The one table of tensor data types.

Every layer (descriptors, backends, the service's wire formats, the SDK) maps DirectML
data types through this module; nothing else spells out these correspondences.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DataType",
    "DataTypeInfo",
    "INFO",
    "from_numpy",
    "from_kserve",
    "parse_data_type",
]


class DataType(enum.StrEnum):
    """DML_TENSOR_DATA_TYPE without its prefix; the value is the wire spelling."""

    FLOAT32 = "FLOAT32"
    FLOAT16 = "FLOAT16"
    UINT32 = "UINT32"
    UINT16 = "UINT16"
    UINT8 = "UINT8"
    INT32 = "INT32"
    INT16 = "INT16"
    INT8 = "INT8"
    FLOAT64 = "FLOAT64"
    UINT64 = "UINT64"
    INT64 = "INT64"

    def __str__(self) -> str:
        return self.value

    @property
    def info(self) -> DataTypeInfo:
        return INFO[self]

    @property
    def numpy(self) -> np.dtype:
        return INFO[self].numpy

    @property
    def itemsize(self) -> int:
        return INFO[self].numpy.itemsize

    @property
    def is_float(self) -> bool:
        return INFO[self].numpy.kind == "f"

    @property
    def is_integer(self) -> bool:
        return INFO[self].numpy.kind in "iu"

    @property
    def kserve(self) -> str:
        return INFO[self].kserve


@dataclass(frozen=True)
class DataTypeInfo:
    dml_value: int  # the DML_TENSOR_DATA_TYPE enum value
    numpy: np.dtype  # little-endian NumPy dtype
    kserve: str  # KServe v2 / Triton datatype name
    cpp: str  # C++ type used by the CUDA kernels for arithmetic


INFO: dict[DataType, DataTypeInfo] = {
    DataType.FLOAT32: DataTypeInfo(1, np.dtype("<f4"), "FP32", "float"),
    DataType.FLOAT16: DataTypeInfo(2, np.dtype("<f2"), "FP16", "__half"),
    DataType.UINT32: DataTypeInfo(3, np.dtype("<u4"), "UINT32", "unsigned int"),
    DataType.UINT16: DataTypeInfo(4, np.dtype("<u2"), "UINT16", "unsigned short"),
    DataType.UINT8: DataTypeInfo(5, np.dtype("u1"), "UINT8", "unsigned char"),
    DataType.INT32: DataTypeInfo(6, np.dtype("<i4"), "INT32", "int"),
    DataType.INT16: DataTypeInfo(7, np.dtype("<i2"), "INT16", "short"),
    DataType.INT8: DataTypeInfo(8, np.dtype("i1"), "INT8", "signed char"),
    DataType.FLOAT64: DataTypeInfo(9, np.dtype("<f8"), "FP64", "double"),
    DataType.UINT64: DataTypeInfo(10, np.dtype("<u8"), "UINT64", "unsigned long long"),
    DataType.INT64: DataTypeInfo(11, np.dtype("<i8"), "INT64", "long long"),
}

_BY_NUMPY = {info.numpy.newbyteorder("="): dt for dt, info in INFO.items()}
_BY_KSERVE = {info.kserve: dt for dt, info in INFO.items()}
_BY_NAME: dict[str, DataType] = {dt.value: dt for dt in DataType}
_PREFIX = "DML_TENSOR_DATA_TYPE_"


def from_numpy(dtype: np.dtype | type) -> DataType:
    """The DataType of a NumPy (or CuPy) dtype; ValueError if DirectML has none."""
    dt = np.dtype(dtype)
    found = _BY_NUMPY.get(dt)  # a native dtype as it is; another byte order made native
    if found is None:
        found = _BY_NUMPY.get(dt.newbyteorder("="))
    if found is None:
        raise ValueError(f"NumPy dtype {dt} has no DirectML tensor data type")
    return found


def from_kserve(name: str) -> DataType:
    """The DataType of a KServe v2 datatype name (FP32, INT8, ...)."""
    try:
        return _BY_KSERVE[name]
    except KeyError:
        raise ValueError(f"KServe datatype {name!r} has no DirectML tensor data type") from None


def parse_data_type(value: object) -> DataType:
    """Accept `FLOAT32`, `DML_TENSOR_DATA_TYPE_FLOAT32` or a DataType."""
    if isinstance(value, DataType):
        return value
    if isinstance(value, str):
        found = _BY_NAME.get(value.removeprefix(_PREFIX))
        if found is not None:
            return found
    allowed = ", ".join(d.value for d in DataType)
    raise ValueError(f"unknown DataType {value!r}; expected one of {allowed}")
