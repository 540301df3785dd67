#!/usr/bin/env python3
"""Host time to issue one CONVOLUTION_INTEGER call (inline filter, and a registered operator's
constant filter), and where it goes (cProfile, top entries by own time).

Usage, from the repository root of a GPU host: python3 bench/conv_host.py [--calls N]
Layers: 3x3 128->128 @28 and 1x1 256->64 @56, batch 32, u8 x s8 (bench_convolution_integer.py's).
Each timed call is followed by a synchronisation, so the GPU is idle when the next is issued.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import cupy  # noqa: E402
import numpy as np  # noqa: E402

from dmlserve.kernels.cupy_backend.convolution_integer import convolution_integer  # noqa: E402

LAYERS = [(32, 128, 128, 28, 3, 1, 1), (32, 256, 64, 56, 1, 1, 0)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    calls = parser.parse_args().calls
    rng = np.random.default_rng(0)
    sync = cupy.cuda.Device().synchronize
    for n, c, m, hw, k, s, p in LAYERS:
        x = cupy.asarray(rng.integers(0, 256, (n, c, hw, hw), dtype=np.uint8))
        w = cupy.asarray(rng.integers(-128, 128, (m, c, k, k), dtype=np.int8))
        zw = np.zeros(m, np.int32)
        geo = ((s, s), (1, 1), (p, p), (p, p))
        cache: dict[object, object] = {}
        for label, kw in (("inline", {}), ("registered", {"filter_cache": cache})):
            call = functools.partial(convolution_integer, x, w, 128, zw, *geo, 1, **kw)

            for _ in range(20):
                call()
            sync()
            samples = []
            for _ in range(calls):
                t0 = time.perf_counter()
                call()
                samples.append((time.perf_counter() - t0) * 1e6)
                sync()
            print(f"{label} {k}x{k} {c}->{m} @{hw} batch {n}: host median "
                  f"{statistics.median(samples):.1f} us")  # fmt: skip
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(calls):
                call()
            profile.disable()
            sync()
            text = io.StringIO()
            pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(8)
            print("\n".join(line for line in text.getvalue().splitlines() if line.strip()))


if __name__ == "__main__":
    main()
