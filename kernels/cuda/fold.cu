// FOLD (col2im, DML_FOLD_OPERATOR_DESC): (N, C*prod(K), BlockCount) -> (N, C, *S) for 1..6
// spatial dims and all eleven dtypes, summing overlapping window taps.
//
// Gather form, no atomics: each thread owns a 16-byte chunk (aligned to the buffer) of one
// output row (innermost spatial dim) and sums, for every element, exactly the (window offset, block) pairs that
// land on it. Per dim those pairs are found without testing every window offset: with
// g = gcd(stride, dilation), position r = p + pad is hit iff g | r, by offsets
// k = k0, k0 + stride/g, ... (k0 from a modular inverse the host precomputes), whose blocks
// step down by dilation/g. The summation order is fixed (window offsets row-major), so
// results are bitwise deterministic. Integers wrap in their own width (unsigned arithmetic),
// FLOAT16 accumulates in float32. Non-overlapping 2-D windows take fold_squares instead
// (squares.cuh) where window rows and column rows are whole 16-byte chunks: one tap per
// element, a V x V square per thread transposed in registers; else fold_slabs, a
// shared-memory transpose of one window row's slab per CTA (fold_patches, the tile
// transpose, stays forceable).
#include <cuda_fp16.h>

#include "common.cuh"
#include "squares.cuh"

