// UNFOLD (im2col, DML_UNFOLD_OPERATOR_DESC): (N, C, *S) -> (N, C*prod(K), BlockCount) for
// 1..6 spatial dims, any dtype (moved as 1/2/4/8-byte words), one launch for the batch.
//
// Output rows r = (n, c, k) are written in 16-byte chunks aligned to the buffer (common.cuh,
// chunk_span). Padding taps are written as zeros explicitly: the output is never pre-filled.
//
// unfold_rows (2 spatial dims; the launcher maps 1 onto 2): one CTA per (n, c, window row kh,
// run of block rows). It reads the input rows those blocks need (one per block row) into
// shared memory with coalesced loads, then writes, for each window column kw, the run's
// segment of output row (c, kh, kw): G*BW consecutive elements, 16-byte chunks gathered from
// shared memory. Every output element is one shared-memory read; the input is read from
// global memory once per window row (CTAs of neighbouring kh run together, so mostly from L2).
//
// unfold_chunks (any rank): each thread writes one chunk of one output row; the row's window
// offset and the chunk's first block are decoded once; along the row the source position is
// affine in the innermost block index (pos = b*stride + k*dilation - pad), so the inner loop
// only adds the stride and carries into the outer block dims when a block row ends.
#include "common.cuh"

namespace dml {

// Mirrors the launcher's NumPy structured dtype field by field (natural alignment).
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
    FastDivmod w_div;           // unfold_rows: division by the input width
    FastDivmod run_div;         // unfold_rows: division by the block-row runs per window row
    int block_count;            // L = prod(blocks)
    int rows_per_cta;           // unfold_rows: block rows per CTA (G)
    int pitch;                  // unfold_rows: shared-memory elements per input row
    int unused;
};

// Shared-memory index of column x of a staged row: one spare element every 64, so the
// stride-16 gathers of patch extraction (ViT) do not all hit one bank.
__device__ __forceinline__ int staged_column(int x) { return x + (x >> 6); }

