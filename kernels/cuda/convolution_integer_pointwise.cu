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
            conv::cp_async4(stage + pw_tile_offset(row, col), in ? src + col : xi, in ? 4 : 0);
        }
    }
}

// The CTA's 64 filter rows of output-channel chunk `mc` (rows of w_row bytes at `dst`), zeros
// past M and past C rounded up to 16.
__device__ __forceinline__ void pw_filter_rows(unsigned dst, const unsigned char* w, int ldw,
                                               int mc, int M, int row_chunks, int c16,
                                               int w_row) {
    for (int k = threadIdx.x; k < 64 * row_chunks; k += PW_WARPS * 32) {
        const int row = k / row_chunks;
        const int chunk = k - row * row_chunks;
        const int m = mc * 64 + row;
        const bool in = m < M && chunk < c16;
        const unsigned char* src = in ? w + static_cast<long long>(m) * ldw + 16 * chunk : w;
        conv::cp_async16(dst + row * w_row + 16 * chunk, src, in ? 16 : 0);
    }
}

// Per filter row of chunk `mc` (4 threads a row, 256 threads): its constant terms into bias_s
// and its zero point into zw_s.
template <bool WS>
__device__ __forceinline__ void pw_row_constants(const unsigned char* w_s, int w_row,
                                                 int row_chunks, int mc, int M, int C,
                                                 int x_zp, int zw_all,
                                                 const int* __restrict__ w_zp, int* bias_s,
                                                 int* zw_s) {
    const int row = threadIdx.x >> 2;
    int sum = 0;
    for (int chunk = threadIdx.x & 3; chunk < row_chunks; chunk += 4) {
        const uint4 v = *reinterpret_cast<const uint4*>(w_s + row * w_row + 16 * chunk);
        sum = conv::byte_sum<WS>(v.x, conv::byte_sum<WS>(v.y, sum));
        sum = conv::byte_sum<WS>(v.z, conv::byte_sum<WS>(v.w, sum));
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if ((threadIdx.x & 3) == 0) {
        const unsigned zw = conv::row_zw(w_zp, zw_all, mc * 64 + row, M);
        bias_s[row] = static_cast<int>(conv::row_bias(C, x_zp, zw, sum));
        zw_s[row] = static_cast<int>(zw);
    }
}

// One step of 32 channels: the lane's words of the step's tile (`tile`: the stage plus the
// lane's offset) transposed into B fragments, summed into xsum where `sum`, and the MMAs of the
// warp's m-tiles against the filter rows' step (`a_addr`: the lane's ldmatrix address of it).
// ROWS: the A fragments' bytes summed too, rows g and g + 8 of each m-tile into wsum (the lane's
// 8 of each row's 32; the 4 lanes of a group hold all of them).
template <bool WS, bool XS, bool ROWS>
__device__ __forceinline__ void pw_step(int (&acc)[PW_MT][4][4], int (&xsum)[4], bool sum,
                                        int (&wsum)[PW_MT][2], const unsigned char* tile,
                                        unsigned a_addr, int w_row) {
    unsigned lo[4], hi[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        lo[i] = *reinterpret_cast<const unsigned*>(tile + i * PW_PIXELS);
        hi[i] = *reinterpret_cast<const unsigned*>(tile + (16 + i) * PW_PIXELS);
    }
    unsigned b0[4], b1[4];
    conv::transpose4(lo, b0);
    conv::transpose4(hi, b1);
    if (sum) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            xsum[j] = conv::byte_sum<XS>(b1[j], conv::byte_sum<XS>(b0[j], xsum[j]));
        }
    }
#pragma unroll
    for (int mt = 0; mt < PW_MT; ++mt) {
        unsigned a[4];
        conv::ldmatrix_x4(a, a_addr + mt * 16 * w_row);
#pragma unroll
        for (int j = 0; j < 4; ++j) conv::mma_k32<WS, XS>(acc[mt][j], a, b0[j], b1[j]);
        if constexpr (ROWS) {  // a[0], a[2]: row g at k 4t.. and 16 + 4t..; a[1], a[3]: g + 8
            wsum[mt][0] = conv::byte_sum<WS>(a[2], conv::byte_sum<WS>(a[0], wsum[mt][0]));
            wsum[mt][1] = conv::byte_sum<WS>(a[3], conv::byte_sum<WS>(a[1], wsum[mt][1]));
        }
    }
}

// The lane stores pixels 8t .. 8t+3 (accumulators 0 / 2 of instances j) and 8t+4 .. 8t+7
// (1 / 3): the sums of x of lanes 8t and 8t+4's groups, summed over their t, into sa and sb.
__device__ __forceinline__ void pw_pixel_sums(int (&xsum)[4], int (&sa)[4], int (&sb)[4]) {
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        xsum[j] += __shfl_xor_sync(0xffffffffu, xsum[j], 1);
        xsum[j] += __shfl_xor_sync(0xffffffffu, xsum[j], 2);
        sa[j] = __shfl_sync(0xffffffffu, xsum[j], 8 * t);
        sb[j] = __shfl_sync(0xffffffffu, xsum[j], 8 * t + 4);
    }
}

