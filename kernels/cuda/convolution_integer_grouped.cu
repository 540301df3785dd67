// CONVOLUTION_INTEGER with a 3x3 window and groups of 8, 16 or 32 input channels and at most
// 16 output channels (ResNeXt's and RegNet's grouped layers), whole images at a time. The
// launcher (kernels/cupy_backend/_convolution_integer_grouped.py) picks it where it applies.
//
// Per group the layer is a GEMM of M/G <= 16 filter rows by K = 9 C/G taps, far too narrow for
// the tiled GEMMs, and memory-bound (the output is 4 bytes per pixel and channel). A CTA owns
// one image and GPC groups: it copies the groups' input planes once into shared memory as a
// frame of pixels, C/G channel bytes each (the padding filled with z_x), then each warp forms
// one group's output for every 4th of the image's 8-pixel blocks with mma.m16n8k32: the A
// fragments (the group's filter, rows past M/G zero) stay in registers for the whole image,
// and each B fragment word (4 channels of one tap at one pixel) is one 4-byte shared load. A
// step of 32 k covers 32 / CG taps; the steps past the 9th tap weigh 0.
//
// Zero points, with the padding holding z_x: sum (x - z_x)(w - z_w) = sum x w - z_w sum x +
// K z_x z_w - z_x sum w (K = 9 C/G, every tap counted), sum w per row from the A fragments,
// sum x per pixel from dp4a on the B fragments (ZW). Arithmetic wraps modulo 2^32.

#include "common.cuh"
#include "convolution_integer_common.cuh"

