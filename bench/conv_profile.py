#!/usr/bin/env python3
"""A few CONVOLUTION_INTEGER calls on one ResNet-50 layer (batch 32), for Nsight Compute.

Usage: ncu -k regex:conv_int_wgmma --launch-skip 2 --launch-count 1 --section SpeedOfLight \\
           python3 bench/conv_profile.py [128|64|1x1|512] [BMxBN] [auto|wgmma|mma_sync]
(run from the repository root; the layers are bench_convolution_integer.py's 3x3 128 @28,
3x3 64 @56, 1x1 256->1024 @14 and 3x3 512 @7).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import cupy  # noqa: E402
import numpy as np  # noqa: E402

LAYERS = {"128": (128, 128, 28, 3), "64": (64, 64, 56, 3), "1x1": (256, 1024, 14, 1)}
LAYERS["512"] = (512, 512, 7, 3)


def main() -> None:
    conv = importlib.import_module("dmlserve.kernels.cupy_backend.convolution_integer")
    layer = sys.argv[1] if len(sys.argv) > 1 else "128"
    tile = tuple(int(v) for v in sys.argv[2].split("x")) if len(sys.argv) > 2 else None
    kernel = sys.argv[3] if len(sys.argv) > 3 else "auto"
    c, m, hw, k = LAYERS[layer]
    rng = np.random.default_rng(0)
    x = cupy.asarray(rng.integers(0, 256, (32, c, hw, hw), dtype=np.uint8))
    w = cupy.asarray(rng.integers(-128, 128, (m, c, k, k), dtype=np.int8))
    pad = (k // 2,) * 2
    options = conv.Options(tile=tile, tensor_cores=kernel)
    for _ in range(4):
        geometry = ((1, 1), (1, 1), pad, pad, 1)
        conv.convolution_integer(x, w, 128, np.zeros(m, np.int32), *geometry, options)
    cupy.cuda.Device().synchronize()


if __name__ == "__main__":
    main()