// Output rows g and g + 8 of m-tile mt, the lane's 8 pixels of each, the rows' constant terms
// `bias` and zero points `zw` applied, into `staged` (rows of `ld` ints, a multiple of 4;
// `row0`: the staged row of the m-tile's row 0); only the first `pixels` (a multiple of 4) of
// each row.
template <bool ZW>
__device__ __forceinline__ void pw_stage_out(const int (&acc)[PW_MT][4][4], int mt, int row0,
                                             const unsigned (&bias)[2], const unsigned (&zw)[2],
                                             const int (&sa)[4], const int (&sb)[4],
                                             int* staged, int ld, int pixels) {
    const int lane = threadIdx.x & 31;
    const int g = lane >> 2;
    const int col = 32 * (threadIdx.x >> 5) + 8 * (lane & 3);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const unsigned b = bias[half];
        const unsigned z = ZW ? zw[half] : 0u;
        int v[8];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            v[j] = static_cast<int>(static_cast<unsigned>(acc[mt][j][2 * half]) -
                                    z * static_cast<unsigned>(sa[j]) + b);
            v[4 + j] = static_cast<int>(static_cast<unsigned>(acc[mt][j][2 * half + 1]) -
                                        z * static_cast<unsigned>(sb[j]) + b);
        }
        int* dst = staged + (row0 + g + 8 * half) * ld + col;
        if (col < pixels) *reinterpret_cast<int4*>(dst) = make_int4(v[0], v[1], v[2], v[3]);
        if (col + 4 < pixels) *reinterpret_cast<int4*>(dst + 4) = make_int4(v[4], v[5], v[6], v[7]);
    }
}

