// CONVOLUTION_INTEGER implicit GEMM on Hopper's warpgroup MMA (wgmma, PTX for sm_90a only).
//
// The same GEMM as conv_int_igemm in convolution_integer.cu (Out^T[m, p] = sum_k W[m, k] X'[p, k]
// over the prepared filter and the (N, H, W, G*Cgp) input, zero points in the epilogue), with the
// tensor-core work issued per warpgroup: each of the CTA's BM / 64 warpgroups owns 64 output
// channels x BN pixels and reads both operands straight from shared memory, so no operand passes
// through registers (mma.sync needs an ldmatrix per fragment). The shared rows are the mma.sync
// kernel's: 64 bytes of K per row, 16-byte chunks XOR-swizzled by (row >> 1) & 3, which is
// exactly the hardware's 64-byte swizzle; a K-major operand descriptor with 8-row groups 512
// bytes apart reads them as they are.
//
// Pipeline: STAGES shared stages, loads issued STAGES - 2 tiles ahead with cp.async; a tile's
// wgmma group may still run while the next one is issued (wait_group 1), so a stage is refilled
// only once every warpgroup has passed the barrier after its second-to-last use.
// Sum x'' per pixel (needed when some z_w is non-zero) is taken from shared memory by the thread
// that loaded each chunk, with dp4a, while the tensor cores run.

#include "convolution_integer_common.cuh"

namespace dml {
namespace wg {

// K-major shared-memory matrix descriptor of rows of SW bytes swizzled over SW bytes: start
// address, leading offset (unused with a swizzle), 8 SW bytes between 8-row groups, the mode
// (SW = 128: 1; 64: 2).
template <int SW>
__device__ __forceinline__ unsigned long long swizzled_desc(unsigned addr) {
    static_assert(SW == 64 || SW == 128, "swizzle");
    constexpr unsigned long long mode = SW == 128 ? 1ull : 2ull;
    return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) | (1ull << 16) |
           (static_cast<unsigned long long>(8 * SW >> 4) << 32) | (mode << 62);
}
// Rows of 64 bytes (the mma.sync kernel's shared layout, exactly the 64-byte swizzle).
__device__ __forceinline__ unsigned long long desc(unsigned addr) {
    return swizzled_desc<64>(addr);
}

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// The accumulators are written by wgmma behind the compiler's back: pin them in their
// registers around the asynchronous part (no copy may move across a wait).
template <int N>
__device__ __forceinline__ void fence_operands(int (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// wgmma m64nNk32 for N a multiple of 16 from 48 to 256: the N / 2 accumulators d[0..N/2) as
// "+r" operands %0.., then the two descriptors and the scale-d flag.
#define DML_WG_B(a, b, c, d, e, f, g, h) \
    "%" #a ", %" #b ", %" #c ", %" #d ", %" #e ", %" #f ", %" #g ", %" #h
#define DML_WG_L1 DML_WG_B(0, 1, 2, 3, 4, 5, 6, 7)
#define DML_WG_L2 DML_WG_L1 ", " DML_WG_B(8, 9, 10, 11, 12, 13, 14, 15)
#define DML_WG_L3 DML_WG_L2 ", " DML_WG_B(16, 17, 18, 19, 20, 21, 22, 23)
#define DML_WG_L4 DML_WG_L3 ", " DML_WG_B(24, 25, 26, 27, 28, 29, 30, 31)
#define DML_WG_L5 DML_WG_L4 ", " DML_WG_B(32, 33, 34, 35, 36, 37, 38, 39)
#define DML_WG_L6 DML_WG_L5 ", " DML_WG_B(40, 41, 42, 43, 44, 45, 46, 47)
#define DML_WG_L7 DML_WG_L6 ", " DML_WG_B(48, 49, 50, 51, 52, 53, 54, 55)
#define DML_WG_L8 DML_WG_L7 ", " DML_WG_B(56, 57, 58, 59, 60, 61, 62, 63)
#define DML_WG_L9 DML_WG_L8 ", " DML_WG_B(64, 65, 66, 67, 68, 69, 70, 71)
#define DML_WG_L10 DML_WG_L9 ", " DML_WG_B(72, 73, 74, 75, 76, 77, 78, 79)
#define DML_WG_L11 DML_WG_L10 ", " DML_WG_B(80, 81, 82, 83, 84, 85, 86, 87)
#define DML_WG_L12 DML_WG_L11 ", " DML_WG_B(88, 89, 90, 91, 92, 93, 94, 95)
#define DML_WG_L13 DML_WG_L12 ", " DML_WG_B(96, 97, 98, 99, 100, 101, 102, 103)
#define DML_WG_L14 DML_WG_L13 ", " DML_WG_B(104, 105, 106, 107, 108, 109, 110, 111)
#define DML_WG_L15 DML_WG_L14 ", " DML_WG_B(112, 113, 114, 115, 116, 117, 118, 119)
#define DML_WG_L16 DML_WG_L15 ", " DML_WG_B(120, 121, 122, 123, 124, 125, 126, 127)
#define DML_WG_O(i)                                                                           \
    "+r"(d[i]), "+r"(d[i + 1]), "+r"(d[i + 2]), "+r"(d[i + 3]), "+r"(d[i + 4]), "+r"(d[i + 5]), \
        "+r"(d[i + 6]), "+r"(d[i + 7])
#define DML_WG_O1 DML_WG_O(0)
#define DML_WG_O2 DML_WG_O1, DML_WG_O(8)
#define DML_WG_O3 DML_WG_O2, DML_WG_O(16)
#define DML_WG_O4 DML_WG_O3, DML_WG_O(24)
#define DML_WG_O5 DML_WG_O4, DML_WG_O(32)
#define DML_WG_O6 DML_WG_O5, DML_WG_O(40)
#define DML_WG_O7 DML_WG_O6, DML_WG_O(48)
#define DML_WG_O8 DML_WG_O7, DML_WG_O(56)
#define DML_WG_O9 DML_WG_O8, DML_WG_O(64)
#define DML_WG_O10 DML_WG_O9, DML_WG_O(72)
#define DML_WG_O11 DML_WG_O10, DML_WG_O(80)
#define DML_WG_O12 DML_WG_O11, DML_WG_O(88)
#define DML_WG_O13 DML_WG_O12, DML_WG_O(96)
#define DML_WG_O14 DML_WG_O13, DML_WG_O(104)
#define DML_WG_O15 DML_WG_O14, DML_WG_O(112)
#define DML_WG_O16 DML_WG_O15, DML_WG_O(120)
// NN / 16 blocks of 8 accumulators; DA, DB, SC: the operand numbers after them.
#define DML_WG_ASM(NN, BLOCKS, DA, DB, SC, ATYPE, BTYPE)                                        \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #SC ", 0;\n"                              \
                 "wgmma.mma_async.sync.aligned.m64n" #NN "k32.s32." ATYPE "." BTYPE " {"         \
                 DML_WG_L##BLOCKS "}, %" #DA ", %" #DB ", p;\n}\n"                               \
                 : DML_WG_O##BLOCKS                                                             \
                 : "l"(da), "l"(db), "r"(scale))
#define DML_WG_CASE(NN, BLOCKS, DA, DB, SC)                                   \
    if constexpr (N == NN) {                                                  \
        if constexpr (WS && XS) {                                             \
            DML_WG_ASM(NN, BLOCKS, DA, DB, SC, "s8", "s8");                   \
        } else if constexpr (WS) {                                            \
            DML_WG_ASM(NN, BLOCKS, DA, DB, SC, "s8", "u8");                   \
        } else if constexpr (XS) {                                            \
            DML_WG_ASM(NN, BLOCKS, DA, DB, SC, "u8", "s8");                   \
        } else {                                                              \
            DML_WG_ASM(NN, BLOCKS, DA, DB, SC, "u8", "u8");                   \
        }                                                                     \
    }

// d (64 x N, the accumulator fragment) = A (64 x 32 bytes) * B (N x 32 bytes)^T, plus d where
// scale is 1 (0: d's old values are ignored).
template <int N, bool WS, bool XS>
__device__ __forceinline__ void mma(int (&d)[N / 2], unsigned long long da, unsigned long long db,
                                    int scale = 1) {
    static_assert(N % 16 == 0 && N >= 48 && N <= 256, "wgmma N");
    DML_WG_CASE(48, 3, 24, 25, 26)
    DML_WG_CASE(64, 4, 32, 33, 34)
    DML_WG_CASE(80, 5, 40, 41, 42)
    DML_WG_CASE(96, 6, 48, 49, 50)
    DML_WG_CASE(112, 7, 56, 57, 58)
    DML_WG_CASE(128, 8, 64, 65, 66)
    DML_WG_CASE(144, 9, 72, 73, 74)
    DML_WG_CASE(160, 10, 80, 81, 82)
    DML_WG_CASE(176, 11, 88, 89, 90)
    DML_WG_CASE(192, 12, 96, 97, 98)
    DML_WG_CASE(208, 13, 104, 105, 106)
    DML_WG_CASE(224, 14, 112, 113, 114)
    DML_WG_CASE(240, 15, 120, 121, 122)
    DML_WG_CASE(256, 16, 128, 129, 130)
}
#undef DML_WG_CASE
#undef DML_WG_ASM

__device__ __forceinline__ int swz(int row, int chunk) {
    return row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4);
}

}  // namespace wg

template <typename WT, typename XT, int BM, int BN, int STAGES, bool ZW>
__global__ void __launch_bounds__(BM * 2)
    conv_int_wgmma(const unsigned char* __restrict__ wp, const unsigned char* __restrict__ xn,
                   const int* __restrict__ w_zp, const int* __restrict__ bias,
                   int* __restrict__ out, int Hp, int Wp, int OW, int S, int stride_h,
                   int stride_w, int dil_h, int dil_w, int M, int Mg, int Cgp, int slots, int Kp,
                   int NP, int P) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __trap();  // built for another target; the launcher sends work here on sm_90 only
#elif defined(__CUDA_ARCH__)
    constexpr bool WS = conv::is_signed_byte<WT>::value;
    constexpr bool XS = conv::is_signed_byte<XT>::value;
    constexpr int THREADS = BM * 2;  // one warpgroup per 64 output channels
    constexpr int ROWS_PER_PASS = THREADS / 4;
    constexpr int A_ITERS = BM / ROWS_PER_PASS;
    constexpr int B_ITERS = BN / ROWS_PER_PASS;
    constexpr int STAGE_BYTES = (BM + BN) * 64;
    static_assert(BM == 64 || BM == 128, "BM");
    static_assert(B_ITERS >= 1 && STAGES >= 3, "tile");
    extern __shared__ unsigned char smem_raw[];
    // The swizzle repeats every 512 bytes; the stages start on a 1024-byte boundary.
    const unsigned raw = conv::smem_addr(smem_raw);
    const unsigned smem_base = (raw + 1023u) & ~1023u;
    // after the stages (or the staging tile, when larger): per-pixel sums and output offsets
    constexpr int STAGED = BM * (BN + 4) * 4;
    constexpr int BODY = STAGES * STAGE_BYTES > STAGED ? STAGES * STAGE_BYTES : STAGED;
    int* xs_sum = reinterpret_cast<int*>(smem_raw + (smem_base - raw) + BODY);
    long long* col_off = reinterpret_cast<long long*>(xs_sum + BN);

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int wgi = tid >> 7;  // warpgroup: output channels 64 wgi ..
    const int g = blockIdx.z;
    const int m0 = blockIdx.y * BM;
    const int q0 = blockIdx.x * BN;

    const int chunk = tid & 3;
    const int row0 = tid >> 2;
    const unsigned char* a_src[A_ITERS];
    bool a_ok[A_ITERS];
