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
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_convolution_integer as bench  # noqa: E402
import cupy  # noqa: E402

from dmlserve.kernels.cupy_backend._common import tensor_map  # noqa: E402
from dmlserve.kernels.cupy_backend._convolution_integer_tma import _masks, _table  # noqa: E402
from dmlserve.kernels.cupy_backend._loader import CUDA_DIR  # noqa: E402
from dmlserve.kernels.cupy_backend.convolution_integer import convolution_integer  # noqa: E402

LAYER = "3x3 128->128 @28"
STAGE_BYTES = 128 * 128 + 224 * 128  # the tap's filter block and input box
ROWS = 8  # output rows a CTA
SOURCE = r"""
#include "convolution_integer_tma_sm90a.cu"
namespace tma = dml::tma;  // the kept kernel's copies, barriers and descriptors
constexpr int S = DML_STAGES;  // stages in the ring
constexpr int A_BYTES = 128 * 128, B_BYTES = 224 * 128, STAGE = A_BYTES + B_BYTES;
// Grid: one CTA per (image, 8 output rows); 384 threads: warpgroup 0 the producer (thread 0
// issues the copies), warpgroups 1 and 2 the consumers (64 output channels each).
extern "C" __global__ void __launch_bounds__(384, 1)
    proto_conv(const tma::TensorMap* tmw, const tma::TensorMap* tmx,
               const int* __restrict__ biases,
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
            tma::init(full + 8 * s, 1);   // the producer's arrival and the stage's bytes
            tma::init(empty + 8 * s, 2);  // one arrival a consumer warpgroup
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
                tma::expect_bytes(full + 8 * s, STAGE);
                tma::load2d(stage, *tmw, kb * 128, 0, full + 8 * s);
                tma::load4d(stage + A_BYTES, *tmx, 0, kb % 3 - 1, h0 + kb / 3 - 1, n,
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
                dml::wg::mma<224, true, false>(acc, dml::wg::swizzled_desc<128>(a + 32 * j),
                                               dml::wg::swizzled_desc<128>(b + 32 * j), 1);
            }
            dml::wg::commit();
            dml::wg::wait<1>();  // the stage before is read: give it back
            if (kb > 0 && (tid & 127) == 0) tma::arrive(empty + 8 * ((kb - 1) % S));
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


def device_map(address: int, dims: list[int], strides: list[int], box: list[int]) -> Any:
    """`tensor_map`'s 128-byte swizzled descriptor of bytes, on the device (the prototype reads
    it from global memory)."""
    encoded = tensor_map(address, dims, strides, box, [1] * len(dims), 128)
    return cupy.asarray(np.frombuffer(encoded, dtype=np.uint64))


def border_biases(w: np.ndarray, zx: int, h: int) -> np.ndarray:
    """[M][9] int32: - z_x times each output channel's filter sums over the taps that lie inside
    the image for each class of output pixel (the kept kernel's table with no filter zero point,
    times z_x), a 3x3 window with padding 1 on h x h images."""
    masks = _masks(h, 1, 1, h)
    assert masks is not None
    table = _table(w, np.zeros(w.shape[0], np.int32), (masks, masks), w.shape[0])
    return (zx * table.astype(np.int64) % 2**32).astype(np.uint32).view(np.int32)


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
    filter_map = device_map(rows.data.ptr, [9 * c, m], [9 * c], [128, 128])
    input_maps = [
        device_map(x.data.ptr, [c, wd, h, n], [c, wd * c, h * wd * c], [128, wd, ROWS, 1])
        for x in stored
    ]
    tiles_h = -(-h // ROWS)
    out = cupy.empty((n, m, h, wd), dtype=cupy.int32)
    ints = tuple(map(np.int32, (h, wd, m, tiles_h)))
    biases = cupy.asarray(border_biases(cupy.asnumpy(w), 128, h))

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

    t_proto = bench.time_ms(prototype, 20, 15, 5) * 1e3
    t_ours = bench.time_ms(ours, 20, 15, 5) * 1e3
    t_cudnn = bench.time_ms(bench.cudnn_on(xs, w, case), 20, 15, 5) * 1e3
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
