// CONVOLUTION_INTEGER on the CUDA cores (SEMANTICS.md §6): depthwise, few channels or outputs
// per group, and zero points the 8-bit tensor-core operands cannot hold. The launcher
// (kernels/cupy_backend/convolution_integer.py) picks these or the tensor-core path of
// convolution_integer.cu.

#include "convolution_integer_common.cuh"

namespace dml {

// ------------------------------------------------------------------------------------------
// CUDA-core path: one thread per output element (n, m, oh, ow), ow fastest.
// Taps in the padding are skipped: they equal z_x and contribute 0.
template <typename WT, typename XT>
__global__ void conv_int_direct(const unsigned char* __restrict__ x,
                                const unsigned char* __restrict__ w,
                                const int* __restrict__ w_zp, int* __restrict__ out, long long total,
                                int M, int Mg, int Cg, int H, int W, int R, int S, int OH, int OW,
                                int stride_h, int stride_w, int dil_h, int dil_w, int pad_h,
                                int pad_w, int x_zp, long long xs_n, long long xs_c, long long xs_h,
                                long long xs_w, long long ws_m, long long ws_c, long long ws_r,
                                long long ws_s) {
    constexpr bool WS = conv::is_signed_byte<WT>::value;
    constexpr bool XS = conv::is_signed_byte<XT>::value;
    for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
         idx < total; idx += static_cast<long long>(gridDim.x) * blockDim.x) {
        const int ow = static_cast<int>(idx % OW);
        long long t = idx / OW;
        const int oh = static_cast<int>(t % OH);
        t /= OH;
        const int m = static_cast<int>(t % M);
        const long long n = t / M;
        const int g = m / Mg;
        const unsigned zw = static_cast<unsigned>(w_zp[m]);
        const int ih0 = oh * stride_h - pad_h;
        const int iw0 = ow * stride_w - pad_w;
        unsigned acc = 0;
        for (int c = 0; c < Cg; ++c) {
            const unsigned char* xc = x + n * xs_n + (static_cast<long long>(g) * Cg + c) * xs_c;
            const unsigned char* wc = w + m * ws_m + c * ws_c;
            for (int r = 0; r < R; ++r) {
                const int ih = ih0 + r * dil_h;
                if (ih < 0 || ih >= H) continue;
                for (int s = 0; s < S; ++s) {
                    const int iw = iw0 + s * dil_w;
                    if (iw < 0 || iw >= W) continue;
                    const unsigned xv =
                        static_cast<unsigned>(conv::widen<XS>(xc[ih * xs_h + iw * xs_w])) -
                        static_cast<unsigned>(x_zp);
                    const unsigned wv =
                        static_cast<unsigned>(conv::widen<WS>(wc[r * ws_r + s * ws_s])) - zw;
                    acc += xv * wv;  // unsigned: exact modulo 2^32
                }
            }
        }
        out[idx] = static_cast<int>(acc);
    }
}

// ------------------------------------------------------------------------------------------
// CUDA-core tiled path: depthwise and narrow groups. CTA = NB images, MB output channels of one
// group, a TH x TW output tile. Shared memory holds the filter chunk as (w - z_w[m]) laid out
// [c][r][s][MB] (the MB taps of one (c, r, s) are one broadcast read) and, per chunk of CC input
// channels, the input tile with its halo as (x - z_x) mod 2^32, 0 at padded taps (which
// contribute 0). Each thread owns V outputs blockDim apart in the flattened tile: consecutive
// lanes take consecutive columns (conflict-free shared reads at stride 1, coalesced stores).
// PIPE (host-checked: one channel chunk, rows contiguous along W, the tile's words fit U per
// thread, images 4-byte aligned alike): the filter, the zero borders and the load addresses are
// set up once per CTA and the next image's words are loaded into registers while the current
// image is computed. All arithmetic is unsigned: exact modulo 2^32. At most 64 registers
// (4 CTAs of 256 threads per SM): the kernel is latency-bound, occupancy pays.
namespace conv {
constexpr int TILED_U = 4;  // input words per thread in flight

// Load descriptor of one input word of the tile (the same for every image of the CTA).
struct TileWord {
    int src;  // byte offset from the image's group base (an image spans < 2^31: host-checked)
    int dst;  // shared index of tile column 0 of the word's row, -1: nothing to load
    int rel;  // offset of the word's first byte from the row's in-image span start
};

template <bool XS>
__device__ __forceinline__ void tile_word_store(unsigned* tile, const TileWord& d, unsigned v,
                                                int lo, int span, unsigned zx) {
#pragma unroll
    for (int b = 0; b < 4; ++b) {
        const int col = d.rel + b;
        if (col >= 0 && col < span) {
            const unsigned char byte = static_cast<unsigned char>(v >> (8 * b));
            tile[d.dst + lo + col] = static_cast<unsigned>(widen<XS>(byte)) - zx;
        }
    }
}

// The word: one aligned 4-byte load inside the span, else the span's bytes one by one.
__device__ __forceinline__ unsigned tile_word_load(const unsigned char* base, const TileWord& d,
                                                   int span) {
    unsigned v = 0u;
    if (d.dst >= 0) {
        const unsigned char* a = base + d.src;
        if (d.rel >= 0 && d.rel + 4 <= span) {
            v = *reinterpret_cast<const unsigned*>(a);
        } else {
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                if (d.rel + b >= 0 && d.rel + b < span) {
                    v |= static_cast<unsigned>(a[b]) << (8 * b);
                }
            }
        }
    }
    return v;
}
}  // namespace conv