#pragma unroll
    for (int i = 0; i < A_ITERS; ++i) {
        const int mr = m0 + row0 + i * ROWS_PER_PASS;
        a_ok[i] = mr < Mg;
        a_src[i] = wp + static_cast<long long>(g * Mg + (a_ok[i] ? mr : 0)) * Kp;
    }
    // xn is the input with every tap's pixel inside it (padded with z_x): a chunk's address is
    // its pixel row's start plus one offset per K tile, the same for all of this thread's rows.
    const unsigned char* b_src[B_ITERS];
#pragma unroll
    for (int i = 0; i < B_ITERS; ++i) {
        const int q = q0 + row0 + i * ROWS_PER_PASS;
        long long at = 0;  // a pixel past the end reads pixel 0: loaded, never stored
        if (q < NP) {
            const int n = q / P;
            const int pp = q - n * P;
            const int oh = pp / OW;
            const int ow = pp - oh * OW;
            at = (static_cast<long long>(n) * Hp + oh * stride_h) * Wp + ow * stride_w;
        }
        b_src[i] = xn + at * slots + static_cast<long long>(g) * Cgp;
    }
    // (r, s, c) of this thread's chunk in the current K tile; advanced tile by tile.
    int kc = chunk * 16;
    int kr, ks;
    {
        const int rs = kc / Cgp;
        kc -= rs * Cgp;
        kr = rs / S;
        ks = rs - kr * S;
    }
    int k_next = chunk * 16;
    const long long tap_row = static_cast<long long>(dil_h) * Wp * slots;
    const long long tap_col = static_cast<long long>(dil_w) * slots;

    auto load_tile = [&](int stage) {
        const unsigned a_base = smem_base + stage * STAGE_BYTES;
        const unsigned b_base = a_base + BM * 64;
        // Beyond K' both operands are zero-filled: neither in the GEMM nor in sum x''.
        const int bytes = k_next < Kp ? 16 : 0;
#pragma unroll
        for (int i = 0; i < A_ITERS; ++i) {
            conv::cp_async16(a_base + wg::swz(row0 + i * ROWS_PER_PASS, chunk),
                             a_ok[i] ? a_src[i] + k_next : wp, a_ok[i] ? bytes : 0);
        }
        const long long off = bytes ? kr * tap_row + ks * tap_col + kc : 0;
#pragma unroll
        for (int i = 0; i < B_ITERS; ++i) {
            conv::cp_async16(b_base + wg::swz(row0 + i * ROWS_PER_PASS, chunk), b_src[i] + off,
                             bytes);
        }
        k_next += 64;
        kc += 64;
        while (kc >= Cgp) {
            kc -= Cgp;
            if (++ks == S) {
                ks = 0;
                ++kr;
            }
        }
    };

    int acc[BN / 2];
#pragma unroll
    for (int e = 0; e < BN / 2; ++e) acc[e] = 0;
    wg::fence_operands(acc);
    int xsum[B_ITERS];
#pragma unroll
    for (int i = 0; i < B_ITERS; ++i) xsum[i] = 0;

    const int KT = (Kp + 63) / 64;
#pragma unroll
    for (int s = 0; s < STAGES - 2; ++s) {
        if (s < KT) load_tile(s);
        conv::cp_async_commit();
    }
    for (int kt = 0; kt < KT; ++kt) {
        conv::cp_async_wait<STAGES - 3>();
        conv::fence_proxy_async();
        __syncthreads();
        // The stage refilled now was last read by the wgmma group of tile kt - 2, which every
        // warpgroup waited for (wait_group 1 in iteration kt - 1) before the barrier above.
        if (kt + STAGES - 2 < KT) load_tile((kt + STAGES - 2) % STAGES);
        conv::cp_async_commit();

        const unsigned a_base = smem_base + (kt % STAGES) * STAGE_BYTES;
        const unsigned b_base = a_base + BM * 64;
        const unsigned a_wg = a_base + wgi * 64 * 64;
        wg::fence();
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
            wg::mma<BN, WS, XS>(acc, wg::desc(a_wg + 32 * kk), wg::desc(b_base + 32 * kk));
        }
        wg::commit();
        if constexpr (ZW) {
#pragma unroll
            for (int i = 0; i < B_ITERS; ++i) {
                uint4 v;
                asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                             : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                             : "r"(b_base + wg::swz(row0 + i * ROWS_PER_PASS, chunk)));
                xsum[i] = conv::byte_sum<XS>(v.x, xsum[i]);
                xsum[i] = conv::byte_sum<XS>(v.y, xsum[i]);
                xsum[i] = conv::byte_sum<XS>(v.z, xsum[i]);
                xsum[i] = conv::byte_sum<XS>(v.w, xsum[i]);
            }
        }
        wg::wait<1>();
    }
    wg::wait<0>();
    wg::fence_operands(acc);
    conv::cp_async_wait<0>();
    __syncthreads();  // every warpgroup is done with the stages: they become the staging tile

    // ---- epilogue: out = acc - z_w[m] * sum x''[p] + bias[m], NCHW ---------------------------
    // The accumulators go through shared memory so that each output row (one channel, BN
    // consecutive pixels) leaves in 16-byte stores, coalesced across the warp.
    constexpr int LD = BN + 4;  // row pitch in ints: 16 bytes of padding against bank conflicts
    int* tile = reinterpret_cast<int*>(smem_raw + (smem_base - raw));
    // wgmma accumulator layout: warp w of the warpgroup holds rows 16 w .. 16 w + 15; per n8
    // block j, lane l holds rows l / 4 and l / 4 + 8, columns 8 j + 2 (l % 4) + {0, 1}.
    {
        const int wrow = wgi * 64 + ((tid >> 5) & 3) * 16 + (lane >> 2);
        const int col = 2 * (lane & 3);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int2 v = make_int2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
                *reinterpret_cast<int2*>(tile + (wrow + 8 * h) * LD + 8 * j + col) = v;
            }
    }
    if constexpr (ZW) {  // per-pixel sums: the four chunk threads of a row add up
#pragma unroll
        for (int i = 0; i < B_ITERS; ++i) {
            int v = xsum[i];
            v += __shfl_xor_sync(0xffffffffu, v, 1);
            v += __shfl_xor_sync(0xffffffffu, v, 2);
            if (chunk == 0) xs_sum[row0 + i * ROWS_PER_PASS] = v;
        }
    }
    for (int c = tid; c < BN; c += THREADS) {
        const int q = q0 + c;
        long long off = -1;
        if (q < NP) {
            const int n = q / P;
            off = static_cast<long long>(n) * M * P + (q - n * P);
        }
        col_off[c] = off;
    }
    __syncthreads();
    constexpr int VPR = BN / 4;  // 16-byte pieces per row
    for (int v = tid; v < BM * VPR; v += THREADS) {
        const int row = v / VPR;
        const int c0 = (v - row * VPR) * 4;
        const int mr = m0 + row;
        if (mr >= Mg) break;  // rows only grow with v
        const int m = g * Mg + mr;
        const unsigned bm = static_cast<unsigned>(bias[m]);
        const int4 a = *reinterpret_cast<const int4*>(tile + row * LD + c0);
        unsigned r[4] = {static_cast<unsigned>(a.x) + bm, static_cast<unsigned>(a.y) + bm,
                         static_cast<unsigned>(a.z) + bm, static_cast<unsigned>(a.w) + bm};
        if constexpr (ZW) {
            const unsigned zw = static_cast<unsigned>(w_zp[m]);
#pragma unroll
            for (int e = 0; e < 4; ++e) r[e] -= zw * static_cast<unsigned>(xs_sum[c0 + e]);
        }
        int* orow = out + static_cast<long long>(m) * P;
        const long long off = col_off[c0];
        const bool whole = off >= 0 && col_off[c0 + 3] == off + 3;
        if (whole && ((static_cast<long long>(m) * P + off) & 3) == 0) {
            *reinterpret_cast<int4*>(orow + off) =
                make_int4(static_cast<int>(r[0]), static_cast<int>(r[1]), static_cast<int>(r[2]),
                          static_cast<int>(r[3]));
        } else {  // an image boundary, the last pixels or an unaligned row: one by one
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const long long o = col_off[c0 + e];
                if (o >= 0) orow[o] = static_cast<int>(r[e]);
            }
        }
    }
#endif
}

