// CONVOLUTION_INTEGER, depthwise (one input channel per group, any channel multiplier) with a
// small window at unit dilation: the band kernel. The launcher
// (kernels/cupy_backend/_convolution_integer_depthwise.py) picks it where the shape fits.
//
// The layer is memory-bound (1 byte in, 4 bytes out per pixel), so the kernel is shaped like
// AVERAGE_POOLING's band kernels: a CTA owns a band of TY output rows x TW output columns of
// one output plane, loads every input word of the band (rows with their halo) before the first
// product, and writes 16-byte int32 stores; the grid is many short CTAs (no carried state, no
// wave tail). The tile holds the input as raw bytes with every padded tap filled with z_x, so
//   sum (x - z_x)(w - z_w) = sum x * w' - z_x * sum w'      (w' = w - z_w[m])
// and padded taps cancel exactly: the inner loop has no bounds tests and no unpacking (the
// shared loads widen the byte by its type). Window, strides and the rows per thread are
// compile-time constants, so every tap is one immediate-offset shared load and one multiply-add.
// Arithmetic is unsigned: exact modulo 2^32 like the reference's int32.
//
// DP (3-wide windows at unit column stride, where every w' fits a signed byte: the launcher
// checks the filter's type and zero points): a tap row is one dp4a of the window's three input
// bytes (and a fourth with weight 0) against the row's packed w', so a thread's 4 x TT outputs
// take R dp4a each in place of 3R multiply-adds; a tile row's windows come from two aligned
// words by funnel shift and byte permutes. The dp4a sum is exact in int32 and adds modulo 2^32.

#include "common.cuh"
#include "convolution_integer_common.cuh"

namespace dml {

// The divisions by run-time sizes are common.cuh's fast_div (3 instructions, not ~20).

// acc + the dot product of x's four bytes (signed where XS) with w's four signed bytes.
template <bool XS>
__device__ __forceinline__ unsigned dw_dp4a(unsigned x, unsigned w, unsigned acc) {
#ifdef __CUDA_ARCH__
    unsigned r;
    if constexpr (XS) {
        asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(w), "r"(acc));
    } else {
        asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(w), "r"(acc));
    }
    return r;
#else
    int sum = 0;
    for (int b = 0; b < 4; ++b) {
        const int xb = XS ? static_cast<int>(static_cast<signed char>(x >> (8 * b)))
                          : static_cast<int>((x >> (8 * b)) & 0xff);
        sum += xb * static_cast<int>(static_cast<signed char>(w >> (8 * b)));
    }
    return acc + static_cast<unsigned>(sum);
#endif
}

