// UNFOLD (im2col, DML_UNFOLD_OPERATOR_DESC): (N, C, *S) -> (N, C*prod(K), BlockCount) for
// 1..6 spatial dims, any dtype (moved as 1/2/4/8-byte words), one launch for the batch.
//
// Each thread writes one 16-byte chunk (aligned to the buffer) of one output row r = (n, c, k). The row's window
// offset and the chunk's first block are decoded once; along the row the source position
// is affine in the innermost block index (pos = b*stride + k*dilation - pad), so the inner
// loop only adds the stride and carries into the outer block dims when a block row ends.
// Padding taps are written as zeros explicitly: the output is never pre-filled.
// Non-overlapping 2-D windows take unfold_squares instead (patches.cuh) where window rows
// and column rows are whole 16-byte chunks: a V x V square per thread transposed in
// registers; else unfold_slabs: a shared-memory transpose of one window row's slab per CTA,
// long 16-byte runs on both sides (unfold_patches, the tile transpose, stays forceable).
// Small 2-D windows take unfold_window2d: the input rows a band of output rows reads are
// staged in shared memory once, then every column row is written with 16-byte stores from
// there (unfold_chunks gathers each element from global memory for every tap that reads it).
#include "common.cuh"
#include "patches.cuh"

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
// registers (patches.cuh), where window rows and column rows are whole chunks. 4- and
// 8-byte words in 32 registers (4-byte: one 8-byte spill, an L1 store and load per thread):
// 8 CTAs, a full SM of threads.
template <int BYTES, typename IDX>
__global__ void __launch_bounds__(PATCH_THREADS, BYTES >= 4 ? 8 : 4)
unfold_squares(const typename Bits<BYTES>::type* __restrict__ x, typename Bits<BYTES>::type* __restrict__ y,
               const PatchParams p) {
    move_squares<BYTES, true, SameBits, IDX>(x, y, p);
}

// 2-D windows of compile-time size KH x KW (unfold_window2d). A CTA owns one band of R
// output rows of one (n, c) plane: the input rows those rows read (padding included, as
// zeros) sit in shared memory, each row in `sw` phases (column q at phase q % sw, position
// q / sw), so the elements one tap reads for consecutive output columns are consecutive
// slots at any stride, and tap t of output (oy, ox) is slot
// (oy - oy0) * sh * pitch + ox + tap_offset[t].
struct UnfoldWindowParams {
    long long x_stride_n;       // input element strides (0 = broadcast)
    long long x_stride_c;
    long long x_stride_h;
    long long x_stride_w;
    int height;                 // H
    int width;                  // W
    int out_w;                  // blocks per output row (OW)
    int out_h;                  // OH
    int stride_h;               // sh
    int stride_w;               // sw
    int pad_top;
    int pad_left;
    int band_rows;              // R: output rows per CTA
    int rows_in;                // input rows a band reads: (R - 1) * sh + (KH - 1) * dh + 1
    int pitch;                  // slots per staged row: sw * phase_len
    int phase_len;              // slots per phase: ceil(staged columns / sw)
    int chunked;                // 1: stage by 16-byte chunks of input row, 0: element-wise
    int chunk_x0;               // input column of the first staged chunk (a multiple of V)
    int staged_cols;            // staged columns: (OW - 1) * sw + (KW - 1) * dw + 1
    FastDivmod out_w_div;       // division by OW
    FastDivmod bands_div;       // division by bands per plane
    FastDivmod channel_div;     // division by C
    FastDivmod pitch_div;       // division by pitch
    FastDivmod phase_div;       // division by phase_len
    FastDivmod row_chunks_div;  // division by chunks per staged row
    FastDivmod stride_w_div;    // division by sw
    int tap_offset[64];         // slot offset of tap t = ky * KW + kx
};

// Slot loads per thread in flight before the first shared-memory store.
const int WINDOW2D_BATCH = 4;
// Chunk loads the same (stage_window_chunks): 2 x 16 bytes, twice the element loop's bytes;
// 4 spill at 40 registers.
const int WINDOW2D_CHUNK_BATCH = 2;