// ------------------------------------------------------------------------------------------
// The shifted-window GEMM: one channel chunk of every tap per stage (strides of 1; of 2 through
// phase planes, below).
//
// With unit strides, output pixel (n, oh, ow) reads tap (r, s) at padded pixel
// (n, oh + r dh, ow + s dw). Number the padded input's pixels (n Hp + h) Wp + w and give output
// pixel (n, oh, ow) the number v = (n Hp + oh) Wp + ow ("virtual" pixels: those with oh >= OH or
// ow >= OW are computed and dropped): tap (r, s) of v is input pixel v + r dh Wp + s dw. A run
// of TN consecutive virtual pixels therefore reads, for every tap, a shifted window of ONE run
// of L = TN + (R - 1) dh Wp + (S - 1) dw input pixels. A stage holds 32 channels of that run
// once and of the filter's taps, and each tap's wgmma reads the run at its shift: the input
// passes L2 -> shared memory once per channel chunk instead of once per tap.
//
// Shared layout, no swizzle (wgmma's interleaved K-major form): 16 bytes of K per row, rows 16
// bytes apart, one such column of rows after the other (the K-direction stride, LBO). So a
// view that starts r rows further is just r * 16 bytes further: any shift is a descriptor.
//   A: [tap][k16 half][BM rows] x 16 B (LBO = BM * 16),
//   B: [k16 half][L rows] x 16 B (LBO = L * 16).
// A CTA of WM x WN warpgroups owns BM = 64 WM output channels x TN = WN BN virtual pixels; the
// CTA is persistent over its tiles, and the stages stream (tile, channel chunk) items, so the
// next tile's loads overlap this tile's last MMAs and its epilogue; an item's MMAs are still
// running while the next item's are issued.
//
// Strides SH x SW of 2 (GATHER only): the padded input splits into SH SW phase planes, plane
// (a, b) holding padded pixels (SH i + a, SW j + b), each numbered like the virtual pixels above
// over its Hq x Wq pixels (Hp, Wp then being Hq, Wq); tap (r, s) of output (oh, ow) reads plane
// (r dh % SH, s dw % SW) at (oh + r dh / SH, ow + s dw / SW): again one shift of one run, the run
// now one per plane (each chunk's rows [plane][k16 half][L]).
//
// K split: a tile's channel chunks are split over `splits` CTAs, each summing its own. With CL =
// splits (a thread-block cluster of the tile's splits), after their MMAs each CTA sends the
// partial sums of the 32-column blocks it does not own to their owners' shared memory (block
// cc is rank cc % CL's), and each owner adds them to its own and stores its blocks: every
// output word is written once. No CTA touches another's memory but between two cluster
// barriers. With CL = 1 the splits' sums meet in the zeroed output by atomic adds.
//
// GATHER (GI > 0): the input is read where it lies, not from a padded transformed copy: at the
// start of each tile the CTA writes its whole run, every channel chunk (Cgp x L bytes, resident
// for the tile), into shared memory; the stages then carry only the filter.
// GI 2 or 3: NCHW, each (n, c) plane H * W consecutive bytes, at any alignment: z_x everywhere
// first (the frame, the padded channels, pixels past the input), then the image's pixels over it, 16 channels x 4 pixels an item (16 word loads of 4 pixels
// each, transposed in registers; where a plane does not start on a word, each word is put
// together from the two aligned words around it).
// Where every plane starts on a word, a thread issues the loads of GI items (2 or 3) before it
// uses any, so that they are in flight together (the launcher says where 3 pays).
// GI 1: the input is read where it lies as (N, H, W, C): each pixel's channels consecutive,
// every 16-channel block on 16 bytes, pixels xs_c bytes apart, rows W xs_c apart, images xs_n
// apart. A run's row of a block is then one 16-byte copy from its pixel, or z_x where the virtual
// pixel is no image pixel (the frame, pixels past the input) or the block past the group's
// channels: no z_x pass first, no transposes; the copies go out in sets of channel chunks, the
// MMAs on a set's chunks waiting for that set's alone (`gather_sets`, see gather_nhwc).
namespace wg {
// K-major, no swizzle: start, LBO (K-direction core-matrix stride), SBO (8-row stride).
__device__ __forceinline__ unsigned long long desc_plain(unsigned addr, unsigned lbo,
                                                         unsigned sbo) {
    return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
           (static_cast<unsigned long long>((lbo & 0x3FFFF) >> 4) << 16) |
           (static_cast<unsigned long long>((sbo & 0x3FFFF) >> 4) << 32);
}
}  // namespace wg

namespace wg {
// A shared-memory barrier that a bulk copy completes: one arrival (the thread that issues the
// copy, announcing its bytes), then the copy's bytes; waited on by phase parity.
__device__ __forceinline__ void bar_init(unsigned bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar) : "memory");
}
// One bulk copy of `bytes` (a multiple of 16, both addresses 16-byte aligned) global -> shared,
// completing on `bar`.
__device__ __forceinline__ void bulk_load(unsigned dst, const void* src, unsigned bytes,
                                          unsigned bar) {
    asm volatile(
        "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%2], [%3], %1, [%0];\n"
        ::"r"(bar), "r"(bytes), "r"(dst), "l"(src)
        : "memory");
}
using conv::allow_next_grid;
using conv::wait_prior_grid;
// Every thread of the cluster's CTAs: what each wrote before is visible to all after.
__device__ __forceinline__ void cluster_sync() {
    asm volatile(
        "barrier.cluster.arrive.release.aligned;\n"
        "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// 16 bytes into the shared memory of the cluster's CTA `rank`, at the address `local` has in
// this CTA's.
__device__ __forceinline__ void st_cluster(unsigned local, unsigned rank, unsigned a, unsigned b,
                                           unsigned c, unsigned d) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(rank));
    asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(remote), "r"(a),
                 "r"(b), "r"(c), "r"(d)
                 : "memory");
}
__device__ __forceinline__ void bar_wait(unsigned bar, unsigned parity) {
    asm volatile(
        "{\n.reg .pred done;\nwait_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra wait_%=;\n}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}
}  // namespace wg

namespace wg {
// Tile `tile` of the shifted-window GEMM: BM-row block tm (fastest), K split sp, pixel block tn,
// group g (`split_fastest`, the splits of a tile in a cluster: sp, then tm); and the split's
// channel chunks [kb, kb + nk) of KT. CTAs start their split's chunks
// at different places (the sums do not care about the order), so that the SMs do not all ask
// L2 for the same filter bytes at the same moment: chunk kc of the tile is its split's
// chunk(kc) = (kc + rot) % nk-th, rot = blockIdx.x % nk.
struct ShiftTile {
    int tm, sp, tn, g, kb, nk, rot;
    __device__ __forceinline__ int chunk(int kc) const {
        return kc + rot < nk ? kc + rot : kc + rot - nk;
    }
};
__device__ __forceinline__ ShiftTile shift_tile(int tile, int tiles_m, int splits, int tiles_n,
                                                int KT, bool split_fastest) {
    ShiftTile t;
    int rest;
    if (split_fastest) {
        t.sp = tile % splits;
        rest = tile / splits;
        t.tm = rest % tiles_m;
        rest /= tiles_m;
    } else {
        t.tm = tile % tiles_m;
        rest = tile / tiles_m;
        t.sp = rest % splits;
        rest /= splits;
    }
    t.tn = rest % tiles_n;
    t.g = rest / tiles_n;
    t.kb = t.sp * KT / splits;
    t.nk = (t.sp + 1) * KT / splits - t.kb;
    t.rot = static_cast<int>(blockIdx.x) % t.nk;
    return t;
}

// Image pixels (flat positions h W + w) whose padded offset (h + ph) Wp + w + pw is below r.
__device__ __forceinline__ int pixels_before(int r, int H, int W, int Wp, int ph, int pw) {
    const int h = r / Wp - ph;
    if (h < 0) return 0;
    if (h >= H) return H * W;
    const int w = r % Wp - pw;
    return h * W + (w < 0 ? 0 : w > W ? W : w);
}
}  // namespace wg

namespace wg {
// At most 224 registers a thread (CTAs of 128 * WM * WN threads, one or two an SM: 57344 of the
// SM's 65536), so that blocks of the filter prep (64 threads of 32 registers) fit beside each
// SM's GEMM: an unregistered call's GEMM starts under its prep (`input_first`). The variants
// that would spill under the cap keep all their registers: the widest tile of one warpgroup,
// and wide tiles with per-channel filter zero points on phase planes or a transformed input,
// or on phase planes of 256 pixels or of unequal strides.
constexpr int shift_max_registers(int WM, int WN, int BN, bool ZW, bool GATHER, int SH, int SW) {
    return (WM * WN == 1 && BN == 256) || (ZW && BN >= 224 && (SH * SW > 1 || !GATHER)) ||
                   (SH * SW > 1 && (BN == 256 || SH != SW))
               ? 255
               : 224;
}
}  // namespace wg

template <typename WT, typename XT, int WM, int WN, int BN, int STAGES, bool ZW, int TAPS,
          int GI, int SH, int SW, int CL>
__global__ void __maxnreg__(wg::shift_max_registers(WM, WN, BN, ZW, GI > 0, SH, SW))
    __cluster_dims__(CL, 1, 1)
    conv_int_wgmma_shift(const unsigned char* __restrict__ wp,
                         const unsigned char* __restrict__ xn, const int* __restrict__ w_zp,
                         const int* __restrict__ bias, int* __restrict__ out, int N, int Hp,
                         int Wp, int OH, int OW, int S, int dil_h, int dil_w, int M, int Mg,
                         int Cgp, int slots, int L, int tiles_m, int tiles_n, int tiles, int H,
                         int W, int ph, int pw, int Cg, unsigned zx4, long long xs_n,
                         long long xs_c, long long span_lo, long long span_hi, int k_splits,
                         int gather_sets, int input_first) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __trap();  // built for another target; the launcher sends work here on sm_90 only
#elif defined(__CUDA_ARCH__)
    constexpr bool WS = conv::is_signed_byte<WT>::value;
    constexpr bool XS = conv::is_signed_byte<XT>::value;
    constexpr int THREADS = 128 * WM * WN;
    constexpr int BM = 64 * WM;
    constexpr int TN = WN * BN;
    constexpr int A_BYTES = TAPS * BM * 32;
    constexpr int NPL = SH * SW;  // phase planes
    constexpr bool GATHER = GI > 0;
    static_assert(GI >= 0 && GI <= 3, "gather items");
    // K split over the cluster: per owner, the partial sums it receives (from each other CTA,
    // per column block it owns, per thread 4 x 16 bytes)
    constexpr int NB = BN / 32;
    constexpr int OB = (NB + CL - 1) / CL;
    constexpr int RECV_BYTES = (CL - 1) * OB * 4 * THREADS * 16;
    static_assert(STAGES >= 2, "stages");
    static_assert(CL >= 1 && CL <= 4 && BN % 32 == 0, "K splits");
    // in a cluster, one split a CTA (the launcher's grid is a whole number of clusters)
    const int splits = CL > 1 ? CL : k_splits;
    static_assert((SH == 1 || SH == 2) && (SW == 1 || SW == 2) && (GATHER || NPL == 1), "strides");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int stage_bytes = A_BYTES + (GATHER ? 0 : L * 32);
    // The block from a 128-byte boundary (the planner reserves the up to 112 bytes skipped): a
    // block starting 16 bytes later than it does after 32 bytes of barriers made the MMA phase
    // up to 30% longer.
    const unsigned smem_base = (conv::smem_addr(smem_raw) + 127u) & ~127u;
    unsigned char* const smem = smem_raw + (smem_base - conv::smem_addr(smem_raw));
    const int KT = Cgp >> 5;  // channel chunks of 32
    // GATHER: after the stages, the tile's run, its split's chunks one after the other, as a
    // stage holds them; in a cluster, the same bytes (at least RECV_BYTES) take the partial
    // sums from its other CTAs once the tile's MMAs are done
    const unsigned run_base = smem_base + STAGES * stage_bytes;
    const int run_bytes = max(GATHER ? (KT + splits - 1) / splits * NPL * L * 32 : 0, RECV_BYTES);
    // then output offsets and input sums per column, each warp's output block, input sums per
    // row of the run (of each plane)
    constexpr int EPI_PITCH = 40;
    long long* col_off =
        reinterpret_cast<long long*>(smem + STAGES * stage_bytes + run_bytes);
    int* xs_sum = reinterpret_cast<int*>(col_off + TN);
    int* epi = xs_sum + TN;
    int* row_sum = epi + (THREADS / 32) * 16 * EPI_PITCH;
    // GATHER, unit strides, planes not on words: where the launcher leaves room past the row
    // sums, an image's channels of the split are copied there as they lie (one block, where
    // its planes lie back to back) and the items are read from shared memory.
    const unsigned x_stage = (conv::smem_addr(row_sum + NPL * L) + 15u) & ~15u;
    unsigned dynamic_bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dynamic_bytes));
    const int stage_room =
        static_cast<int>(conv::smem_addr(smem_raw) + dynamic_bytes) - static_cast<int>(x_stage);
    // Each stage's barrier: its filter block has landed.
    __shared__ __align__(8) unsigned long long full_bar_mem[STAGES];
    const unsigned full_bar = conv::smem_addr(full_bar_mem);
    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) wg::bar_init(full_bar + s * 8);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int wgi = tid >> 7;
    const int wm = wgi % WM;  // warpgroup's 64 output channels within the CTA's BM
    const int wn = wgi / WM;  // and its BN virtual pixels within TN
    const int P = OH * OW;
    const long long HWp = static_cast<long long>(Hp) * Wp;
    const long long pixels_in = N * HWp;
    // each tap's shift within its plane, and (bits 24 on) its plane
    int tap_off[TAPS];
