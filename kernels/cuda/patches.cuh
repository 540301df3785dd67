// Non-overlapping 2-D windows (stride = window, unit dilation, no padding, the image tiled
// exactly, as ViT patches): UNFOLD is then a permutation and FOLD its inverse. Per (n, c) and
// block row the permutation is a transpose of (block bx, window column kx) for each window
// row ky, so one side of a gather kernel reads or writes single elements KW apart. Here a CTA
// stages a tile of R block rows in shared memory: global reads and writes are buffer-aligned
// 16-byte chunks on both sides, and each thread has several reads in flight before its first
// shared-memory store.
#pragma once

#include "common.cuh"

namespace dml {

// The launchers read this struct into their NumPy structured dtype (natural alignment): one
// field per line, `type name;` or `type name[count];`.
struct PatchParams {
    long long image_stride_n;   // image element strides; its planes are compact (rows of W)
    long long image_stride_c;
    long long col_stride_n;     // column tensor element strides; its blocks are compact
    long long col_stride_r;
    long long squares;          // squares: V x V squares in all (one per thread)
    int width;                  // W = blocks_w * window_w
    int window_h;               // KH
    int window_w;               // KW
    int blocks_h;               // BH
    int blocks_w;               // BW
    int tile_rows;              // R: block rows per CTA
    int segment_chunks;         // chunks per column segment of R * BW blocks (buffer-aligned)
    int row_chunks;             // slabs: chunks per image row of W elements (buffer-aligned)
    FastDivmod window_w_div;    // division by KW
    FastDivmod blocks_w_div;    // division by BW
    FastDivmod segment_div;     // division by segment_chunks
    FastDivmod tiles_div;       // division by tiles (slabs: KH) per (n, c) plane
    FastDivmod channel_div;     // division by C
    FastDivmod row_chunks_div;  // slabs: division by row_chunks
    FastDivmod blocks_div;      // slabs: division by BH * BW
    FastDivmod square_cols_div; // squares: division by KW / V
    FastDivmod square_rows_div; // squares: division by BH * BW / V
};

const int PATCH_THREADS = 256;
// CTAs per SM the register budget is held to: a ~30 KB tile allows 7.
const int PATCH_CTAS = 6;
// Chunks each thread reads before it stores any: 4 x 16 bytes, ~100 KB in flight per SM at
// 6-7 CTAs, well above the ~23 KB that Little's law asks for at 3 TB/s.
const int PATCH_BATCH = 4;

// Shared-memory slot of tile element e = y * W + x (y counted from the tile's first image
// row). One spare slot after each window row of KW elements staggers the banks of the
// column side, which reads KW apart.
__device__ __forceinline__ int image_slot(const PatchParams& p, int e) {
    return e + (int)fast_div((unsigned)e, p.window_w_div);
}

// The same slot, named from the column side: window offset (ky, kx), tile block j = r*BW + bx.
// (e = (r*KH + ky)*W + bx*KW + kx, and e / KW = (r*KH + ky)*BW + bx.)
__device__ __forceinline__ int column_slot(const PatchParams& p, int ky, int kx, int j) {
    const int r = (int)fast_div((unsigned)j, p.blocks_w_div);
    const int bx = j - r * p.blocks_w;
    return (r * p.window_h + ky) * (p.width + p.blocks_w) + bx * (p.window_w + 1) + kx;
}

// Slots [first, end) of the chunk whose slot 0 is at `src`: one 16-byte load when full (src
// is then 16-byte aligned by construction), else element by element.
template <int BYTES>
__device__ __forceinline__ Chunk<BYTES> load_span(const typename Bits<BYTES>::type* src, int first,
                                                  int end) {
    Chunk<BYTES> c;
    if (first == 0 && end == Chunk<BYTES>::N) {
        c.v = __ldg(reinterpret_cast<const uint4*>(src));
        return c;
    }
#pragma unroll
    for (int i = 0; i < Chunk<BYTES>::N; ++i) c.e[i] = (i >= first && i < end) ? __ldg(src + i) : 0;
    return c;
}

// A buffer-aligned chunk of a run of `len` elements whose first element lies `misalign`
// elements past a 16-byte boundary: its slot 0 is run element `at`, [first, end) in the run.
struct RunChunk {
    int at;
    int first;
    int end;
};

template <int BYTES>
__device__ __forceinline__ RunChunk run_chunk(int chunk, int misalign, int len) {
    const int n = Chunk<BYTES>::N;
    RunChunk r;
    r.at = chunk * n - misalign;
    r.first = imax(0, -r.at);
    r.end = imin(n, len - r.at);
    return r;
}

template <int BYTES>
__device__ __forceinline__ int misalign_of(const void* ptr) {
    return (int)(((unsigned long long)ptr / BYTES) & (unsigned long long)(Chunk<BYTES>::N - 1));
}

// Chunks 0..items-1 into shared memory, PATCH_BATCH loads per thread in flight before the
// first shared-memory store. `locate(i, r)` gives chunk i's source (the address of its slot
// 0) and sets its span `r`; `put(i, chunk)` scatters it (positions are derived again there:
// cheaper than registers held across the loads).
template <int BYTES, typename Locate, typename Put>
__device__ __forceinline__ void stage_chunks(int items, Locate locate, Put put) {
    for (int i0 = threadIdx.x; i0 < items; i0 += PATCH_BATCH * PATCH_THREADS) {
        Chunk<BYTES> buf[PATCH_BATCH];
#pragma unroll
        for (int u = 0; u < PATCH_BATCH; ++u) {
            const int i = i0 + u * PATCH_THREADS;
            if (i < items) {
                RunChunk r;
                const typename Bits<BYTES>::type* at = locate(i, r);
                if (r.first < r.end) buf[u] = load_span<BYTES>(at + r.at, r.first, r.end);
            }
        }
#pragma unroll
        for (int u = 0; u < PATCH_BATCH; ++u) {
            const int i = i0 + u * PATCH_THREADS;
            if (i < items) put(i, buf[u]);
        }
    }
}

// One CTA per (n, c, tile of R block rows). TO_COLUMNS: image -> columns (UNFOLD), else
// columns -> image (FOLD). `Op::apply` maps each element on its way to the destination.
template <int BYTES, bool TO_COLUMNS, typename Op, typename IDX>
__device__ __forceinline__ void move_patches(const typename Bits<BYTES>::type* __restrict__ src,
                                             typename Bits<BYTES>::type* __restrict__ dst,
                                             const PatchParams& p) {
    typedef typename Bits<BYTES>::type T;
    T* tile = dynamic_smem<T>();
    IDX plane, t;
    divmod<IDX>((IDX)blockIdx.x, p.tiles_div, plane, t);
    IDX n, c;
    divmod<IDX>(plane, p.channel_div, n, c);
    const int by0 = (int)t * p.tile_rows;
    const int rows = imin(p.tile_rows, p.blocks_h - by0);
    const int span = rows * p.window_h * p.width;  // image elements of the tile
    const int blocks = rows * p.blocks_w;          // blocks of the tile (a column segment)
    const int taps = p.window_h * p.window_w;
    const IDX image_at = n * (IDX)p.image_stride_n + c * (IDX)p.image_stride_c +
                         (IDX)by0 * (IDX)p.window_h * (IDX)p.width;
    const IDX col_at = n * (IDX)p.col_stride_n + c * (IDX)taps * (IDX)p.col_stride_r +
                       (IDX)by0 * (IDX)p.blocks_w;
    const T* image_in = src + image_at;
    T* image_out = dst + image_at;
    const T* col_in = src + col_at;
    T* col_out = dst + col_at;
    const int image_misalign = misalign_of<BYTES>(TO_COLUMNS ? (const void*)image_in : (const void*)image_out);
    const int image_chunks = (span + image_misalign + Chunk<BYTES>::N - 1) / Chunk<BYTES>::N;
    const int col_items = taps * p.segment_chunks;

    if (TO_COLUMNS) {
        // Image tile -> shared memory.
        stage_chunks<BYTES>(
            image_chunks,
            [&](int i, RunChunk& r) {
                r = run_chunk<BYTES>(i, image_misalign, span);
                return image_in;
            },
            [&](int i, const Chunk<BYTES>& c) {
                const RunChunk r = run_chunk<BYTES>(i, image_misalign, span);
#pragma unroll
                for (int k = 0; k < Chunk<BYTES>::N; ++k) {
                    if (k >= r.first && k < r.end) tile[image_slot(p, r.at + k)] = c.e[k];
                }
            });
        __syncthreads();
        // Shared memory -> column segments, one buffer-aligned chunk per item.
        for (int i = threadIdx.x; i < col_items; i += PATCH_THREADS) {
            const int s = (int)fast_div((unsigned)i, p.segment_div);
            const int ky = (int)fast_div((unsigned)s, p.window_w_div);
            const int kx = s - ky * p.window_w;
            T* seg = col_out + (IDX)s * (IDX)p.col_stride_r;
            const RunChunk r = run_chunk<BYTES>(i - s * p.segment_chunks, misalign_of<BYTES>(seg), blocks);
            if (r.first >= r.end) continue;  // the spare chunk of an aligned segment
            Chunk<BYTES> out;
#pragma unroll
            for (int k = 0; k < Chunk<BYTES>::N; ++k) {
                out.e[k] = (k >= r.first && k < r.end) ? Op::apply(tile[column_slot(p, ky, kx, r.at + k)]) : 0;
            }
            store_span<BYTES>(seg + r.at, out, r.first, r.end);
        }
    } else {
        // Column segments -> shared memory.
        stage_chunks<BYTES>(
            col_items,
            [&](int i, RunChunk& r) {
                const int s = (int)fast_div((unsigned)i, p.segment_div);
                const T* seg = col_in + (IDX)s * (IDX)p.col_stride_r;
                r = run_chunk<BYTES>(i - s * p.segment_chunks, misalign_of<BYTES>(seg), blocks);
                return seg;
            },
            [&](int i, const Chunk<BYTES>& c) {
                const int s = (int)fast_div((unsigned)i, p.segment_div);
                const int ky = (int)fast_div((unsigned)s, p.window_w_div);
                const int kx = s - ky * p.window_w;
                const T* seg = col_in + (IDX)s * (IDX)p.col_stride_r;
                const RunChunk r = run_chunk<BYTES>(i - s * p.segment_chunks, misalign_of<BYTES>(seg), blocks);
#pragma unroll
                for (int k = 0; k < Chunk<BYTES>::N; ++k) {
                    if (k >= r.first && k < r.end) tile[column_slot(p, ky, kx, r.at + k)] = c.e[k];
                }
            });
        __syncthreads();
        // Shared memory -> image tile, one buffer-aligned chunk per item.
        for (int i = threadIdx.x; i < image_chunks; i += PATCH_THREADS) {
            const RunChunk r = run_chunk<BYTES>(i, image_misalign, span);
            Chunk<BYTES> out;
#pragma unroll
            for (int k = 0; k < Chunk<BYTES>::N; ++k) {
                out.e[k] = (k >= r.first && k < r.end) ? Op::apply(tile[image_slot(p, r.at + k)]) : 0;
            }
            store_span<BYTES>(image_out + r.at, out, r.first, r.end);
        }
    }
}

// Where the slab of CTA blockIdx.x = (n, c, ky) lies: its first image row's element offset
// and its column run's (slab_to_columns, columns_to_slab).
template <typename IDX>
struct SlabPlace {
    IDX image;
    IDX run;
};

template <typename IDX>
__device__ __forceinline__ SlabPlace<IDX> slab_place(const PatchParams& p) {
    IDX plane, ky, n, c;
    divmod<IDX>((IDX)blockIdx.x, p.tiles_div, plane, ky);
    divmod<IDX>(plane, p.channel_div, n, c);
    SlabPlace<IDX> at;
    at.image = n * (IDX)p.image_stride_n + c * (IDX)p.image_stride_c + ky * (IDX)p.width;
    at.run = n * (IDX)p.col_stride_n + (c * (IDX)p.window_h + ky) * (IDX)p.window_w * (IDX)p.col_stride_r;
    return at;
}

// A slab is what one window row ky of one (n, c) plane contributes: the image rows
// by*KH + ky (by < BH), each W long, and the KW column rows (ky, kx = 0..KW-1), adjacent in
// a compact column tensor, so one run of KW*BH*BW elements. One CTA per (n, c, ky) moves a
// slab through shared memory with long contiguous 16-byte accesses on both sides. Slots:
// slab element e = by*W + x sits at image_slot(e) (a spare slot after each window row, as in
// the tiles); run element kx*BH*BW + j (j = by*BW + bx) is then at j*(KW + 1) + kx, because
// W = BW*KW makes the spare-padded slab rows abut.
template <int BYTES, typename IDX>
__device__ __forceinline__ void slab_to_columns(const typename Bits<BYTES>::type* __restrict__ src,
                                                typename Bits<BYTES>::type* __restrict__ dst,
                                                const PatchParams& p) {
    typedef typename Bits<BYTES>::type T;
    const int N = Chunk<BYTES>::N;
    T* slab = dynamic_smem<T>();
    const SlabPlace<IDX> at = slab_place<IDX>(p);
    const IDX row_step = (IDX)p.window_h * (IDX)p.width;  // image elements between slab rows
    const T* image = src + at.image;
    const int blocks = (int)p.blocks_div.d;  // BH * BW
    const int len = p.window_w * blocks;
    T* run = dst + at.run;

    // Slab rows -> shared memory.
    stage_chunks<BYTES>(
        p.blocks_h * p.row_chunks,
        [&](int i, RunChunk& r) {
            const int by = (int)fast_div((unsigned)i, p.row_chunks_div);
            const T* row = image + (IDX)by * row_step;
            r = run_chunk<BYTES>(i - by * p.row_chunks, misalign_of<BYTES>(row), p.width);
            return row;
        },
        [&](int i, const Chunk<BYTES>& c) {
            const int by = (int)fast_div((unsigned)i, p.row_chunks_div);
            const T* row = image + (IDX)by * row_step;
            const RunChunk r = run_chunk<BYTES>(i - by * p.row_chunks, misalign_of<BYTES>(row), p.width);
            const int e0 = by * p.width + r.at;
#pragma unroll
            for (int k = 0; k < N; ++k) {
                if (k >= r.first && k < r.end) slab[image_slot(p, e0 + k)] = c.e[k];
            }
        });
    __syncthreads();
    // Shared memory -> the run, one buffer-aligned chunk per item.
    const int run_misalign = misalign_of<BYTES>(run);
    const int run_items = (len + run_misalign + N - 1) / N;
    const int pitch = p.window_w + 1;
    for (int i = threadIdx.x; i < run_items; i += PATCH_THREADS) {
        const RunChunk r = run_chunk<BYTES>(i, run_misalign, len);
        const int e0 = r.at + r.first;
        const int kx0 = (int)fast_div((unsigned)e0, p.blocks_div);
        int j = e0 - kx0 * blocks;
        int slot = j * pitch + kx0;
        Chunk<BYTES> out;
#pragma unroll
        for (int k = 0; k < N; ++k) {
            if (k >= r.first && k < r.end) {
                out.e[k] = slab[slot];
                slot += pitch;
                // Past the last block of column row kx: the first block of row kx + 1.
                if (++j == blocks) {
                    j = 0;
                    slot -= blocks * pitch - 1;
                }
            } else {
                out.e[k] = 0;
            }
        }
        store_span<BYTES>(run + r.at, out, r.first, r.end);
    }
}

// The reverse of slab_to_columns (FOLD): one CTA per (n, c, ky) reads the slab's run of
// KW*BH*BW column elements, contiguous in a compact column tensor, and writes its BH image
// rows, each W long, through the same shared-memory slots. `Op::apply` maps each element on
// its way to the image.
template <int BYTES, typename Op, typename IDX>
__device__ __forceinline__ void columns_to_slab(const typename Bits<BYTES>::type* __restrict__ src,
                                                typename Bits<BYTES>::type* __restrict__ dst,
                                                const PatchParams& p) {
    typedef typename Bits<BYTES>::type T;
    const int N = Chunk<BYTES>::N;
    T* slab = dynamic_smem<T>();
    const SlabPlace<IDX> at = slab_place<IDX>(p);
    const IDX row_step = (IDX)p.window_h * (IDX)p.width;
    T* image = dst + at.image;
    const int blocks = (int)p.blocks_div.d;  // BH * BW
    const int len = p.window_w * blocks;
    const T* run = src + at.run;
    const int run_misalign = misalign_of<BYTES>(run);
    const int run_items = (len + run_misalign + N - 1) / N;
    const int pitch = p.window_w + 1;

    // The run -> shared memory.
    stage_chunks<BYTES>(
        run_items,
        [&](int i, RunChunk& r) {
            r = run_chunk<BYTES>(i, run_misalign, len);
            return run;
        },
        [&](int i, const Chunk<BYTES>& c) {
            const RunChunk r = run_chunk<BYTES>(i, run_misalign, len);
            const int e0 = r.at + r.first;
            const int kx0 = (int)fast_div((unsigned)e0, p.blocks_div);
            int j = e0 - kx0 * blocks;
            int slot = j * pitch + kx0;
#pragma unroll
            for (int k = 0; k < N; ++k) {
                if (k >= r.first && k < r.end) {
                    slab[slot] = c.e[k];
                    slot += pitch;
                    // Past the last block of column row kx: the first block of row kx + 1.
                    if (++j == blocks) {
                        j = 0;
                        slot -= blocks * pitch - 1;
                    }
                }
            }
        });
    __syncthreads();
    // Shared memory -> the slab's image rows, one buffer-aligned chunk per item.
    const int store_items = p.blocks_h * p.row_chunks;
    for (int i = threadIdx.x; i < store_items; i += PATCH_THREADS) {
        const int by = (int)fast_div((unsigned)i, p.row_chunks_div);
        T* row = image + (IDX)by * row_step;
        const RunChunk r = run_chunk<BYTES>(i - by * p.row_chunks, misalign_of<BYTES>(row), p.width);
        if (r.first >= r.end) continue;  // the spare chunk of an aligned row
        const int e0 = by * p.width + r.at;
        Chunk<BYTES> out;
#pragma unroll
        for (int k = 0; k < N; ++k) {
            out.e[k] = (k >= r.first && k < r.end) ? Op::apply(slab[image_slot(p, e0 + k)]) : 0;
        }
        store_span<BYTES>(row + r.at, out, r.first, r.end);
    }
}

// Elements moved unchanged (UNFOLD).
struct SameBits {
    template <typename T> __device__ __forceinline__ static T apply(T v) { return v; }
};

}  // namespace dml