template <int N>
__device__ __forceinline__ void pw_zero(int (&acc)[N][4][4]) {
#pragma unroll
    for (int mt = 0; mt < N; ++mt) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[mt][j][r] = 0;
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
    conv::dependent_start();  // everything below reads or writes what the grid ahead may
    const int mc = blockIdx.x % mchunks;
    const int rest = blockIdx.x / mchunks;
    const int img = rest / tiles;
    const int p0 = (rest - img * tiles) * PW_PIXELS;
    const unsigned char* xi = x + img * xs_n;
    const int ksteps = (C + 31) >> 5;
    const int w_row = ksteps * 32 + 16;  // the 16: rows 4 banks apart, ldmatrix conflict-free
    const int row_chunks = ksteps * 2;
    const unsigned base = conv::smem_addr(ring);
    const unsigned w_base = conv::smem_addr(w_s);

    // The CTA's filter rows with the first stage.
    pw_filter_rows(w_base, w, ldw, mc, M, row_chunks, (C + 15) >> 4, w_row);
#pragma unroll
    for (int s = 0; s < PW_STAGES - 1; ++s) {
        if (s < ksteps) pw_stage<VEC16>(base + s * PW_STAGE_BYTES, xi, xs_c, s, C, HW, p0);
        conv::cp_async_commit();
    }
    int acc[PW_MT][4][4];
    pw_zero(acc);
    int xsum[4] = {0, 0, 0, 0};
    int unused[PW_MT][2];
    // This lane's words: rows 4t + i (+ 16), bytes 4g .. of the warp's 32 columns.
    const int lane_offset = pw_tile_offset(4 * t, 32 * warp + 4 * g);
    // ldmatrix rows: lanes 8q .. 8q + 7 address matrix q = (rows +8 if q odd, bytes +16 if q > 1).
    const unsigned a_lane = w_base + ((lane & 7) + 8 * ((lane >> 3) & 1)) * w_row + 16 * (lane >> 4);
    for (int ks = 0; ks < ksteps; ++ks) {
        conv::cp_async_wait<PW_STAGES - 2>();
        __syncthreads();  // stage ks landed for all; stage ks - 1 is free for the next copy
        if (ks == 0) {
            pw_row_constants<WS>(w_s, w_row, row_chunks, mc, M, C, x_zp, zw_all, w_zp, bias_s,
                                 zw_s);
        }
        const int next = ks + PW_STAGES - 1;
        if (next < ksteps) {
            pw_stage<VEC16>(base + (next % PW_STAGES) * PW_STAGE_BYTES, xi, xs_c, next, C, HW, p0);
        }
        conv::cp_async_commit();
        pw_step<WS, XS, false>(acc, xsum, ZW, unused,
                               ring + (ks % PW_STAGES) * PW_STAGE_BYTES + lane_offset,
                               a_lane + 32 * ks, w_row);
    }

    int sa[4] = {0, 0, 0, 0};
    int sb[4] = {0, 0, 0, 0};
    if constexpr (ZW) pw_pixel_sums(xsum, sa, sb);
    // Through shared memory (the ring is free now), 32 output channels at a time, so every
    // store to the output is whole 128-byte lines: lanes write their 8 pixels per channel,
    // then each warp copies 512 contiguous bytes of a channel row per instruction.
    conv::cp_async_wait<0>();
    __syncthreads();
    int* staged = reinterpret_cast<int*>(ring);
    int* out_img = out + static_cast<long long>(img) * M * HW;
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
#pragma unroll
        for (int mt2 = 0; mt2 < 2; ++mt2) {
            const int row = (2 * pass + mt2) * 16 + g;
            const unsigned bias[2] = {static_cast<unsigned>(bias_s[row]),
                                      static_cast<unsigned>(bias_s[row + 8])};
            const unsigned zw[2] = {static_cast<unsigned>(zw_s[row]),
                                    static_cast<unsigned>(zw_s[row + 8])};
            pw_stage_out<ZW>(acc, 2 * pass + mt2, 16 * mt2, bias, zw, sa, sb, staged, PW_OUT_ROW,
                             PW_PIXELS);
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


// The resident form, for layers with many output channels per input byte (256 -> 1024, say):
// the output's stores are most of the time, and in the kernel above every 64-channel chunk
// copies the tile's input again and stores only after its MMAs. Here a CTA copies its tile's
// input once, for all of K, and forms a run of consecutive chunks from it; each chunk's
// output leaves through shared memory by bulk copies issued by one warp, which drain while
// the next chunk's MMAs run. Where an image is one tile, a chunk's 64 output rows lie back to
// back in the output and leave as one copy (a copy per row costs the copy engine about as much
// as the row's bytes take to store); else one copy a row. The next chunk's filter rows are
// copied in during the MMAs of the one before (two buffers), and each lane sums the filter
// bytes of its rows from the A fragments it loads, so a chunk needs no pass over its rows.
// Needs sm_90 (cp.async.bulk) and HW a multiple of 4 with `out` 16-byte aligned (every
// channel row's start and length are then 16-byte multiples); the input as the kernel above.
// Grid: one CTA per (image, 256-pixel tile, run of `run` chunks), the run fastest; dynamic
// shared memory PWR_STAGED + ceil(C / 32) PW_STAGE_BYTES + 2 * 64 (ceil(C / 32) 32 + 16).
[[maybe_unused]] constexpr int PWR_STAGED = 64 * PW_OUT_ROW * 4;  // a chunk's 64 output rows

template <typename WT, typename XT, bool ZW, bool VEC16>
__global__ void __launch_bounds__(PW_WARPS * 32, 1)
    conv_int_pointwise_resident(const unsigned char* __restrict__ x,
                                const unsigned char* __restrict__ w,
                                const int* __restrict__ w_zp, int* __restrict__ out, int M,
                                int C, int HW, int mchunks, int tiles, int ldw, int x_zp,
                                int zw_all, long long xs_n, long long xs_c, int run,
                                int runs) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    __trap();  // no bulk copies: the launcher sends work here on sm_90 and later only
#else
    conv::dependent_start();  // everything below reads or writes what the grid ahead may
    constexpr bool WS = conv::is_signed_byte<WT>::value;
    constexpr bool XS = conv::is_signed_byte<XT>::value;
    extern __shared__ __align__(128) unsigned char pw_smem[];
    int* const staged = reinterpret_cast<int*>(pw_smem);
    unsigned char* const tile = pw_smem + PWR_STAGED;
    const int ksteps = (C + 31) >> 5;
    const int w_row = ksteps * 32 + 16;
    const int row_chunks = ksteps * 2;
    const int c16 = (C + 15) >> 4;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int g = lane >> 2;
    const int r = blockIdx.x % runs;
    const int rest = blockIdx.x / runs;
    const int img = rest / tiles;
    const int p0 = (rest - img * tiles) * PW_PIXELS;
    const int first = r * run;
    const int count = min(run, mchunks - first);
    const unsigned char* xi = x + img * xs_n;
    const unsigned tile_base = conv::smem_addr(tile);
    const unsigned w_base = tile_base + ksteps * PW_STAGE_BYTES;  // [2][64 rows of w_row]
    const unsigned staged_base = conv::smem_addr(staged);
    const int w_bytes = 64 * w_row;

    // The whole tile and the first chunk's filter rows, then the second chunk's.
    for (int ks = 0; ks < ksteps; ++ks) {
        pw_stage<VEC16>(tile_base + ks * PW_STAGE_BYTES, xi, xs_c, ks, C, HW, p0);
    }
    pw_filter_rows(w_base, w, ldw, first, M, row_chunks, c16, w_row);
    conv::cp_async_commit();
    if (count > 1) pw_filter_rows(w_base + w_bytes, w, ldw, first + 1, M, row_chunks, c16, w_row);
    conv::cp_async_commit();
    conv::cp_async_wait<1>();
    __syncthreads();

    int xsum[4] = {0, 0, 0, 0};
    int sa[4] = {0, 0, 0, 0};
    int sb[4] = {0, 0, 0, 0};
    const int lane_offset = pw_tile_offset(4 * (lane & 3), 32 * warp + 4 * g);
    const unsigned a_lane = ((lane & 7) + 8 * ((lane >> 3) & 1)) * w_row + 16 * (lane >> 4);
    const int pixels = min(PW_PIXELS, HW - p0);
    // An image of one tile stages its rows back to back, as the output holds them.
    const bool whole = tiles == 1;
    const int ld = whole ? HW : PW_OUT_ROW;
    int* const out_tile = out + static_cast<long long>(img) * M * HW + p0;
    for (int i = 0; i < count; ++i) {
        const int mc = first + i;
        const int buf = i & 1;
        // The lane's rows (g, g + 8 of each m-tile): zero points loaded while the MMAs run.
        unsigned zw[PW_MT][2];
#pragma unroll
        for (int mt = 0; mt < PW_MT; ++mt) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                zw[mt][half] = conv::row_zw(w_zp, zw_all, mc * 64 + mt * 16 + g + 8 * half, M);
            }
        }
        int acc[PW_MT][4][4];
        pw_zero(acc);
        int wsum[PW_MT][2] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}};
        for (int ks = 0; ks < ksteps; ++ks) {
            pw_step<WS, XS, true>(acc, xsum, ZW && i == 0, wsum,
                                  tile + ks * PW_STAGE_BYTES + lane_offset,
                                  w_base + buf * w_bytes + a_lane + 32 * ks, w_row);
        }
        if (ZW && i == 0) pw_pixel_sums(xsum, sa, sb);
        // The staged rows are free once the last chunk's bulk copies have read them; every
        // warp is done with this chunk's filter buffer, which takes chunk i + 2's rows.
        if (warp == 0) conv::bulk_wait_read();
        __syncthreads();
        if (i + 2 < count) {
            pw_filter_rows(w_base + buf * w_bytes, w, ldw, mc + 2, M, row_chunks, c16, w_row);
        }
        conv::cp_async_commit();