#pragma unroll
    for (int t = 0; t < TAPS; ++t) {
        const int r = (t / S) * dil_h;
        const int s = (t % S) * dil_w;
        tap_off[t] = (r / SH) * Wp + s / SW + (((r % SH) * SW + s % SW) << 24);
    }
    // tap t's first row where each plane takes plane_rows rows: in a chunk's run (16-byte
    // rows [plane][k16 half][L]: 2 L) and in the per-plane row sums ([plane][L]: L)
    auto tap_row = [&](int t, int plane_rows) {
        return NPL == 1 ? tap_off[t] : (tap_off[t] >> 24) * plane_rows + (tap_off[t] & 0xFFFFFF);
    };

    // (tile, chunk) pairs of this CTA's stream (each tile's decoding takes integer divisions,
    // dependent ones: where K is not split, every tile has all KT chunks)
    int items = 0;
    if (splits == 1) {
        items = (tiles - static_cast<int>(blockIdx.x) + static_cast<int>(gridDim.x) - 1) /
                static_cast<int>(gridDim.x) * KT;
    } else {
        for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            items += wg::shift_tile(tile, tiles_m, splits, tiles_n, KT, CL > 1).nk;
        }
    }

    // The producer side: item (tile, chunk) -> one stage; advanced item by item, the tile
    // decoded once per tile.
    int ld_tile = blockIdx.x;
    int ld_kc = 0;
    wg::ShiftTile lt = wg::shift_tile(ld_tile, tiles_m, splits, tiles_n, KT, CL > 1);
    auto load_item = [&](int stage) {
        const unsigned a_base = smem_base + stage * stage_bytes;
        const unsigned b_base = a_base + A_BYTES;
        const int tm = lt.tm;
        const int tn = lt.tn;
        const int g = lt.g;
        const int chunk = lt.kb + lt.chunk(ld_kc);
        // The filter lies as the stages want it (the prep's shifted-window layout): one
        // item's A is A_BYTES consecutive bytes.
        const unsigned char* a_src =
            wp + (static_cast<long long>(g * tiles_m + tm) * KT + chunk) * A_BYTES;
        // One bulk copy, on the stage's barrier. The prepared tile's rows past the group's
        // last channel hold whatever the allocation held: their sums land in output rows that
        // are never stored.
        if (tid == 0) wg::bulk_load(a_base, a_src, A_BYTES, full_bar + stage * 8);
        if constexpr (!GATHER) {
            const long long p0 = static_cast<long long>(tn) * TN;
            const unsigned char* b_src = xn + g * Cgp + chunk * 32 + 16 * (tid & 1);
            for (int i = tid; i < 2 * L; i += THREADS) {
                const int r = i >> 1;
                const long long p = p0 + r;
                const bool ok = p < pixels_in;  // past the input: junk pixels' taps only
                conv::cp_async16(b_base + ((i & 1) * L + r) * 16, ok ? b_src + p * slots : xn,
                                 ok ? 16 : 0);
            }
        }
        if (++ld_kc == lt.nk) {
            ld_kc = 0;
            ld_tile += gridDim.x;
            if (ld_tile < tiles) lt = wg::shift_tile(ld_tile, tiles_m, splits, tiles_n, KT, CL > 1);
        }
    };

    int acc[BN / 2];