// WORDS (host-checked): rows contiguous along W and W a multiple of 4; where the plane's rows
// are also 4-byte aligned (checked here, per CTA), each word of the tile is wholly inside the
// image or wholly padding and is one 4-byte load. Otherwise each byte is gathered with its
// own stride and bounds.
//
// Grid (plane n * M + m, band of TY output rows, tile of TW output columns). Thread (tx, ty) =
// (tid % TX, tid / TX) owns V = 4 consecutive outputs of TT consecutive rows; the block may
// hold more threads than TX * TY / TT (they help load the tile and the filter, then stop).
// Shared memory: the R*S filter taps w' (int32), then the tile, IHT rows of WPW words; tile
// column 0 is image column ox0*SW - PL (PL: the start padding rounded up to 4, so tile words
// and image words coincide). zw_all: the filter zero point of every channel, or conv::PER_CHANNEL
// where they differ (then w_zp[m]; a per-tensor zero point needs no device copy). step: the tile
// rows one pass of the block loads (threads / WPW). The (mul, shift) pairs divide by M, Mg, WPW
// and TX. With DP the launcher allocates one word past the tile: the last row's windows read
// it (into a byte whose weight is 0).
//
// CG > 1 (narrow groups, CG input channels a group): a CTA per (image n, group g, band) stages
// the band of the group's CG input planes (plane c at tile + c * IHT * WPW) and forms the band's
// outputs of each of the group's Mg output channels in turn from the same tile; `M` is then the
// group count G (blockIdx.x = n * G + g, whose first output plane is blockIdx.x * Mg) and the
// shared memory holds the Mg * CG * R * S taps. The zero-point algebra is per output channel,
// over its CG * R * S taps.
template <typename WT, typename XT, int R, int S, int SH, int SW, int TT, bool WORDS, bool DP, int CG>
__global__ void __launch_bounds__(256) conv_int_dw_bands(
    const unsigned char* __restrict__ x, const unsigned char* __restrict__ w,
    const int* __restrict__ w_zp, int* __restrict__ out, int M, int Mg, int H, int W, int OH,
    int OW, int pad_h, int pad_w, int x_zp, int zw_all, int TX, int TY, int PL, int WPW, int IHT, int step,
    unsigned mul_m, unsigned sh_m, unsigned mul_mg, unsigned sh_mg, unsigned mul_wpw,
    unsigned sh_wpw, unsigned mul_tx, unsigned sh_tx, long long xs_n, long long xs_c,
    long long xs_h, long long xs_w, long long ws_m, long long ws_c, long long ws_r, long long ws_s) {
    constexpr bool WS = conv::is_signed_byte<WT>::value;
    static_assert(!DP || (S <= 3 && SW == 1), "dp4a windows: at most 3 columns, unit column stride");
    constexpr int V = 4;
    constexpr int RT = (TT - 1) * SH + R;  // input rows a thread reads
    constexpr int SPAN = (V - 1) * SW + S;  // input columns a thread reads per row
    constexpr int U = 4;                    // tile words per thread in flight (per pass)
    unsigned char* smem = dynamic_smem<unsigned char>();
    int* taps = reinterpret_cast<int*>(smem);
    constexpr int RS = R * S;
    const int MO = CG == 1 ? 1 : Mg;  // output channels a CTA forms
    unsigned* tile = reinterpret_cast<unsigned*>(smem + 4 * (RS * CG * MO + (CG == 1 ? 0 : MO)));

    conv::dependent_start();  // everything below reads or writes what the grid ahead may
    const int tid = static_cast<int>(threadIdx.x);
    const int plane = static_cast<int>(blockIdx.x);  // n * M + m
    const int oy0 = static_cast<int>(blockIdx.y) * TY, ox0 = static_cast<int>(blockIdx.z) * (V * TX);
    const int n = fast_div(plane, mul_m, sh_m);
    const int j = plane - n * M;  // the output channel (CG 1) or the group
    const int m0 = CG == 1 ? j : j * Mg;  // the CTA's first output channel
    const int c0 = CG == 1 ? fast_div(j, mul_mg, sh_mg) : j * CG;  // its first input channel
    const unsigned char* xp = x + static_cast<long long>(n) * xs_n + static_cast<long long>(c0) * xs_c;

    if constexpr (CG == 1) {
        if (tid < R * S) {  // the launcher's block holds at least R * S threads
            const int r = tid / S, s = tid - r * S;
            const unsigned char wb = w[m0 * ws_m + r * ws_r + s * ws_s];
            taps[tid] = conv::widen<WS>(wb) - (zw_all == conv::PER_CHANNEL ? w_zp[m0] : zw_all);
        }
    } else {
        // w' of output channel m0 + mo, input plane c, tap (r, s)
        const auto tap = [&](int mo, int c, int r, int s) {
            const int m = m0 + mo;
            const unsigned char wb = w[m * ws_m + c * ws_c + r * ws_r + s * ws_s];
            return conv::widen<WS>(wb) - (zw_all == conv::PER_CHANNEL ? w_zp[m] : zw_all);
        };
        // taps[(mo * CG + c) * RS + r * S + s], then the MO biases -z_x * sum w' (each thread
        // of the first MO sums its channel's taps itself: no second barrier)
        for (int i = tid; i < MO * CG * RS; i += static_cast<int>(blockDim.x)) {
            const int mc = i / RS, rs = i - mc * RS;
            const int mo = mc / CG, r = rs / S;
            taps[i] = tap(mo, mc - mo * CG, r, rs - r * S);
        }
        for (int mo = tid; mo < MO; mo += static_cast<int>(blockDim.x)) {
            unsigned sum = 0;
            for (int c = 0; c < CG; ++c) {
                for (int r = 0; r < R; ++r) {
                    for (int s = 0; s < S; ++s) sum += static_cast<unsigned>(tap(mo, c, r, s));
                }
            }
            taps[MO * CG * RS + mo] = static_cast<int>(0u - static_cast<unsigned>(x_zp) * sum);
        }
    }

    // The tile: thread -> (rows tr0 + k * step, word wc); every load of a pass issues before
    // its first shared store. Threads past step * WPW load nothing (their rows would repeat).
    // Row, image row, source pointer and tile slot advance by additions: no multiplication
    // and no 64-bit address arithmetic per word beyond one 64-bit add.
    const unsigned zx4 = static_cast<unsigned>(x_zp & 0xff) * 0x01010101u;
    const int tq = fast_div(tid, mul_wpw, sh_wpw);
    const int wc = tid - tq * WPW;
    const int tr0 = tq < step ? tq : IHT;
    const int iy0 = oy0 * SH - pad_h;
    const int ix = ox0 * SW - PL + 4 * wc;
    const bool words =
        WORDS && ((reinterpret_cast<unsigned long long>(xp) | static_cast<unsigned long long>(xs_h) |
                   static_cast<unsigned long long>(CG == 1 ? 0 : xs_c)) & 3) == 0;
    // The band's image rows as tile rows [r_lo, r_hi), set once per CTA: one unsigned compare
    // a word tests both image edges and the tile's end, inside the image or across its edges.
    const int r_lo = iy0 < 0 ? -iy0 : 0;
    const int r_hi = min(IHT, H - iy0);
    const unsigned r_span = r_hi > r_lo ? static_cast<unsigned>(r_hi - r_lo) : 0u;
    const long long row_step = static_cast<long long>(step) * xs_h;
    const int slot_step = step * WPW;
#pragma unroll
    for (int c = 0; c < CG; ++c) {
        const unsigned char* p = xp + static_cast<long long>(c) * xs_c + static_cast<long long>(iy0 + tr0) * xs_h;
        unsigned* slot = tile + c * (IHT * WPW) + tr0 * WPW + wc;
        if (words) {
            // Whole words: wholly image or wholly padding along W (the host's WORDS check).
            const bool col_in = static_cast<unsigned>(ix) < static_cast<unsigned>(W);
            p += ix;
            for (int row = tr0; row < IHT; row += U * step) {
                unsigned v[U];
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const bool in = col_in && static_cast<unsigned>(row + u * step - r_lo) < r_span;
                    v[u] = in ? __ldg(reinterpret_cast<const unsigned*>(p)) : zx4;
                    p += row_step;
                }
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    if (row + u * step < IHT) slot[u * slot_step] = v[u];
                }
                slot += U * slot_step;
            }
        } else {
            // Bytes gathered one tile word at a time (the fallback: four loads in flight keep the
            // registers of the word path's).
            for (int row = tr0; row < IHT; row += step) {
                const bool in = static_cast<unsigned>(row - r_lo) < r_span;
                unsigned word = 0;
#pragma unroll
                for (int b = 0; b < 4; ++b) {
                    const int col = ix + b;
                    const unsigned byte = in && static_cast<unsigned>(col) < static_cast<unsigned>(W)
                                              ? static_cast<unsigned>(__ldg(p + col * xs_w))
                                              : static_cast<unsigned>(x_zp & 0xff);
                    word |= byte << (8 * b);
                }
                *slot = word;
                p += row_step;
                slot += slot_step;
            }
        }
    }
    __syncthreads();

    const int ty = fast_div(tid, mul_tx, sh_tx), tx = tid - ty * TX;
    const int oy = oy0 + ty * TT;
    const int ox = ox0 + tx * V;
    if (ty * TT >= TY || oy >= OH || ox >= OW) return;  // no barrier follows
    const bool vec = (OW & 3) == 0;  // ox, OW and the plane offsets all multiples of 4

    for (int mo = 0; mo < MO; ++mo) {
        unsigned bias;
        if constexpr (CG == 1) {
            unsigned wsum = 0;
#pragma unroll
            for (int i = 0; i < RS; ++i) wsum += static_cast<unsigned>(taps[i]);
            bias = 0u - static_cast<unsigned>(x_zp) * wsum;
        } else {
            bias = static_cast<unsigned>(taps[MO * CG * RS + mo]);
        }
        unsigned acc[TT][V];
#pragma unroll
        for (int t = 0; t < TT; ++t) {
#pragma unroll
            for (int v = 0; v < V; ++v) acc[t][v] = bias;
        }
        // One input plane at a time: unrolled, the compiler would hoist every plane's taps
        // and tile reads ahead of the products and spill registers.
#pragma unroll 1
        for (int c = 0; c < CG; ++c) {
            int wc_[RS];
#pragma unroll
            for (int i = 0; i < RS; ++i) wc_[i] = taps[(mo * CG + c) * RS + i];
            const unsigned* plane_tile = tile + c * (IHT * WPW);
            if constexpr (DP) {
                // Row r's w' as signed bytes 0..S-1 (byte 3 is 0: the window's fourth byte drops out).
                unsigned wp[R];
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    wp[r] = 0;
#pragma unroll
                    for (int s = 0; s < S; ++s) wp[r] |= (static_cast<unsigned>(wc_[r * S + s]) & 0xffu) << (8 * s);
                }
                // The thread's first input byte is byte `off` of tile word tx (V * SW = 4 bytes a thread).
                const unsigned* row = plane_tile + (ty * TT * SH) * WPW + tx;
                const unsigned sh = 8u * static_cast<unsigned>(PL - pad_w);
#pragma unroll
                for (int i = 0; i < RT; ++i) {
                    const unsigned w0 = row[i * WPW], w1 = row[i * WPW + 1], w2 = row[i * WPW + 2];
                    const unsigned a0 = __funnelshift_r(w0, w1, sh), a1 = __funnelshift_r(w1, w2, sh);
                    const unsigned win[V] = {a0, __byte_perm(a0, a1, 0x4321), __byte_perm(a0, a1, 0x5432),
                                             __byte_perm(a0, a1, 0x6543)};
#pragma unroll
                    for (int t = 0; t < TT; ++t) {
                        const int r = i - t * SH;
                        if (r < 0 || r >= R) continue;
#pragma unroll
                        for (int v = 0; v < V; ++v) {
                            acc[t][v] = dw_dp4a<conv::is_signed_byte<XT>::value>(win[v], wp[r], acc[t][v]);
                        }
                    }
                }
            } else {
                const int WP = 4 * WPW;
                const XT* src =
                    reinterpret_cast<const XT*>(plane_tile) + (ty * TT * SH) * WP + tx * V * SW + PL - pad_w;
#pragma unroll
                for (int i = 0; i < RT; ++i) {
                    int xv[SPAN];
#pragma unroll
                    for (int j2 = 0; j2 < SPAN; ++j2) xv[j2] = static_cast<int>(src[i * WP + j2]);
#pragma unroll
                    for (int t = 0; t < TT; ++t) {
                        const int r = i - t * SH;
                        if (r < 0 || r >= R) continue;
#pragma unroll
                        for (int s = 0; s < S; ++s) {
#pragma unroll
                            for (int v = 0; v < V; ++v) {
                                acc[t][v] += static_cast<unsigned>(xv[v * SW + s]) * static_cast<unsigned>(wc_[r * S + s]);
                            }
                        }
                    }
                }
            }
        }

        const long long oplane = CG == 1 ? static_cast<long long>(plane) : static_cast<long long>(plane) * Mg + mo;
