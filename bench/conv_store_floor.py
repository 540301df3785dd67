"""The floor under the shifted-window GEMM's epilogue: how long the GPU takes to write the int32
output of the 3x3 128->128 @28 layer at batch 32 (12.8 MB, NCHW) with nothing else to do, in
the orders a kernel could store it. Each pattern writes every output once (the 16-byte one:
every output that a whole aligned group of 4 holds, 98-99% of them); each time includes a
launch (the `empty` row: an empty kernel on 129 CTAs).

- contiguous blocks: each CTA one block of the flat output (4-byte, then 16-byte stores);
- the epilogue's pattern: CTAs on tiles of 224 virtual pixels (rows of 30, of which 28 are
  outputs: the kept plan's grid for this layer, its pads not shared; and rows of 29, pads
  shared), a warp on its own 16 channels, its lanes on 32 consecutive virtual pixels, one
  channel after the other; and the same tiles with the CTA's warps on channels w, w + 8, ..;
- row-aligned tiles: CTAs on 224 consecutive outputs of an image (no pad columns in them), in
  the epilogue's warp order;
- the MMA fragment's order (pixels as the MMA's M: one instruction writes 8 consecutive pixels
  of 4 channels, no trip through shared memory), on the virtual tiles and the row-aligned ones;
- 16-byte stores (a lane 4 output pixels of a row, 16 channels a warp);
- bulk copies (`cp.async.bulk` shared -> global) of 7-row tiles, one 784-byte copy a channel, and
  of contiguous blocks, after the tile is written into shared memory (`fill only`: that part).

Each lane's output offsets come from a table made on the host (one load a lane before its
first store, which the contiguous and bulk patterns do not pay), so that no pattern pays for
its own index arithmetic. Run on a GPU of compute capability 9.0, from the repository root:
``python3 bench/conv_store_floor.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_convolution_integer as bench  # noqa: E402
import cupy  # noqa: E402

N, M, OH, OW = 32, 128, 28, 28
P = OH * OW
GRIDS = (30, 29)  # virtual rows: the output row and its two pad columns, or one shared
TILE = 224

SOURCE = r"""
extern "C" __global__ void empty(int* out) {}
extern "C" __global__ void st_scalar(int* out, int per_cta) {
    int* o = out + (long long)blockIdx.x * per_cta;
    for (int i = threadIdx.x; i < per_cta; i += blockDim.x) o[i] = i;
}
extern "C" __global__ void st_vec(int* out, int per_cta) {
    int4* o = reinterpret_cast<int4*>(out + (long long)blockIdx.x * per_cta);
    for (int i = threadIdx.x; i < per_cta / 4; i += blockDim.x) o[i] = make_int4(i, i, i, i);
}
// tab[tile][224]: channel 0's output offset of each pixel of the tile, -1 for none
// a warp its own 16 channels, lanes on 32 consecutive pixels (the epilogue's order)
extern "C" __global__ void st_warp16(int* out, const int* tab, int P) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int off[7];
    for (int i = 0; i < 7; ++i) off[i] = tab[blockIdx.x * 224 + 32 * i + lane];
    for (int m = warp * 16; m < warp * 16 + 16; ++m)
        for (int i = 0; i < 7; ++i) if (off[i] >= 0) out[off[i] + (long long)m * P] = m;
}
// the CTA's warps on channels w, w + 8, ..
extern "C" __global__ void st_warp_strided(int* out, const int* tab, int P) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int off[7];
    for (int i = 0; i < 7; ++i) off[i] = tab[blockIdx.x * 224 + 32 * i + lane];
    for (int m = warp; m < 128; m += 8)
        for (int i = 0; i < 7; ++i) if (off[i] >= 0) out[off[i] + (long long)m * P] = m;
}
// the MMA fragment's order: warp w on 16-pixel groups w, w + 8; lane l on pixels 16 g + l / 4
// (and + 8) and channels 8 j + 2 (l % 4) + {0, 1}
extern "C" __global__ void st_fragment(int* out, const int* tab, int P) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int off[4];
    for (int i = 0; i < 4; ++i) {
        const int g = warp + 8 * (i / 2);
        off[i] = g < 14 ? tab[blockIdx.x * 224 + 16 * g + lane / 4 + 8 * (i & 1)] : -1;
    }
    for (int j = 0; j < 16; ++j)
        for (int e = 0; e < 2; ++e)
            for (int i = 0; i < 4; ++i)
                if (off[i] >= 0) out[off[i] + (long long)(8 * j + 2 * (lane & 3) + e) * P] = j;
}
// 16-byte stores: q4[tile][64]: channel 0's offset of a 4-pixel group (aligned, in one row),
// or -1; a warp its own 16 channels, lanes on groups
extern "C" __global__ void st_vec16(int* out, const int* q4, int P) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int o0 = q4[blockIdx.x * 64 + lane], o1 = q4[blockIdx.x * 64 + 32 + lane];
    for (int m = warp * 16; m < warp * 16 + 16; ++m) {
        if (o0 >= 0) *reinterpret_cast<int4*>(out + o0 + (long long)m * P) = make_int4(m, m, m, m);
        if (o1 >= 0) *reinterpret_cast<int4*>(out + o1 + (long long)m * P) = make_int4(m, m, m, m);
    }
}
__device__ __forceinline__ void fill(int* s, int words) {
    int4* s4 = reinterpret_cast<int4*>(s);
    for (int i = threadIdx.x; i < words / 4; i += blockDim.x) s4[i] = make_int4(i, i, i, i);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
}
__device__ __forceinline__ void bulk_store(void* g, const void* s, unsigned bytes) {
    const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(s));
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                 :: "l"(g), "r"(sa), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_wait() {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
// 7-row tiles (196 outputs, 4 an image) staged in shared memory
extern "C" __global__ void fill_only(int* out, int P) {
    extern __shared__ __align__(128) int s[];
    fill(s, 128 * 196);
    if (threadIdx.x == 0 && s[5] == -1) out[0] = 1;
}
extern "C" __global__ void bulk_channels(int* out, int P) {
    extern __shared__ __align__(128) int s[];
    fill(s, 128 * 196);
    const int n = blockIdx.x / 4, q = blockIdx.x % 4;
    if (threadIdx.x < 32) {
        for (int m = threadIdx.x; m < 128; m += 32)
            bulk_store(out + (long long)(n * 128 + m) * P + q * 196, s + m * 196, 784);
        bulk_wait();
    }
}
extern "C" __global__ void bulk_block(int* out, int P) {
    extern __shared__ __align__(128) int s[];
    fill(s, 128 * 196);
    if (threadIdx.x < 7) {  // the CTA's 100 KB block in copies of 14 KB
        int* o = out + (long long)blockIdx.x * 128 * 196;
        bulk_store(o + threadIdx.x * 3584, s + threadIdx.x * 3584, 3584 * 4);
        bulk_wait();
    }
}
"""


def _tables() -> dict[str, np.ndarray]:
    """Per tile, channel 0's output offset of each of its 224 pixels (-1: none)."""
    tables = {}
    for vw in GRIDS:  # vw x vw virtual pixels an image
        tiles = -(-N * vw * vw // TILE)
        v = np.arange(tiles * TILE)
        n, r = v // (vw * vw), v % (vw * vw)
        oh, ow = r // vw, r % vw
        virtual = np.where((n < N) & (oh < OH) & (ow < OW), n * M * P + oh * OW + ow, -1)
        tables[f"virtual {vw} x {vw}"] = virtual.reshape(tiles, TILE)
    q = np.arange(N * P)  # tiles of 224 consecutive outputs of an image (the last one 112)
    n, pix = q // P, q % P
    per_image = -(-P // TILE)
    aligned = np.full((N * per_image, TILE), -1)
    aligned[n * per_image + pix // TILE, pix % TILE] = n * M * P + pix
    tables["row-aligned"] = aligned
    return tables


def _groups(table: np.ndarray) -> np.ndarray:
    """Per tile, the 16-byte groups (4 outputs of a row from a multiple of 4) it holds whole."""
    out = np.full((table.shape[0], 64), -1)
    for t, row in enumerate(table):
        starts = [o for o in row if o >= 0 and o % 4 == 0 and {o + 1, o + 2, o + 3} <= set(row)]
        out[t, : len(starts)] = starts
    return out


def main() -> None:
    out = cupy.zeros(N * M * P, cupy.int32)
    module = cupy.RawModule(code=SOURCE, options=("-std=c++17", "-arch=sm_90a"))

    def run(name: str, grid: int, args: tuple, smem: int = 0) -> float:
        kernel = module.get_function(name)
        kernel.max_dynamic_shared_size_bytes = smem
        out.fill(-1)
        kernel((grid,), (256,), args, shared_mem=smem)
        if name not in ("empty", "fill_only") and bool((out == -1).any()):
            raise AssertionError(f"{name} left outputs unwritten")
        call = lambda i: kernel((grid,), (256,), args, shared_mem=smem)  # noqa: E731
        return bench.time_ms(call, 10, 7, 3) * 1e3

    full = out.nbytes
    rows = [("empty", 129, run("empty", 129, (out,)), 0)]
    per_cta = out.size // 128
    for name in ("st_scalar", "st_vec"):
        us = run(name, 128, (out, np.int32(per_cta)))
        rows.append((f"contiguous blocks, {name}", 128, us, full))
    p = np.int32(P)
    for kind, table in _tables().items():
        tab = cupy.asarray(table.astype(np.int32))
        tiles = table.shape[0]
        for name in ("st_warp16", "st_warp_strided", "st_fragment"):
            rows.append((f"{kind} tiles, {name}", tiles, run(name, tiles, (out, tab, p)), full))
        if kind.startswith("virtual"):  # only the outputs that whole aligned groups hold
            groups = _groups(table)
            share = int((groups >= 0).sum()) * 4 * M * 4
            kernel = module.get_function("st_vec16")
            args = (out, cupy.asarray(groups.astype(np.int32)), p)
            call = lambda i, k=kernel, a=args, g=tiles: k((g,), (256,), a)  # noqa: E731
            us = bench.time_ms(call, 10, 7, 3) * 1e3
            rows.append(
                (f"{kind} tiles, st_vec16 ({share / full:.0%} of the output)", tiles, us, share)
            )
    smem = 128 * 196 * 4
    for name in ("fill_only", "bulk_channels", "bulk_block"):
        nbytes = 0 if name == "fill_only" else full
        rows.append((f"7-row tiles, {name}", 128, run(name, 128, (out, p), smem), nbytes))
    print("| stores | CTAs | µs a call | TB/s |")
    print("|---|---|---|---|")
    for name, grid, us, nbytes in rows:
        rate = f"{nbytes / us / 1e6:.2f}" if nbytes else "-"
        print(f"| {name} | {grid} | {us:.2f} | {rate} |")


if __name__ == "__main__":
    main()
