"""The kernel argument buffer that dependent launches hand the driver: each argument at its
natural alignment, as a kernel's parameters lie (the GPU tests launch through it)."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import numpy as np
import pytest

from dmlserve.kernels.cupy_backend._common import DependentLaunch, Launch, packed_arguments


def _device_array(address: int) -> SimpleNamespace:
    """What the packing reads of a CuPy array: its device address."""
    return SimpleNamespace(data=SimpleNamespace(ptr=address))


def test_arguments_lie_at_their_natural_alignment() -> None:
    args = (
        _device_array(0x1122334455667788),
        np.int32(-5),
        np.int64(7),
        np.uint32(0xFFFFFFFF),
        np.int32(9),
        _device_array(0x10),
    )
    packed = packed_arguments(args)
    # pointer 0..8, int32 8..12, 4 bytes of padding, int64 16..24, uint32 24..28, int32
    # 28..32, pointer 32..40
    assert packed == struct.pack("<QiiqIiQ", 0x1122334455667788, -5, 0, 7, 0xFFFFFFFF, 9, 0x10)


def test_scalars_after_scalars_pack_without_gaps() -> None:
    assert packed_arguments((np.int32(1), np.uint32(2))) == struct.pack("<iI", 1, 2)
    assert packed_arguments((np.int32(1), np.int64(2))) == struct.pack("<iiq", 1, 0, 2)


@pytest.mark.parametrize("arg", [3, 2.5, np.float32(1.0), "x"])
def test_arguments_of_unknown_layout_are_refused(arg: object) -> None:
    with pytest.raises(TypeError, match="not a kernel argument"):
        packed_arguments((np.int32(1), arg))


def test_scalars_packed_once_lie_where_a_whole_packing_puts_them() -> None:
    """A dependent launch packs its scalars once, after its arrays: the same bytes as packing
    every argument at each call."""
    scalars = (np.int32(3), np.int64(-4), np.uint32(5), np.int32(6), np.int64(7))
    arrays = (_device_array(0x100), _device_array(0x200), _device_array(0x300))
    for count in (1, 3):
        launch = DependentLaunch(Launch(None, (1, 1, 1)), scalars, arrays=count)
        assert launch.arguments(*arrays[:count]) == packed_arguments((*arrays[:count], *scalars))