namespace dml {

// The launcher reads this struct into its NumPy structured dtype (natural alignment): one
// field per line, `type name;` or `type name[count];`.
struct FoldParams {
    long long col_stride_n;      // element strides of the column tensor (0 = broadcast)
    long long col_stride_r;
    long long col_stride_l;
    long long total_chunks;      // output rows * chunks_per_row
    int size[6];                 // S
    int window[6];               // K
    int pad_lo[6];
    int dilation[6];
    int blocks[6];               // BlocksPerDimension
    int k_step[6];               // stride / g
    int b_step[6];               // dilation / g
    int k_inverse[6];            // (dilation / g)^-1 mod (stride / g)
    int tap_stride[6];           // weight of k[d] in the flattened window offset
    int block_stride[6];         // weight of b[d] in the flattened block index
    FastDivmod size_div[6];      // division by S[d]
    FastDivmod stride_div[6];    // division by stride[d]
    FastDivmod gcd_div[6];       // division by g
    FastDivmod k_step_div[6];    // division by stride / g
    FastDivmod chunk_div;        // division by chunks per output row
    FastDivmod channel_div;      // division by C
    int taps;                    // prod(K)
    int unused;
};

template <typename T> struct Accumulate { typedef T type; };
template <> struct Accumulate<__half> { typedef float type; };
template <> struct Accumulate<signed char> { typedef unsigned type; };
template <> struct Accumulate<unsigned char> { typedef unsigned type; };
template <> struct Accumulate<short> { typedef unsigned type; };
template <> struct Accumulate<unsigned short> { typedef unsigned type; };
template <> struct Accumulate<int> { typedef unsigned type; };
template <> struct Accumulate<long long> { typedef unsigned long long type; };

template <typename A, typename T> __device__ __forceinline__ A widen(T v) { return (A)v; }
template <> __device__ __forceinline__ float widen<float, __half>(__half v) { return __half2float(v); }
template <typename T, typename A> __device__ __forceinline__ T narrow(A v) { return (T)v; }
template <> __device__ __forceinline__ __half narrow<__half, float>(float v) { return __float2half_rn(v); }

// The first window offset k (and its block b) that puts a tap on padded position r = p + pad
// of dim d; false when none does. Later taps: k += k_step[d], b -= b_step[d] while
// k < K and b >= 0 (taps with b >= blocks[d] are skipped by the caller).
// KS > 0: k_step[d] known at compile time (its modulo folds into multiplies); 0: run-time.
template <int KS = 0>
__device__ __forceinline__ bool first_tap(const FoldParams& p, int d, int r, int& k, int& b) {
    unsigned rg = (unsigned)r;
    if (KS > 0 && p.dilation[d] == 1) {
        // g = 1 and k_step = stride = KS, b_step = 1: offsets k = r mod KS, blocks r / KS.
        const unsigned ks = KS > 0 ? (unsigned)KS : 1u;
        k = (int)(rg % ks);
        b = (int)(rg / ks);
        return k < p.window[d];
    }
    const unsigned g = p.gcd_div[d].d;
    if (g != 1) {
        const unsigned q = fast_div(rg, p.gcd_div[d]);
        if (rg != q * g) return false;
        rg = q;
    }
    unsigned k0 = 0;
    if (KS > 1) {
        const unsigned ks = KS > 1 ? (unsigned)KS : 1u;
        k0 = ((rg % ks) * (unsigned)p.k_inverse[d]) % ks;
    } else if (KS == 0 && p.k_step[d] != 1) {
        const unsigned m = rg - fast_div(rg, p.k_step_div[d]) * (unsigned)p.k_step[d];
        k0 = p.k_inverse[d] == 1
                 ? m
                 : (unsigned)(((unsigned long long)m * (unsigned)p.k_inverse[d]) % (unsigned)p.k_step[d]);
    }
    const int rest = r - (int)k0 * p.dilation[d];
    if ((int)k0 >= p.window[d] || rest < 0) return false;
    k = (int)k0;
    b = (int)fast_div((unsigned)rest, p.stride_div[d]);
    return true;
}

// A chunk's sums, narrowed to T, stored at `dst` (the address of slot 0) over the span.
template <typename T, typename A, int V>
__device__ __forceinline__ void store_sums(T* dst, const A (&acc)[V], const ChunkSpan& span) {
    typedef typename Bits<sizeof(T)>::type W;
    Chunk<sizeof(T)> out;
#pragma unroll
    for (int i = 0; i < V; ++i) {
        const T v = narrow<T, A>(acc[i]);
        out.e[i] = *reinterpret_cast<const W*>(&v);
    }
    store_span<sizeof(T)>(reinterpret_cast<W*>(dst), out, span.first, span.end);
}

template <typename T, int D, typename IDX>
__global__ void __launch_bounds__(256)
fold_chunks(const T* __restrict__ cols, T* __restrict__ y, const FoldParams p) {
    typedef typename Accumulate<T>::type A;
    const int V = 16 / (int)sizeof(T);
    IDX row, row_start;
    ChunkSpan span;
    if (!row_chunk<sizeof(T), IDX>(p.total_chunks, p.chunk_div, p.size[D - 1], row, row_start, span))
        return;
    const int c0 = span.c0;

    // Output row -> outer spatial coordinates, channel and batch.
    int po[D > 1 ? D - 1 : 1];
    IDX rest = row;
#pragma unroll
    for (int d = D - 2; d >= 0; --d) {
        IDX q, o;
        divmod<IDX>(rest, p.size_div[d], q, o);
        po[d] = (int)o;
        rest = q;
    }
    IDX n, c;
    divmod<IDX>(rest, p.channel_div, n, c);
    const IDX base = n * (IDX)p.col_stride_n + (c * (IDX)p.taps) * (IDX)p.col_stride_r;

    // First inner-dim tap of each element of the chunk.
    int k_in[V], b_in[V];
    bool any_in[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
        any_in[i] = i >= span.first && i < span.end &&
                    first_tap(p, D - 1, c0 + i + p.pad_lo[D - 1], k_in[i], b_in[i]);
    }

    A acc[V];
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = (A)0;

    // Odometer over the outer dims' taps (k[d], b[d]), each dim's taps in increasing k.
    int k_first[D > 1 ? D - 1 : 1], b_first[D > 1 ? D - 1 : 1];
    int k[D > 1 ? D - 1 : 1], b[D > 1 ? D - 1 : 1];
    bool live = true;
#pragma unroll
    for (int d = 0; d < D - 1; ++d) {
        live = live && first_tap(p, d, po[d] + p.pad_lo[d], k_first[d], b_first[d]);
        k[d] = k_first[d];
        b[d] = b_first[d];
    }
    const int inner_window = p.window[D - 1];
    const int inner_blocks = p.blocks[D - 1];
    const int inner_k_step = p.k_step[D - 1];
    const int inner_b_step = p.b_step[D - 1];
    const IDX stride_r = (IDX)p.col_stride_r;
    const IDX stride_l = (IDX)p.col_stride_l;
    while (live) {
        bool in_range = true;
        int tap = 0, block = 0;
#pragma unroll
        for (int d = 0; d < D - 1; ++d) {
            in_range = in_range && b[d] < p.blocks[d];
            tap += k[d] * p.tap_stride[d];
            block += b[d] * p.block_stride[d];
        }
        if (in_range) {
#pragma unroll
            for (int i = 0; i < V; ++i) {
                if (any_in[i]) {
                    int ki = k_in[i], bi = b_in[i];
                    for (; ki < inner_window && bi >= 0; ki += inner_k_step, bi -= inner_b_step) {
                        if (bi < inner_blocks) {
                            const IDX at = base + (IDX)(tap + ki) * stride_r + (IDX)(block + bi) * stride_l;
                            acc[i] += widen<A, T>(cols[at]);
                        }
                    }
                }
            }
        }
        // Advance the odometer, innermost outer dim fastest (fixed order: deterministic sums).
        bool carry = true;
#pragma unroll
        for (int d = D - 2; d >= 0; --d) {
            if (carry) {
                k[d] += p.k_step[d];
                b[d] -= p.b_step[d];
                if (k[d] < p.window[d] && b[d] >= 0) {
                    carry = false;
                } else {
                    k[d] = k_first[d];
                    b[d] = b_first[d];
                }
            }
        }
        if (carry) live = false;  // every outer dim wrapped (or D == 1: a single pass)
    }

    store_sums<T, A, V>(y + (row_start + (IDX)c0), acc, span);
}

// fold_chunks for 2-D windows of compile-time size KH x KW whose window offsets hitting one
// position step by KSH / KSW (stride / gcd(stride, dilation)): each element has at most
// ceil(KH / KSH) * ceil(KW / KSW) taps, so the tap loops unroll fully with predication and
// every tap's load issues before the sums need it (fold_chunks walks run-time trip counts,
// one dependent load chain at a time). Same taps, same summation order per output.
// SINGLE: one output element per thread (total_chunks = elements, chunk_div divides by the
// row width), so each warp-wide load is 32 consecutive elements of a column row; else a
// 16-byte chunk per thread as fold_chunks, whose warp-wide loads touch every 16th element
// and leave the other three taps of each sector to the thread's next loads.
template <typename T, int KH, int KW, int KSH, int KSW, bool SINGLE, typename IDX>
__global__ void __launch_bounds__(256, 4)
fold_window2d(const T* __restrict__ cols, T* __restrict__ y, const FoldParams p) {
    typedef typename Accumulate<T>::type A;
    const int V = SINGLE ? 1 : 16 / (int)sizeof(T);
    const int TH = (KH + KSH - 1) / KSH;
    const int TW = (KW + KSW - 1) / KSW;
    IDX row, row_start;
    ChunkSpan span;
    if constexpr (SINGLE) {
        const IDX t = (IDX)blockIdx.x * (IDX)blockDim.x + (IDX)threadIdx.x;
        if (t >= (IDX)p.total_chunks) return;
        IDX column;
        divmod<IDX>(t, p.chunk_div, row, column);
        row_start = row * (IDX)p.size[1];
        span.c0 = (int)column;
        span.first = 0;
        span.end = 1;
    } else {
        if (!row_chunk<sizeof(T), IDX>(p.total_chunks, p.chunk_div, p.size[1], row, row_start, span))
            return;
    }
    const int c0 = span.c0;

    IDX plane, yo, n, c;
    divmod<IDX>(row, p.size_div[0], plane, yo);
    divmod<IDX>(plane, p.channel_div, n, c);
    const IDX stride_r = (IDX)p.col_stride_r;
    const IDX stride_l = (IDX)p.col_stride_l;
    const IDX base = n * (IDX)p.col_stride_n + (c * (IDX)(KH * KW)) * stride_r;

    int kh0 = 0, bh0 = 0;
    const bool live = first_tap<KSH>(p, 0, (int)yo + p.pad_lo[0], kh0, bh0);
    // Tap (th, tw) of element i sits at base + at_h[th] + at_w[i] + tw * step_w; its
    // existence is bit th of rows_hit and bit tw of taps_hit[i]. Both are worked out once, so
    // each load costs an address add and a predicate.
    const int blocks_w = p.blocks[1];
    const IDX step_w = (IDX)KSW * stride_r - (IDX)p.b_step[1] * stride_l;
    IDX at_w[V];
    unsigned taps_hit[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
        int kw = 0, bw = 0;
        const bool any = live && i >= span.first && i < span.end &&
                         first_tap<KSW>(p, 1, c0 + i + p.pad_lo[1], kw, bw);
        at_w[i] = (IDX)kw * stride_r + (IDX)bw * stride_l;
        taps_hit[i] = 0;
#pragma unroll
        for (int tw = 0; tw < TW; ++tw) {
            const int b = bw - tw * p.b_step[1];
            if (any && kw + tw * KSW < KW && b >= 0 && b < blocks_w) taps_hit[i] |= 1u << tw;
        }
    }
    IDX at_h[TH];
    unsigned rows_hit = 0;
#pragma unroll
    for (int th = 0; th < TH; ++th) {
        const int kh = kh0 + th * KSH;
        const int bh = bh0 - th * p.b_step[0];
        at_h[th] = base + (IDX)(kh * KW) * stride_r + (IDX)bh * (IDX)blocks_w * stride_l;
        if (kh < KH && bh >= 0 && bh < p.blocks[0]) rows_hit |= 1u << th;
    }

    // All taps' loads first (predicated, independent), then the sums in fold_chunks' order. A
    // tap that does not exist adds a zero: the running sum starts at +0 and is never -0 (round
    // to nearest), and x + 0 == x bitwise for every other x, so the sums stay bit-identical.
    T tap[TH][V][TW];
#pragma unroll
    for (int th = 0; th < TH; ++th) {
#pragma unroll
        for (int i = 0; i < V; ++i) {
#pragma unroll
            for (int tw = 0; tw < TW; ++tw) {
                const bool hit = ((rows_hit >> th) & (taps_hit[i] >> tw) & 1u) != 0;
                tap[th][i][tw] = hit ? cols[at_h[th] + at_w[i] + (IDX)tw * step_w] : T(0);
            }
        }
    }
    A acc[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
        acc[i] = (A)0;
#pragma unroll
        for (int th = 0; th < TH; ++th) {
#pragma unroll
            for (int tw = 0; tw < TW; ++tw) {
                acc[i] += widen<A, T>(tap[th][i][tw]);
            }
        }
    }

    if constexpr (SINGLE) {
        y[row_start + (IDX)c0] = narrow<T, A>(acc[0]);
    } else {
        store_sums<T, A, V>(y + (row_start + (IDX)c0), acc, span);
    }
}

// A sum of exactly one tap, in the accumulator type as fold_chunks forms it (0 + v: a float
// -0.0 becomes +0.0), on the element's bits.
template <typename T> struct SingleTap {
    typedef typename Bits<sizeof(T)>::type W;
    __device__ __forceinline__ static W apply(W bits) {
        typedef typename Accumulate<T>::type A;
        const T v = *reinterpret_cast<const T*>(&bits);
        const T sum = narrow<T, A>((A)0 + widen<A, T>(v));
        return *reinterpret_cast<const W*>(&sum);
    }
};

// FOLD of non-overlapping 2-D windows (PatchParams, patches.cuh): columns -> image.
template <typename T, typename IDX>
__global__ void __launch_bounds__(PATCH_THREADS, PATCH_CTAS)
fold_patches(const T* __restrict__ cols, T* __restrict__ y, const PatchParams p) {
    typedef typename Bits<sizeof(T)>::type W;
    move_patches<sizeof(T), false, SingleTap<T>, IDX>(reinterpret_cast<const W*>(cols),
                                                      reinterpret_cast<W*>(y), p);
}

// FOLD of non-overlapping 2-D windows, one slab (n, c, ky) per CTA (patches.cuh): the
// column run in, the slab's image rows out.
// Words of 4 and 8 bytes fit 32 registers without spilling, so 8 CTAs per SM (a slab of a
// ViT patching is ~13 KB of shared memory): a full SM of threads where 6 leave a quarter idle.
template <typename T, typename IDX>
__global__ void __launch_bounds__(PATCH_THREADS, sizeof(T) >= 4 ? 8 : PATCH_CTAS)
fold_slabs(const T* __restrict__ cols, T* __restrict__ y, const PatchParams p) {
    typedef typename Bits<sizeof(T)>::type W;
    columns_to_slab<sizeof(T), SingleTap<T>, IDX>(reinterpret_cast<const W*>(cols),
                                                  reinterpret_cast<W*>(y), p);
}

// FOLD of non-overlapping 2-D windows, one V x V square per thread transposed in registers
// (squares.cuh), where window rows and column rows are whole chunks. 4- and 8-byte words in
// 32 registers (4-byte: one 8-byte spill, an L1 store and load per thread): 8 CTAs, a full
// SM of threads.
template <typename T, typename IDX>
__global__ void __launch_bounds__(PATCH_THREADS, sizeof(T) >= 4 ? 8 : 4)
fold_squares(const T* __restrict__ cols, T* __restrict__ y, const PatchParams p) {
    typedef typename Bits<sizeof(T)>::type W;
    move_squares<sizeof(T), false, SingleTap<T>, IDX>(reinterpret_cast<const W*>(cols),
                                                      reinterpret_cast<W*>(y), p);
}

}  // namespace dml