#pragma unroll
    for (int e = 0; e < BN / 2; ++e) acc[e] = 0;
    wg::fence_operands(acc);

    // Before the grid ahead in the stream completes (a dependent launch), nothing is read or
    // written that it may write. The launcher asks a dependent launch for in two cases. The
    // prepared filter is a registration's constant (prepared and completed by an earlier call):
    // the first filter stages go out first where the input is read in place (a transformed
    // input is the grid ahead's output). Or (`input_first`, the input read in place) the grid
    // ahead is the call's own filter prep, which began only once all before it had completed
    // and writes nothing but the prepared filter and bias: the first tile's run is gathered
    // first, then the wait, then the filter stages.
    auto first_stages = [&]() {
#pragma unroll 1  // one copy of the (cold) loading code here, one in the loop
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < items) load_item(s);
            conv::cp_async_commit();
        }
    };
    if constexpr (!GATHER) wg::wait_prior_grid();
    if (!GATHER || !input_first) {
        first_stages();
        if constexpr (GATHER) wg::wait_prior_grid();
    }
    wg::allow_next_grid();
    // GATHER: the image's pixels of the split's channels (its 16-channel blocks, rows at
    // run_base + block L 16) over the z_x already there: per image met by the run, the flat
    // positions [pa, pb) whose virtual pixels lie in it, in words of 4 pixels x 16 channels.
    // Every plane starts on a word: each word of 4 pixels is one aligned load.
    const bool word_planes = ((reinterpret_cast<size_t>(xn) | xs_n | xs_c) & 3) == 0;
    auto gather = [&](const wg::ShiftTile& ct, long long v0) {
        const int blocks = 2 * ct.nk;  // the split's 16-channel blocks
        for (long long n = static_cast<int>(v0) / static_cast<int>(HWp); n < N && n * HWp < v0 + L;
             ++n) {
            const long long base = n * HWp;
            const int ra = static_cast<int>((v0 > base ? v0 : base) - base);
            const int rb = static_cast<int>((v0 + L < base + HWp ? v0 + L : base + HWp) - base);
            int pa, pb;
            if constexpr (NPL == 1) {
                pa = wg::pixels_before(ra, H, W, Wp, ph, pw);
                pb = wg::pixels_before(rb, H, W, Wp, ph, pw);
            } else {  // the image rows of the planes' rows met: whole rows, some pixels of
                      // the first and last ones outside the run (left out by put)
                pa = min(max(SH * (ra / Wp) - ph, 0), H) * W;
                pb = min(max(SH * ((rb - 1) / Wp + 1) - ph, 0), H) * W;
            }
            if (pa >= pb) continue;
            const int ja = pa >> 2;
            const int words = ((pb + 3) >> 2) - ja;
            // the split's first channel
            const unsigned char* xi =
                xn + n * xs_n + (static_cast<long long>(ct.g) * Cg + 32 * ct.kb) * xs_c;
            const int c_left = Cg - 32 * ct.kb;  // channels at and past it are z_x
            // the virtual pixel of image n's first (padded) pixel, relative to the run
            // (in 32 bits, as every virtual pixel's number)
            const int p_img = static_cast<int>(base - v0);
            // item (blk, jw)'s 16 words (in[q][b]: channel 4 q + b of the 16-channel block blk,
            // pixels 4 jw ..), transposed to 4 pixels of 16 channels, each stored where its
            // virtual pixel lies in the run
            auto put = [&](const unsigned (&in)[4][4], int blk, int jw) {
                unsigned t[4][4];  // t[q][b]: channels 4 q .. 4 q + 3 of pixel b
#pragma unroll
                for (int q = 0; q < 4; ++q) conv::transpose4(in[q], t[q]);
                // (unsigned: no sign to handle in the divisions)
                int pos = 4 * jw;
                unsigned h = static_cast<unsigned>(pos) / static_cast<unsigned>(W);
                unsigned w = static_cast<unsigned>(pos) - h * static_cast<unsigned>(W);
                // the block's rows: its chunk's, then its k16 half's (of each plane)
                const unsigned rows = run_base + ((blk >> 1) * 2 * NPL + (blk & 1)) * L * 16;
#pragma unroll
                for (int b = 0; b < 4; ++b) {
                    const unsigned hp = h + ph;  // padded
                    const unsigned wq = w + pw;
                    const int p = p_img + static_cast<int>((hp / SH) * Wp + wq / SW);
                    if (pos >= pa && pos < pb && (NPL == 1 || (p >= 0 && p < L))) {
                        const int plane = static_cast<int>((hp % SH) * SW + wq % SW);
                        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(
                                         rows + (plane * 2 * L + p) * 16),
                                     "r"(t[0][b]), "r"(t[1][b]), "r"(t[2][b]), "r"(t[3][b])
                                     : "memory");
                    }
                    ++pos;
                    if (++w == static_cast<unsigned>(W)) {
                        w = 0;
                        ++h;
                    }
                }
            };
            // Item i: 16-channel block blk and word jw (block-major: i = blk words + jw - ja),
            // the channels of the block that exist (cl), its first channel's word at a0. A
            // thread's items, from tid on THREADS apart, are walked as (blk, jw - ja) without
            // a division an item: sb blocks and sj words a step.
            struct Item {
                int blk, jw, cl;
                const unsigned char* a0;
            };
            struct Walk {
                int blk, j;
            };
            const int sb = THREADS / words;
            const int sj = THREADS - sb * words;
            auto step = [&](Walk k) {
                k.blk += sb;
                k.j += sj;
                if (k.j >= words) {
                    k.j -= words;
                    ++k.blk;
                }
                return k;
            };
            auto at = [&](Walk k) {
                const int jw = ja + k.j;
                return Item{k.blk, jw, c_left - k.blk * 16, xi + k.blk * 16 * xs_c + 4 * jw};
            };
            const Walk first{tid / words, tid - tid / words * words};
            // Whether every byte that the words' loads touch (from `before` bytes before
            // each word to `after` bytes on) in channels [0, cl) from a0 lies in the input's
            // span [span_lo, span_hi) from xn: for every item of the image at once, else item
            // by item.
            const int image_items = words * blocks;
            const int before = word_planes ? 0 : 3;
            const int after = word_planes ? 4 : 8;
            auto inside = [&](const unsigned char* a0, int cl, int after_bytes) {
                const long long o = a0 - xn;
                const long long oc = static_cast<long long>(cl - 1) * xs_c;
                return o + min(0ll, oc) - before >= span_lo &&
                       o + max(0ll, oc) + after_bytes <= span_hi;
            };
            const bool all_inside =
                inside(xi + 4 * ja, min(c_left, 16 * blocks), 4 * (words - 1) + after);
            // The words: a word's loads all issued before any is used, so that they are in
            // flight together (one round trip). Where each plane starts on a word, one aligned
            // load each; else the two aligned words around it, shifted together.
            if (word_planes) {
                constexpr int AT = GI > 0 ? GI : 1;  // items at a time (GI 0: never run)
                Walk k = first;
                for (int i0 = tid; i0 < image_items; i0 += AT * THREADS) {
                    unsigned in[AT][4][4];
                    bool ok[AT];
                    Walk ks[AT];
#pragma unroll
                    for (int u = 0; u < AT; ++u) {
                        const int i = i0 + u * THREADS;
                        ks[u] = k;
                        k = step(k);
                        const Item t = at(ks[u]);
                        ok[u] = i < image_items &&
                                (all_inside || inside(t.a0, min(t.cl, 16), after));
                        if (ok[u] && t.cl >= 16) {  // every channel: one pointer step apart
                            const unsigned char* a = t.a0;
#pragma unroll
                            for (int c = 0; c < 16; ++c, a += xs_c) {
                                in[u][c >> 2][c & 3] = __ldg(reinterpret_cast<const unsigned*>(a));
                            }
                        } else {
#pragma unroll
                            for (int c = 0; c < 16; ++c) {
                                in[u][c >> 2][c & 3] =
                                    ok[u] && c < t.cl ? __ldg(reinterpret_cast<const unsigned*>(
                                                            t.a0 + c * xs_c))
                                                      : zx4;
                            }
                        }
                    }
#pragma unroll
                    for (int u = 0; u < AT; ++u) {
                        if (ok[u]) put(in[u], ks[u].blk, ja + ks[u].j);
                    }
                }
            } else if (const int block_bytes = min(c_left, 16 * blocks) * H * W;
                       NPL == 1 && xs_c == H * W &&
                       ((reinterpret_cast<size_t>(xi) | block_bytes) & 15) == 0 &&
                       block_bytes + 16 <= stage_room) {
                // The block in at once (16-byte copies, every one in flight together), then
                // each item's words from shared memory: the two aligned words around each,
                // shifted together (the last channel's may read up to 4 bytes past the block,
                // into pixels that put leaves out).
                for (int q = tid; q < block_bytes / 16; q += THREADS) {
                    conv::cp_async16(x_stage + 16 * q, xi + 16 * q, 16);
                }
                conv::cp_async_commit();
                conv::cp_async_wait<0>();
                __syncthreads();
                Walk k = first;
                for (int i = tid; i < image_items; i += THREADS, k = step(k)) {
                    const Item t = at(k);
                    unsigned in[4][4];
#pragma unroll
                    for (int c = 0; c < 16; ++c) {
                        unsigned v = zx4;
                        if (c < t.cl) {
                            const unsigned o = static_cast<unsigned>((t.blk * 16 + c) * H * W +
                                                                     4 * t.jw);
                            unsigned lo, hi;
                            asm volatile("ld.shared.u32 %0, [%1];\n"
                                         : "=r"(lo)
                                         : "r"(x_stage + (o & ~3u)));
                            asm volatile("ld.shared.u32 %0, [%1];\n"
                                         : "=r"(hi)
                                         : "r"(x_stage + (o & ~3u) + 4));
                            v = __funnelshift_r(lo, hi, 8 * (o & 3u));
                        }
                        in[c >> 2][c & 3] = v;
                    }
                    put(in, t.blk, t.jw);
                }
                __syncthreads();  // the staged block read: the next image may take its place
                continue;  // (every item read from the block: no ends byte by byte)
            } else {
                Walk k = first;
                for (int i = tid; i < image_items; i += THREADS, k = step(k)) {
                    const Item t = at(k);
                    const bool ok = all_inside || inside(t.a0, min(t.cl, 16), after);
                    unsigned in[4][4], hi[16];
#pragma unroll
                    for (int c = 0; c < 16; ++c) {
                        const unsigned char* a = t.a0 + c * xs_c;
                        const unsigned* w = reinterpret_cast<const unsigned*>(
                            a - (reinterpret_cast<size_t>(a) & 3));
                        in[c >> 2][c & 3] = ok && c < t.cl ? __ldg(w) : zx4;
                        hi[c] = ok && c < t.cl ? __ldg(w + 1) : zx4;
                    }
#pragma unroll
                    for (int c = 0; c < 16; ++c) {
                        const size_t addr = reinterpret_cast<size_t>(t.a0 + c * xs_c);
                        const int lead = static_cast<int>(addr & 3);
                        in[c >> 2][c & 3] = __funnelshift_r(in[c >> 2][c & 3], hi[c], 8 * lead);
                    }
                    if (ok) put(in, t.blk, t.jw);
                }
            }
            // The few words at the span's ends (the first plane's first, the last plane's
            // last), byte by byte: only the plane's pixels are read.
            Walk k = first;
            for (int i = all_inside ? image_items : tid; i < image_items;
                 i += THREADS, k = step(k)) {
                const Item t = at(k);
                if (inside(t.a0, min(t.cl, 16), after)) continue;
                unsigned in[4][4];
#pragma unroll
                for (int c = 0; c < 16; ++c) {
                    unsigned v = zx4;
                    if (c < t.cl) {
                        v = 0u;
                        for (int b = 0; b < 4 && 4 * t.jw + b < H * W; ++b) {
                            v |= static_cast<unsigned>(__ldg(t.a0 + c * xs_c + b)) << (8 * b);
                        }
                    }
                    in[c >> 2][c & 3] = v;
                }
                put(in, t.blk, t.jw);
            }
        }
    };

    // GI 1: in at most `gather_sets` sets of consecutive chunks (as the MMAs take them: each
    // set but the last ceil(nk / gather_sets) chunks, so that 3 sets of 4 chunks are 2 sets of
    // 2), each set's copies one cp.async group, so that the MMAs
    // on a set's chunks wait for its group alone, the later sets' copies in flight meanwhile.
    // In a set, the 16-channel blocks of each row's pixel, each row's planes side by side (row
    // r of plane (a, b): padded pixel (SH i + a, SW j + b)), then the rows.
    auto set_chunks = [&](const wg::ShiftTile& ct) {
        const int sets = min(max(gather_sets, 1), ct.nk);
        return (ct.nk + sets - 1) / sets;
    };
    auto gather_nhwc = [&](const wg::ShiftTile& ct, long long v0) {
        const unsigned char* xg = xn + static_cast<long long>(ct.g) * Cg + 32 * ct.kb;
        const int c_left = Cg - 32 * ct.kb;  // the group's channels at and past the split's
        // block b of the set from chunk k0 in row r of `plane`, whose virtual pixel is (n, pr,
        // pc) of its plane
        auto copy = [&](int k0, int b, int r, int plane, int n, int pr, int pc) {
            const int lc = ct.chunk(k0 + (b >> 1));  // the block's chunk of the split
            const int half = b & 1;
            const unsigned dst = run_base + (((lc * NPL + plane) * 2 + half) * L + r) * 16;
            const int h = SH * pr + plane / SW - ph;
            const int w = SW * pc + plane % SW - pw;
            const int c = 32 * lc + 16 * half;
            if (n < N && c < c_left && h >= 0 && h < H && w >= 0 && w < W) {
                conv::cp_async16(
                    dst, xg + n * xs_n + (static_cast<long long>(h) * W + w) * xs_c + c, 16);
            } else {
                conv::st_shared16(dst, zx4);
            }
        };
        const int per_set = set_chunks(ct);
        for (int k0 = 0; k0 < ct.nk; k0 += per_set) {
            const int blocks = 2 * min(per_set, ct.nk - k0);  // the set's 16-channel blocks
            const int row_step = THREADS / blocks;
            if (row_step * blocks == THREADS && row_step % NPL == 0) {
                // (the launcher's usual counts) each thread one block of one plane, its rows
                // r_step apart, their pixels walked without divisions
                const int b = tid % blocks;
                const int plane = tid / blocks % NPL;
                const int r_step = row_step / NPL;
                int r = tid / blocks / NPL;
                const int v = static_cast<int>(v0) + r;
                int n = v / static_cast<int>(HWp);
                const int rem = v - n * static_cast<int>(HWp);
                int pr = rem / Wp;
                int pc = rem - pr * Wp;
                for (; r < L; r += r_step) {
                    copy(k0, b, r, plane, n, pr, pc);
                    pc += r_step;
                    while (pc >= Wp) {
                        pc -= Wp;
                        if (++pr == Hp) {
                            pr = 0;
                            ++n;
                        }
                    }
                }
            } else {
                for (int i = tid; i < NPL * L * blocks; i += THREADS) {
                    const int row = i / blocks;
                    const int r = row / NPL;
                    const int v = static_cast<int>(v0) + r;
                    const int n = v / static_cast<int>(HWp);
                    const int rem = v - n * static_cast<int>(HWp);
                    const int pr = rem / Wp;
                    copy(k0, i - row * blocks, r, row - r * NPL, n, pr, rem - pr * Wp);
                }
            }
            conv::cp_async_commit();
        }
    };
    // GI 1: wait for the gather's groups but the last `pending` (beyond 7, for all)
    auto gather_wait = [&](int pending) {
        switch (pending) {
            case 0: conv::cp_async_wait<0>(); break;
            case 1: conv::cp_async_wait<1>(); break;
            case 2: conv::cp_async_wait<2>(); break;
            case 3: conv::cp_async_wait<3>(); break;
            case 4: conv::cp_async_wait<4>(); break;
            case 5: conv::cp_async_wait<5>(); break;
            case 6: conv::cp_async_wait<6>(); break;
            case 7: conv::cp_async_wait<7>(); break;
            default: conv::cp_async_wait<0>(); break;
        }
    };

    int it = 0;  // the item (tile, chunk) in this CTA's stream
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const wg::ShiftTile ct = wg::shift_tile(tile, tiles_m, splits, tiles_n, KT, CL > 1);
        const int tm = ct.tm;
        const int tn = ct.tn;
        const int g = ct.g;
        const long long v0 = static_cast<long long>(tn) * TN;
        // GI 1: the chunks each set holds, the sets, and (counted down over the tile's chunks)
        // the chunks of the current set left to wait for no group
        const int per_set = GI == 1 ? set_chunks(ct) : 1;
        const int sets = (ct.nk + per_set - 1) / per_set;
        int set_left = 0;
        int set = -1;
        if constexpr (GI == 1) {
            // The last tile's MMAs are done (every warpgroup passed the epilogue's barrier).
            gather_nhwc(ct, v0);
        } else if constexpr (GATHER) {
            // The last tile's MMAs are done (every warpgroup passed the epilogue's barrier).
            // z_x over the split's run: the frame, padded channels, pixels past the input.
            for (int i = tid; i < ct.nk * NPL * L * 2; i += THREADS) {
                asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(run_base + i * 16),
                             "r"(zx4)
                             : "memory");
            }
            __syncthreads();
            gather(ct, v0);
        }
        if constexpr (GATHER) {
            conv::fence_proxy_async();  // published by the barrier of the tile's first chunk
            if (input_first && it == 0) {  // the first tile's run is in (GI 1: its copies
                                           // issued): now its filter
                wg::wait_prior_grid();
                first_stages();
            }
        }
        for (int kc = 0; kc < ct.nk; ++kc, ++it) {
            // GI 1: a set's first chunk waits for the set's group: after it, the tile's later
            // sets' groups, one more each chunk since (empty: the filter stages come by bulk
            // copies) and, on the first tile of a call that gathers before its filter
            // (`input_first`), the first filter stages' STAGES - 1
            bool set_start = false;
            if constexpr (GI == 1) {
                set_start = set_left == 0;
                if (set_start) {
                    set_left = per_set;
                    ++set;
                    const int first_stages_after = input_first && it == kc ? STAGES - 1 : 0;
                    gather_wait(sets - 1 - set + kc + first_stages_after);
                }
                --set_left;
            } else {
                conv::cp_async_wait<STAGES - 2>();
            }
            wg::bar_wait(full_bar + (it % STAGES) * 8, (it / STAGES) & 1);
            conv::fence_proxy_async();
            // every thread's part of the stage (the transformed input's run), or of the tile's
            // gathered run (GI 1: of the set's), visible to every warpgroup's MMAs; the
            // filter's bulk copy is complete once its barrier is
            if (!GATHER || kc == 0 || set_start) __syncthreads();

            const unsigned a_base = smem_base + (it % STAGES) * stage_bytes;
            // the stage's filter chunk is the CTA's rotated one (see ShiftTile); so is the run's
            const unsigned b_base =
                GATHER ? run_base + ct.chunk(kc) * NPL * L * 32 : a_base + A_BYTES;
            wg::fence();
#pragma unroll
            for (int t = 0; t < TAPS; ++t) {
                const unsigned long long da =
                    wg::desc_plain(a_base + (t * 2 * BM + wm * 64) * 16, BM * 16, 128);
                const unsigned long long db =
                    wg::desc_plain(b_base + (tap_row(t, 2 * L) + wn * BN) * 16, L * 16, 128);
                // a tile's first MMA overwrites the last tile's sums: no zeroing copies, which
                // would make the compiler wait for every MMA before the loop's back edge
                wg::mma<BN, WS, XS>(acc, da, db, t == 0 && kc == 0 ? 0 : 1);
            }
            wg::commit();
            if (kc == 0) {  // where each column's output goes (-1: a dropped virtual pixel),
                            // while the tile's first MMAs run (virtual pixels fit 31 bits)
                for (int c = tid; c < TN; c += THREADS) {
                    const int v = static_cast<int>(v0) + c;
                    long long off = -1;
                    if (v < pixels_in) {
                        const int n = v / static_cast<int>(HWp);
                        const int rem = v - n * static_cast<int>(HWp);
                        const int oh = rem / Wp;
                        const int ow = rem - oh * Wp;
                        if (oh < OH && ow < OW) {
                            off = static_cast<long long>(n) * M * P + oh * OW + ow;
                        }
                    }
                    col_off[c] = off;
                }
            }
            // The stage refilled now was last read by the MMAs of item it - 1: each warpgroup
            // waits for its own (item it's stay in flight, so that the tensor cores go on from
            // item to item), then for the others; STAGES - 1 items are in flight while the
            // tensor cores work.
            wg::wait<1>();
            __syncthreads();
            if (it + STAGES - 1 < items) load_item((it + STAGES - 1) % STAGES);
            conv::cp_async_commit();
            if constexpr (ZW) {  // sum x'' per input pixel of the run, chunk by chunk
                for (int r = tid; r < NPL * L; r += THREADS) {
                    const int row = NPL == 1 ? r : r + r / L * L;  // [plane][k16 half][L]
                    uint4 u, w;
                    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                                 : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
                                 : "r"(b_base + row * 16));
                    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                                 : "=r"(w.x), "=r"(w.y), "=r"(w.z), "=r"(w.w)
                                 : "r"(b_base + (L + row) * 16));
                    int v = kc == 0 ? 0 : row_sum[r];
                    v = conv::byte_sum<XS>(u.x, v);
                    v = conv::byte_sum<XS>(u.y, v);
                    v = conv::byte_sum<XS>(u.z, v);
                    v = conv::byte_sum<XS>(u.w, v);
                    v = conv::byte_sum<XS>(w.x, v);
                    v = conv::byte_sum<XS>(w.y, v);
                    v = conv::byte_sum<XS>(w.z, v);
                    v = conv::byte_sum<XS>(w.w, v);
                    row_sum[r] = v;
                }
            }
        }
        wg::wait<0>();
        // ---- the tile's epilogue: out = acc - z_w[m] sum x''[p] + bias[m] -----------------
        // (the accumulators stay in the same registers from tile to tile: any copy of them
        // would make the compiler wait for every MMA)
        wg::fence_operands(acc);
        if constexpr (ZW) {
            __syncthreads();  // every row's sum
            for (int c = tid; c < TN; c += THREADS) {
                unsigned v = 0u;
#pragma unroll
                for (int t = 0; t < TAPS; ++t) {
                    v += static_cast<unsigned>(row_sum[c + tap_row(t, L)]);
                }
                xs_sum[c] = static_cast<int>(v);
            }
        }
        __syncthreads();  // the column offsets (and sums)
        {
            // Each warp's 16 rows leave 32 columns at a time through the warp's own block of
            // shared memory (rows 40 ints apart: the 8-byte fragment writes are conflict-free),
            // so that each store instruction writes 32 consecutive virtual pixels of one output
            // row: whole lines, where the fragments' own layout would give 32-byte pieces of 8
            // rows. Fragment layout: warp w of the warpgroup holds rows 16 w + l / 4 and + 8;
            // per n8 block j, columns 8 j + 2 (l % 4) + {0, 1}.
            // The bias and z_w terms are added in the fragments (a thread's two rows are
            // fixed), so the store loop only moves words.
            const int warp = tid >> 5;
            int* wst = epi + warp * (16 * EPI_PITCH);
            const int row0 = tm * BM + wm * 64 + (warp & 3) * 16;  // the warp's first row
            const int rows = Mg - row0;  // of which rows < 16 exist
            unsigned bm[2], zw[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = (lane >> 2) + 8 * h;
                const int m = g * Mg + (r < rows ? row0 + r : Mg - 1);  // any row of the group
                // once per output
                bm[h] = CL > 1 || ct.sp == 0 ? static_cast<unsigned>(bias[m]) : 0u;
                zw[h] = ZW ? static_cast<unsigned>(w_zp[m]) : 0u;
            }
            if constexpr (CL > 1) {
                // K split over the cluster: every CTA of it is past its MMAs (its run is
                // free); each sends its sums of the blocks it does not own, its own z_w term
                // taken off, to their owners, then adds what it received to the blocks it owns
                // (block by block, picked by compare chains as in the store loop below).
                const int rank = ct.sp;
                // where block ch's 16 bytes jj from source `slot` lie in its owner's memory
                auto recv_at = [&](int slot, int ch, int jj) {
                    return run_base + (((slot * OB + ch / CL) * 4 + jj) * THREADS + tid) * 16;
                };
                wg::cluster_sync();
#pragma unroll 1
                for (int ch = 0; ch < NB; ++ch) {
                    const int owner = ch % CL;
                    if (owner == rank) continue;
                    const int slot = rank < owner ? rank : rank - 1;
#pragma unroll
                    for (int cc = 0; cc < NB; ++cc) {
                        if (cc != ch) continue;
#pragma unroll
                        for (int jj = 0; jj < 4; ++jj) {
                            const int col = wn * BN + 32 * cc + 8 * jj + 2 * (lane & 3);
                            unsigned x0 = 0u, x1 = 0u;
                            if constexpr (ZW) {
                                const int2 xs = *reinterpret_cast<const int2*>(xs_sum + col);
                                x0 = static_cast<unsigned>(xs.x);
                                x1 = static_cast<unsigned>(xs.y);
                            }
                            const int e = 4 * (4 * cc + jj);
                            wg::st_cluster(recv_at(slot, ch, jj), static_cast<unsigned>(owner),
                                           static_cast<unsigned>(acc[e]) - zw[0] * x0,
                                           static_cast<unsigned>(acc[e + 1]) - zw[0] * x1,
                                           static_cast<unsigned>(acc[e + 2]) - zw[1] * x0,
                                           static_cast<unsigned>(acc[e + 3]) - zw[1] * x1);
                        }
                    }
                }
                wg::cluster_sync();
#pragma unroll 1
                for (int ch = rank; ch < NB; ch += CL) {
#pragma unroll 1
                    for (int slot = 0; slot < CL - 1; ++slot) {
#pragma unroll
                        for (int cc = 0; cc < NB; ++cc) {
                            if (cc != ch) continue;
#pragma unroll
                            for (int jj = 0; jj < 4; ++jj) {
                                uint4 u;
                                asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                                             : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
                                             : "r"(recv_at(slot, ch, jj)));
                                const int e = 4 * (4 * cc + jj);
                                acc[e] = static_cast<int>(static_cast<unsigned>(acc[e]) + u.x);
                                acc[e + 1] =
                                    static_cast<int>(static_cast<unsigned>(acc[e + 1]) + u.y);
                                acc[e + 2] =
                                    static_cast<int>(static_cast<unsigned>(acc[e + 2]) + u.z);
                                acc[e + 3] =
                                    static_cast<int>(static_cast<unsigned>(acc[e + 3]) + u.w);
                            }
                        }
                    }
                }
                __syncthreads();  // read before the CTA's next tile writes its run there
            }
            int* const out_rows = out + static_cast<long long>(g * Mg + row0) * P;
            // One copy of the store code for every block of 32 columns (the kernel runs once
            // per tile on most grids: its code is fetched cold, so its size is time): the loop
            // over the blocks is not unrolled, and each block's fragments are picked by a
            // compare chain, since register indices must be constants.
