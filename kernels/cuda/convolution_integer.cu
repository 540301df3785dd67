// CONVOLUTION_INTEGER (SEMANTICS.md §6): int8/uint8 cross-correlation with int32 output.
//
// Two paths, chosen on the host:
//  * tensor cores: the input goes NCHW -> (N, H, W, G, Cgp) and the filter KCRS -> K(RS)Cgp
//    (Cgp = channels per group rounded up to 16), then an implicit GEMM
//    Out^T[m, p] = sum_k W[m, k] * X'[p, k] on mma.sync m16n8k32 with a cp.async ring in shared
//    memory. Zero points never touch the operands: with x'' the input where out-of-image taps and
//    padded channels hold z_x, and padded filter channels 0,
//      sum (x''-z_x)(w-z_w[m]) = sum x''w - z_w[m] * sum x'' - z_x * sum w[m] + K' z_x z_w[m]
//    (padded entries contribute (z_x-z_x)(..) = 0). The last two terms are per channel
//    (`bias`, from the filter prep); sum x'' per pixel comes from a dp4a over the B fragments,
//    only when some z_w is non-zero. All sums wrap modulo 2^32 (no .satfinite), which keeps the
//    expansion exact.
//  * CUDA cores (depthwise, few channels or outputs per group, zero points the 8-bit operands
//    cannot hold): a shared-memory tiled kernel (conv_int_tiled); where its tile does not fit,
//    one thread per output element straight from the strided tensors (conv_int_direct); both
//    live in convolution_integer_direct.cu.
// The operand preparation (filter and input layouts, the z_x frame) is in
// convolution_integer_prep.cu; the Hopper GEMM in convolution_integer_sm90a.cu.

#include "convolution_integer_common.cuh"

namespace dml {

// ------------------------------------------------------------------------------------------
// Tensor-core implicit GEMM. CTA tile BM (output channels) x BN (pixels) x 64 bytes of K,
// 2x2 warps, STAGES-deep cp.async ring. Shared rows are 64 bytes = 4 chunks of 16 B, chunk
// index XOR-swizzled with (row >> 1) & 3 so ldmatrix's 8-row phases hit 8 distinct bank groups.
struct IgemmParams {
    int H, W, OH, OW, R, S;
    int stride_h, stride_w, dil_h, dil_w, pad_h, pad_w;
    int M, Mg, Cgp, slots, Kp, NP, P;
    unsigned zx_pattern;  // z_x's byte in all four bytes
};

template <int BM, int BN, int STAGES>
struct IgemmShape {
    static constexpr int WM = 2, WN = 2, THREADS = WM * WN * 32;
    static constexpr int TM = BM / WM, TN = BN / WN;
    static constexpr int MI = TM / 16, NI = TN / 8;
    static constexpr int A_ITERS = BM * 4 / THREADS, B_ITERS = BN * 4 / THREADS;
    static constexpr int STAGE_BYTES = (BM + BN) * 64;
    static constexpr int SMEM = STAGES * STAGE_BYTES;
    static_assert(MI >= 1 && NI >= 2 && NI % 2 == 0, "warp tile");
    static_assert(A_ITERS >= 1 && B_ITERS >= 1, "load split");
};

__device__ __forceinline__ int swz(int row, int chunk) {
    return row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4);
}