#ifdef DMLSERVE_EXPLICIT_INSTANTIATION
template __global__ void dml::fold_chunks<float, 2, int>(const float*, float*, const dml::FoldParams);
template __global__ void dml::fold_chunks<__half, 2, int>(const __half*, __half*, const dml::FoldParams);
template __global__ void dml::fold_chunks<double, 1, int>(const double*, double*, const dml::FoldParams);
template __global__ void dml::fold_chunks<signed char, 3, long long>(const signed char*, signed char*, const dml::FoldParams);
template __global__ void dml::fold_chunks<unsigned long long, 6, int>(const unsigned long long*, unsigned long long*, const dml::FoldParams);
template __global__ void dml::fold_chunks<short, 2, int>(const short*, short*, const dml::FoldParams);
template __global__ void dml::fold_window2d<float, 3, 3, 1, 1, false, int>(const float*, float*, const dml::FoldParams);
template __global__ void dml::fold_window2d<float, 4, 4, 2, 2, false, int>(const float*, float*, const dml::FoldParams);
template __global__ void dml::fold_window2d<__half, 3, 3, 1, 1, false, long long>(const __half*, __half*, const dml::FoldParams);
template __global__ void dml::fold_window2d<float, 3, 3, 1, 1, true, int>(const float*, float*, const dml::FoldParams);
template __global__ void dml::fold_window2d<float, 4, 4, 2, 2, true, int>(const float*, float*, const dml::FoldParams);
template __global__ void dml::fold_window2d<__half, 3, 3, 1, 1, true, long long>(const __half*, __half*, const dml::FoldParams);
template __global__ void dml::fold_window2d<double, 5, 3, 3, 3, false, int>(const double*, double*, const dml::FoldParams);
template __global__ void dml::fold_window2d<signed char, 2, 3, 1, 3, false, int>(const signed char*, signed char*, const dml::FoldParams);
template __global__ void dml::fold_patches<float, int>(const float*, float*, const dml::PatchParams);
template __global__ void dml::fold_patches<__half, long long>(const __half*, __half*, const dml::PatchParams);
template __global__ void dml::fold_patches<signed char, int>(const signed char*, signed char*, const dml::PatchParams);
template __global__ void dml::fold_patches<double, int>(const double*, double*, const dml::PatchParams);
template __global__ void dml::fold_squares<float, int>(const float*, float*, const dml::PatchParams);
template __global__ void dml::fold_squares<__half, long long>(const __half*, __half*, const dml::PatchParams);
template __global__ void dml::fold_squares<double, int>(const double*, double*, const dml::PatchParams);
template __global__ void dml::fold_slabs<float, int>(const float*, float*, const dml::PatchParams);
template __global__ void dml::fold_slabs<__half, long long>(const __half*, __half*, const dml::PatchParams);
template __global__ void dml::fold_slabs<signed char, int>(const signed char*, signed char*, const dml::PatchParams);
template __global__ void dml::fold_slabs<double, int>(const double*, double*, const dml::PatchParams);
#endif