// The band's part of column rows from shared memory: `seg` elements of each row, the first
// of tap t at first + t * blocks. ALL_TAPS: the rows are whole numbers of chunks, so every
// row has the chunk boundaries of the first and a chunk's slots are found once for all
// TAPS taps; else only tap `tap`'s row.
template <int BYTES, int TAPS, bool ALL_TAPS, typename IDX>
__device__ __forceinline__ void window_chunks(const typename Bits<BYTES>::type* tile,
                                              typename Bits<BYTES>::type* first, IDX blocks, int seg,
                                              int tap, const UnfoldWindowParams& p) {
    typedef typename Bits<BYTES>::type T;
    const int V = Chunk<BYTES>::N;
    const int TN = ALL_TAPS ? TAPS : 1;  // taps per chunk
    if (!ALL_TAPS) first += (IDX)tap * blocks;
    const int misalign = misalign_of<BYTES>(first);
    const int items = (seg + misalign + V - 1) / V;
    const int row_step = p.stride_h * p.pitch;
    for (int i = threadIdx.x; i < items; i += blockDim.x) {
        const RunChunk r = run_chunk<BYTES>(i, misalign, seg);
        T* dst = first + r.at;
        const int e0 = r.at + r.first;
        const int oy = (int)fast_div((unsigned)e0, p.out_w_div);
        const int ox = e0 - oy * p.out_w;
        if (r.first == 0 && r.end == V && ox + V <= p.out_w) {
            // Within one output row: V consecutive slots per tap.
            const T* at = tile + (oy * row_step + ox);
#pragma unroll
            for (int u = 0; u < TN; ++u) {
                const int offset = ALL_TAPS ? p.tap_offset[u] : p.tap_offset[tap];
                Chunk<BYTES> out;
#pragma unroll
                for (int k = 0; k < V; ++k) out.e[k] = at[offset + k];
                store_span<BYTES>(dst + (IDX)u * blocks, out, 0, V);
            }
        } else {
            // A chunk that wraps to the next output row or ends a segment: its slots walked
            // again per tap (rare; holding V slots would cost V registers throughout).
            const int base = oy * row_step + ox;
#pragma unroll
            for (int u = 0; u < TN; ++u) {
                int slot = base + (ALL_TAPS ? p.tap_offset[u] : p.tap_offset[tap]);
                int col = ox;
                Chunk<BYTES> out;
#pragma unroll
                for (int k = 0; k < V; ++k) {
                    out.e[k] = 0;
                    if (k >= r.first && k < r.end) {
                        out.e[k] = tile[slot];
                        ++slot;
                        if (++col == p.out_w) {
                            col = 0;
                            slot += row_step - p.out_w;
                        }
                    }
                }
                store_span<BYTES>(dst + (IDX)u * blocks, out, r.first, r.end);
            }
        }
    }
}

// Staged input rows, one element per load: any strides (unfold_window2d).
template <int BYTES, typename IDX>
__device__ __forceinline__ void stage_window_elements(typename Bits<BYTES>::type* tile,
                                                      const typename Bits<BYTES>::type* image, int iy0,
                                                      const UnfoldWindowParams& p) {
    typedef typename Bits<BYTES>::type T;
    const int slots = p.rows_in * p.pitch;
    for (int i0 = threadIdx.x; i0 < slots; i0 += WINDOW2D_BATCH * blockDim.x) {
        T v[WINDOW2D_BATCH];
#pragma unroll
        for (int u = 0; u < WINDOW2D_BATCH; ++u) {
            const int i = i0 + u * (int)blockDim.x;
            const int r = (int)fast_div((unsigned)i, p.pitch_div);
            const int s = i - r * p.pitch;
            const int phase = (int)fast_div((unsigned)s, p.phase_div);
            const int ix = (s - phase * p.phase_len) * p.stride_w + phase - p.pad_left;
            const int iy = iy0 + r;
            const bool inside = i < slots && (unsigned)iy < (unsigned)p.height && (unsigned)ix < (unsigned)p.width;
            v[u] = inside ? __ldg(image + ((IDX)iy * (IDX)p.x_stride_h + (IDX)ix * (IDX)p.x_stride_w)) : (T)0;
        }
#pragma unroll
        for (int u = 0; u < WINDOW2D_BATCH; ++u) {
            const int i = i0 + u * (int)blockDim.x;
            if (i < slots) tile[i] = v[u];
        }
    }
}