#pragma unroll 1
            for (int ch = 0; ch < NB; ++ch) {
                if (CL > 1 && ch % CL != ct.sp) continue;  // another CTA of the cluster's
#pragma unroll
                for (int cc = 0; cc < NB; ++cc) {
                    if (cc != ch) continue;
#pragma unroll
                    for (int jj = 0; jj < 4; ++jj) {
                        const int col = 8 * jj + 2 * (lane & 3);
                        int2 xs = make_int2(0, 0);
                        if constexpr (ZW) {
                            xs = *reinterpret_cast<const int2*>(xs_sum + wn * BN + 32 * cc + col);
                        }
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            const int e = 4 * (4 * cc + jj) + 2 * h;
                            const unsigned v0 = static_cast<unsigned>(acc[e]) + bm[h] -
                                                zw[h] * static_cast<unsigned>(xs.x);
                            const unsigned v1 = static_cast<unsigned>(acc[e + 1]) + bm[h] -
                                                zw[h] * static_cast<unsigned>(xs.y);
                            *reinterpret_cast<int2*>(wst + ((lane >> 2) + 8 * h) * EPI_PITCH +
                                                     col) =
                                make_int2(static_cast<int>(v0), static_cast<int>(v1));
                        }
                    }
                }
                __syncwarp();
                const long long off = col_off[wn * BN + 32 * ch + lane];
                if (off >= 0) {
                    // the column's 16 words first, all in flight together, then its stores
                    int v[16];
#pragma unroll
                    for (int r = 0; r < 16; ++r) v[r] = wst[r * EPI_PITCH + lane];
                    int* o = out_rows + off;
                    if (CL > 1 || splits == 1) {
#pragma unroll
                        for (int r = 0; r < 16; ++r) {
                            if (r < rows) o[static_cast<long long>(r) * P] = v[r];
                        }
                    } else {  // the splits' partial sums meet in the zeroed output (mod 2^32)
#pragma unroll
                        for (int r = 0; r < 16; ++r) {
                            if (r < rows) atomicAdd(o + static_cast<long long>(r) * P, v[r]);
                        }
                    }
                }
                __syncwarp();
            }
        }
    }
    conv::cp_async_wait<0>();
