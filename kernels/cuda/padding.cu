// PADDING (DML_PADDING1_OPERATOR_DESC): CONSTANT, EDGE, REFLECTION, SYMMETRIC, WRAP on
// tensors of rank 1..8, any dtype (moved as 1/2/4/8-byte words).
//
// The output is a set of rows (its innermost dim, after the host collapsed unpadded contiguous
// dims), written in 16-byte chunks aligned to the buffer, so full chunks are single 16-byte
// stores (common.cuh, chunk_span). Two kernels:
//
// pad_chunks: K chunks a thread (all loaded before any is stored), outer coordinates decoded
// per chunk and the source read from global memory (any strides, any row length).
//
// pad_tiles: one CTA per run of output elements, which is contiguous whatever the row length;
// it stages the padded output rows it touches in shared memory, then every store is a full
// aligned 16-byte one built by shifted shared reads, with no per-element work on the border
// columns in the store loop. Needs a unit inner stride, no negative stride, rows of at least
// 16 bytes, and slots that fit its shared memory.
#include "common.cuh"

namespace dml {

enum PadMode { PAD_CONSTANT = 0, PAD_EDGE = 1, PAD_REFLECTION = 2, PAD_SYMMETRIC = 3, PAD_WRAP = 4 };

// The launcher reads this struct into its NumPy structured dtype (natural alignment): one
// field per line, `type name;` or `type name[count];`.
struct PadParams {
    long long in_stride[8];    // element strides of the collapsed input dims (0 = broadcast)
    long long total_chunks;    // rows * chunks_per_row
    unsigned long long value;  // CONSTANT value, its bytes in the low end
    long long in_end;          // bytes from x to the end of the last element the input addresses
    int in_size[8];
    int out_size[8];
    int pad_lo[8];
    FastDivmod out_div[8];     // division by out_size[d] (outer dims)
    FastDivmod chunk_div;      // division by chunks per row
    FastDivmod period_div[8];  // division by each dim's mirror period (periodic maps)
    int period_offset[8];      // a multiple of that period at or above the dim's start pad
    int mode;                  // the PadMode (pad_tiles reads it at run time)
    int periodic;              // some pad needs more than one fold: use the modular map
    int inner_contiguous;      // in_stride[R-1] == 1: interior chunks are shifted copies
    int row_bytes;             // pad_tiles: bytes of one row's shared-memory slot
    int tile;                  // pad_tiles: output elements per CTA (a multiple of 16 bytes)
    int lead;                  // pad_tiles: slot byte of the source row's first 16-byte block
    int max_rows;              // pad_tiles: slots per CTA (the most rows a tile touches)
    FastDivmod border_div;     // pad_tiles: division by the inner dim's pad (lo + hi, or 1)
};

// The source index of position j (outside [0, n)) of dim d (SEMANTICS.md §4). The closed
// forms hold while every pad is within one fold; `periodic` selects the modular forms
// otherwise, the modulo a multiply-high division (j + period_offset >= 0 always). REFLECTION
// of a size-1 axis repeats the element.
__device__ __forceinline__ int pad_source(int j, int d, int mode, const PadParams& p) {
    const int n = p.in_size[d];
    if (mode == PAD_EDGE) return j < 0 ? 0 : n - 1;
    if (mode == PAD_REFLECTION && n == 1) return 0;
    if (!p.periodic) {
        if (mode == PAD_WRAP) return j < 0 ? j + n : j - n;
        if (mode == PAD_REFLECTION) return j < 0 ? -j : 2 * (n - 1) - j;
        return j < 0 ? -1 - j : 2 * n - 1 - j;  // PAD_SYMMETRIC
    }
    const unsigned u = (unsigned)(j + p.period_offset[d]);
    const int period = (int)p.period_div[d].d;
    const int r = (int)(u - fast_div(u, p.period_div[d]) * (unsigned)period);
    if (mode == PAD_WRAP) return r;
    if (mode == PAD_REFLECTION) return r < n ? r : period - r;
    return r < n ? r : period - 1 - r;  // PAD_SYMMETRIC
}

// The source row offset of output row `row` (outer coordinates decoded and mirrored), and
// whether the row lies in CONSTANT padding (then it is all fill). MODE is the PadMode, known
// at compile time (no branches on the mode per row), or -1: p.mode, read at run time
// (pad_tiles: its EDGE int8 instance spills under its 32-register bound with the mode folded
// in, 84 bytes of spill stores, and measured 30% slower).
template <int R, typename IDX, int MODE>
__device__ __forceinline__ IDX pad_source_row(const PadParams& p, IDX row, bool& fill) {
    const int mode = MODE >= 0 ? MODE : p.mode;
    IDX src = 0;
    fill = false;
    IDX rest = row;
#pragma unroll
    for (int d = R - 2; d >= 0; --d) {
        IDX o;
        if (d == 0) {
            o = rest;
        } else {
            IDX q;
            divmod<IDX>(rest, p.out_div[d], q, o);
            rest = q;
        }
        int j = (int)o - p.pad_lo[d];
        if ((unsigned)j >= (unsigned)p.in_size[d]) {
            if (mode == PAD_CONSTANT) {
                fill = true;
                j = 0;
            } else {
                j = pad_source(j, d, mode, p);
            }
        }
        src += (IDX)j * (IDX)p.in_stride[d];
    }
    return src;
}

// One chunk of pad_chunks, loaded but not yet used: `c` holds its elements, or (interior
// chunks of a contiguous row) `words` the source's aligned words, put into place by
// pad_chunk_value.
template <int BYTES>
struct PadChunk {
    Chunk<BYTES> c;
    Words16 words;
    bool interior;
};

template <int BYTES, int R, typename IDX, int MODE>
__device__ __forceinline__ void pad_chunk_load(const typename Bits<BYTES>::type* __restrict__ x,
                                               const PadParams& p, IDX row, const ChunkSpan& span,
                                               PadChunk<BYTES>& out) {
    typedef typename Bits<BYTES>::type T;
    const int V = Chunk<BYTES>::N;
    const int c0 = span.c0;

    // Outer coordinates -> source row offset, once per chunk.
    bool fill;
    const IDX src = pad_source_row<R, IDX, MODE>(p, row, fill);

    const T value = (T)p.value;
    const int lo = p.pad_lo[R - 1];
    const int n = p.in_size[R - 1];
    out.interior = false;
    if (fill) {
#pragma unroll
        for (int i = 0; i < V; ++i) out.c.e[i] = value;
    } else if (p.inner_contiguous && c0 >= lo && c0 + V <= lo + n &&
               words_within(x + (src + (IDX)(c0 - lo)), x, p.in_end)) {
        out.words = load16_words<BYTES>(reinterpret_cast<const unsigned char*>(x + (src + (IDX)(c0 - lo))));
        out.interior = true;
    } else {
        const IDX step = (IDX)p.in_stride[R - 1];
#pragma unroll
        for (int i = 0; i < V; ++i) {
            if (i >= span.first && i < span.end) {
                int j = c0 + i - lo;
                if ((unsigned)j >= (unsigned)n) {
                    if (MODE == PAD_CONSTANT) {
                        out.c.e[i] = value;
                        continue;
                    }
                    j = pad_source(j, R - 1, MODE, p);
                }
                out.c.e[i] = __ldg(x + (src + (IDX)j * step));
            }
        }
    }
}

template <int BYTES>
__device__ __forceinline__ Chunk<BYTES> pad_chunk_value(const PadChunk<BYTES>& l) {
    Chunk<BYTES> c = l.c;
    if (l.interior) c.v = words16_value(l.words);
    return c;
}

// K chunks per thread, chunks k * blockDim.x apart (a warp's k-th chunks are consecutive, so
// each load instruction covers the same sectors as with one chunk a thread); every chunk's
// loads are issued before the first is used, K times the bytes in flight per thread.
template <int BYTES, int R, int MODE, int K, typename IDX>
__global__ void __launch_bounds__(256)
pad_chunks(const typename Bits<BYTES>::type* __restrict__ x, typename Bits<BYTES>::type* __restrict__ y,
           const PadParams p) {
    const long long t0 = (long long)blockIdx.x * blockDim.x * K + threadIdx.x;
    const int width = p.out_size[R - 1];
    PadChunk<BYTES> l[K];
    IDX at[K];
    ChunkSpan span[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const long long t = t0 + (long long)k * blockDim.x;
        span[k].first = span[k].end = 0;
        IDX row, row_start;
        if (t < p.total_chunks && row_chunk_at<BYTES, IDX>((IDX)t, p.chunk_div, width, row, row_start, span[k])) {
            at[k] = row_start + (IDX)span[k].c0;
            pad_chunk_load<BYTES, R, IDX, MODE>(x, p, row, span[k], l[k]);
        }
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
        if (span[k].first < span[k].end) store_span<BYTES>(y + at[k], pad_chunk_value<BYTES>(l[k]), span[k].first, span[k].end);
    }
}

// 16 bytes at byte `off` (any alignment, >= 0) of the block's shared memory: the aligned
// words that hold them, funnel-shifted. A word index from the shared array itself, so the
// reads stay shared-memory loads (a pointer through an integer becomes a generic load).
__device__ __forceinline__ uint4 smem_load16(int off) {
    const unsigned* w = dynamic_smem<unsigned>() + (off >> 2);
    const unsigned sh = (unsigned)(off & 3) * 8u;
    const unsigned w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
    if (sh == 0) return make_uint4(w0, w1, w2, w3);
    const unsigned w4 = w[4];
    return make_uint4(__funnelshift_r(w0, w1, sh), __funnelshift_r(w1, w2, sh),
                      __funnelshift_r(w2, w3, sh), __funnelshift_r(w3, w4, sh));
}

// pad_tiles: the input bytes of one staged row. A fill row (CONSTANT, outer coordinate in the
// padding) loads nothing and has a = 0, so its blocks start at slot byte p.lead too.
struct TileRow {
    unsigned long long a;   // the row's first byte
    unsigned long long a1;  // one past its last byte
    int blocks;             // the aligned 16-byte blocks from a & ~15 that hold it
    bool fill;
};

template <int BYTES, int R, typename IDX, int MODE>
__device__ __forceinline__ TileRow tile_row(const PadParams& p, const typename Bits<BYTES>::type* x,
                                            IDX row) {
    TileRow t;
    const IDX src = pad_source_row<R, IDX, -1>(p, row, t.fill);
    t.a = t.fill ? 0ull : (unsigned long long)(x + src);
    t.a1 = t.a + (unsigned long long)p.in_size[R - 1] * BYTES;
    t.blocks = (int)((t.a1 + 15 - (t.a & ~15ull)) >> 4);
    return t;
}

// Block b of a staged row: its aligned 16 input bytes (bytes of the neighbouring rows
// included), only the row's own elements where the block leaves the input [xb, xe), or the
// fill chunk.
template <int BYTES>
__device__ __forceinline__ uint4 tile_block(const TileRow& t, int b, unsigned long long xb,
                                            unsigned long long xe, const uint4& fill) {
    typedef typename Bits<BYTES>::type T;
    if (t.fill) return fill;
    const unsigned long long ba = (t.a & ~15ull) + 16ull * (unsigned long long)b;
    if (ba >= xb && ba + 16 <= xe) return __ldg(reinterpret_cast<const uint4*>(ba));
    Chunk<BYTES> c;
#pragma unroll
    for (int e = 0; e < Chunk<BYTES>::N; ++e) {
        const unsigned long long ea = ba + (unsigned long long)(e * BYTES);
        c.e[e] = ea >= t.a && ea < t.a1 ? __ldg(reinterpret_cast<const T*>(ea)) : (T)0;
    }
    return c.v;
}

// pad_tiles' output block at column `rel` of the tile's first row, in row i at column c:
// `out` holds the shifted read of row i's slot (column 0 at byte image[i]); a block across a
// row end takes its bytes past the row from the next row's slot.
template <int BYTES>
__device__ __forceinline__ void tile_merge(Chunk<BYTES>& out, const int* image, int i, int c,
                                           int width, int rows) {
    if (c + Chunk<BYTES>::N > width && i + 1 < rows) {
        Chunk<BYTES> next;
        next.v = smem_load16(image[i + 1] + (c - width) * BYTES);
        // The block's first k bytes (1..15) come from row i: byte masks of the low and high
        // halves.
        const int k = (width - c) * BYTES;
        const unsigned long long keep_lo = k >= 8 ? ~0ull : (1ull << (8 * k)) - 1ull;
        const unsigned long long keep_hi = k <= 8 ? 0ull : (1ull << (8 * (k - 8))) - 1ull;
        const unsigned keep[4] = {(unsigned)keep_lo, (unsigned)(keep_lo >> 32), (unsigned)keep_hi,
                                  (unsigned)(keep_hi >> 32)};
#pragma unroll
        for (int w = 0; w < 4; ++w) out.w[w] = (out.w[w] & keep[w]) | (next.w[w] & ~keep[w]);
    }
}

// pad_tiles' block size (the launcher's BLOCK): loop strides known at compile time.
const int TILE_THREADS = 256;
// pad_tiles' rows a lane group loads per turn (the benchmark's 16 KB tiles, up to 72 int8
// rows with 16 lanes a row and 38 fp16 rows with 32, take two turns; each row of a turn
// holds a 16-byte load in registers, under the kernel's 32-register bound).
const int TILE_ROWS = 3;

// One CTA per tile of p.tile output elements (p.total_chunks holds the output's element
// count here). The tile's bytes start 16-byte aligned, so all of its stores but the tensor's
// last are single aligned 16-byte stores. Shared memory: p.max_rows slots of p.row_bytes,
// then one int per slot, the byte offset of its row's column 0. Three passes:
//  1. G lanes per touched output row copy its source row into the row's slot with aligned
//     16-byte loads, the row's first byte at slot byte p.lead + phase (its address modulo 16);
//     a fill row (CONSTANT, outer coordinate in the padding) gets the value instead;
//  2. each border element is written from its slot's interior (the mirror map) or
//     the value, so each slot holds its whole output row;
//  3. one thread per output 16-byte block reads it from the slots as a shifted 16-byte read
//     (tile_merge); a block across a row end merges the two rows' reads.
// Loads read whole aligned blocks wherever they lie inside the input (bytes of the
// neighbouring rows are loaded and unused); only the input's first and last block go element
// by element.
template <int BYTES, int R, typename IDX, int MODE, int G>
__global__ void __launch_bounds__(TILE_THREADS, 8)
pad_tiles(const typename Bits<BYTES>::type* __restrict__ x, typename Bits<BYTES>::type* __restrict__ y,
          const PadParams p) {
    typedef typename Bits<BYTES>::type T;
    const int V = Chunk<BYTES>::N;
    const int width = p.out_size[R - 1];
    const int n = p.in_size[R - 1];
    const int lo = p.pad_lo[R - 1];
    const T value = (T)p.value;
    const IDX o0 = (IDX)blockIdx.x * (IDX)p.tile;
    const IDX left = (IDX)p.total_chunks - o0;
    const int count = left < (IDX)p.tile ? (int)left : p.tile;
    const IDX ra = div_of<IDX>(o0, p.out_div[R - 1]);
    const int ca = (int)(o0 - ra * (IDX)width);  // column of the tile's first element
    const int rows = (int)fast_div((unsigned)(ca + count - 1), p.out_div[R - 1]) + 1;
    unsigned char* smem = dynamic_smem<unsigned char>();
    int* image = reinterpret_cast<int*>(smem + p.max_rows * p.row_bytes);

    // TILE_ROWS rows a turn, all their loads issued before any is stored: a tile's rows then
    // take one turn, one load latency (a lane has one block of a row unless the row is longer
    // than G blocks, which only G == 32 allows).
    const int lane = (int)threadIdx.x & (G - 1);
    const int step = TILE_THREADS / G;
    const unsigned long long xb = (unsigned long long)x;
    const unsigned long long xe = xb + (unsigned long long)p.in_end;
    Chunk<BYTES> fill;
#pragma unroll
    for (int e = 0; e < V; ++e) fill.e[e] = value;
    bool longer = false;  // some row of this lane group has more than G blocks
    for (int i = (int)threadIdx.x / G; i < rows; i += TILE_ROWS * step) {
        uint4 v[TILE_ROWS];
        int blocks[TILE_ROWS];
#pragma unroll
        for (int k = 0; k < TILE_ROWS; ++k) {
            const int r = i + k * step;
            blocks[k] = 0;
            if (r < rows) {
                const TileRow t = tile_row<BYTES, R, IDX, MODE>(p, x, ra + (IDX)r);
                blocks[k] = t.blocks;
                if (lane < t.blocks) v[k] = tile_block<BYTES>(t, lane, xb, xe, fill.v);
                if (lane == 0) image[r] = r * p.row_bytes + p.lead + (int)(t.a & 15) - lo * BYTES;
            }
        }
#pragma unroll
        for (int k = 0; k < TILE_ROWS; ++k) {
            unsigned char* slot = smem + (i + k * step) * p.row_bytes + p.lead;
            if (lane < blocks[k]) *reinterpret_cast<uint4*>(slot + 16 * lane) = v[k];
            longer = longer || blocks[k] > G;
        }
    }
    // Long rows' further blocks in a loop of their own, so that the turns above keep their
    // loads in registers (the rows of a tensor differ by at most one block).
    for (int i = (int)threadIdx.x / G; G == 32 && longer && i < rows; i += step) {
        unsigned char* slot = smem + i * p.row_bytes + p.lead;
        const TileRow t = tile_row<BYTES, R, IDX, MODE>(p, x, ra + (IDX)i);
        for (int b = lane + G; b < t.blocks; b += G) {
            *reinterpret_cast<uint4*>(slot + 16 * b) = tile_block<BYTES>(t, b, xb, xe, fill.v);
        }
    }
    __syncthreads();

    // Each thread keeps one border column over every TILE_THREADS / border-th row, so its
    // mirror source is found once; a pad wider than the block takes several columns a thread.
    const int border = width - n;
    if (border > 0) {
        const int i0 = (int)fast_div(threadIdx.x, p.border_div);
        const int step = imax(1, (int)fast_div(TILE_THREADS, p.border_div));
        for (int e = (int)threadIdx.x - i0 * border; i0 < step && e < border; e += TILE_THREADS) {
            const int col = e < lo ? e : e + n;
            const int from = MODE == PAD_CONSTANT ? 0 : lo + pad_source(col - lo, R - 1, MODE, p);
            // Four rows a turn, their reads before their writes: the reads are interior
            // elements and the writes border ones, so no order among them matters, and the
            // turn waits on shared memory twice instead of eight times.
            int i = i0;
            for (; i + 3 * step < rows; i += 4 * step) {
                int at[4];
                T e4[4];
#pragma unroll
                for (int k = 0; k < 4; ++k) at[k] = image[i + k * step];
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    e4[k] = MODE == PAD_CONSTANT ? value : reinterpret_cast<const T*>(smem + at[k])[from];
                }
#pragma unroll
                for (int k = 0; k < 4; ++k) reinterpret_cast<T*>(smem + at[k])[col] = e4[k];
            }
            for (; i < rows; i += step) {
                T* row = reinterpret_cast<T*>(smem + image[i]);
                row[col] = MODE == PAD_CONSTANT ? value : row[from];
            }
        }
    }
    __syncthreads();