template <int BYTES, typename IDX>
__global__ void __launch_bounds__(256)
unfold_rows(const typename Bits<BYTES>::type* __restrict__ x, typename Bits<BYTES>::type* __restrict__ y,
            const UnfoldParams p) {
    typedef typename Bits<BYTES>::type T;
    const int V = Chunk<BYTES>::N;
    constexpr int LOADS = 8;
    T* rows = dynamic_smem<T>();

    // CTA -> (n, c, run, kh), kh fastest: CTAs that read the same input rows run together.
    unsigned rest = blockIdx.x, q;
    q = fast_div(rest, p.window_div[0]);
    const int kh = (int)(rest - q * p.window_div[0].d);
    rest = q;
    q = fast_div(rest, p.run_div);
    const int run = (int)(rest - q * p.run_div.d);
    const unsigned nc = q;
    const unsigned n = fast_div(nc, p.channel_div);
    const unsigned c = nc - n * p.channel_div.d;

    const int H = p.size[0], W = p.size[1];
    const int BH = p.blocks[0], BW = p.blocks[1];
    const int KH = (int)p.window_div[0].d, KW = (int)p.window_div[1].d;
    const int bh0 = run * p.rows_per_cta;
    const int g_count = imin(p.rows_per_cta, BH - bh0);
    const int y0 = bh0 * p.window_stride[0] + kh * p.dilation[0] - p.pad_lo[0];
    const int sh = p.window_stride[0];
    const IDX plane = (IDX)n * (IDX)p.x_stride_n + (IDX)c * (IDX)p.x_stride_c;
    const IDX xs_h = (IDX)p.x_stride[0], xs_w = (IDX)p.x_stride[1];

    // 1. The G input rows -> shared memory (rows in the padding are never read back).
    const int total = g_count * W;
    for (int base = threadIdx.x; base < total; base += LOADS * blockDim.x) {
        T v[LOADS];
        int at[LOADS];
#pragma unroll
        for (int u = 0; u < LOADS; ++u) {
            const int j = base + u * (int)blockDim.x;
            at[u] = -1;
            if (j < total) {
                const int g = (int)fast_div((unsigned)j, p.w_div);
                const int col = j - g * W;
                const int row = y0 + g * sh;
                if ((unsigned)row < (unsigned)H) {
                    v[u] = __ldg(x + (plane + (IDX)row * xs_h + (IDX)col * xs_w));
                    at[u] = g * p.pitch + staged_column(col);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < LOADS; ++u) {
            if (at[u] >= 0) rows[at[u]] = v[u];
        }
    }
    __syncthreads();

    // 2. For each kw: the run's segment of output row (n, c, kh, kw), chunk by chunk.
    const int seg_len = g_count * BW;
    const int seg_chunks = (seg_len + 2 * V - 2) / V;
    const int sw = p.window_stride[1];
    for (int kw = 0; kw < KW; ++kw) {
        const IDX out_row = ((IDX)nc * (IDX)KH + (IDX)kh) * (IDX)KW + (IDX)kw;
        const IDX seg_start = out_row * (IDX)p.block_count + (IDX)bh0 * (IDX)BW;
        const int x_off = kw * p.dilation[1] - p.pad_lo[1];
        for (int ch = threadIdx.x; ch < seg_chunks; ch += blockDim.x) {
            const ChunkSpan span = chunk_span<BYTES, IDX>(seg_start, (IDX)ch, seg_len);
            if (span.first >= span.end) continue;
            const int e0 = span.c0 + span.first;
            int g = (int)fast_div((unsigned)e0, p.block_div[1]);
            int bw = e0 - g * BW;
            Chunk<BYTES> out;
#pragma unroll
            for (int i = 0; i < V; ++i) {
                if (i >= span.first && i < span.end) {
                    const int col = bw * sw + x_off;
                    const int row = y0 + g * sh;
                    out.e[i] = ((unsigned)row < (unsigned)H && (unsigned)col < (unsigned)W)
                                   ? rows[g * p.pitch + staged_column(col)]
                                   : (T)0;
                    if (++bw == BW) {
                        bw = 0;
                        ++g;
                    }
                }
            }
            store_span<BYTES>(y + (seg_start + (IDX)span.c0), out, span.first, span.end);
        }
    }
}

template <int BYTES, int D, typename IDX>
__global__ void __launch_bounds__(256)
unfold_chunks(const typename Bits<BYTES>::type* __restrict__ x, typename Bits<BYTES>::type* __restrict__ y,
              const UnfoldParams p) {
    typedef typename Bits<BYTES>::type T;
    const int V = Chunk<BYTES>::N;
    const IDX t = (IDX)blockIdx.x * (IDX)blockDim.x + (IDX)threadIdx.x;
    if (t >= (IDX)p.total_chunks) return;

    IDX row, chunk;
    divmod<IDX>(t, p.chunk_div, row, chunk);
    const int length = p.block_count;
    const IDX row_start = row * (IDX)length;
    const ChunkSpan span = chunk_span<BYTES, IDX>(row_start, chunk, length);
    if (span.first >= span.end) return;  // the spare chunk of a row that needed one less

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

}  // namespace dml

#ifdef DMLSERVE_EXPLICIT_INSTANTIATION
template __global__ void dml::unfold_rows<1, int>(const unsigned char*, unsigned char*, const dml::UnfoldParams);
template __global__ void dml::unfold_rows<2, long long>(const unsigned short*, unsigned short*, const dml::UnfoldParams);
template __global__ void dml::unfold_rows<4, int>(const unsigned int*, unsigned int*, const dml::UnfoldParams);
template __global__ void dml::unfold_rows<8, int>(const unsigned long long*, unsigned long long*, const dml::UnfoldParams);
template __global__ void dml::unfold_chunks<1, 1, int>(const unsigned char*, unsigned char*, const dml::UnfoldParams);
template __global__ void dml::unfold_chunks<2, 2, int>(const unsigned short*, unsigned short*, const dml::UnfoldParams);
template __global__ void dml::unfold_chunks<4, 2, int>(const unsigned int*, unsigned int*, const dml::UnfoldParams);
template __global__ void dml::unfold_chunks<4, 3, long long>(const unsigned int*, unsigned int*, const dml::UnfoldParams);
template __global__ void dml::unfold_chunks<8, 6, int>(const unsigned long long*, unsigned long long*, const dml::UnfoldParams);
#endif