#endif
}

// ---- 1x1 layers whose images are one tile: the pointwise GEMM on the warpgroup MMA ----------
//
// Out[n]^T (HW x M) = X[n]^T (HW x C) . W^T (C x M) for a 1x1 window at unit stride, no
// padding, one group, HW <= 256 pixels a multiple of 4, C <= 256, the input's (n, c) planes
// contiguous with 4-byte aligned words. Such layers store 4 M bytes a pixel against C read:
// the output's stores are the time, and the kernel is built to start them early and keep them
// going. A CTA takes one image and a run of `run` consecutive chunks of 64 output channels.
// Pixels are the MMA's rows, taken from registers, and output channels its columns, read from
// the filter blocks in shared memory (K-major, [16-channel block][64 rows][16 bytes] a chunk).
// The image is copied in as it lies (one bulk copy where its planes lie back to back, else
// 4-byte copies into rows an odd number of words apart) and each thread loads, for its 4
// consecutive pixels (a word of each channel row), its 8 channels of each step of 32 and
// transposes them in registers into the A fragments of two m64 tiles (rows g and g + 8 of
// each: pixels 4 W, 4 W + 1 of tile 0 and 4 W + 2, 4 W + 3 of tile 1), kept for the whole run:
// no K-major copy of the image is made. The words W = (g & 3) + 4 warp + 16 (g >> 2) + 32 wgi
// put a warp's 32 loads of a channel row in 32 banks where the rows are an odd number of words
// apart, and its output stores (16 bytes: one channel of the thread's 4 pixels) in distinct
// bank quads where HW / 4 is odd (with HW a multiple of 16, two passes a quarter-warp). Both
// warpgroups take every chunk of the run (each half of the image's 256 pixel rows): its 2 KS
// MMAs a warpgroup, its rows' constants while they run, then a staging block
// in the output's order (an image's rows of one channel after another) that leaves as one
// bulk copy while the next chunk's MMAs run (two staging blocks). The filter blocks come in
// three at a time, the first before the image and the others behind it: where a registered
// operator keeps them (`prepared`, `wb`: per chunk its block, zero-padded, then its 64 rows'
// sums as int32), one bulk copy each, sums included; else 16-byte copies of the rows of `w`
// (M, ldw), the sums made from the block. Grid: one CTA per (image, run), the run fastest;
// 256 threads; KS = ceil(C / 32). Dynamic shared memory: max(2 * 64 * HW * 4, 32 KS * 4 ld +
// 256) (the staging blocks, first the image in rows of ld words: HW / 4 where the planes lie
// back to back, else HW / 4 made odd) + 3 * (KS * 2048 + 256) (filter blocks and their sums)
// + 1024 (each chunk's row constants).
namespace wg {
#define DML_WR_ASM(ATYPE, BTYPE)                                                                \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                   \
                 "wgmma.mma_async.sync.aligned.m64n64k32.s32." ATYPE "." BTYPE " {" DML_WG_L4    \
                 "}, {%32, %33, %34, %35}, %36, p;\n}\n"                                           \
                 : DML_WG_O4                                                                     \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale))
// d (64 x 64) = A (64 x 32 bytes, this thread's fragment registers) * B (64 x 32 bytes)^T,
// plus d where scale is 1.
template <bool AS, bool BS>
__device__ __forceinline__ void mma_regs(int (&d)[32], const unsigned (&a)[4],
                                         unsigned long long db, int scale) {
    DML_CONV_BYTE_TYPES(DML_WR_ASM, AS, BS)
}
#undef DML_WR_ASM
}  // namespace wg

template <typename WT, typename XT, bool ZW, int KS>
__global__ void __launch_bounds__(256, 1)
    conv_int_wgmma_pointwise(const unsigned char* __restrict__ x,
                             const unsigned char* __restrict__ w, const int* __restrict__ w_zp,
                             int* __restrict__ out, const unsigned char* __restrict__ wb, int M,
                             int C, int HW, int mchunks, int ldw, int x_zp, int zw_all,
                             long long xs_n, long long xs_c, int run, int runs, int dense,
                             int prepared) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __trap();  // built for another target; the launcher sends work here on sm_90 only
#elif defined(__CUDA_ARCH__)
    constexpr bool WS = conv::is_signed_byte<WT>::value;
    constexpr bool XS = conv::is_signed_byte<XT>::value;
    static_assert(KS >= 1 && KS <= 8, "KS");
    constexpr int KP = 32 * KS;
    constexpr int W_BYTES = KP * 64;     // a filter block
    constexpr int SLOT = W_BYTES + 256;  // and its rows' sums, where they are kept with it
    constexpr int BLOCKS = 3;            // filter blocks in flight
    extern __shared__ __align__(128) unsigned char smem[];
    const int staged_bytes = 64 * HW * 4;
    const int words = HW >> 2;                    // a channel row's words
    const int ld = dense ? words : (words | 1);   // the image's rows, in words
    const int front = max(2 * staged_bytes, KP * ld * 4 + 256);
    const unsigned base = conv::smem_addr(smem);
    const unsigned w_base = base + front;
    int* const biases = reinterpret_cast<int*>(smem + front + BLOCKS * SLOT);  // [2][64]
    int* const row_zw = biases + 128;                                         // [2][64]
    const int tid = threadIdx.x;
    const int wgi = tid >> 7;
    const int lane = tid & 31;
    const int warp = (tid >> 5) & 3;
    const int g = lane >> 2;
    const int t = lane & 3;
    const int img = blockIdx.x / runs;
    const int first = (blockIdx.x - img * runs) * run;
    const int count = min(run, mchunks - first);

    __shared__ __align__(8) unsigned long long bar_mem[1 + BLOCKS];
    const unsigned image_bar = conv::smem_addr(bar_mem);
    const unsigned filter_bar = image_bar + 8;
    if (tid == 0) {
#pragma unroll
        for (int b = 0; b < 1 + BLOCKS; ++b) wg::bar_init(image_bar + 8 * b);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (tid < 128) biases[tid] = 0;
    __syncthreads();
    // The run's i-th chunk into filter block i % BLOCKS, one commit group (empty past the run).
    auto load_filter = [&](int i) {
        const int b = i % BLOCKS;
        const int mc = first + i;
        if (prepared && i < count) {
            if (tid == 0) {
                wg::bulk_load(w_base + b * SLOT, wb + static_cast<long long>(mc) * SLOT, SLOT,
                              filter_bar + 8 * b);
            }
        } else if (i < count) {
            const int c16 = (C + 15) >> 4;
            for (int q = tid; q < 64 * 2 * KS; q += 256) {
                const int row = q & 63;
                const int k16 = q >> 6;
                const int m = mc * 64 + row;
                const bool in = m < M && k16 < c16;
                const unsigned char* src =
                    in ? w + static_cast<long long>(m) * ldw + 16 * k16 : w;
                conv::cp_async16(w_base + b * SLOT + (k16 * 64 + row) * 16, src, in ? 16 : 0);
            }
        }
        conv::cp_async_commit();
    };
    // Launched as a programmatic dependent (`prepared`), the grid may start while the grid
    // before it finishes: until the wait it reads only the kept filter blocks. The first
    // chunk's block, then the image, then the later blocks: every SM asks for them at once,
    // and the image and the first block are what the first MMAs wait for.
    if (prepared) load_filter(0);
    wg::wait_prior_grid();
    wg::allow_next_grid();
    if (!prepared) load_filter(0);
    // The image as it lies, channel rows `ld` words apart, rows past C zeros: one bulk copy
    // where its planes lie back to back, else 4-byte copies.
    {
        const unsigned char* xi = x + img * xs_n;
        if (dense) {
            const int bytes = C * HW;
            for (int q = bytes / 4 + tid; q < KP * words; q += 256) {
                asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(base + 4 * q), "r"(0u) : "memory");
            }
            if (tid == 0) wg::bulk_load(base, xi, static_cast<unsigned>(bytes), image_bar);
            wg::bar_wait(image_bar, 0);
        } else {
            for (int q = tid; q < KP * ld; q += 256) {
                const int c = q / ld;
                const int pw = q - c * ld;
                const bool in = c < C && pw < words;
                conv::cp_async4(base + 4 * q, in ? xi + c * xs_c + 4 * pw : xi, in ? 4 : 0);
            }
            conv::cp_async_commit();
            conv::cp_async_wait<0>();
        }
    }
    for (int i = 1; i < BLOCKS; ++i) load_filter(i);  // the later filter blocks, behind it
    __syncthreads();  // the image in
    // This thread's A fragments for all of K, and its pixels' channel sums.
    const int wd = (g & 3) + 4 * warp + 16 * (g >> 2) + 32 * wgi;  // its word: pixels 4 wd ..
    unsigned a[KS][2][4];
    int xsum[4] = {0, 0, 0, 0};
    {
        const unsigned* raw = reinterpret_cast<const unsigned*>(smem);
#pragma unroll
        for (int s = 0; s < KS; ++s) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                unsigned in[4];
#pragma unroll
                for (int r = 0; r < 4; ++r) in[r] = raw[(32 * s + 16 * half + 4 * t + r) * ld + wd];
                unsigned o[4];  // o[j]: pixel 4 wd + j, 4 channels
                conv::transpose4(in, o);
#pragma unroll
                for (int u = 0; u < 2; ++u) {
                    a[s][u][2 * half] = o[2 * u];
                    a[s][u][2 * half + 1] = o[2 * u + 1];
                }
                if constexpr (ZW) {
#pragma unroll
                    for (int j = 0; j < 4; ++j) xsum[j] = conv::byte_sum<XS>(o[j], xsum[j]);
                }
            }
        }
        if constexpr (ZW) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                xsum[j] += __shfl_xor_sync(0xffffffffu, xsum[j], 1);
                xsum[j] += __shfl_xor_sync(0xffffffffu, xsum[j], 2);
            }
        }
    }
    const bool live = 4 * wd < HW;
    int acc[2][32];
    for (int i = 0; i < count; ++i) {
        const int mc = first + i;
        const int b = i & 1;  // staging block, row constants
        const unsigned w_mine = w_base + (i % BLOCKS) * SLOT;
        if (prepared) {
            wg::bar_wait(filter_bar + 8 * (i % BLOCKS), (i / BLOCKS) & 1);
        } else {
            conv::cp_async_wait<BLOCKS - 1>();  // this chunk's block (later ones may still come)
            conv::fence_proxy_async();
            __syncthreads();
        }
        wg::fence();
#pragma unroll
        for (int u = 0; u < 2; ++u) {
#pragma unroll
            for (int s = 0; s < KS; ++s) {
                wg::mma_regs<XS, WS>(acc[u], a[s][u],
                                   wg::desc_plain(w_mine + s * 2 * 64 * 16, 64 * 16, 128),
                                   s == 0 ? 0 : 1);
            }
        }
        wg::commit();
        // The chunk's row constants while the MMAs run: bias = C z_x z_w - z_x sum w, from the
        // row sums kept after the block (`prepared`), else from a thread a row and a quarter
        // of its 16-byte pieces (a quarter-warp's 8 rows in 8 bank quads), each adding its
        // part in shared memory; and, where some is not 0, z_w.
        {
            const int row = tid & 63;
            const int part = tid >> 6;
            const unsigned zw = part == 0 ? conv::row_zw(w_zp, zw_all, mc * 64 + row, M) : 0u;
            int sum = 0;
#pragma unroll
            for (int k16 = part; k16 < (prepared ? 0 : 2 * KS); k16 += 4) {
                uint4 v;
                asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                             : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                             : "r"(w_mine + (k16 * 64 + row) * 16));
                sum = conv::byte_sum<WS>(v.x, conv::byte_sum<WS>(v.y, sum));
                sum = conv::byte_sum<WS>(v.z, conv::byte_sum<WS>(v.w, sum));
            }
            if (prepared && part == 0) {
                const int* kept = reinterpret_cast<const int*>(smem + front + (i % BLOCKS) * SLOT);
                biases[64 * b + row] =
                    static_cast<int>(conv::row_bias(C, x_zp, zw, kept[W_BYTES / 4 + row]));
            } else if (!prepared && part < 2 * KS) {  // each part's - z_x sum, one C z_x z_w
                atomicAdd(reinterpret_cast<unsigned*>(biases) + 64 * b + row,
                          conv::row_bias(part == 0 ? C : 0, x_zp, zw, sum));
            }
            if (ZW && part == 0) row_zw[64 * b + row] = static_cast<int>(zw);
        }
        // Staging block b is free once the copy of chunk i - 2 has read it.
        if (tid == 0) asm volatile("cp.async.bulk.wait_group.read 1;\n" ::: "memory");
        wg::wait<0>();
        wg::fence_operands(acc[0]);
        wg::fence_operands(acc[1]);
        __syncthreads();  // the chunk's MMAs done (its filter block free), its row sums in
        load_filter(i + BLOCKS);
        // acc[u][4 j + 2 h + e]: pixel 4 wd + 2 u + h, channel 8 j + 2 t + e. The rows'
        // constants are read first, so that the loads are not held behind the stores.
        const unsigned staged = base + b * staged_bytes + 16 * wd;
        unsigned bias[16], zw[16];
        if (live) {
#pragma unroll
            for (int q = 0; q < 16; ++q) {
                const int ch = 8 * (q >> 1) + 2 * t + (q & 1);
                bias[q] = static_cast<unsigned>(biases[64 * b + ch]);
                zw[q] = ZW ? static_cast<unsigned>(row_zw[64 * b + ch]) : 0u;
            }
        }
        // The first chunk leaves in pieces of 16 rows, each once it is staged (no copy is in
        // flight yet, and the call waits on the stores); a later chunk's copy queues behind
        // the ones before it, in one piece.
        const int rows = min(64, M - mc * 64);
