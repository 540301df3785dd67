// The V x V square transpose shared by UNFOLD's and FOLD's squares kernels (unfold_squares,
// fold_squares): non-overlapping 2-D windows whose window rows and column rows are whole
// 16-byte chunks; one square per thread, V 16-byte loads on one side, transposed in
// registers, V 16-byte stores on the other (no shared memory, no barrier).
#pragma once

#include "patches.cuh"

namespace dml {

// One V x V square (move_squares): chunks at image[u] and col_at + u * col_stride, read on
// one side, transposed, written on the other. ALIGNED: both buffers 16-byte aligned (the
// strides being multiples of V, so is every chunk), else elements move one by one.
template <int BYTES, bool TO_COLUMNS, bool ALIGNED, typename Op, typename IDX>
__device__ __forceinline__ void move_square(const typename Bits<BYTES>::type* __restrict__ src,
                                            typename Bits<BYTES>::type* __restrict__ dst,
                                            const IDX* image, IDX col_at, long long col_stride) {
    typedef typename Bits<BYTES>::type T;
    const int V = Chunk<BYTES>::N;
    Chunk<BYTES> in[V];
#pragma unroll
    for (int u = 0; u < V; ++u) {
        const T* at = src + (TO_COLUMNS ? image[u] : col_at + (IDX)u * (IDX)col_stride);
        if (ALIGNED) {
            in[u].v = __ldg(reinterpret_cast<const uint4*>(at));
        } else {
#pragma unroll
            for (int k = 0; k < V; ++k) in[u].e[k] = __ldg(at + k);
        }
    }
#pragma unroll
    for (int k = 0; k < V; ++k) {
        Chunk<BYTES> out;
#pragma unroll
        for (int u = 0; u < V; ++u) out.e[u] = Op::apply(in[u].e[k]);
        T* at = dst + (TO_COLUMNS ? col_at + (IDX)k * (IDX)col_stride : image[k]);
        if (ALIGNED) {
            store_span<BYTES>(at, out, 0, V);
        } else {
#pragma unroll
            for (int u = 0; u < V; ++u) at[u] = out.e[u];
        }
    }
}

// Where KW and L = BH*BW are multiples of V = 16 / BYTES (and so are the planes' strides)
// the transpose needs no shared memory: a thread moves one V x V square of one slab (n, c,
// ky), V consecutive blocks j = j0.. by V window columns kx = kx0.., as V 16-byte chunks of
// image rows in (block j's columns kx0..) and V chunks of column rows out (row kx's blocks
// j0..), transposed in registers. No barrier, every load of a thread issues before its first
// store (V chunks, 64 bytes, in flight per thread), and with kx0 fastest a warp reads whole
// block rows (KW elements each) and writes runs of 32 V / KW chunks of each column row.
// TO_COLUMNS: image -> columns (UNFOLD), else columns -> image (FOLD); `Op::apply` maps each
// element on its way.
template <int BYTES, bool TO_COLUMNS, typename Op, typename IDX>
__device__ __forceinline__ void move_squares(const typename Bits<BYTES>::type* __restrict__ src,
                                             typename Bits<BYTES>::type* __restrict__ dst,
                                             const PatchParams& p) {
    typedef typename Bits<BYTES>::type T;
    const int V = Chunk<BYTES>::N;
    const IDX i = (IDX)blockIdx.x * (IDX)blockDim.x + (IDX)threadIdx.x;
    if (i >= (IDX)p.squares) return;
    IDX rest, kg, slab, jg, plane, ky, n, c;
    divmod<IDX>(i, p.square_cols_div, rest, kg);
    divmod<IDX>(rest, p.square_rows_div, slab, jg);
    divmod<IDX>(slab, p.tiles_div, plane, ky);
    divmod<IDX>(plane, p.channel_div, n, c);
    const int j0 = (int)jg * V;
    int by = (int)fast_div((unsigned)j0, p.blocks_w_div);
    int bx = j0 - by * p.blocks_w;
    // Image offsets of the V blocks' chunks: KW apart along a block row, and past its last
    // block on to the first of the next block row, (KH - 1) image rows further.
    IDX image[V];
    image[0] = n * (IDX)p.image_stride_n + c * (IDX)p.image_stride_c +
               ((IDX)by * (IDX)p.window_h + ky) * (IDX)p.width + (IDX)(bx * p.window_w) + kg * (IDX)V;
#pragma unroll
    for (int u = 1; u < V; ++u) {
        image[u] = image[u - 1] + (IDX)p.window_w;
        if (++bx == p.blocks_w) {
            bx = 0;
            image[u] += (IDX)(p.window_h - 1) * (IDX)p.width;
        }
    }
    const IDX col_at = n * (IDX)p.col_stride_n +
                       ((c * (IDX)p.window_h + ky) * (IDX)p.window_w + kg * (IDX)V) * (IDX)p.col_stride_r +
                       (IDX)j0;
    // Branched once per thread: predicated element loads would still take issue slots.
    if ((((unsigned long long)src | (unsigned long long)dst) & 15) == 0) {
        move_square<BYTES, TO_COLUMNS, true, Op, IDX>(src, dst, image, col_at, p.col_stride_r);
    } else {
        move_square<BYTES, TO_COLUMNS, false, Op, IDX>(src, dst, image, col_at, p.col_stride_r);
    }
}

}  // namespace dml