template <typename WT, typename XT, int BM, int BN, int STAGES, bool ZW>
__global__ void __launch_bounds__(IgemmShape<BM, BN, STAGES>::THREADS)
    conv_int_igemm(const unsigned char* __restrict__ wp, const unsigned char* __restrict__ xn,
                   const int* __restrict__ w_zp, const int* __restrict__ bias,
                   int* __restrict__ out, int H, int W, int OH, int OW, int R, int S,
                   int stride_h, int stride_w, int dil_h, int dil_w, int pad_h, int pad_w, int M,
                   int Mg, int Cgp, int slots, int Kp, int NP, int P, unsigned zx_pattern) {
    constexpr bool WS = conv::is_signed_byte<WT>::value;
    constexpr bool XS = conv::is_signed_byte<XT>::value;
    // Scalars arrive one by one (plain launch arguments); grouped here for readability.
    const IgemmParams p{H,       W,        OH,    OW,    R,     S,   stride_h, stride_w, dil_h,
                        dil_w,   pad_h,    pad_w, M,     Mg,    Cgp, slots,    Kp,       NP,
                        P,       zx_pattern};
    using Sh = IgemmShape<BM, BN, STAGES>;
    extern __shared__ __align__(128) unsigned char smem[];
    const unsigned smem_base = conv::smem_addr(smem);

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int wm = warp / Sh::WN;
    const int wn = warp % Sh::WN;
    const int g = blockIdx.z;
    const int m0 = blockIdx.y * BM;  // within the group
    const int q0 = blockIdx.x * BN;  // flat pixel (n, oh, ow)

    // ---- per-thread load state: one 16-byte chunk column, A_ITERS / B_ITERS rows ----------
    const int chunk = tid & 3;
    const int row0 = tid >> 2;
    constexpr int ROWS_PER_PASS = Sh::THREADS / 4;

    const unsigned char* a_src[Sh::A_ITERS];  // row starts; + k_next per tile
    bool a_ok[Sh::A_ITERS];
#pragma unroll
    for (int i = 0; i < Sh::A_ITERS; ++i) {
        const int mr = m0 + row0 + i * ROWS_PER_PASS;
        a_ok[i] = mr < p.Mg;
        a_src[i] = wp + static_cast<long long>(g * p.Mg + (a_ok[i] ? mr : 0)) * p.Kp;
    }
    const unsigned char* b_src[Sh::B_ITERS];
    int b_ih[Sh::B_ITERS], b_iw[Sh::B_ITERS];
#pragma unroll
    for (int i = 0; i < Sh::B_ITERS; ++i) {
        const int q = q0 + row0 + i * ROWS_PER_PASS;
        if (q < p.NP) {
            const int n = q / p.P;
            const int pp = q - n * p.P;
            const int oh = pp / p.OW;
            const int ow = pp - oh * p.OW;
            b_ih[i] = oh * p.stride_h - p.pad_h;
            b_iw[i] = ow * p.stride_w - p.pad_w;
            b_src[i] = xn + static_cast<long long>(n) * p.H * p.W * p.slots +
                       static_cast<long long>(g) * p.Cgp;
        } else {
            b_ih[i] = -0x40000000;  // never inside the image: filled, never stored
            b_iw[i] = 0;
            b_src[i] = xn;
        }
    }
    // (r, s, c) of this thread's chunk in the current K tile; advanced tile by tile.
    int kc = chunk * 16;
    int kr, ks;
    {
        const int rs = kc / p.Cgp;
        kc -= rs * p.Cgp;
        kr = rs / p.S;
        ks = rs - kr * p.S;
    }
    int k_next = chunk * 16;  // flat k of the next tile's chunk

    auto load_tile = [&](int stage) {
        const unsigned a_base = smem_base + stage * Sh::STAGE_BYTES;
        const unsigned b_base = a_base + BM * 64;
        const bool k_ok = k_next < p.Kp;
#pragma unroll
        for (int i = 0; i < Sh::A_ITERS; ++i) {
            const int row = row0 + i * ROWS_PER_PASS;
            const bool ok = a_ok[i] && k_ok;
            conv::cp_async16(a_base + swz(row, chunk), ok ? a_src[i] + k_next : wp, ok ? 16 : 0);
        }
        const int dy = kr * p.dil_h;
        const int dx = ks * p.dil_w;
#pragma unroll
        for (int i = 0; i < Sh::B_ITERS; ++i) {
            const int row = row0 + i * ROWS_PER_PASS;
            const unsigned dst = b_base + swz(row, chunk);
            const int ih = b_ih[i] + dy;
            const int iw = b_iw[i] + dx;
            if (!k_ok) {
                conv::st_shared16(dst, 0u);  // beyond K': neither in the GEMM nor in sum x''
            } else if (static_cast<unsigned>(ih) < static_cast<unsigned>(p.H) &&
                       static_cast<unsigned>(iw) < static_cast<unsigned>(p.W)) {
                conv::cp_async16(
                    dst, b_src[i] + (static_cast<long long>(ih) * p.W + iw) * p.slots + kc, 16);
            } else {
                conv::st_shared16(dst, p.zx_pattern);  // padding tap = z_x
            }
        }
        // advance to the next K tile (64 bytes = 4 chunks of 16 <= 4 channel wraps)
        k_next += 64;
        kc += 64;
        while (kc >= p.Cgp) {
            kc -= p.Cgp;
            if (++ks == p.S) {
                ks = 0;
                ++kr;
            }
        }
    };

    int acc[Sh::MI][Sh::NI][4];
#pragma unroll
    for (int i = 0; i < Sh::MI; ++i)
#pragma unroll
        for (int j = 0; j < Sh::NI; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0;
    int xsum[Sh::NI];
#pragma unroll
    for (int j = 0; j < Sh::NI; ++j) xsum[j] = 0;

    const int KT = (p.Kp + 63) / 64;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) load_tile(s);
        conv::cp_async_commit();
    }

    // ldmatrix lane roles (see the m16n8k32 fragment layouts in the PTX ISA):
    // A x4 = rows {0-7, 8-15} x chunks {0, 1}; B x4 = pixel rows {0-7, 8-15} x chunks {0, 1}.
    const int a_row = wm * Sh::TM + (lane & 7) + ((lane >> 3) & 1) * 8;
    const int a_chk = lane >> 4;
    const int b_row = wn * Sh::TN + (lane & 7) + (lane >> 4) * 8;
    const int b_chk = (lane >> 3) & 1;

    for (int kt = 0; kt < KT; ++kt) {
        conv::cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (kt + STAGES - 1 < KT) load_tile((kt + STAGES - 1) % STAGES);
        conv::cp_async_commit();

        const unsigned a_base = smem_base + (kt % STAGES) * Sh::STAGE_BYTES;
        const unsigned b_base = a_base + BM * 64;
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
            unsigned af[Sh::MI][4];
            unsigned bf[Sh::NI][2];
#pragma unroll
            for (int i = 0; i < Sh::MI; ++i) {
                conv::ldmatrix_x4(af[i], a_base + swz(a_row + i * 16, kk * 2 + a_chk));
            }
#pragma unroll
            for (int j = 0; j < Sh::NI; j += 2) {
                unsigned r[4];
                conv::ldmatrix_x4(r, b_base + swz(b_row + j * 8, kk * 2 + b_chk));
                bf[j][0] = r[0];
                bf[j][1] = r[1];
                bf[j + 1][0] = r[2];
                bf[j + 1][1] = r[3];
            }
            if constexpr (ZW) {
#pragma unroll
                for (int j = 0; j < Sh::NI; ++j) {
                    xsum[j] = conv::byte_sum<XS>(bf[j][0], xsum[j]);
                    xsum[j] = conv::byte_sum<XS>(bf[j][1], xsum[j]);
                }
            }
#pragma unroll
            for (int i = 0; i < Sh::MI; ++i)
#pragma unroll
                for (int j = 0; j < Sh::NI; ++j)
                    conv::mma_k32<WS, XS>(acc[i][j], af[i], bf[j][0], bf[j][1]);
        }
    }
    conv::cp_async_wait<0>();

    // ---- epilogue: out = acc - z_w[m] * sum x''[p] + bias[m], NCHW ---------------------------
    const int gid = lane >> 2;
    const int tig = lane & 3;
    int xs_col[Sh::NI][2];
