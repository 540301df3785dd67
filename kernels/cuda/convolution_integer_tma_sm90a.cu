// CONVOLUTION_INTEGER's 3x3 layers on Hopper's copy engine and warpgroup MMA (PTX for sm_90a
// only): an implicit GEMM whose operands never pass through registers.
//
// Input stored (N, H, W, C) (any 16-byte multiple strides), C a multiple of 64; filter 3 x 3,
// dilation 1, one group, stride 1 or 2 (the same both ways), start pads of 0 or 1 where only
// the first and last output rows and columns have taps outside the image. One CTA forms 64 WM
// output channels x one tile of pixels: BI whole images, or BR output rows of one image (whole
// rows). Its K is the taps (r, s) x chunks of CK channels, one ring stage each: the filter's
// block (64 WM rows x CK bytes of the prepared filter, rows (r, s, c)) and the input's box of
// the tile's pixels shifted by the tap (element strides = the conv strides; TMA writes 0 for
// pixels outside the image), both CK-byte swizzled K-major tiles that wgmma reads as they land.
//
// Warp roles: warpgroup 0's thread 0 issues the copies; its warps 1-3, while the MMAs run, load
// the epilogue's table, work out each pixel's output offset and class and, where a filter zero
// point is not 0, each pixel's sum S(p) (the tile's input region, copied once beside the ring,
// or where WIN the windows as they land: each input pixel's channels summed once, then the
// window's nine); the WM x WN consumer
// warpgroups each multiply 64 channels x NP of the tile's pixels (WN = 2: the tile's first and
// second NP) and store the output.
//
// With x0 the input with 0 outside the image, the MMAs sum x0 w; DirectML pads with z_x, so
//   out = sum (x - z_x)(w - z_w) over the taps inside = sum x0 w - z_w S(p) + z_x T[m][class(p)],
// S(p) = sum x0 over the taps and channels, T = - sum_inside w + z_w C taps_inside: one of nine
// values per channel by the pixel's class (first / inner / last row x column), made with the
// prepared filter (convolution_integer's launcher), all modulo 2^32.

#include "convolution_integer_sm90a.cu"