namespace dml {

constexpr int GR_GROUPS = 4;  // groups per CTA (GPC)
constexpr int GR_WPG = 4;  // warps per group: each takes every 4th 8-pixel block
constexpr int GR_WARPS = GR_GROUPS * GR_WPG;
constexpr int GR_UNROLL = 8;  // frame items a thread loads before storing them (bytes)
constexpr int GR_UNROLL_W = 2;  // the same, items of 4 words (WORDS)

// x (N, C, H, W) and w (M, CG, 3, 3) strided bytes; out (N, M, OH, OW) int32, contiguous.
// Frame: FH x FW cells (the padded input a CTA's taps reach), CG bytes a cell, per group.
// WORDS: each (n, c) plane contiguous, H * W a multiple of 4, W >= 4, the planes 4-byte aligned,
// an image's offsets below 2^31, and every pixel of the image inside the frame (H + ph <= FH,
// W + pw <= FW): the frame loads 4-byte words and places each of their pixels. The (mul, shift) pairs
// divide by the staging loop's item count per channel quad (H * W / 4 with WORDS, else
// FH * FW), by its row length (W, else FW) and by OW.
// Grid: N * ceil(G / GR_GROUPS); dynamic shared memory GR_GROUPS * (FH * FW * CG + KSTEPS * 512)
// bytes (the frames, then the A fragments).
template <typename WT, typename XT, int CG, bool ZW, bool WORDS>
__global__ void __launch_bounds__(GR_WARPS * 32, CG == 32 ? 1 : 2) conv_int_grouped(
    const unsigned char* __restrict__ x, const unsigned char* __restrict__ w,
    const int* __restrict__ w_zp, int* __restrict__ out, int G, int MG, int H, int W, int OH,
    int OW, int sh, int sw, int dh, int dw, int ph, int pw, int FH, int FW, int x_zp,
    int zw_all, unsigned item_mul, unsigned item_shift, unsigned row_mul, unsigned row_shift,
    unsigned ow_mul, unsigned ow_shift, long long xs_n, long long xs_c, long long xs_h, long long xs_w, long long ws_m,
    long long ws_c, long long ws_r, long long ws_s) {
    constexpr bool WS = conv::is_signed_byte<WT>::value;
    constexpr bool XS = conv::is_signed_byte<XT>::value;
    constexpr int K = 9 * CG;
    constexpr int KSTEPS = (K + 31) / 32;
    constexpr int QUADS = CG / 4;  // 4-channel words per cell
    unsigned char* const gr_frame = dynamic_smem<unsigned char>();
    const int ctas_per_image = (G + GR_GROUPS - 1) / GR_GROUPS;
    conv::dependent_start();  // everything below reads or writes what the grid ahead may
    const int img = blockIdx.x / ctas_per_image;
    const int group0 = (blockIdx.x - img * ctas_per_image) * GR_GROUPS;
    const int cells = FH * FW;
    const unsigned zx_word = (static_cast<unsigned>(x_zp) & 0xffu) * 0x01010101u;

    const unsigned char* xi = x + img * xs_n;
    if constexpr (WORDS) {
        // Planes contiguous in 4-byte words: every cell z_x first, then per item the word wi
        // of 4 channels' planes (4 pixels), transposed into 4 cells' 4-channel words.
        const uint4 zx4 = make_uint4(zx_word, zx_word, zx_word, zx_word);
        for (int i = threadIdx.x; i < GR_GROUPS * cells * CG / 16; i += GR_WARPS * 32) {
            reinterpret_cast<uint4*>(gr_frame)[i] = zx4;
        }
        __syncthreads();
        const int plane_words = (H * W) >> 2;
        const int items = GR_GROUPS * QUADS * plane_words;
        const int cs = static_cast<int>(xs_c);
        for (int first = threadIdx.x; first < items; first += GR_WARPS * 32 * GR_UNROLL_W) {
            unsigned raw[GR_UNROLL_W][4];
            int gq[GR_UNROLL_W];
            int wi[GR_UNROLL_W];
#pragma unroll
            for (int u = 0; u < GR_UNROLL_W; ++u) {
                const int i = first + u * GR_WARPS * 32;
                gq[u] = fast_div(i, item_mul, item_shift);  // group * QUADS + quad
                wi[u] = i - gq[u] * plane_words;
                const bool in = i < items && group0 + gq[u] / QUADS < G;
                const int off = (group0 * CG + 4 * gq[u]) * cs + 4 * wi[u];
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    raw[u][k] = in ? __ldg(reinterpret_cast<const unsigned*>(xi + off + k * cs)) : 0u;
                }
                if (!in) gq[u] = -1;
            }
#pragma unroll
            for (int u = 0; u < GR_UNROLL_W; ++u) {
                if (gq[u] < 0) continue;
                unsigned px[4];
                conv::transpose4(raw[u], px);
                int iy = fast_div(4 * wi[u], row_mul, row_shift);
                int ix = 4 * wi[u] - iy * W;
                unsigned char* frame = gr_frame + (gq[u] / QUADS) * cells * CG + 4 * (gq[u] % QUADS);
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    *reinterpret_cast<unsigned*>(frame + ((iy + ph) * FW + ix + pw) * CG) = px[j];
                    if (++ix == W) {  // W >= 4: at most one new row within a word
                        ix = 0;
                        ++iy;
                    }
                }
            }
        }
    } else {
        // Any strides: 4 channels of one cell per item, consecutive threads on consecutive
        // cells; GR_UNROLL items' loads in flight per thread before their stores.
        const int items = GR_GROUPS * QUADS * cells;
        for (int first = threadIdx.x; first < items; first += GR_WARPS * 32 * GR_UNROLL) {
            unsigned v[GR_UNROLL];
            int at[GR_UNROLL];
#pragma unroll
            for (int u = 0; u < GR_UNROLL; ++u) {
                const int i = first + u * GR_WARPS * 32;
                const int gq = fast_div(i, item_mul, item_shift);  // group * QUADS + quad
                const int cell = i - gq * cells;
                const int fy = fast_div(cell, row_mul, row_shift);
                const int fx = cell - fy * FW;
                const int iy = fy - ph;
                const int ix = fx - pw;
                const int group = group0 + gq / QUADS;
                v[u] = zx_word;
                at[u] = i < items ? ((gq / QUADS) * cells + cell) * CG + 4 * (gq % QUADS) : -1;
                if (i < items && group < G && iy >= 0 && iy < H && ix >= 0 && ix < W) {
                    const unsigned char* src =
                        xi + (group * CG + 4 * (gq % QUADS)) * xs_c + iy * xs_h + ix * xs_w;
                    v[u] = static_cast<unsigned>(__ldg(src)) |
                           static_cast<unsigned>(__ldg(src + xs_c)) << 8 |
                           static_cast<unsigned>(__ldg(src + 2 * xs_c)) << 16 |
                           static_cast<unsigned>(__ldg(src + 3 * xs_c)) << 24;
                }
            }
#pragma unroll
            for (int u = 0; u < GR_UNROLL; ++u) {
                if (at[u] >= 0) *reinterpret_cast<unsigned*>(gr_frame + at[u]) = v[u];
            }
        }
    }

    // A fragments in mma order, per (group, step, lane) 16 bytes: rows g and g + 8 of the group,
    // k = 32 s + 4t (+ 16) .. + 3 (tap k / CG, channel k % CG); 0 past MG and the 9th tap.
    unsigned char* const a_frag = gr_frame + GR_GROUPS * cells * CG;
    for (int i = threadIdx.x; i < GR_GROUPS * KSTEPS * 128; i += GR_WARPS * 32) {
        const int q = i & 3;
        const int fl = (i >> 2) & 31;  // the fragment's lane (g, t)
        const int s = (i >> 7) % KSTEPS;
        const int group = group0 + (i >> 7) / KSTEPS;
        const int row = (fl >> 2) + 8 * (q & 1);
        const int k0 = 32 * s + 4 * (fl & 3) + 16 * (q >> 1);
        unsigned v = 0u;
        if (group < G && row < MG && k0 < K) {
            const int tap = k0 / CG;
            const unsigned char* src = w + (static_cast<long long>(group) * MG + row) * ws_m +
                                       (k0 % CG) * ws_c + (tap / 3) * ws_r + (tap % 3) * ws_s;
            v = static_cast<unsigned>(__ldg(src)) | static_cast<unsigned>(__ldg(src + ws_c)) << 8 |
                static_cast<unsigned>(__ldg(src + 2 * ws_c)) << 16 |
                static_cast<unsigned>(__ldg(src + 3 * ws_c)) << 24;
        }
        reinterpret_cast<unsigned*>(a_frag)[i] = v;
    }

    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int g = lane >> 2;
    const int t = lane & 3;
    const int gl = warp / GR_WPG;  // the warp's group in the CTA
    const int group = group0 + gl;
    // The warp's A fragments, made once per CTA before the barrier below; row sums for the bias.
    __syncthreads();  // the frame and the fragments are complete
    unsigned a[KSTEPS][4];
    int sum_lo = 0;
    int sum_hi = 0;
