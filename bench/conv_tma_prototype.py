"""A prototype of the next 3x3 kernel, timed beside the kept one: the implicit GEMM of 3x3 128->128
@28 (stride 1, padding 1) on an input stored (N, H, W, C), its operands brought in by the copy
engine (TMA tensor maps, 128-byte swizzled K-major tiles that the warpgroup MMA reads as they
land) by one producer thread while two consumer warpgroups multiply, through a ring of stages
guarded by full / empty barriers. One CTA forms 128 output channels x 8 output rows of one
image (224 pixels, the rows past the image discarded), each of the 9 taps one stage: the
filter's 128 x 128-channel block for the tap and the input's box of 8 x 28 pixels x 128
channels shifted by the tap (TMA fills the pixels outside the image with 0). The epilogue adds
-z_x times the output channel's filter sums over the taps that lie inside the image (the MMAs
summed x w with the outside taps as 0, where DirectML's padding is z_x: sum (x - z_x) w), and
the output is stored NCHW from the accumulators.

What it leaves out, and so what it does not measure: a filter zero point (z_w = 0, the
benchmark's layer; a z_w needs each pixel's channel sums), any shape but this layer's, a
persistent grid, an asynchronous epilogue and a K split. Its output (z_x = 128) is checked
against the kept kernel's, and its time printed beside that kernel's registered call and
cuDNN's fp16 convolution on the same values, each timed as the benchmark times its calls.

Run on a GPU of compute capability 9.0, from the repository root:
``python3 bench/conv_tma_prototype.py [--batch 32 ...] [--stages 4]``.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_convolution_integer as bench  # noqa: E402
import cupy  # noqa: E402
import torch  # noqa: E402

from dmlserve.kernels.cupy_backend._loader import CUDA_DIR  # noqa: E402
from dmlserve.kernels.cupy_backend.convolution_integer import convolution_integer  # noqa: E402

LAYER = "3x3 128->128 @28"
STAGE_BYTES = 128 * 128 + 224 * 128  # the tap's filter block and input box
ROWS = 8  # output rows a CTA
SOURCE = r"""
#include "convolution_integer_sm90a.cu"
namespace proto {
// K-major, 128-byte swizzle: 8 rows of 128 bytes (1024) between row groups.
__device__ __forceinline__ unsigned long long desc128(unsigned addr) {
    return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) | (1ull << 16) |
           (static_cast<unsigned long long>(1024 >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void tma2d(unsigned dst, const void* map, int c0, int c1,
                                      unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}
__device__ __forceinline__ void tma4d(unsigned dst, const void* map, int c0, int c1, int c2,
                                      int c3, unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(c2),
        "r"(c3), "r"(bar)
        : "memory");
}
__device__ __forceinline__ void expect(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
}  // namespace proto
constexpr int S = DML_STAGES;  // stages in the ring
constexpr int A_BYTES = 128 * 128, B_BYTES = 224 * 128, STAGE = A_BYTES + B_BYTES;
// Grid: one CTA per (image, 8 output rows); 384 threads: warpgroup 0 the producer (thread 0
// issues the copies), warpgroups 1 and 2 the consumers (64 output channels each).
extern "C" __global__ void __launch_bounds__(384, 1)
    proto_conv(const void* tmw, const void* tmx, const int* __restrict__ biases,
               int* __restrict__ out, int H, int W, int M, int tiles_h) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long bars[2 * S];
    __shared__ int bias_rows[128 * 9];  // the CTA's channels' rows of `biases`
    const unsigned base = (dml::conv::smem_addr(smem_raw) + 1023u) & ~1023u;
    const unsigned full = dml::conv::smem_addr(bars), empty = full + 8 * S;
    const int tid = threadIdx.x, wg = tid >> 7;
    const int n = blockIdx.x / tiles_h, h0 = (blockIdx.x % tiles_h) * 8;
    if (tid == 0) {
        for (int s = 0; s < S; ++s) {
            proto::init(full + 8 * s, 1);   // the producer's arrival and the stage's bytes
            proto::init(empty + 8 * s, 2);  // one arrival a consumer warpgroup
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (wg == 0) {
        if (tid >= 32) {  // warps 1-3: the epilogue's biases, while the MMAs run
            for (int q = tid - 32; q < 128 * 9; q += 96) bias_rows[q] = biases[q];
            asm volatile("bar.arrive 1, 352;" ::: "memory");
        }
        if (tid == 0) {
            for (int kb = 0; kb < 9; ++kb) {  // tap kb = (r, s) = (kb / 3, kb % 3)
                const int s = kb % S;
                if (kb >= S) dml::wg::bar_wait(empty + 8 * s, ((kb / S) - 1) & 1);
                const unsigned stage = base + s * STAGE;
                proto::expect(full + 8 * s, STAGE);
                proto::tma2d(stage, tmw, kb * 128, 0, full + 8 * s);
                proto::tma4d(stage + A_BYTES, tmx, 0, kb % 3 - 1, h0 + kb / 3 - 1, n,
                             full + 8 * s);
            }
        }
    } else {
        const int cw = wg - 1;
        int acc[112];
#pragma unroll
        for (int i = 0; i < 112; ++i) acc[i] = 0;
        for (int kb = 0; kb < 9; ++kb) {
            const int s = kb % S;
            dml::wg::bar_wait(full + 8 * s, (kb / S) & 1);
            dml::wg::fence();
            const unsigned a = base + s * STAGE + cw * 64 * 128, b = base + s * STAGE + A_BYTES;
#pragma unroll
            for (int j = 0; j < 4; ++j) {  // the stage's 128 channels, 32 an MMA
                dml::wg::mma<224, true, false>(acc, proto::desc128(a + 32 * j),
                                               proto::desc128(b + 32 * j), 1);
            }
            dml::wg::commit();
            dml::wg::wait<1>();  // the stage before is read: give it back
            if (kb > 0 && (tid & 127) == 0) proto::arrive(empty + 8 * ((kb - 1) % S));
        }
        dml::wg::wait<0>();
        dml::wg::fence_operands(acc);
        // acc[4 j + 2 h + e]: channel 16 warp + g + 8 h, pixel 8 j + 2 t + e of the 224.
        // out = sum (x - z_x) w: the MMAs summed x w with the taps outside the image as 0 (TMA's
        // fill), so each output adds - z_x times its channel's filter sums over the taps inside
        // the image: `biases` [M][9], one a class of pixel (top / inner / bottom row x left /
        // inner / right column).
        const int lane = tid & 31, warp = (tid >> 5) & 3, g = lane >> 2, t = lane & 3;
        const int m0 = cw * 64 + warp * 16 + g;
        asm volatile("bar.sync 1, 352;" ::: "memory");  // the biases in
        const int* b0 = bias_rows + m0 * 9;
#pragma unroll
        for (int j = 0; j < 28; ++j) {
            const int p = 8 * j + 2 * t;
            const int oh = h0 + p / 28, ow = p % 28;
            if (oh < H) {
                int* o = out + ((static_cast<long long>(n) * M + m0) * H + oh) * W + ow;
                const int row = oh == 0 ? 0 : (oh == H - 1 ? 6 : 3);  // the row class's first
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int* b = b0 + 72 * h + row;  // channel m0 + 8 h
                    *reinterpret_cast<int2*>(o + 8 * h * H * W) =
                        make_int2(acc[4 * j + 2 * h] + b[ow == 0 ? 0 : 1],
                                  acc[4 * j + 2 * h + 1] + b[ow + 1 == W - 1 ? 2 : 1]);
                }
            }
        }
    }
}
"""

# cuda.h: CU_TENSOR_MAP_DATA_TYPE_UINT8, CU_TENSOR_MAP_INTERLEAVE_NONE,
# CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
_UINT8, _NO_INTERLEAVE, _SWIZZLE_128B, _L2_128B, _ZERO_FILL = 0, 0, 3, 2, 0


def tensor_map(address: int, dims: list[int], strides: list[int], box: list[int]) -> Any:
    """A tiled TMA descriptor of bytes (`dims` innermost first, `strides` in bytes of the outer
    dimensions), 128-byte swizzled, on the device (the kernel reads it from global memory)."""
    encode = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    encode.restype = ctypes.c_int
    out = (ctypes.c_uint64 * 16)()
    rank = len(dims)
    status = encode(
        ctypes.byref(out), _UINT8, rank, ctypes.c_void_p(address),
        (ctypes.c_uint64 * rank)(*dims), (ctypes.c_uint64 * (rank - 1))(*strides),
        (ctypes.c_uint32 * rank)(*box), (ctypes.c_uint32 * rank)(*([1] * rank)),
        _NO_INTERLEAVE, _SWIZZLE_128B, _L2_128B, _ZERO_FILL,
    )  # fmt: skip
    if status:
        raise RuntimeError(f"cuTensorMapEncodeTiled returned {status}")
    return cupy.asarray(np.frombuffer(bytes(out), dtype=np.uint64))


def border_biases(w: np.ndarray, zx: int) -> np.ndarray:
    """[M][9] int32: - z_x times each output channel's filter sums over the taps that lie inside
    the image for each class of output pixel (3 row classes: the top row, inner rows, the bottom
    row; times 3 column classes alike), a 3x3 window with padding 1 on images of at least 2 x 2."""
    taps = w.astype(np.int64).sum(axis=1)  # [M][3][3]
    out = np.empty((w.shape[0], 9), dtype=np.int64)
    for rc in range(3):
        for cc in range(3):
            inside = np.ones((3, 3), dtype=bool)
            inside[0 if rc == 0 else 2, :] &= rc == 1
            inside[:, 0 if cc == 0 else 2] &= cc == 1
            out[:, 3 * rc + cc] = -zx * (taps * inside).sum(axis=(1, 2))
    return out.astype(np.int32)


def run(batch: int, stages: int) -> str:
    """One batch's line: the prototype's time, whether its output matched, the peers' times."""
    case = next(c for c in bench.CASES if c.name == LAYER)
    xs, w, zw, geo = bench.case_inputs(case, batch)
    stored = bench.stored_channels_last(xs)  # NCHW views of (N, H, W, C) bytes
    n, c, h, wd = stored[0].shape
    m = w.shape[0]
    if (m, c, wd) != (128, 128, 28):  # the kernel's tile and epilogue are this layer's
        raise ValueError(
            f"the prototype runs 128 -> 128 channels on 28-wide images, not {m, c, wd}"
        )
    module = cupy.RawModule(
        code=SOURCE,
        options=("-std=c++17", "-arch=sm_90a", f"-I{CUDA_DIR}", f"-DDML_STAGES={stages}"),
    )
    kernel = module.get_function("proto_conv")
    smem = stages * STAGE_BYTES + 1024  # and room to align the ring on 1024 bytes
    kernel.max_dynamic_shared_size_bytes = smem
    rows = cupy.ascontiguousarray(w.transpose(0, 2, 3, 1).reshape(m, 9 * c))  # [M][(r, s, C)]
    filter_map = tensor_map(rows.data.ptr, [9 * c, m], [9 * c], [128, 128])
    input_maps = [
        tensor_map(x.data.ptr, [c, wd, h, n], [c, wd * c, h * wd * c], [128, wd, ROWS, 1])
        for x in stored
    ]
    tiles_h = -(-h // ROWS)
    out = cupy.empty((n, m, h, wd), dtype=cupy.int32)
    ints = tuple(map(np.int32, (h, wd, m, tiles_h)))
    biases = cupy.asarray(border_biases(cupy.asnumpy(w), 128))

    def prototype(i: int) -> Any:
        args = (filter_map, input_maps[i % 3], biases, out, *ints)
        kernel((n * tiles_h,), (384,), args, shared_mem=smem)
        return out

    prototype(0)
    expected = convolution_integer(stored[0], w, 128, zw, *geo, 1)
    exact = bool(cupy.array_equal(out, expected))
    kept: dict[Any, Any] = {}

    def ours(i: int) -> Any:
        return convolution_integer(stored[i % 3], w, 128, zw, *geo, 1, filter_cache=kept)

    halves = [
        torch.as_tensor(x.astype(cupy.float16), device="cuda").contiguous(
            memory_format=torch.channels_last
        )
        for x in xs
    ]
    w16 = torch.as_tensor(w.astype(cupy.float16), device="cuda").contiguous(
        memory_format=torch.channels_last
    )
    torch.backends.cudnn.benchmark = True

    def cudnn(i: int) -> Any:
        return torch.nn.functional.conv2d(halves[i % 3], w16, padding=1)

    t_proto = bench.time_ms(prototype, 20, 15, 5) * 1e3
    t_ours = bench.time_ms(ours, 20, 15, 5) * 1e3
    t_cudnn = bench.time_ms(cudnn, 20, 15, 5) * 1e3
    return (
        f"| {batch} | {stages} | {t_proto:.2f} | {'yes' if exact else 'NO'} | {t_ours:.2f} "
        f"| {t_cudnn:.2f} | {t_cudnn / t_proto:.2f} | {t_cudnn / t_ours:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[32])
    parser.add_argument(
        "--stages", type=int, default=4, choices=range(2, 6), help="the ring's stages (2-5)"
    )
    args = parser.parse_args()
    print(
        f"{LAYER}, input stored (N, H, W, C)\n\n| batch | stages | prototype µs "
        "| equal to the kept kernel's | kept kernel, registered µs "
        "| cuDNN fp16 µs | cuDNN / prototype | cuDNN / kept |\n|---|---|---|---|---|---|---|---|"
    )
    for batch in args.batch:
        print(run(batch, args.stages), flush=True)


if __name__ == "__main__":
    main()