#pragma unroll
        for (int t = 0; t < TT; ++t) {
            if (oy + t >= OH) break;
            int* o = out + (oplane * OH + oy + t) * OW + ox;
            if (vec) {
                *reinterpret_cast<int4*>(o) = make_int4(static_cast<int>(acc[t][0]), static_cast<int>(acc[t][1]),
                                                        static_cast<int>(acc[t][2]), static_cast<int>(acc[t][3]));
            } else {
#pragma unroll
                for (int v = 0; v < V; ++v) {
                    if (ox + v < OW) o[v] = static_cast<int>(acc[t][v]);
                }
            }
        }
    }
}

}  // namespace dml

#ifdef DMLSERVE_EXPLICIT_INSTANTIATION
#define DML_DW_ARGS                                                                                    \
    const unsigned char*, const unsigned char*, const int*, int*, int, int, int, int, int, int, int,   \
        int, int, int, int, int, int, int, int, int, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, \
        unsigned, unsigned, long long, long long, long long, long long, long long, long long, long long, long long
template __global__ void dml::conv_int_dw_bands<signed char, unsigned char, 3, 3, 1, 1, 4, true, true, 1>(DML_DW_ARGS);
template __global__ void dml::conv_int_dw_bands<signed char, unsigned char, 3, 3, 1, 1, 4, true, false, 1>(DML_DW_ARGS);
template __global__ void dml::conv_int_dw_bands<signed char, unsigned char, 3, 3, 1, 1, 2, true, false, 1>(DML_DW_ARGS);
template __global__ void dml::conv_int_dw_bands<unsigned char, signed char, 3, 3, 1, 1, 4, false, true, 1>(DML_DW_ARGS);
template __global__ void dml::conv_int_dw_bands<signed char, unsigned char, 3, 3, 2, 2, 2, true, false, 1>(DML_DW_ARGS);
template __global__ void dml::conv_int_dw_bands<unsigned char, signed char, 5, 5, 1, 1, 2, false, false, 1>(DML_DW_ARGS);
template __global__ void dml::conv_int_dw_bands<signed char, signed char, 7, 7, 1, 1, 2, true, false, 1>(DML_DW_ARGS);
template __global__ void dml::conv_int_dw_bands<unsigned char, unsigned char, 1, 5, 1, 2, 1, false, false, 1>(DML_DW_ARGS);
template __global__ void dml::conv_int_dw_bands<signed char, unsigned char, 3, 3, 1, 1, 4, true, true, 4>(DML_DW_ARGS);
template __global__ void dml::conv_int_dw_bands<signed char, unsigned char, 3, 3, 1, 1, 4, true, false, 4>(DML_DW_ARGS);
template __global__ void dml::conv_int_dw_bands<signed char, unsigned char, 3, 3, 1, 1, 4, true, true, 2>(DML_DW_ARGS);
#undef DML_DW_ARGS
#endif