#pragma unroll
    for (int s = 0; s < KSTEPS; ++s) {
        const uint4 v = *reinterpret_cast<const uint4*>(a_frag + ((gl * KSTEPS + s) * 32 + lane) * 16);
        a[s][0] = v.x;
        a[s][1] = v.y;
        a[s][2] = v.z;
        a[s][3] = v.w;
        sum_lo = conv::byte_sum<WS>(v.z, conv::byte_sum<WS>(v.x, sum_lo));
        sum_hi = conv::byte_sum<WS>(v.w, conv::byte_sum<WS>(v.y, sum_hi));
    }
    sum_lo += __shfl_xor_sync(0xffffffffu, sum_lo, 1);
    sum_lo += __shfl_xor_sync(0xffffffffu, sum_lo, 2);
    sum_hi += __shfl_xor_sync(0xffffffffu, sum_hi, 1);
    sum_hi += __shfl_xor_sync(0xffffffffu, sum_hi, 2);
    const int m_lo = group * MG + g;
    const int m_hi = m_lo + 8;
    const bool live_lo = group < G && g < MG;
    const bool live_hi = group < G && g + 8 < MG;
    const unsigned zx = static_cast<unsigned>(x_zp);
    const unsigned zw_lo = !live_lo ? 0u
                           : static_cast<unsigned>(zw_all == conv::PER_CHANNEL ? w_zp[m_lo] : zw_all);
    const unsigned zw_hi = !live_hi ? 0u
                           : static_cast<unsigned>(zw_all == conv::PER_CHANNEL ? w_zp[m_hi] : zw_all);
    const unsigned bias_lo = static_cast<unsigned>(K) * zx * zw_lo - zx * static_cast<unsigned>(sum_lo);
    const unsigned bias_hi = static_cast<unsigned>(K) * zx * zw_hi - zx * static_cast<unsigned>(sum_hi);

    // The cells of this lane's B words relative to its pixel's first tap: k 32 s + 4t (+16).
    int tap_cell[KSTEPS][2];
