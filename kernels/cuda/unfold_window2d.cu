// UNFOLD of small 2-D windows (unfold_window2d): the input rows a band of output rows reads
// are staged in shared memory once, then every column row is written with 16-byte stores from
// there (unfold.cu's unfold_chunks gathers each element from global memory for every tap that
// reads it).
#include "common.cuh"
#include "patches.cuh"

namespace dml {

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
template __global__ void dml::unfold_window2d<4, 3, 3, int>(const unsigned int*, unsigned int*, const dml::UnfoldWindowParams);
template __global__ void dml::unfold_window2d<4, 4, 4, int>(const unsigned int*, unsigned int*, const dml::UnfoldWindowParams);
template __global__ void dml::unfold_window2d<2, 3, 3, long long>(const unsigned short*, unsigned short*, const dml::UnfoldWindowParams);
template __global__ void dml::unfold_window2d<1, 2, 5, int>(const unsigned char*, unsigned char*, const dml::UnfoldWindowParams);
template __global__ void dml::unfold_window2d<8, 8, 8, int>(const unsigned long long*, unsigned long long*, const dml::UnfoldWindowParams);
#endif