// Staged input rows by 16-byte chunks of input row (unfold_window2d, `chunked`): the rows have
// unit element stride and start on chunk boundaries, so a chunk that lies inside the image is
// one load; its elements go to their slots (phase and position walked, not divided, per
// element), those in the padding as zeros. ~7 instructions per staged element where the
// element-wise loop takes ~40.
template <int BYTES, typename IDX>
__device__ __forceinline__ void stage_window_chunks(typename Bits<BYTES>::type* tile,
                                                    const typename Bits<BYTES>::type* image, int iy0,
                                                    const UnfoldWindowParams& p) {
    typedef typename Bits<BYTES>::type T;
    const int V = Chunk<BYTES>::N;
    const int row_chunks = (int)p.row_chunks_div.d;
    const int items = p.rows_in * row_chunks;
    const int x_lo = -p.pad_left;  // input column of staged column 0
    for (int i0 = threadIdx.x; i0 < items; i0 += WINDOW2D_CHUNK_BATCH * blockDim.x) {
        Chunk<BYTES> buf[WINDOW2D_CHUNK_BATCH];
#pragma unroll
        for (int u = 0; u < WINDOW2D_CHUNK_BATCH; ++u) {
            const int i = i0 + u * (int)blockDim.x;
            const int r = (int)fast_div((unsigned)i, p.row_chunks_div);
            const int cx = p.chunk_x0 + (i - r * row_chunks) * V;
            const int iy = iy0 + r;
            const T* at = image + ((IDX)iy * (IDX)p.x_stride_h + (IDX)cx);
            buf[u].v = make_uint4(0, 0, 0, 0);
            if (i < items && (unsigned)iy < (unsigned)p.height) {
                if (cx >= 0 && cx + V <= p.width) {
                    buf[u].v = __ldg(reinterpret_cast<const uint4*>(at));
                } else {
#pragma unroll
                    for (int k = 0; k < V; ++k) {
                        if ((unsigned)(cx + k) < (unsigned)p.width) buf[u].e[k] = __ldg(at + k);
                    }
                }
            }
        }
#pragma unroll
        for (int u = 0; u < WINDOW2D_CHUNK_BATCH; ++u) {
            const int i = i0 + u * (int)blockDim.x;
            if (i >= items) break;
            const int r = (int)fast_div((unsigned)i, p.row_chunks_div);
            const int q0 = p.chunk_x0 + (i - r * row_chunks) * V - x_lo;  // staged column
            // Staged column q sits at phase q % sw, position q / sw; q0 may be negative.
            const int qb = q0 + V * p.stride_w;  // >= 0: chunk_x0 >= x_lo - V
            const int pb = (int)fast_div((unsigned)qb, p.stride_w_div);
            int phase = qb - pb * p.stride_w;
            int pos = pb - V;
            T* row = tile + r * p.pitch;
#pragma unroll
            for (int k = 0; k < V; ++k) {
                if ((unsigned)(q0 + k) < (unsigned)p.staged_cols) row[phase * p.phase_len + pos] = buf[u].e[k];
                if (++phase == p.stride_w) {
                    phase = 0;
                    ++pos;
                }
            }
        }
    }
}

// 6 CTAs per SM: 40 registers without spills at every width but 1 byte (16 slots a chunk).
template <int BYTES, int KH, int KW, typename IDX>
__global__ void __launch_bounds__(256, BYTES >= 2 ? 6 : 4)
unfold_window2d(const typename Bits<BYTES>::type* __restrict__ x, typename Bits<BYTES>::type* __restrict__ y,
                const UnfoldWindowParams p) {
    typedef typename Bits<BYTES>::type T;
    const int TAPS = KH * KW;
    T* tile = dynamic_smem<T>();
    IDX plane, band, n, c;
    divmod<IDX>((IDX)blockIdx.x, p.bands_div, plane, band);
    divmod<IDX>(plane, p.channel_div, n, c);
    const int oy0 = (int)band * p.band_rows;
    const int iy0 = oy0 * p.stride_h - p.pad_top;
    const T* image = x + (n * (IDX)p.x_stride_n + c * (IDX)p.x_stride_c);

    // Input rows -> shared memory, zeros where a slot falls in the padding or past the image.
    if (p.chunked && ((unsigned long long)image & 15) == 0) {
        stage_window_chunks<BYTES, IDX>(tile, image, iy0, p);
    } else {
        stage_window_elements<BYTES, IDX>(tile, image, iy0, p);
    }
    __syncthreads();

    // Tap t's part of this band is `seg` elements of column row plane * TAPS + t, at the
    // same place in every row.
    const int seg = imin(p.band_rows, p.out_h - oy0) * p.out_w;
    const IDX blocks = (IDX)p.out_h * (IDX)p.out_w;
    T* first = y + (plane * (IDX)TAPS * blocks + (IDX)oy0 * (IDX)p.out_w);
    if (blocks % Chunk<BYTES>::N == 0) {
        window_chunks<BYTES, TAPS, true, IDX>(tile, first, blocks, seg, 0, p);
    } else {
        for (int t = 0; t < TAPS; ++t) window_chunks<BYTES, TAPS, false, IDX>(tile, first, blocks, seg, t, p);
    }
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
template __global__ void dml::unfold_window2d<4, 3, 3, int>(const unsigned int*, unsigned int*, const dml::UnfoldWindowParams);
template __global__ void dml::unfold_window2d<4, 4, 4, int>(const unsigned int*, unsigned int*, const dml::UnfoldWindowParams);
template __global__ void dml::unfold_window2d<2, 3, 3, long long>(const unsigned short*, unsigned short*, const dml::UnfoldWindowParams);
template __global__ void dml::unfold_window2d<1, 2, 5, int>(const unsigned char*, unsigned char*, const dml::UnfoldWindowParams);
template __global__ void dml::unfold_window2d<8, 8, 8, int>(const unsigned long long*, unsigned long long*, const dml::UnfoldWindowParams);
#endif