#pragma unroll
        for (int mt = 0; mt < PW_MT; ++mt) {
            unsigned bias[2];
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                int sum = wsum[mt][half];
                sum += __shfl_xor_sync(0xffffffffu, sum, 1);
                sum += __shfl_xor_sync(0xffffffffu, sum, 2);
                bias[half] = conv::row_bias(C, x_zp, zw[mt][half], sum);
            }
            pw_stage_out<ZW>(acc, mt, 16 * mt, bias, zw[mt], sa, sb, staged, ld, pixels);
        }
        conv::cp_async_wait<1>();  // chunk i + 1's filter rows (committed a chunk ago)
        conv::fence_proxy_async();    // the staged rows, visible to the bulk copies
        __syncthreads();
        if (warp == 0) {
            const int rows = min(64, M - mc * 64);
            int* const dst = out_tile + static_cast<long long>(mc) * 64 * HW;
            if (whole) {  // the chunk's rows lie back to back in the output: one copy
                if (lane == 0) {
                    conv::bulk_store(dst, staged_base, static_cast<unsigned>(rows * HW * 4));
                }
            } else {
                for (int row = lane; row < rows; row += 32) {
                    conv::bulk_store(dst + static_cast<long long>(row) * HW,
                                  staged_base + row * PW_OUT_ROW * 4,
                                     static_cast<unsigned>(pixels * 4));
                }
            }
            conv::bulk_commit();
        }
    }
    if (warp == 0) conv::bulk_wait_read();  // the shared memory outlives the copies' reads
#endif
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
#define DML_PWR(WT, XT, ZW, VEC16)                                                           \
    template __global__ void dml::conv_int_pointwise_resident<WT, XT, ZW, VEC16>(            \
        const unsigned char*, const unsigned char*, const int*, int*, int, int, int, int, int, \
        int, int, int, long long, long long, int, int)
DML_PWR(signed char, unsigned char, false, true);
DML_PWR(signed char, unsigned char, true, false);
DML_PWR(unsigned char, signed char, false, false);
DML_PWR(signed char, signed char, true, true);
DML_PWR(unsigned char, unsigned char, true, true);
#undef DML_PW
#undef DML_PWR
#endif