#pragma unroll
    for (int s = 0; s < KSTEPS; ++s) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int k0 = 32 * s + 4 * t + 16 * h;
            const int tap = k0 / CG;
            tap_cell[s][h] = k0 < K ? ((tap / 3) * dh * FW + (tap % 3) * dw) * CG + k0 % CG : -1;
        }
    }

    const unsigned char* frame = gr_frame + gl * cells * CG;
    const int pixels = OH * OW;
    const int blocks = (pixels + 7) >> 3;
    int* out_lo = out + (static_cast<long long>(img) * G * MG + m_lo) * pixels;
    int* out_hi = out_lo + 8LL * pixels;
    for (int blk = warp % GR_WPG; blk < blocks; blk += GR_WPG) {
        int p = 8 * blk + g;  // this lane's B column: pixel p
        p = p < pixels ? p : pixels - 1;
        const int oy = fast_div(p, ow_mul, ow_shift);
        const int ox = p - oy * OW;
        const unsigned char* cell = frame + (oy * sh * FW + ox * sw) * CG;
        int acc[4] = {0, 0, 0, 0};
        int xsum = 0;
#pragma unroll
        for (int s = 0; s < KSTEPS; ++s) {
            const unsigned b0 =
                tap_cell[s][0] < 0 ? 0u : *reinterpret_cast<const unsigned*>(cell + tap_cell[s][0]);
            const unsigned b1 =
                tap_cell[s][1] < 0 ? 0u : *reinterpret_cast<const unsigned*>(cell + tap_cell[s][1]);
            if constexpr (ZW) xsum = conv::byte_sum<XS>(b1, conv::byte_sum<XS>(b0, xsum));
            conv::mma_k32<WS, XS>(acc, a[s], b0, b1);
        }
        // Accumulators: rows g (0, 1) and g + 8 (2, 3) at pixels 8 blk + 2t, + 1.
        unsigned x0 = 0u;
        unsigned x1 = 0u;
        if constexpr (ZW) {
            xsum += __shfl_xor_sync(0xffffffffu, xsum, 1);
            xsum += __shfl_xor_sync(0xffffffffu, xsum, 2);
            x0 = static_cast<unsigned>(__shfl_sync(0xffffffffu, xsum, 8 * t));
            x1 = static_cast<unsigned>(__shfl_sync(0xffffffffu, xsum, 8 * t + 4));
        }
        const int q = 8 * blk + 2 * t;
        const int v0 = static_cast<int>(static_cast<unsigned>(acc[0]) - zw_lo * x0 + bias_lo);
        const int v1 = static_cast<int>(static_cast<unsigned>(acc[1]) - zw_lo * x1 + bias_lo);
        const int v2 = static_cast<int>(static_cast<unsigned>(acc[2]) - zw_hi * x0 + bias_hi);
        const int v3 = static_cast<int>(static_cast<unsigned>(acc[3]) - zw_hi * x1 + bias_hi);
        if ((pixels & 1) == 0 && q < pixels) {  // q even: both pixels in, 8-byte aligned
            if (live_lo) *reinterpret_cast<int2*>(out_lo + q) = make_int2(v0, v1);
            if (live_hi) *reinterpret_cast<int2*>(out_hi + q) = make_int2(v2, v3);
        } else {
            if (live_lo && q < pixels) out_lo[q] = v0;
            if (live_lo && q + 1 < pixels) out_lo[q + 1] = v1;
            if (live_hi && q < pixels) out_hi[q] = v2;
            if (live_hi && q + 1 < pixels) out_hi[q + 1] = v3;
        }
    }
}

}  // namespace dml

#ifdef DMLSERVE_EXPLICIT_INSTANTIATION
#define DML_GR(WT, XT, CG, ZW, WORDS)                                                         \
    template __global__ void dml::conv_int_grouped<WT, XT, CG, ZW, WORDS>(                    \
        const unsigned char*, const unsigned char*, const int*, int*, int, int, int, int, int, \
        int, int, int, int, int, int, int, int, int, int, int, unsigned, unsigned, unsigned,   \
        unsigned, unsigned, unsigned, long long, long long, long long, long long, long long,   \
        long long, long long, long long)
DML_GR(signed char, unsigned char, 16, false, true);
DML_GR(signed char, unsigned char, 8, true, false);
DML_GR(unsigned char, signed char, 32, false, true);
DML_GR(signed char, signed char, 16, true, false);
DML_GR(unsigned char, unsigned char, 32, true, true);
#undef DML_GR
#endif