template <typename WT, typename XT, int MB, int V, bool WIDE>
__global__ void __launch_bounds__(256, 4) conv_int_tiled(
    const unsigned char* __restrict__ x, const unsigned char* __restrict__ w,
    const int* __restrict__ w_zp, int* __restrict__ out, int N, int M, int Mg, int Cg, int H,
    int W, int R, int S, int OH, int OW, int stride_h, int stride_w, int dil_h, int dil_w,
    int pad_h, int pad_w, int x_zp, int TH, int TW, int IHT, int IWT, int CC, int tiles_w,
    int mchunks, int NB, int pipe, long long xs_n, long long xs_c, long long xs_h,
    long long xs_w, long long ws_m, long long ws_c, long long ws_r, long long ws_s) {
    constexpr bool WS = conv::is_signed_byte<WT>::value;
    constexpr bool XS = conv::is_signed_byte<XT>::value;
    constexpr int U = conv::TILED_U;
    extern __shared__ __align__(16) unsigned smem_u[];
    const int plane = IHT * IWT;
    const int RS = R * S;
    unsigned* filt = smem_u;  // CC * RS * MB, first: 16-byte aligned rows of MB taps
    unsigned* tile = smem_u + ((CC * RS * MB + 3) & ~3);  // CC planes of IHT x IWT
    const int th_i = blockIdx.x / tiles_w;
    const int tw_i = blockIdx.x - th_i * tiles_w;
    const int g = blockIdx.y / mchunks;
    const int m0 = (blockIdx.y - g * mchunks) * MB;  // within the group
    const int n0 = blockIdx.z * NB;
    const int n1 = min(N, n0 + NB);
    const int oh0 = th_i * TH;
    const int ow0 = tw_i * TW;
    const int ih0 = oh0 * stride_h - pad_h;  // image row of tile row 0
    const int iw0 = ow0 * stride_w - pad_w;  // image column of tile column 0
    const int tid = threadIdx.x;
    const int nthr = blockDim.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int nwarps = nthr >> 5;
    const unsigned zx = static_cast<unsigned>(x_zp);
    // In-image tile columns [lo, hi); the same for every row.
    const int lo = min(max(0, -iw0), IWT);
    const int hi = max(min(IWT, W - iw0), lo);
    const int span = hi - lo;
    const int wpr = span > 0 ? (span + 3) / 4 + 1 : 0;  // words touching a row's span

    int off[V];   // shared offset of the output's top-left tap; 0 for idle slots
    int opos[V];  // oh * OW + ow, or -1
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const int f = tid + j * nthr;
        const int tr = f / TW;
        const int tc = f - tr * TW;
        const int oh = oh0 + tr;
        const int ow = ow0 + tc;
        const bool ok = f < TH * TW && oh < OH && ow < OW;
        off[j] = ok ? tr * stride_h * IWT + tc * stride_w : 0;
        opos[j] = ok ? oh * OW + ow : -1;
    }

    auto group_base = [&](int n) {
        return x + n * xs_n + static_cast<long long>(g) * Cg * xs_c;
    };
    // Zeros: rows outside the image, and the padded columns of the others.
    auto zero_borders = [&](int cc_n) {
        for (int cr = warp; cr < cc_n * IHT; cr += nwarps) {  // one warp per (channel, row)
            const int c = cr / IHT;
            const int ih = ih0 + (cr - c * IHT);
            unsigned* dst = tile + c * plane + (cr - c * IHT) * IWT;
            if (ih < 0 || ih >= H || span == 0) {
                for (int col = lane; col < IWT; col += 32) dst[col] = 0u;
            } else {
                for (int col = lane; col < lo; col += 32) dst[col] = 0u;
                for (int col = hi + lane; col < IWT; col += 32) dst[col] = 0u;
            }
        }
    };
    auto load_filter = [&](int c0, int cc_n) {
        for (int i = tid; i < cc_n * RS * MB; i += nthr) {
            const int mb = i % MB;
            const int t = i / MB;
            const int c = t / RS;
            const int rs = t - c * RS;
            const int mr = m0 + mb;
            unsigned v = 0u;  // channels past the group's end contribute nothing (never stored)
            if (mr < Mg) {
                const int m = g * Mg + mr;
                const int r = rs / S;
                const unsigned char b =
                    w[m * ws_m + (c0 + c) * ws_c + r * ws_r + (rs - r * S) * ws_s];
                v = static_cast<unsigned>(conv::widen<WS>(b)) - static_cast<unsigned>(w_zp[m]);
            }
            filt[i] = v;
        }
    };
    // Word `item` of the flattened (channel, row, word) list of a chunk starting at channel c0;
    // `base` only fixes the alignment (the same for every image of the CTA).
    auto describe = [&](const unsigned char* base, int c0, int item, int items) {
        conv::TileWord d{0, -1, 0};
        if (item >= items) return d;  // also every item when wpr == 0
        const int cr = item / wpr;
        const int k = item - cr * wpr;
        const int c = cr / IHT;
        const int ih = ih0 + (cr - c * IHT);
        if (ih >= 0 && ih < H) {
            const long long a = static_cast<long long>(c0 + c) * xs_c +
                                static_cast<long long>(ih) * xs_h + (iw0 + lo);  // >= 0
            const int r0 = static_cast<int>(reinterpret_cast<unsigned long long>(base + a) & 3);
            const int rl = 4 * k - r0;
            if (rl < span) {
                d.src = static_cast<int>(a + rl);
                d.dst = c * plane + (cr - c * IHT) * IWT;
                d.rel = rl;
            }
        }
        return d;
    };
    auto compute = [&](int cc_n, unsigned (&acc)[MB][V]) {
        for (int c = 0; c < cc_n; ++c) {
            for (int r = 0; r < R; ++r) {
                const unsigned* trow = tile + c * plane + r * dil_h * IWT;
                const unsigned* frow = filt + (c * RS + r * S) * MB;
                for (int s = 0; s < S; ++s) {
                    unsigned wv[MB];
                    if constexpr (MB % 4 == 0) {
#pragma unroll
                        for (int q = 0; q < MB / 4; ++q) {
                            const uint4 t4 =
                                *reinterpret_cast<const uint4*>(frow + s * MB + 4 * q);
                            wv[4 * q] = t4.x;
                            wv[4 * q + 1] = t4.y;
                            wv[4 * q + 2] = t4.z;
                            wv[4 * q + 3] = t4.w;
                        }
                    } else {
#pragma unroll
                        for (int mb = 0; mb < MB; ++mb) wv[mb] = frow[s * MB + mb];
                    }
                    const unsigned* t = trow + s * dil_w;
#pragma unroll
                    for (int j = 0; j < V; ++j) {
                        const unsigned xv = t[off[j]];
#pragma unroll
                        for (int mb = 0; mb < MB; ++mb) acc[mb][j] += xv * wv[mb];
                    }
                }
            }
        }
    };
    auto store = [&](int n, unsigned (&acc)[MB][V]) {
#pragma unroll
        for (int mb = 0; mb < MB; ++mb) {
            const int mr = m0 + mb;
            if (mr >= Mg) continue;
            int* orow = out + (static_cast<long long>(n) * M + g * Mg + mr) *
                                  static_cast<long long>(OH) * OW;
#pragma unroll
            for (int j = 0; j < V; ++j) {
                if (opos[j] >= 0) orow[opos[j]] = static_cast<int>(acc[mb][j]);
                acc[mb][j] = 0u;
            }
        }
    };

    unsigned acc[MB][V];
