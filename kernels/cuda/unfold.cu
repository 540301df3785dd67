// UNFOLD (im2col, DML_UNFOLD_OPERATOR_DESC): (N, C, *S) -> (N, C*prod(K), BlockCount) for
// 1..6 spatial dims, any dtype (moved as 1/2/4/8-byte words), one launch for the batch.
//
// Each thread writes one 16-byte chunk (aligned to the buffer) of one output row r = (n, c, k). The row's window
// offset and the chunk's first block are decoded once; along the row the source position
// is affine in the innermost block index (pos = b*stride + k*dilation - pad), so the inner
// loop only adds the stride and carries into the outer block dims when a block row ends.
// Padding taps are written as zeros explicitly: the output is never pre-filled.
// Non-overlapping 2-D windows take unfold_squares instead (squares.cuh) where window rows
// and column rows are whole 16-byte chunks: a V x V square per thread transposed in
// registers; else unfold_slabs: a shared-memory transpose of one window row's slab per CTA,
// long 16-byte runs on both sides (unfold_patches, the tile transpose, stays forceable).
// Small 2-D windows take unfold_window2d (unfold_window2d.cu): the input rows a band of output rows reads are
// staged in shared memory once, then every column row is written with 16-byte stores from
// there (unfold_chunks gathers each element from global memory for every tap that reads it).
#include "common.cuh"
#include "squares.cuh"

namespace dml {

// The launcher reads this struct into its NumPy structured dtype (natural alignment): one
// field per line, `type name;` or `type name[count];`.
struct UnfoldParams {
    long long x_stride_n;       // element strides of the input (0 = broadcast)
    long long x_stride_c;
    long long x_stride[6];
    long long total_chunks;     // rows * chunks_per_row
    int size[6];                // S
    int window_stride[6];
    int dilation[6];
    int pad_lo[6];
    int blocks[6];              // BlocksPerDimension
    FastDivmod block_div[6];    // division by blocks[d]
    FastDivmod window_div[6];   // division by WindowSizes[d]
    FastDivmod chunk_div;       // division by chunks per row
    FastDivmod taps_div;        // division by prod(WindowSizes)
    FastDivmod channel_div;     // division by C
    int block_count;            // L = prod(blocks)
    int unused;
};

template <int BYTES, int D, typename IDX>
__global__ void __launch_bounds__(256)
unfold_chunks(const typename Bits<BYTES>::type* __restrict__ x, typename Bits<BYTES>::type* __restrict__ y,
              const UnfoldParams p) {
    typedef typename Bits<BYTES>::type T;
    const int V = Chunk<BYTES>::N;
    IDX row, row_start;
    ChunkSpan span;
    if (!row_chunk<BYTES, IDX>(p.total_chunks, p.chunk_div, p.block_count, row, row_start, span))
        return;

    IDX nc, tap, n, c;
    divmod<IDX>(row, p.taps_div, nc, tap);
    divmod<IDX>(nc, p.channel_div, n, c);

    // Window offset k of this row -> k*dilation - pad per dim.
    int koff[D];
    {
        unsigned rest = (unsigned)tap;
#pragma unroll
        for (int d = D - 1; d >= 0; --d) {
            unsigned k;
            if (d == 0) {
                k = rest;
            } else {
                const unsigned q = fast_div(rest, p.window_div[d]);
                k = rest - q * p.window_div[d].d;
                rest = q;
            }
            koff[d] = (int)k * p.dilation[d] - p.pad_lo[d];
        }
    }
    // Block coordinates of the chunk's first column in the row.
    int b[D];
    {
        unsigned rest = (unsigned)(span.c0 + span.first);
#pragma unroll
        for (int d = D - 1; d >= 0; --d) {
            if (d == 0) {
                b[d] = (int)rest;
            } else {
                const unsigned q = fast_div(rest, p.block_div[d]);
                b[d] = (int)(rest - q * p.block_div[d].d);
                rest = q;
            }
        }
    }

    const IDX base = n * (IDX)p.x_stride_n + c * (IDX)p.x_stride_c;
    IDX outer = base;
    bool inside = true;
#pragma unroll
    for (int d = 0; d < D - 1; ++d) {
        const int pos = b[d] * p.window_stride[d] + koff[d];
        inside = inside && (unsigned)pos < (unsigned)p.size[d];
        outer += (IDX)pos * (IDX)p.x_stride[d];
    }

    const int inner_size = p.size[D - 1];
    const int inner_blocks = p.blocks[D - 1];
    const int inner_step = p.window_stride[D - 1];
    const IDX inner_stride = (IDX)p.x_stride[D - 1];
    int pos = b[D - 1] * inner_step + koff[D - 1];
    int bi = b[D - 1];

    Chunk<BYTES> out;
#pragma unroll
    for (int i = 0; i < V; ++i) {
        if (i >= span.first && i < span.end) {
            out.e[i] = (inside && (unsigned)pos < (unsigned)inner_size)
                           ? __ldg(x + (outer + (IDX)pos * inner_stride))
                           : (T)0;
            pos += inner_step;
            if (++bi == inner_blocks) {
                // Next block row: carry into the outer block dims and re-derive their part.
                bi = 0;
                pos = koff[D - 1];
                if (D > 1) {
#pragma unroll
                    for (int d = D - 2; d >= 0; --d) {
                        if (++b[d] < p.blocks[d]) break;
                        b[d] = 0;
                    }
                    outer = base;
                    inside = true;
#pragma unroll
                    for (int d = 0; d < D - 1; ++d) {
                        const int q = b[d] * p.window_stride[d] + koff[d];
                        inside = inside && (unsigned)q < (unsigned)p.size[d];
                        outer += (IDX)q * (IDX)p.x_stride[d];
                    }
                }
            }
        }
    }
    store_span<BYTES>(y + (row_start + (IDX)span.c0), out, span.first, span.end);
}

// UNFOLD of non-overlapping 2-D windows (PatchParams, patches.cuh): image -> columns.
template <int BYTES, typename IDX>
__global__ void __launch_bounds__(PATCH_THREADS, PATCH_CTAS)
unfold_patches(const typename Bits<BYTES>::type* __restrict__ x, typename Bits<BYTES>::type* __restrict__ y,
               const PatchParams p) {
    move_patches<BYTES, true, SameBits, IDX>(x, y, p);
}

// UNFOLD of non-overlapping 2-D windows, one slab (n, c, ky) per CTA (patches.cuh).
template <int BYTES, typename IDX>
__global__ void __launch_bounds__(PATCH_THREADS, PATCH_CTAS)
unfold_slabs(const typename Bits<BYTES>::type* __restrict__ x, typename Bits<BYTES>::type* __restrict__ y,
             const PatchParams p) {
    slab_to_columns<BYTES, IDX>(x, y, p);
}

// UNFOLD of non-overlapping 2-D windows, one V x V square per thread transposed in
// registers (squares.cuh), where window rows and column rows are whole chunks. 4- and
// 8-byte words in 32 registers (4-byte: one 8-byte spill, an L1 store and load per thread):
// 8 CTAs, a full SM of threads.
template <int BYTES, typename IDX>
__global__ void __launch_bounds__(PATCH_THREADS, BYTES >= 4 ? 8 : 4)
unfold_squares(const typename Bits<BYTES>::type* __restrict__ x, typename Bits<BYTES>::type* __restrict__ y,
               const PatchParams p) {
    move_squares<BYTES, true, SameBits, IDX>(x, y, p);
}

}  // namespace dml

