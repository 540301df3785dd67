// CONVOLUTION_INTEGER with a 1x1 window at unit stride, no padding and one group, on an input
// whose (n, c) planes are contiguous: per image a GEMM, Out[n] (M x HW) = W (M x C) . X[n]
// (C x HW), read straight from the NCHW input with no transform pass. The launcher
// (kernels/cupy_backend/_convolution_integer_pointwise.py) picks it where it applies.
//
// The layer is memory-bound (C bytes in, 4M bytes out per pixel at a few hundred multiply-adds
// per byte), so the kernel is built around the loads and stores. A CTA owns 256 pixels of one
// image x 64 output channels and walks K in steps of 32 channels through a STAGES-deep
// cp.async ring: a step's tile is 32 channel rows x 256 contiguous bytes (whole DRAM bursts;
// 16-byte copies where the planes allow, else 4-byte ones). Warp w reads its 32 pixels: lane
// (g, t) takes the words of channels 4t + i and 16 + 4t + i at pixels 4g .. 4g+3 and transposes
// each 4x4 block of bytes in registers, which gives exactly mma.m16n8k32's B fragments for 4
// instances j, column g of instance j being pixel 4g + j. Tile rows are stored with their
// 16-byte chunks permuted (chunk ^ 2t for rows 4t.. and 16 + 4t..), so those reads are free of
// bank conflicts. The accumulators then hold, per lane and output channel, the 8 consecutive
// pixels 8t .. 8t+7, which leave through shared memory as whole 128-byte lines. The CTA's 64
// filter rows (the filter itself where it lies as (M, C) rows of 16-byte multiples, else a
// padded copy) are copied into shared memory with the first stage and read by ldmatrix, so a
// call needs no filter preparation.
//
// Zero points: sum (x - z_x)(w - z_w) = sum x w - z_w[m] sum x + C z_x z_w[m] - z_x sum w[m];
// the CTA sums its filter rows once for the last two terms, sum x per pixel comes from dp4a on
// the B fragments (ZW: some z_w is not 0). Channels past C and pixels past the image load as 0 and weigh 0.
// Arithmetic wraps modulo 2^32 like the reference's int32.

#include "convolution_integer_common.cuh"

namespace dml {

constexpr int PW_WARPS = 8;   // warps per CTA
constexpr int PW_MT = 4;      // 16-row m-tiles per warp: 64 output channels
constexpr int PW_PIXELS = PW_WARPS * 32;  // pixels per CTA: one tile row of bytes
constexpr int PW_STAGES = 4;  // cp.async ring depth
constexpr int PW_STAGE_BYTES = 32 * PW_PIXELS;
constexpr int PW_OUT_ROW = PW_PIXELS + 4;  // ints per staged output row (bank spread)
constexpr int PW_HEAD = 512;  // the rows' constants and zero points
constexpr int PW_BODY = PW_STAGES * PW_STAGE_BYTES > 32 * PW_OUT_ROW * 4
                            ? PW_STAGES * PW_STAGE_BYTES : 32 * PW_OUT_ROW * 4;

// Where byte `col` of tile row `row` lies in the stage: its 16-byte chunk permuted by the row.
__device__ __forceinline__ int pw_tile_offset(int row, int col) {
    return row * PW_PIXELS + (((col >> 4) ^ (2 * ((row >> 2) & 3))) << 4) + (col & 15);
}

__device__ __forceinline__ void pw_copy4(unsigned dst, const void* src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes));
}

// Stage `ks` of the tile (channels 32 ks .., pixels p0 .. p0 + 255 of the image at `xi`) into
// shared memory at `stage`; past C or HW: zeros. Thread: row tid / 8; VEC16: 16-byte chunks
// tid % 8 and + 8; else 4-byte words tid % 8 + 8 k.
template <bool VEC16>
__device__ __forceinline__ void pw_stage(unsigned stage, const unsigned char* xi, long long xs_c,
                                         int ks, int C, int HW, int p0) {
    const int row = threadIdx.x >> 3;
    const int c = ks * 32 + row;
    const unsigned char* src = xi + static_cast<long long>(c < C ? c : 0) * xs_c + p0;
    if constexpr (VEC16) {
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const int col = 16 * ((threadIdx.x & 7) + 8 * k);
            const bool in = c < C && p0 + col < HW;
            conv::cp_async16(stage + pw_tile_offset(row, col), in ? src + col : xi, in ? 16 : 0);
        }
    } else {
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const int col = 4 * ((threadIdx.x & 7) + 8 * k);
            const bool in = c < C && p0 + col < HW;
            pw_copy4(stage + pw_tile_offset(row, col), in ? src + col : xi, in ? 4 : 0);
        }
    }
}

