"""The floor under the shifted-window GEMM's epilogue: how long the GPU takes to write the int32
output of the 3x3 128->128 @28 layer at batch 32 (12.8 MB) from 129 CTAs of 256 threads, with
nothing else to do: each CTA writing a contiguous block (4-byte stores, then 16-byte stores), in
the epilogue's own pattern (a warp storing 32 consecutive virtual pixels of one output row,
rows of 30 virtual pixels of which 28 are outputs, 16 channel rows one after the other), and
the same outputs a channel row at a time (the CTA's threads on one row's 224 pixels). Each
time includes a launch (an empty kernel's ~2 µs, `bench/conv_shift_timeline.py`).

Run on a GPU, from the repository root: ``python3 bench/conv_store_floor.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_convolution_integer as bench  # noqa: E402
import cupy  # noqa: E402

SOURCE = r"""
extern "C" __global__ void st_scalar(int* out, int per_cta) {
    int* o = out + (long long)blockIdx.x * per_cta;
    for (int i = threadIdx.x; i < per_cta; i += blockDim.x) o[i] = i;
}
extern "C" __global__ void st_vec(int* out, int per_cta) {
    int4* o = reinterpret_cast<int4*>(out + (long long)blockIdx.x * per_cta);
    for (int i = threadIdx.x; i < per_cta / 4; i += blockDim.x) o[i] = make_int4(i, i, i, i);
}
// Channel 0's output of virtual pixel v (images of 30 x 30 virtual pixels, 28 x 28 outputs),
// or null where v is dropped.
__device__ int* output_of(int* out, long long v, int P, int M) {
    const long long n = v / 900;
    const int rem = v - n * 900, oh = rem / 30, ow = rem % 30;
    if (n >= 32 || oh >= 28 || ow >= 28) return nullptr;
    return out + n * M * P + oh * 28 + ow;
}
// 128 channel rows x 224 virtual pixels a CTA; a warp: 32 consecutive virtual pixels, 16 rows
extern "C" __global__ void st_epilogue(int* out, int P, int M) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const long long v0 = (long long)blockIdx.x * 224;
    for (int w = warp; w < 128 / 16 * 7; w += blockDim.x / 32) {
        const int rows = w / 7, piece = w % 7;
        int* o = output_of(out, v0 + piece * 32 + lane, P, M);
        if (o == nullptr) continue;
        o += (long long)(rows * 16) * P;
        for (int r = 0; r < 16; ++r) o[(long long)r * P] = r;
    }
}
// the same outputs a channel row at a time: the CTA's threads on one row's 224 virtual pixels
// (a whole tile staged in shared memory would allow this order)
extern "C" __global__ void st_rows(int* out, int P, int M) {
    if (threadIdx.x >= 224) return;
    int* o = output_of(out, (long long)blockIdx.x * 224 + threadIdx.x, P, M);
    if (o == nullptr) return;
    for (int m = 0; m < 128; ++m) o[(long long)m * P] = m;
}
"""


def main() -> None:
    outputs = 32 * 128 * 784
    out = cupy.zeros(outputs, cupy.int32)
    module = cupy.RawModule(code=SOURCE)
    per_cta = outputs // 129 // 4 * 4
    print("| stores | µs a call | TB/s |")
    print("|---|---|---|")
    for name in ("st_scalar", "st_vec"):
        kernel = module.get_function(name)
        args = (out, cupy.int32(per_cta))
        us = bench.time_ms(lambda i, k=kernel, a=args: k((129,), (256,), a), 10, 7, 3) * 1e3
        print(f"| {name} | {us:.2f} | {129 * per_cta * 4 / us / 1e6:.2f} |")
    for name in ("st_epilogue", "st_rows"):
        kernel = module.get_function(name)
        args = (out, cupy.int32(784), cupy.int32(128))
        us = bench.time_ms(lambda i, k=kernel, a=args: k((129,), (256,), a), 10, 7, 3) * 1e3
        print(f"| {name} | {us:.2f} | {out.nbytes / us / 1e6:.2f} |")


if __name__ == "__main__":
    main()