#pragma unroll
        for (int piece = 0; piece < 4; ++piece) {
            if (live) {
#pragma unroll
                for (int q = 4 * piece; q < 4 * piece + 4; ++q) {
                    const int j = q >> 1;
                    const int e = q & 1;
                    unsigned v[4];
#pragma unroll
                    for (int k = 0; k < 4; ++k) {
                        v[k] = static_cast<unsigned>(acc[k >> 1][4 * j + 2 * (k & 1) + e]) +
                               bias[q];
                        if constexpr (ZW) v[k] -= zw[q] * static_cast<unsigned>(xsum[k]);
                    }
                    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(
                                     staged + (8 * j + 2 * t + e) * HW * 4),
                                 "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3])
                                 : "memory");
                }
            }
            if (i == 0 || piece == 3) {
                conv::fence_proxy_async();  // the staged rows, visible to the bulk copy
                __syncthreads();            // (and, the last, the row constants read)
                const int lo = i == 0 ? 16 * piece : 0;
                const int hi = min(rows, 16 * piece + 16);
                if (tid == 0 && lo < hi) {
                    conv::bulk_store(out + (static_cast<long long>(img) * M + mc * 64 + lo) * HW,
                                     base + b * staged_bytes + lo * HW * 4,
                                     static_cast<unsigned>((hi - lo) * HW * 4));
                }
            }
        }
        if (tid < 64) biases[64 * b + tid] = 0;
        if (tid == 0) conv::bulk_commit();
    }
    if (tid == 0) conv::bulk_wait_read();  // the shared memory outlives the copies' reads
    conv::cp_async_wait<0>();
#endif
}

}  // namespace dml

#ifdef DMLSERVE_EXPLICIT_INSTANTIATION
// One per accumulator width and signedness pair (the kernel's signature, types only).
#define DML_WG_INST(WT, XT, BM, BN, ST, ZW)                                                       \
    template __global__ void dml::conv_int_wgmma<WT, XT, BM, BN, ST, ZW>(                        \
        const unsigned char*, const unsigned char*, const int*, const int*, int*, int, int, int, \
        int, int, int, int, int, int, int, int, int, int, int, int)
DML_WG_INST(signed char, unsigned char, 128, 128, 6, false);
DML_WG_INST(unsigned char, signed char, 128, 256, 4, true);
DML_WG_INST(signed char, signed char, 64, 64, 8, true);
DML_WG_INST(unsigned char, unsigned char, 64, 128, 6, false);
DML_WG_INST(signed char, unsigned char, 128, 64, 8, true);
#undef DML_WG_INST
// (clusters, CL > 1, on tiles of up to 128 pixels only, as the launcher makes them)
#define DML_WS_INST(WT, XT, WM, WN, BN, ST, ZW, GI, SH, SW, CL)                                  \
    template __global__ void                                                                      \
    dml::conv_int_wgmma_shift<WT, XT, WM, WN, BN, ST, ZW, 9, GI, SH, SW, CL>(                     \
        const unsigned char*, const unsigned char*, const int*, const int*, int*, int, int, int,   \
        int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int,   \
        unsigned, long long, long long, long long, long long, int, int, int)
DML_WS_INST(signed char, unsigned char, 2, 1, 256, 4, false, 0, 1, 1, 1);
DML_WS_INST(unsigned char, signed char, 2, 1, 128, 4, true, 2, 1, 1, 2);
DML_WS_INST(signed char, signed char, 1, 1, 256, 3, true, 0, 1, 1, 1);
DML_WS_INST(unsigned char, unsigned char, 1, 1, 128, 4, false, 2, 1, 1, 3);
DML_WS_INST(signed char, unsigned char, 2, 1, 224, 4, false, 2, 1, 1, 1);
DML_WS_INST(unsigned char, signed char, 2, 1, 224, 4, true, 0, 1, 1, 1);
DML_WS_INST(signed char, unsigned char, 1, 1, 128, 4, true, 2, 1, 1, 1);
DML_WS_INST(signed char, unsigned char, 2, 1, 256, 4, true, 2, 1, 1, 1);
DML_WS_INST(unsigned char, signed char, 1, 1, 224, 3, false, 3, 1, 1, 1);
DML_WS_INST(signed char, unsigned char, 1, 1, 224, 3, true, 3, 1, 1, 1);
DML_WS_INST(signed char, unsigned char, 2, 1, 224, 2, false, 2, 2, 2, 1);
DML_WS_INST(unsigned char, signed char, 2, 1, 128, 3, true, 2, 2, 2, 2);
DML_WS_INST(signed char, signed char, 1, 1, 256, 2, true, 2, 2, 1, 1);
DML_WS_INST(unsigned char, unsigned char, 1, 1, 128, 4, false, 2, 1, 2, 1);
DML_WS_INST(signed char, unsigned char, 2, 1, 64, 4, true, 2, 1, 1, 4);
DML_WS_INST(unsigned char, unsigned char, 1, 1, 64, 4, false, 0, 1, 1, 2);
DML_WS_INST(signed char, unsigned char, 2, 1, 224, 4, false, 1, 1, 1, 1);
DML_WS_INST(unsigned char, signed char, 1, 1, 224, 3, true, 1, 1, 1, 1);
DML_WS_INST(signed char, unsigned char, 2, 1, 224, 2, true, 1, 2, 2, 1);
DML_WS_INST(signed char, signed char, 2, 1, 128, 4, false, 1, 1, 1, 2);
#undef DML_WS_INST
#define DML_WP_INST(WT, XT, ZW, KS)                                                             \
    template __global__ void dml::conv_int_wgmma_pointwise<WT, XT, ZW, KS>(                   \
        const unsigned char*, const unsigned char*, const int*, int*, const unsigned char*, int, \
        int, int, int, int, int, int, long long, long long, int, int, int, int)
DML_WP_INST(signed char, unsigned char, false, 8);
DML_WP_INST(unsigned char, signed char, true, 8);
DML_WP_INST(signed char, signed char, true, 2);
DML_WP_INST(unsigned char, unsigned char, false, 1);
#undef DML_WP_INST
#endif