#pragma unroll
    for (int j = 0; j < Sh::NI; ++j) {
        int v = xsum[j];
        if constexpr (ZW) {
            v += __shfl_xor_sync(0xffffffffu, v, 1);
            v += __shfl_xor_sync(0xffffffffu, v, 2);
        }
        // lane 4c holds the sum of column c of this n8 tile
        xs_col[j][0] = __shfl_sync(0xffffffffu, v, (2 * tig) * 4);
        xs_col[j][1] = __shfl_sync(0xffffffffu, v, (2 * tig + 1) * 4);
    }
    long long col_off[Sh::NI][2];
#pragma unroll
    for (int j = 0; j < Sh::NI; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int q = q0 + wn * Sh::TN + j * 8 + 2 * tig + e;
            if (q < p.NP) {
                const int n = q / p.P;
                col_off[j][e] = static_cast<long long>(n) * p.M * p.P + (q - n * p.P);
            } else {
                col_off[j][e] = -1;
            }
        }
#pragma unroll
    for (int i = 0; i < Sh::MI; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int mr = m0 + wm * Sh::TM + i * 16 + gid + 8 * h;
            if (mr >= p.Mg) continue;
            const int m = g * p.Mg + mr;
            const unsigned zw = ZW ? static_cast<unsigned>(w_zp[m]) : 0u;
            const unsigned bm = static_cast<unsigned>(bias[m]);
            int* orow = out + static_cast<long long>(m) * p.P;
#pragma unroll
            for (int j = 0; j < Sh::NI; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    if (col_off[j][e] < 0) continue;
                    unsigned v = static_cast<unsigned>(acc[i][j][2 * h + e]) + bm;
                    if constexpr (ZW) v -= zw * static_cast<unsigned>(xs_col[j][e]);
                    orow[col_off[j][e]] = static_cast<int>(v);
                }
        }
}

}  // namespace dml

#ifdef DMLSERVE_EXPLICIT_INSTANTIATION
#define IGEMM_ARGS                                                                              \
    const unsigned char*, const unsigned char*, const int*, const int*, int*, int, int, int, int, \
        int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, unsigned
template __global__ void dml::conv_int_igemm<signed char, unsigned char, 128, 128, 4, false>(
    IGEMM_ARGS);
template __global__ void dml::conv_int_igemm<signed char, unsigned char, 64, 128, 4, true>(
    IGEMM_ARGS);
template __global__ void dml::conv_int_igemm<unsigned char, signed char, 128, 64, 4, false>(
    IGEMM_ARGS);
template __global__ void dml::conv_int_igemm<signed char, signed char, 64, 64, 4, false>(
    IGEMM_ARGS);
template __global__ void dml::conv_int_igemm<unsigned char, unsigned char, 32, 128, 4, true>(
    IGEMM_ARGS);
#undef IGEMM_ARGS
#endif
