"""CONVOLUTION_INTEGER's 1x1 256->1024 @14 layer for Nsight Compute: at batches 32, 8 and 1,
one call of a registered operator (its filter's blocks kept, three warm-up calls before) and
one inline call, each between cudaProfilerStart and Stop, for

    ncu --profile-from-start off --csv --page details ... python3 bench/conv_pointwise_profile.py

The registered calls are launched without the programmatic-dependent attribute here (in a trial
ncu profiled one of six launches made with it); the kernel and its arguments are the same.
Prints ``profiled: <call>`` before each."""

from __future__ import annotations

import importlib
from typing import Any

import cupy
import numpy as np

common = importlib.import_module("dmlserve.kernels.cupy_backend._common")
conv = importlib.import_module("dmlserve.kernels.cupy_backend.convolution_integer")
ONE = ((1, 1), (1, 1), (0, 0), (0, 0))


def main() -> None:
    common.DependentLaunch.__call__ = lambda self, *arrays: False  # launched as usual
    for n in (32, 8, 1):
        rng = np.random.default_rng(0)
        x = cupy.asarray(rng.integers(0, 256, (n, 256, 14, 14), dtype=np.uint8))
        w = cupy.asarray(rng.integers(-128, 128, (1024, 256, 1, 1), dtype=np.int8))
        zw = np.zeros(1024, np.int32)
        kept: dict[Any, Any] = {}
        for _ in range(3):
            conv.convolution_integer(x, w, 128, zw, *ONE, 1, filter_cache=kept)
        for label, cache in (("registered", kept), ("inline", None)):
            cupy.cuda.Device().synchronize()
            print(f"profiled: 1x1 256->1024 @14 b{n} {label}", flush=True)
            cupy.cuda.profiler.start()
            conv.convolution_integer(x, w, 128, zw, *ONE, 1, filter_cache=cache)
            cupy.cuda.Device().synchronize()
            cupy.cuda.profiler.stop()


if __name__ == "__main__":
    main()