    // Two blocks a turn, each step's shared reads of both issued together (the second
    // block's reads, past the tile, repeat the first's).
    const int blocks = (count + V - 1) / V;
    for (int m = (int)threadIdx.x; m < blocks; m += 2 * TILE_THREADS) {
        const int m1 = m + TILE_THREADS;
        const bool two = m1 < blocks;
        const int rel0 = ca + m * V;
        const int rel1 = two ? ca + m1 * V : rel0;
        const int i0 = (int)fast_div((unsigned)rel0, p.out_div[R - 1]);
        const int i1 = (int)fast_div((unsigned)rel1, p.out_div[R - 1]);
        const int c0 = rel0 - i0 * width;
        const int c1 = rel1 - i1 * width;
        const int at0 = image[i0], at1 = image[i1];
        Chunk<BYTES> out0, out1;
        out0.v = smem_load16(at0 + c0 * BYTES);
        out1.v = smem_load16(at1 + c1 * BYTES);
        tile_merge<BYTES>(out0, image, i0, c0, width, rows);
        store_span<BYTES>(y + (o0 + (IDX)(m * V)), out0, 0, imin(V, count - m * V));
        if (two) {
            tile_merge<BYTES>(out1, image, i1, c1, width, rows);
            store_span<BYTES>(y + (o0 + (IDX)(m1 * V)), out1, 0, imin(V, count - m1 * V));
        }
    }
}

}  // namespace dml