#pragma unroll
    for (int mb = 0; mb < MB; ++mb)
#pragma unroll
        for (int j = 0; j < V; ++j) acc[mb][j] = 0u;

    if (WIDE && pipe) {
        const int items = Cg * IHT * wpr;  // <= U * nthr (host-checked)
        conv::TileWord d[U];
        unsigned v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) d[u] = describe(group_base(n0), 0, tid + u * nthr, items);
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = conv::tile_word_load(group_base(n0), d[u], span);
        zero_borders(Cg);
        load_filter(0, Cg);
        for (int n = n0; n < n1; ++n) {
            __syncthreads();  // the previous image's readers are done
#pragma unroll
            for (int u = 0; u < U; ++u) {
                if (d[u].dst >= 0) conv::tile_word_store<XS>(tile, d[u], v[u], lo, span, zx);
            }
            __syncthreads();
            if (n + 1 < n1) {  // next image's words in flight during this image's arithmetic
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    v[u] = conv::tile_word_load(group_base(n + 1), d[u], span);
                }
            }
            compute(Cg, acc);
            store(n, acc);
        }
        return;
    }
    // The zero borders are the same for every chunk and image: written once. So is the filter
    // when all channels fit one chunk.
    const bool one_chunk = Cg <= CC;
    zero_borders(min(CC, Cg));
    if (one_chunk) load_filter(0, Cg);
    for (int n = n0; n < n1; ++n) {
        const unsigned char* xg = group_base(n);
        for (int c0 = 0; c0 < Cg; c0 += CC) {
            const int cc_n = min(CC, Cg - c0);
            __syncthreads();  // the previous chunk's readers are done
            if (WIDE) {  // flattened (channel, row, word): U loads in flight per thread
                const int items = cc_n * IHT * wpr;
                for (int b0 = tid; b0 < items; b0 += U * nthr) {
                    conv::TileWord d[U];
                    unsigned v[U];
#pragma unroll
                    for (int u = 0; u < U; ++u) d[u] = describe(xg, c0, b0 + u * nthr, items);
#pragma unroll
                    for (int u = 0; u < U; ++u) v[u] = conv::tile_word_load(xg, d[u], span);
#pragma unroll
                    for (int u = 0; u < U; ++u) {
                        if (d[u].dst >= 0) {
                            conv::tile_word_store<XS>(tile, d[u], v[u], lo, span, zx);
                        }
                    }
                }
            } else {
                for (int cr = warp; cr < cc_n * IHT; cr += nwarps) {  // bytes, a warp per row
                    const int c = cr / IHT;
                    const int ih = ih0 + (cr - c * IHT);
                    if (ih < 0 || ih >= H) continue;
                    unsigned* dst = tile + c * plane + (cr - c * IHT) * IWT;
                    const unsigned char* src = xg + static_cast<long long>(c0 + c) * xs_c +
                                               static_cast<long long>(ih) * xs_h;
                    for (int col = lo + lane; col < hi; col += 32) {
                        const unsigned char byte = src[static_cast<long long>(iw0 + col) * xs_w];
                        dst[col] = static_cast<unsigned>(conv::widen<XS>(byte)) - zx;
                    }
                }
            }
            if (!one_chunk) load_filter(c0, cc_n);
            __syncthreads();
            compute(cc_n, acc);
        }
        store(n, acc);
    }
}

}  // namespace dml

#ifdef DMLSERVE_EXPLICIT_INSTANTIATION
template __global__ void dml::conv_int_direct<signed char, unsigned char>(const unsigned char*, const unsigned char*,
                                                      const int*, int*, long long, int, int, int,
                                                      int, int, int, int, int, int, int, int, int,
                                                      int, int, int, int, long long, long long,
                                                      long long, long long, long long, long long,
                                                      long long, long long);
template __global__ void dml::conv_int_tiled<unsigned char, signed char, 1, 4, true>(
    const unsigned char*, const unsigned char*, const int*, int*, int, int, int, int, int, int,
    int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int,
    int, int, long long, long long, long long, long long, long long, long long, long long,
    long long);
template __global__ void dml::conv_int_tiled<signed char, unsigned char, 4, 4, false>(
    const unsigned char*, const unsigned char*, const int*, int*, int, int, int, int, int, int,
    int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int,
    int, int, long long, long long, long long, long long, long long, long long, long long,
    long long);
template __global__ void dml::conv_int_tiled<signed char, signed char, 2, 4, true>(
    const unsigned char*, const unsigned char*, const int*, int*, int, int, int, int, int, int,
    int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int,
    int, int, long long, long long, long long, long long, long long, long long, long long,
    long long);
#endif