// x (N, C, HW) bytes with pixel stride 1 and 4-byte aligned words (HW, xs_c, xs_n multiples of
// 4; VEC16: of 16, and the planes 16-byte aligned); w (M, ldw) filter rows, 16-byte aligned,
// ldw a multiple of 16 >= C rounded up to 16 (bytes past C are read only where C % 16 != 0 and
// must then be 0); out (N, M, HW) int32. Grid: one CTA per (image, 256-pixel tile, 64-channel
// chunk), the chunk fastest; dynamic shared memory PW_HEAD + PW_BODY + 64 (ceil(C / 32) 32 + 16).
template <typename WT, typename XT, bool ZW, bool VEC16>
__global__ void __launch_bounds__(PW_WARPS * 32, 2)
    conv_int_pointwise(const unsigned char* __restrict__ x, const unsigned char* __restrict__ w,
                       const int* __restrict__ w_zp, int* __restrict__ out, int M, int C, int HW,
                       int mchunks, int tiles, int ldw, int x_zp, int zw_all, long long xs_n,
                       long long xs_c) {
    constexpr bool WS = conv::is_signed_byte<WT>::value;
    constexpr bool XS = conv::is_signed_byte<XT>::value;
    extern __shared__ __align__(128) unsigned char pw_smem[];
    int* const bias_s = reinterpret_cast<int*>(pw_smem);          // 64 per-row constants
    int* const zw_s = bias_s + 64;                                  // 64 filter zero points
    unsigned char* const ring = pw_smem + PW_HEAD;                  // stages, then the output
    unsigned char* const w_s = ring + PW_BODY;                      // 64 rows of ksteps * 32 + 16
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int g = lane >> 2;
    const int t = lane & 3;
    const int mc = blockIdx.x % mchunks;
    const int rest = blockIdx.x / mchunks;
    const int img = rest / tiles;
    const int p0 = (rest - img * tiles) * PW_PIXELS;
    const unsigned char* xi = x + img * xs_n;
    const int ksteps = (C + 31) >> 5;
    const int w_row = ksteps * 32 + 16;  // the 16: rows 4 banks apart, ldmatrix conflict-free
    const unsigned base = conv::smem_addr(ring);
    const unsigned w_base = conv::smem_addr(w_s);

    // The CTA's filter rows, zeros past M and past C rounded up to 16, with the first stage.
    const int row_chunks = ksteps * 2;
    const int c16 = (C + 15) >> 4;
    for (int k = threadIdx.x; k < 64 * row_chunks; k += PW_WARPS * 32) {
        const int row = k / row_chunks;
        const int chunk = k - row * row_chunks;
        const int m = mc * 64 + row;
        const bool in = m < M && chunk < c16;
        const unsigned char* src = in ? w + static_cast<long long>(m) * ldw + 16 * chunk : w;
        conv::cp_async16(w_base + row * w_row + 16 * chunk, src, in ? 16 : 0);
    }
#pragma unroll
    for (int s = 0; s < PW_STAGES - 1; ++s) {
        if (s < ksteps) pw_stage<VEC16>(base + s * PW_STAGE_BYTES, xi, xs_c, s, C, HW, p0);
        conv::cp_async_commit();
    }
    int acc[PW_MT][4][4];
#pragma unroll
    for (int mt = 0; mt < PW_MT; ++mt) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[mt][j][r] = 0;
        }
    }
    int xsum[4] = {0, 0, 0, 0};
    // This lane's words: rows 4t + i (+ 16), bytes 4g .. of the warp's 32 columns.
    const int lane_offset = pw_tile_offset(4 * t, 32 * warp + 4 * g);
    // ldmatrix rows: lanes 8q .. 8q + 7 address matrix q = (rows +8 if q odd, bytes +16 if q > 1).
    const unsigned a_lane = w_base + ((lane & 7) + 8 * ((lane >> 3) & 1)) * w_row + 16 * (lane >> 4);
    for (int ks = 0; ks < ksteps; ++ks) {
        conv::cp_async_wait<PW_STAGES - 2>();
        __syncthreads();  // stage ks landed for all; stage ks - 1 is free for the next copy
        if (ks == 0) {
            // Per filter row: C z_x z_w - z_x sum w (mod 2^32); 4 threads a row.
            const int row = threadIdx.x >> 2;
            const int m = mc * 64 + row;
            int sum = 0;
            for (int chunk = threadIdx.x & 3; chunk < row_chunks; chunk += 4) {
                const uint4 v = *reinterpret_cast<const uint4*>(w_s + row * w_row + 16 * chunk);
                sum = conv::byte_sum<WS>(v.x, conv::byte_sum<WS>(v.y, sum));
                sum = conv::byte_sum<WS>(v.z, conv::byte_sum<WS>(v.w, sum));
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            if ((threadIdx.x & 3) == 0) {
                const unsigned zw = m >= M ? 0u
                                    : static_cast<unsigned>(zw_all == conv::PER_CHANNEL ? w_zp[m]
                                                                                       : zw_all);
                const unsigned zx = static_cast<unsigned>(x_zp);
                bias_s[row] = static_cast<int>(static_cast<unsigned>(C) * zx * zw -
                                               zx * static_cast<unsigned>(sum));
                zw_s[row] = static_cast<int>(zw);
            }
        }
        const int next = ks + PW_STAGES - 1;
        if (next < ksteps) {
            pw_stage<VEC16>(base + (next % PW_STAGES) * PW_STAGE_BYTES, xi, xs_c, next, C, HW, p0);
        }
        conv::cp_async_commit();
        const unsigned char* tile = ring + (ks % PW_STAGES) * PW_STAGE_BYTES + lane_offset;
        unsigned lo[4], hi[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            lo[i] = *reinterpret_cast<const unsigned*>(tile + i * PW_PIXELS);
            hi[i] = *reinterpret_cast<const unsigned*>(tile + (16 + i) * PW_PIXELS);
        }
        unsigned b0[4], b1[4];
        conv::transpose4(lo, b0);
        conv::transpose4(hi, b1);
        if constexpr (ZW) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                xsum[j] = conv::byte_sum<XS>(b1[j], conv::byte_sum<XS>(b0[j], xsum[j]));
            }
        }