#ifdef DMLSERVE_EXPLICIT_INSTANTIATION
template __global__ void dml::pad_tiles<1, 3, int, 0, 16>(const unsigned char*, unsigned char*, const dml::PadParams);
template __global__ void dml::pad_tiles<1, 3, int, 1, 16>(const unsigned char*, unsigned char*, const dml::PadParams);
template __global__ void dml::pad_tiles<2, 3, int, 0, 32>(const unsigned short*, unsigned short*, const dml::PadParams);
template __global__ void dml::pad_tiles<2, 3, int, 2, 32>(const unsigned short*, unsigned short*, const dml::PadParams);
template __global__ void dml::pad_tiles<4, 3, int, 2, 8>(const unsigned int*, unsigned int*, const dml::PadParams);
template __global__ void dml::pad_tiles<8, 8, long long, 4, 4>(const unsigned long long*, unsigned long long*, const dml::PadParams);
template __global__ void dml::pad_chunks<1, 1, 1, 1, int>(const unsigned char*, unsigned char*, const dml::PadParams);
template __global__ void dml::pad_chunks<2, 4, 2, 2, int>(const unsigned short*, unsigned short*, const dml::PadParams);
template __global__ void dml::pad_chunks<4, 3, 0, 1, int>(const unsigned int*, unsigned int*, const dml::PadParams);
template __global__ void dml::pad_chunks<4, 3, 0, 2, int>(const unsigned int*, unsigned int*, const dml::PadParams);
template __global__ void dml::pad_chunks<4, 3, 2, 2, int>(const unsigned int*, unsigned int*, const dml::PadParams);
template __global__ void dml::pad_chunks<4, 8, 3, 4, long long>(const unsigned int*, unsigned int*, const dml::PadParams);
template __global__ void dml::pad_chunks<8, 3, 4, 2, int>(const unsigned long long*, unsigned long long*, const dml::PadParams);
#endif