#ifdef DMLSERVE_EXPLICIT_INSTANTIATION
template __global__ void dml::unfold_chunks<1, 1, int>(const unsigned char*, unsigned char*, const dml::UnfoldParams);
template __global__ void dml::unfold_chunks<2, 2, int>(const unsigned short*, unsigned short*, const dml::UnfoldParams);
template __global__ void dml::unfold_chunks<4, 2, int>(const unsigned int*, unsigned int*, const dml::UnfoldParams);
template __global__ void dml::unfold_chunks<4, 3, long long>(const unsigned int*, unsigned int*, const dml::UnfoldParams);
template __global__ void dml::unfold_chunks<8, 6, int>(const unsigned long long*, unsigned long long*, const dml::UnfoldParams);
template __global__ void dml::unfold_patches<4, int>(const unsigned int*, unsigned int*, const dml::PatchParams);
template __global__ void dml::unfold_patches<2, long long>(const unsigned short*, unsigned short*, const dml::PatchParams);
template __global__ void dml::unfold_patches<1, int>(const unsigned char*, unsigned char*, const dml::PatchParams);
template __global__ void dml::unfold_patches<8, int>(const unsigned long long*, unsigned long long*, const dml::PatchParams);
template __global__ void dml::unfold_slabs<4, int>(const unsigned int*, unsigned int*, const dml::PatchParams);
template __global__ void dml::unfold_slabs<2, long long>(const unsigned short*, unsigned short*, const dml::PatchParams);
template __global__ void dml::unfold_slabs<1, int>(const unsigned char*, unsigned char*, const dml::PatchParams);
template __global__ void dml::unfold_slabs<8, int>(const unsigned long long*, unsigned long long*, const dml::PatchParams);
template __global__ void dml::unfold_squares<4, int>(const unsigned int*, unsigned int*, const dml::PatchParams);
template __global__ void dml::unfold_squares<2, long long>(const unsigned short*, unsigned short*, const dml::PatchParams);
template __global__ void dml::unfold_squares<8, int>(const unsigned long long*, unsigned long long*, const dml::PatchParams);
#endif
