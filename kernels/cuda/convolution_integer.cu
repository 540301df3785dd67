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


#include "convolution_integer_common.cuh"

namespace dml {

// ------------------------------------------------------------------------------------------
// Filter prep: w (M, Cg, R, S) strided -> wp (M, R*S*Cgp), zero in the padded channels, and
// bias[m] = K' z_x z_w[m] - z_x * sum w[m] (mod 2^32), K' = R*S*Cgp. One block per m; each
// thread owns 4 consecutive channels (one 4-byte store, Cgp is a multiple of 16) and walks the
// R*S taps with no per-element division.
template <typename WT>
__global__ void conv_int_prep_w(const unsigned char* __restrict__ w,
                                const int* __restrict__ w_zp, unsigned char* __restrict__ wp,
                                int* __restrict__ bias, int Cg, int S, int Cgp, int Kp, int x_zp,
                                long long ws_m, long long ws_c, long long ws_r, long long ws_s) {
    constexpr bool WS = conv::is_signed_byte<WT>::value;
    __shared__ int partial[32];
    const int m = blockIdx.x;
    const int RS = Kp / Cgp;
    const unsigned char* wm = w + m * ws_m;
    unsigned* dst = reinterpret_cast<unsigned*>(wp + static_cast<long long>(m) * Kp);
    int sum = 0;
    for (int c4 = 4 * threadIdx.x; c4 < Cgp; c4 += 4 * blockDim.x) {
        int r = 0;
        int s = 0;
        for (int rs = 0; rs < RS; ++rs) {
            const unsigned char* src = wm + r * ws_r + s * ws_s;
            unsigned v = 0u;
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                if (c4 + b < Cg) v |= static_cast<unsigned>(src[(c4 + b) * ws_c]) << (8 * b);
            }
            dst[(rs * Cgp + c4) >> 2] = v;
            sum = conv::byte_sum<WS>(v, sum);
            if (++s == S) {
                s = 0;
                ++r;
            }
        }
    }
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned total = 0;
        for (int i = 0; i < static_cast<int>(blockDim.x >> 5); ++i) {
            total += static_cast<unsigned>(partial[i]);
        }
        const unsigned zx = static_cast<unsigned>(x_zp);
        const unsigned zw = static_cast<unsigned>(w_zp[m]);
        bias[m] = static_cast<int>(static_cast<unsigned>(Kp) * zx * zw - zx * total);
    }
}