namespace dml {
namespace tma {

// cuda.h's CUtensorMap: 128 opaque bytes, 64-byte aligned (a __grid_constant__ parameter).
struct alignas(64) TensorMap {
    unsigned long long words[16];
};

__device__ __forceinline__ void load2d(unsigned dst, const TensorMap& map, int c0, int c1,
                                       unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
        "l"(reinterpret_cast<unsigned long long>(&map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}
__device__ __forceinline__ void load4d(unsigned dst, const TensorMap& map, int c0, int c1, int c2,
                                       int c3, unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(dst),
        "l"(reinterpret_cast<unsigned long long>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
        "r"(bar)
        : "memory");
}
__device__ __forceinline__ void expect_bytes(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

}  // namespace tma

// Grid: tiles_m x tiles_p CTAs (M fastest: a tile's M blocks read the same input boxes at
// about the same time), 128 (1 + WM WN) threads. Shared memory: STAGES stages of the filter
// block and the input box on 1024 bytes (where WIN, the filter block alone); where WIN, the
// two window buffers (below), or else where ZW the tile's input region (`region_slice` bytes
// for each chunk of CK channels: images x region_h x region_w pixels, 0 outside the image);
// then the table's rows [BM][9]; per pixel of the consumers' WN NP its output offset in the
// tile, then its sum; where ZW, the channel sums of the region's pixels; per consumer pixel its
// class (-1: no output). tmr: the region's copy descriptor (where ZW and not WIN; box CK x
// region_w x region_h x images).
//
// WIN (stride 1): the shifted-window form. The K steps run chunk by chunk, its nine
// taps in turn; each chunk's input region (images x region_h x region_w pixels, CK channels,
// swizzled as the stages' boxes) is copied once into one of two window buffers (`region_slice`
// bytes each, on 1024 bytes) and every tap's B operand starts r region_w + s rows into it: a
// consumer column is a region pixel (img, row, col) whose output (row, col) exists where col <
// OW (region_w: the buffer's pixels a row, the region's columns rounded up to 8 where the
// launcher keeps output rows on 32-byte sectors); the ring's stages hold the filter blocks
// alone. The copies bring each input byte of a tile once rather than nine times, for the MMA
// columns of each row's pads. Where ZW, the helpers sum the pixels of each window as it lands (no
// region copy of its own), and each window's buffer waits for them too.
template <typename WT, typename XT, int CK, int NP, int WM, int WN, int STAGES, bool ZW,
          bool WIN>
__global__ void __launch_bounds__(128 * (1 + WM * WN), 1)
    conv_int_tma(const __grid_constant__ tma::TensorMap tmx,
                 const __grid_constant__ tma::TensorMap tmw,
                 const __grid_constant__ tma::TensorMap tmr, const int* __restrict__ w_zp,
                 const int* __restrict__ table, int* __restrict__ out, int N, int C, int M,
                 int OH, int OW, int rows, int images, int tiles_m, int tiles_h, int chunks,
                 int sh, int ph, int pw, int region_h, int region_w, int region_slice,
                 int align, int zx) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __trap();  // built for another target; the launcher sends work here on sm_90 only
#elif defined(__CUDA_ARCH__)
    constexpr bool WS = conv::is_signed_byte<WT>::value;
    constexpr bool XS = conv::is_signed_byte<XT>::value;
    constexpr int BM = 64 * WM;
    // the box lands 8 rows into its block (a swizzle atom): a consumer may start reading up to
    // 7 rows before it (`shift`)
    constexpr int A_BYTES = BM * CK, B_BYTES = WIN ? 0 : (WN * NP + 8) * CK;
    constexpr int STAGE = A_BYTES + B_BYTES;
    constexpr int CONSUMERS = 128 * WM * WN;
    constexpr int HELPERS = 96;  // warpgroup 0's warps 1-3
    constexpr int Q = WN * NP;   // the consumers' pixels
    static_assert(CK == 64 || CK == 128, "CK");
    static_assert(STAGES >= 2, "the region's copy follows the first stage's");
    static_assert(!WIN || STAGES <= 10, "window c + 1 is copied at a K step past the first fill");
    static_assert(WM * WN == 2 || WM * WN == 1, "consumers");
    extern __shared__ unsigned char smem_raw[];  // (aligned on 1024 below)
    // the ring's full and empty barriers; where ZW, the region's and the helpers'; where WIN,
    // the two window buffers' full and empty barriers
    __shared__ __align__(8) unsigned long long bars[2 * STAGES + 6];
    const unsigned base = (conv::smem_addr(smem_raw) + 1023u) & ~1023u;
    unsigned char* const ring = smem_raw + (base - conv::smem_addr(smem_raw));
    // ZW: [chunks][images][region_h][region_w][CK]; WIN: two window buffers, [rows][CK] each
    const unsigned region = base + STAGES * STAGE;
    const int area = region_h * region_w, total = images * area;  // the region's pixels
    int* tbl = reinterpret_cast<int*>(ring + STAGES * STAGE +
                                      (WIN ? 2 * region_slice : (ZW ? chunks * region_slice : 0)));
    int* rel = tbl + BM * 9;  // [Q]: output offset from the tile's first
    int* psum = rel + Q;      // [Q]
    int* csum = psum + Q;     // [images][region_h][region_w]
    signed char* cls = reinterpret_cast<signed char*>(csum + (ZW ? total : 0));  // [Q]
    const unsigned full = conv::smem_addr(bars), empty = full + 8 * STAGES;
    const unsigned region_bar = empty + 8 * STAGES, helpers_bar = region_bar + 8;
    const unsigned win_full = region_bar + 16, win_empty = win_full + 16;  // [2] each (WIN)
    const int tid = threadIdx.x, wg = tid >> 7;
    const int tm = blockIdx.x % tiles_m, tp = blockIdx.x / tiles_m;
    const int m0 = tm * BM;
    const int n0 = (tp / tiles_h) * images, oh0 = (tp % tiles_h) * rows;
    const int pixels = images * rows * OW;  // the box's (some past the output: not stored)
    const unsigned box_bytes = static_cast<unsigned>(pixels) * CK;
    const int KT = 9 * chunks;
    const long long plane = static_cast<long long>(OH) * OW;
    // Consumer column c (of the WN NP) is the tile's pixel c - shift: where `align`, shift is
    // the tile's first output offset modulo 8, so that each 8 columns (32 bytes of a channel's
    // output) start on a 32-byte sector (the launcher sets `align` where every channel's plane
    // is a multiple of 8 pixels and a tile's rows are not).
    const int shift = !WIN && align ? (oh0 * OW) & 7 : 0;
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            tma::init(full + 8 * s, 1);          // the producer's arrival and the stage's bytes
            tma::init(empty + 8 * s, WM * WN);  // one arrival a consumer warpgroup
        }
        if (ZW) {
            if (!WIN) tma::init(region_bar, 1);
            tma::init(helpers_bar, HELPERS);
        }
        if (WIN) {
            for (int b = 0; b < 2; ++b) {
                tma::init(win_full + 8 * b, 1);
                // (one arrival a consumer warpgroup and, where ZW, a helper warp)
                tma::init(win_empty + 8 * b, WM * WN + (ZW ? HELPERS / 32 : 0));
            }
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    // Stage kb: tap (r, s) and channels c CK.. of the filter's K (tap C + c CK): tap kb / chunks,
    // chunk kb % chunks; where WIN, chunk kb / 9, tap kb % 9.
    auto tap_of = [&](int kb) { return WIN ? kb % 9 : kb / chunks; };
    auto chunk_of = [&](int kb) { return WIN ? kb / 9 : kb % chunks; };
    auto load_filter = [&](int kb, unsigned stage) {
        tma::load2d(stage, tmw, tap_of(kb) * C + chunk_of(kb) * CK, m0, full + 8 * (kb % STAGES));
    };
    auto load_input = [&](int kb, unsigned stage) {
        const int tap = tap_of(kb), c = chunk_of(kb);
        const int r = tap / 3, s = tap - 3 * r;
        tma::load4d(stage + A_BYTES + 8 * CK, tmx, c * CK, s - pw, oh0 * sh - ph + r, n0,
                    full + 8 * (kb % STAGES));
    };
    // WIN: chunk c's region into window buffer c % 2 (tmx's box: CK x region_w x region_h x
    // images), once the consumers (and, where ZW, the helpers) are done with chunk c - 2's
    auto load_window = [&](int c) {
        const int b = c & 1;
        if (c >= 2) dml::wg::bar_wait(win_empty + 8 * b, ((c >> 1) - 1) & 1);
        tma::expect_bytes(win_full + 8 * b, static_cast<unsigned>(total * CK));
        tma::load4d(region + b * region_slice, tmx, c * CK, -pw, oh0 - ph, n0, win_full + 8 * b);
    };
    if (wg == 0) {
        if (tid == 0) {
            // The filter is the registration's (written before the grid ahead began): its first
            // blocks come in while that grid ends; the input, once it has.
            const int first = KT < STAGES ? KT : STAGES;
            for (int kb = 0; kb < first; ++kb) {
                const unsigned stage = base + kb * STAGE;
                tma::expect_bytes(full + 8 * kb, A_BYTES + (WIN ? 0u : box_bytes));
                load_filter(kb, stage);
            }
            conv::dependent_start();
            if (WIN) {  // both buffers' first chunks; each later one once its buffer is free
                load_window(0);
                if (chunks > 1) load_window(1);
            }
            // (the region right after the first stage: the helpers' sums then take the time of
            // the MMAs, not of the ring's first fill, which the L2's bandwidth bounds)
            constexpr int REGION_AT = 1;
            for (int kb = 0; kb < first; ++kb) {
                if (ZW && !WIN && kb == REGION_AT) {
                    tma::expect_bytes(region_bar, static_cast<unsigned>(chunks * total * CK));
                    for (int c = 0; c < chunks; ++c) {
                        tma::load4d(region + c * region_slice, tmr, c * CK, -pw, oh0 * sh - ph,
                                    n0, region_bar);
                    }
                }
                if (!WIN) load_input(kb, base + kb * STAGE);
            }
            for (int kb = STAGES; kb < KT; ++kb) {
                const int s = kb % STAGES;
                dml::wg::bar_wait(empty + 8 * s, ((kb / STAGES) - 1) & 1);
                const unsigned stage = base + s * STAGE;
                tma::expect_bytes(full + 8 * s, A_BYTES + (WIN ? 0u : box_bytes));
                load_filter(kb, stage);
                if (!WIN) load_input(kb, stage);
                // (chunk c + 1's window into chunk c - 1's buffer, which the consumers give
                // back at chunk c's first tap: a chunk's K steps ahead of its use)
                const int c = chunk_of(kb);
                if (WIN && tap_of(kb) == 1 && c >= 1 && c + 1 < chunks) load_window(c + 1);
            }
        } else if (tid >= 32) {
            // While the MMAs run: the table's rows, each pixel's output offset and class.
            const int h = tid - 32;
            for (int i = h; i < BM * 9; i += HELPERS) tbl[i] = table[m0 * 9 + i];
            const int per_image = rows * OW;
            for (int col = h; col < Q; col += HELPERS) {
                // (WIN: the column is the region pixel (img, row, ow) of rows region_w wide)
                const int q = col - shift < 0 ? 0 : col - shift;
                const int span = WIN ? area : per_image, width = WIN ? region_w : OW;
                const int img = q / span, row = (q - img * span) / width;
                const int ow = q - img * span - row * width;
                const int n = n0 + img, oh = oh0 + row;
                const int rc = oh == 0 ? 0 : (oh == OH - 1 ? 2 : 1);
                const int cc = ow == 0 ? 0 : (ow == OW - 1 ? 2 : 1);
                const bool ok = col >= shift && img < images && row < rows && ow < OW &&
                                n < N && oh < OH;
                cls[col] = static_cast<signed char>(ok ? 3 * rc + cc : -1);
                rel[col] = static_cast<int>(img * M * plane) + row * OW + ow;
            }
            conv::dependent_start();
            if constexpr (ZW) {
                // Each region pixel's channel sum, once, 8 lanes a pixel (every lane of a warp
                // takes each round: the shuffles need all 32), from the region's copy or, where
                // WIN, each chunk's window as it lands (the helpers then give it back too);
                // then each output pixel's sum over its window.
                const int lane8 = h & 7;
                // the 16-byte pieces of each pixel in `bytes` (chunk c's at c region_slice), its
                // sums added to those of the chunks before where `add`
                auto sum_pixels = [&](const unsigned char* bytes, int pieces, bool add) {
                    constexpr int U = 4;  // pixels a group of 8 lanes sums at once
                    for (int i0 = h >> 3; i0 - (h >> 3) < total; i0 += U * HELPERS / 8) {
                        int sum[U];
#pragma unroll
                        for (int u = 0; u < U; ++u) sum[u] = 0;
                        for (int v = lane8; v < pieces; v += 8) {
                            const int c = v * 16 / CK, off = v * 16 - c * CK;
                            const unsigned char* const p = bytes + c * region_slice + off;
                            uint4 b[U];
#pragma unroll
                            for (int u = 0; u < U; ++u) {
                                const int i = i0 + u * HELPERS / 8;
                                const int at = (i < total ? i : 0) * CK;
                                b[u] = *reinterpret_cast<const uint4*>(p + at);
                            }
#pragma unroll
                            for (int u = 0; u < U; ++u) {
                                sum[u] = conv::byte_sum<XS>(b[u].x, sum[u]);
                                sum[u] = conv::byte_sum<XS>(b[u].y, sum[u]);
                                sum[u] = conv::byte_sum<XS>(b[u].z, sum[u]);
                                sum[u] = conv::byte_sum<XS>(b[u].w, sum[u]);
                            }
                        }
#pragma unroll
                        for (int u = 0; u < U; ++u) {
#pragma unroll
                            for (int o = 4; o > 0; o >>= 1) {
                                sum[u] += __shfl_xor_sync(0xffffffffu, sum[u], o);
                            }
                            // (a pixel's group is the same for every chunk)
                            const int i = i0 + u * HELPERS / 8;
                            if (lane8 == 0 && i < total) csum[i] = sum[u] + (add ? csum[i] : 0);
                        }
                    }
                };
                if constexpr (WIN) {
                    for (int c = 0; c < chunks; ++c) {
                        dml::wg::bar_wait(win_full + 8 * (c & 1), (c >> 1) & 1);
                        sum_pixels(ring + STAGES * STAGE + (c & 1) * region_slice, CK / 16, c > 0);
                        __syncwarp();
                        if ((h & 31) == 0) tma::arrive(win_empty + 8 * (c & 1));
                    }
                } else {
                    dml::wg::bar_wait(region_bar, 0);
                    sum_pixels(ring + STAGES * STAGE, C / 16, false);
                }
                // (the helpers meet on a shared-memory barrier rather than a named one, which
                // the race checker orders with the named barrier after it)
                tma::arrive(helpers_bar);
                dml::wg::bar_wait(helpers_bar, 0);
                for (int col = h; col < Q; col += HELPERS) {
                    // (the column's image, row and column, as for its class above)
                    const int q = col - shift < 0 ? 0 : col - shift;
                    const int span = WIN ? area : per_image, width = WIN ? region_w : OW;
                    const int img = q / span, row = (q - img * span) / width;
                    const int ow = q - img * span - row * width;
                    int sum = 0;
                    if (cls[col] >= 0) {
                        const int* c0 = csum + (img * region_h + row * sh) * region_w + ow * sh;
#pragma unroll
                        for (int r = 0; r < 3; ++r) {
#pragma unroll
                            for (int s = 0; s < 3; ++s) sum += c0[r * region_w + s];
                        }
                    }
                    psum[col] = sum;
                }
            }
            // (a sync, not an arrive: the helpers have nothing left to do, and their writes are
            // ordered before the consumers' reads as the memory model and its checkers see it)
            asm volatile("bar.sync 1, %0;" ::"n"(CONSUMERS + HELPERS) : "memory");
        }
        return;
    }
    const int cw = wg - 1, wm = cw % WM, wn = cw / WM;
    const int lane = tid & 31, warp = (tid >> 5) & 3, g = lane >> 2, t = lane & 3;
    const int ml = wm * 64 + warp * 16 + g;  // the CTA's channel (and + 8)
    unsigned zw[2];  // (the registration's, as the table: read before the grid ahead ends)
    bool live[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int m = m0 + ml + 8 * h;
        live[h] = m < M;
        zw[h] = ZW && live[h] ? static_cast<unsigned>(w_zp[m]) : 0u;
    }
    conv::dependent_start();
    int acc[NP / 2];  // (the first MMA ignores its values: no instruction but wgmma writes them)
    for (int kb = 0; kb < KT; ++kb) {
        const int s = kb % STAGES;
        const int tap = tap_of(kb), c = chunk_of(kb);
        if (WIN && tap == 0) dml::wg::bar_wait(win_full + 8 * (c & 1), (c >> 1) & 1);
        dml::wg::bar_wait(full + 8 * s, (kb / STAGES) & 1);
        dml::wg::fence();
        const unsigned a = base + s * STAGE + wm * 64 * CK;
        const unsigned b = WIN ? region + (c & 1) * region_slice +
                                     ((tap / 3) * region_w + tap % 3 + wn * NP) * CK
                               : base + s * STAGE + A_BYTES + (8 - shift + wn * NP) * CK;
#pragma unroll
        for (int j = 0; j < CK / 32; ++j) {
            dml::wg::mma<NP, WS, XS>(acc, dml::wg::swizzled_desc<CK>(a + 32 * j),
                                     dml::wg::swizzled_desc<CK>(b + 32 * j), kb > 0 || j > 0);
        }
        dml::wg::commit();
        dml::wg::wait<1>();  // the stage before is read: give it back
        if (kb > 0 && (tid & 127) == 0) tma::arrive(empty + 8 * ((kb - 1) % STAGES));
        // (and at a chunk's first tap, the chunk before's window)
        if (WIN && tap == 0 && c > 0 && (tid & 127) == 0) {
            tma::arrive(win_empty + 8 * ((c - 1) & 1));
        }
    }
    dml::wg::wait<0>();
    dml::wg::fence_operands(acc);

    // acc[4 j + 2 h + e]: channel 16 warp + g + 8 h, pixel 8 j + 2 t + e of the warpgroup's NP.
    asm volatile("bar.sync 1, %0;" ::"n"(CONSUMERS + HELPERS) : "memory");  // helpers' work in
    int* const tile_out = out + ((static_cast<long long>(n0) * M + m0 + ml) * plane + oh0 * OW);
#pragma unroll
    for (int j = 0; j < NP / 8; ++j) {
        const int q = wn * NP + 8 * j + 2 * t;
        const int2 r = *reinterpret_cast<const int2*>(rel + q);
        const int c0 = cls[q], c1 = cls[q + 1];
        int2 ps = make_int2(0, 0);
        if constexpr (ZW) ps = *reinterpret_cast<const int2*>(psum + q);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if (!live[h]) continue;
            const int* tb = tbl + (ml + 8 * h) * 9;
            const unsigned x_zp = static_cast<unsigned>(zx);
            const unsigned v0 = static_cast<unsigned>(acc[4 * j + 2 * h]) +
                                x_zp * static_cast<unsigned>(tb[c0 < 0 ? 0 : c0]) -
                                zw[h] * static_cast<unsigned>(ps.x);
            const unsigned v1 = static_cast<unsigned>(acc[4 * j + 2 * h + 1]) +
                                x_zp * static_cast<unsigned>(tb[c1 < 0 ? 0 : c1]) -
                                zw[h] * static_cast<unsigned>(ps.y);
            int* o = tile_out + 8 * h * plane;
            if (c0 >= 0 && c1 >= 0 && r.y == r.x + 1 &&
                (reinterpret_cast<unsigned long long>(o + r.x) & 7) == 0) {
                *reinterpret_cast<int2*>(o + r.x) =
                    make_int2(static_cast<int>(v0), static_cast<int>(v1));
            } else {
                if (c0 >= 0) o[r.x] = static_cast<int>(v0);
                if (c1 >= 0) o[r.y] = static_cast<int>(v1);
            }
        }
    }
#endif
}

}  // namespace dml

#ifdef DMLSERVE_EXPLICIT_INSTANTIATION
#define DML_TMA_INST(WT, XT, CK, NP, WM, WN, ST, ZW, WIN)                                   \
    template __global__ void dml::conv_int_tma<WT, XT, CK, NP, WM, WN, ST, ZW, WIN>(        \
        const __grid_constant__ dml::tma::TensorMap,                                        \
        const __grid_constant__ dml::tma::TensorMap,                                        \
        const __grid_constant__ dml::tma::TensorMap, const int*, const int*, int*, int, int, \
        int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int)
DML_TMA_INST(signed char, unsigned char, 128, 208, 2, 1, 4, false, false);
DML_TMA_INST(unsigned char, signed char, 128, 224, 2, 1, 4, true, false);
DML_TMA_INST(signed char, signed char, 64, 112, 1, 2, 6, true, false);
DML_TMA_INST(unsigned char, unsigned char, 64, 48, 2, 1, 8, false, false);
DML_TMA_INST(signed char, unsigned char, 128, 256, 1, 1, 4, true, false);
DML_TMA_INST(signed char, unsigned char, 128, 208, 2, 1, 4, false, true);
DML_TMA_INST(unsigned char, unsigned char, 64, 208, 1, 2, 5, false, true);
DML_TMA_INST(signed char, unsigned char, 128, 208, 2, 1, 4, true, true);
DML_TMA_INST(unsigned char, signed char, 64, 112, 1, 2, 3, true, true);
#undef DML_TMA_INST
#endif