#pragma unroll
        for (int mt = 0; mt < PW_MT; ++mt) {
            unsigned a[4];
            conv::ldmatrix_x4(a, a_lane + mt * 16 * w_row + 32 * ks);
#pragma unroll
            for (int j = 0; j < 4; ++j) conv::mma_k32<WS, XS>(acc[mt][j], a, b0[j], b1[j]);
        }
    }

    // The lane stores pixels 8t .. 8t+3 (accumulators 0 / 2 of instances j) and 8t+4 ..
    // 8t+7 (1 / 3): the sums of x of lanes 8t and 8t+4's groups, summed over their t.
    int sa[4] = {0, 0, 0, 0};
    int sb[4] = {0, 0, 0, 0};
    if constexpr (ZW) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            xsum[j] += __shfl_xor_sync(0xffffffffu, xsum[j], 1);
            xsum[j] += __shfl_xor_sync(0xffffffffu, xsum[j], 2);
            sa[j] = __shfl_sync(0xffffffffu, xsum[j], 8 * t);
            sb[j] = __shfl_sync(0xffffffffu, xsum[j], 8 * t + 4);
        }
    }
    // Through shared memory (the ring is free now), 32 output channels at a time, so every
    // store to the output is whole 128-byte lines: lanes write their 8 pixels per channel,
    // then each warp copies 512 contiguous bytes of a channel row per instruction.
    conv::cp_async_wait<0>();
    __syncthreads();
    int* staged = reinterpret_cast<int*>(ring);
    int* out_img = out + static_cast<long long>(img) * M * HW;
    const int col = 32 * warp + 8 * t;
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
#pragma unroll
        for (int mt2 = 0; mt2 < 2; ++mt2) {
            const int mt = 2 * pass + mt2;
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int row = mt * 16 + g + 8 * half;
                const unsigned b = static_cast<unsigned>(bias_s[row]);
                const unsigned zw = ZW ? static_cast<unsigned>(zw_s[row]) : 0u;
                int v[8];
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    v[j] = static_cast<int>(static_cast<unsigned>(acc[mt][j][2 * half]) -
                                            zw * static_cast<unsigned>(sa[j]) + b);
                    v[4 + j] = static_cast<int>(static_cast<unsigned>(acc[mt][j][2 * half + 1]) -
                                                zw * static_cast<unsigned>(sb[j]) + b);
                }
                int* dst = staged + (mt2 * 16 + g + 8 * half) * PW_OUT_ROW + col;
                *reinterpret_cast<int4*>(dst) = make_int4(v[0], v[1], v[2], v[3]);
                *reinterpret_cast<int4*>(dst + 4) = make_int4(v[4], v[5], v[6], v[7]);
            }
        }
        __syncthreads();
        for (int k = threadIdx.x; k < 32 * (PW_PIXELS / 4); k += PW_WARPS * 32) {
            const int row = k / (PW_PIXELS / 4);
            const int px = 4 * (k % (PW_PIXELS / 4));
            const int m = mc * 64 + pass * 32 + row;
            if (m < M && p0 + px < HW) {
                *reinterpret_cast<int4*>(out_img + static_cast<long long>(m) * HW + p0 + px) =
                    *reinterpret_cast<const int4*>(staged + row * PW_OUT_ROW + px);
            }
        }
        __syncthreads();
    }
}

}  // namespace dml

#ifdef DMLSERVE_EXPLICIT_INSTANTIATION
#define DML_PW(WT, XT, ZW, VEC16)                                                            \
    template __global__ void dml::conv_int_pointwise<WT, XT, ZW, VEC16>(                     \
        const unsigned char*, const unsigned char*, const int*, int*, int, int, int, int, int, \
        int, int, int, long long, long long)
DML_PW(signed char, unsigned char, false, true);
DML_PW(signed char, unsigned char, true, false);
DML_PW(unsigned char, signed char, false, false);
DML_PW(signed char, signed char, true, true);
DML_PW(unsigned char, unsigned char, true, true);
#undef DML_PW
#endif