// ------------------------------------------------------------------------------------------
// Input prep: x (N, C, H, W) strided -> xn (N, Hp, Wp, G*Cgp), pixel (h, w) at (h + ph, w + pw);
// padded channels hold z_x (conv_int_fill_border fills the pixels around the image).
// Block: 64 pixels x 64 channel slots through shared memory; 16-byte stores.
// VEC: each (n, c) plane is contiguous (W stride 1, H stride W) and 16-byte aligned, so phase 1
// reads 16 consecutive pixels of one channel per thread instead of 16 single-byte gathers.
template <bool VEC>
__global__ void __launch_bounds__(256) conv_int_prep_x(
    const unsigned char* __restrict__ x, unsigned char* __restrict__ xn, int H, int W, int Cg,
    int Cgp, int slots, int Hp, int Wp, int ph, int pw, unsigned zx_byte, long long xs_n,
    long long xs_c, long long xs_h, long long xs_w) {
    constexpr int ROW = 65;  // odd row length: the column gathers below hit distinct banks
    __shared__ unsigned char tile[64 * ROW];
    const int HW = H * W;
    const int pix0 = blockIdx.x * 64;
    const int slot0 = blockIdx.y * 64;
    const long long n = blockIdx.z;
    if constexpr (VEC) {
        const int row = threadIdx.x >> 2;  // channel slot within the tile
        const int seg = (threadIdx.x & 3) * 16;  // 16 pixels
        const int slot = slot0 + row;
        const int g = slot / Cgp;
        const int cc = slot - g * Cgp;
        const int pix = pix0 + seg;
        unsigned word[4] = {zx_byte * 0x01010101u, zx_byte * 0x01010101u, zx_byte * 0x01010101u,
                            zx_byte * 0x01010101u};
        if (slot < slots && cc < Cg && pix < HW) {
            const unsigned char* xp = x + n * xs_n + (static_cast<long long>(g) * Cg + cc) * xs_c;
            if (pix + 16 <= HW) {
                const uint4 v = *reinterpret_cast<const uint4*>(xp + pix);
                word[0] = v.x;
                word[1] = v.y;
                word[2] = v.z;
                word[3] = v.w;
            } else {  // ragged end of the plane: bytes, unrolled so word[] stays in registers
#pragma unroll
                for (int b = 0; b < 16; ++b) {
                    if (b < HW - pix) {
                        const unsigned sh = 8 * (b & 3);
                        word[b >> 2] =
                            (word[b >> 2] & ~(0xFFu << sh)) | (unsigned(xp[pix + b]) << sh);
                    }
                }
            }
        }
#pragma unroll
        for (int b = 0; b < 16; ++b) {
            tile[row * ROW + seg + b] = static_cast<unsigned char>(word[b >> 2] >> (8 * (b & 3)));
        }
    } else {
        const int pl = threadIdx.x & 63;
        const int pix = pix0 + pl;
        if (pix < HW) {
            const int h = pix / W;
            const int wc = pix - h * W;
            const unsigned char* xp = x + n * xs_n + h * xs_h + wc * xs_w;
            unsigned char v[16];
#pragma unroll
            for (int i = 0; i < 16; ++i) {
                const int slot = slot0 + (threadIdx.x >> 6) + 4 * i;
                const int g = slot / Cgp;
                const int cc = slot - g * Cgp;
                v[i] = static_cast<unsigned char>(zx_byte);
                if (slot < slots && cc < Cg) v[i] = xp[(static_cast<long long>(g) * Cg + cc) * xs_c];
            }
#pragma unroll
            for (int i = 0; i < 16; ++i) tile[((threadIdx.x >> 6) + 4 * i) * ROW + pl] = v[i];
        }
    }
    __syncthreads();
    const int pl = threadIdx.x >> 2;
    const int q = threadIdx.x & 3;
    const int pix = pix0 + pl;
    const int slot = slot0 + 16 * q;
    if (pix < HW && slot < slots) {
        unsigned word[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            unsigned v = 0;
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                v |= static_cast<unsigned>(tile[(16 * q + 4 * j + b) * ROW + pl]) << (8 * b);
            }
            word[j] = v;
        }
        uint4 vec = make_uint4(word[0], word[1], word[2], word[3]);
        const int h = pix / W;
        const long long at = (n * Hp + h + ph) * Wp + (pix - h * W) + pw;
        *reinterpret_cast<uint4*>(xn + at * slots + slot) = vec;
    }
}

// The pixels of xn (N, Hp, Wp, slots) around the image (rows [ph, ph + H) x columns
// [pw, pw + W)) all hold z_x, so every tap of the GEMM reads inside the buffer. Grid: x over
// the CHUNK-byte (16) pieces of one padded row, y = padded row, z = image.
template <int CHUNK>
__global__ void conv_int_fill_border(unsigned char* __restrict__ xn, int H, int W, int Hp, int Wp,
                                     int ph, int pw, int row_chunks, unsigned zx_pattern) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= row_chunks) return;
    const int hq = blockIdx.y;
    const int wq = i / (row_chunks / Wp);
    if (hq >= ph && hq < ph + H && wq >= pw && wq < pw + W) return;
    const long long at = (static_cast<long long>(blockIdx.z) * Hp + hq) * row_chunks + i;
    static_assert(CHUNK == sizeof(uint4), "one 16-byte store per piece");
    reinterpret_cast<uint4*>(xn)[at] = make_uint4(zx_pattern, zx_pattern, zx_pattern, zx_pattern);
}

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
template __global__ void dml::conv_int_prep_x<true>(const unsigned char*, unsigned char*, int, int,
                                               int, int, int, int, int, int, int, unsigned,
                                               long long, long long, long long, long long);
template __global__ void dml::conv_int_prep_x<false>(const unsigned char*, unsigned char*, int, int,
                                                int, int, int, int, int, int, int, unsigned,
                                                long long, long long, long long, long long);
template __global__ void dml::conv_int_fill_border<16>(unsigned char*, int, int, int, int, int,
                                                      int, int, unsigned);
template __global__ void dml::conv_int_prep_w<signed char>(const unsigned char*, const int*, unsigned char*,
                                               int*, int, int, int, int, int, long long,
                                               long long, long long, long long);
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
