// CONVOLUTION_INTEGER's operand preparation for the tensor-core GEMMs (convolution_integer.cu,
// convolution_integer_sm90a.cu): the filter KCRS -> K(RS)Cgp with its per-channel constant, the
// input NCHW -> (N, H, W, G*Cgp), and the z_x frame around a padded input.

#include "convolution_integer_common.cuh"

namespace dml {

// ------------------------------------------------------------------------------------------
// Filter prep: w (M, Cg, R, S) strided -> wp (M, R*S*Cgp), zero in the padded channels, and
// bias[m] = K' z_x z_w[m] - z_x * sum w[m] (mod 2^32), K' = R*S*Cgp. One block per m. With
// `staged` (the row's Cg*R*S bytes fit the block's dynamic shared memory), the block first
// copies the row into shared memory in (c, r, s) order (consecutive bytes of a packed filter,
// as one run); then, tap by tap, each thread forms whole 4-byte words (4 consecutive channels;
// Cgp is a multiple of 16).
// BM > 0: the shifted-window GEMM's layout instead (convolution_integer_sm90a.cu): per group,
// tile of BM output channels and chunk of 32 channels, the chunk's bytes as the shared stage
// holds them, [tap][16-byte half][BM rows] x 16 bytes (rows past Mg are never read).
namespace prep {
template <typename WT>
__device__ __forceinline__ void filter_row(int m, const unsigned char* __restrict__ w,
                                           const int* __restrict__ w_zp,
                                           unsigned char* __restrict__ wp,
                                           int* __restrict__ bias, int Cg, int S, int Cgp, int Kp,
                                           int x_zp, int Mg, int BM, int tiles_m, int staged,
                                           long long ws_m, long long ws_c, long long ws_r,
                                           long long ws_s) {
    constexpr bool WS = conv::is_signed_byte<WT>::value;
    extern __shared__ __align__(16) unsigned char w_row[];
    __shared__ int partial[32];
    const int RS = Kp / Cgp;
    const unsigned char* wm = w + m * ws_m;
    unsigned char* row = wp + static_cast<long long>(m) * Kp;
    long long chunk_bytes = 0;  // shifted-window layout: bytes per 32-channel chunk
    if (BM > 0) {
        const int g = m / Mg;
        const int tm = (m - g * Mg) / BM;
        chunk_bytes = static_cast<long long>(RS) * BM * 32;
        row = wp + static_cast<long long>(g * tiles_m + tm) * (Cgp / 32) * chunk_bytes +
              (m - g * Mg - tm * BM) * 16;
    }
    if (staged) {
        const int n = Cg * RS;
        if (ws_s == 1 && ws_r == S && ws_c == RS &&
            ((reinterpret_cast<unsigned long long>(wm) | n) & 15) == 0) {
            // a packed row, 16-byte aligned: 16-byte copies, all in flight at once (a loop of
            // dependent byte loads would wait out the memory latency once per byte)
            for (int i = threadIdx.x; i < n / 16; i += blockDim.x) {
                conv::cp_async16(conv::smem_addr(w_row + 16 * i), wm + 16 * i, 16);
            }
            conv::cp_async_commit();
            conv::cp_async_wait<0>();
        } else if (ws_s == 1 && ws_r == S && ws_c == RS) {  // packed: one run of bytes
#pragma unroll 8
            for (int i = threadIdx.x; i < n; i += blockDim.x) w_row[i] = wm[i];
        } else {
            for (int c = threadIdx.x; c < Cg; c += blockDim.x) {
                int r = 0;
                int s = 0;
#pragma unroll 4
                for (int rs = 0; rs < RS; ++rs) {
                    w_row[c * RS + rs] = wm[c * ws_c + r * ws_r + s * ws_s];
                    if (++s == S) {
                        s = 0;
                        ++r;
                    }
                }
            }
        }
        __syncthreads();
    }
    int sum = 0;
    int r = 0;
    int s = 0;
    for (int rs = 0; rs < RS; ++rs) {  // taps outside, the row's words spread over the block
        const unsigned char* src = wm + r * ws_r + s * ws_s;
        for (int c4 = 4 * threadIdx.x; c4 < Cgp; c4 += 4 * blockDim.x) {
            unsigned v = 0u;
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                if (c4 + b < Cg) {
                    const unsigned byte =
                        staged ? w_row[(c4 + b) * RS + rs] : src[(c4 + b) * ws_c];
                    v |= byte << (8 * b);
                }
            }
            if (BM > 0) {
                *reinterpret_cast<unsigned*>(row + (c4 >> 5) * chunk_bytes +
                                             (rs * 2 + ((c4 >> 4) & 1)) * BM * 16 + (c4 & 15)) = v;
            } else {
                *reinterpret_cast<unsigned*>(row + rs * Cgp + c4) = v;
            }
            sum = conv::byte_sum<WS>(v, sum);
        }
        if (++s == S) {
            s = 0;
            ++r;
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
}  // namespace prep

// At most 32 registers a thread: blocks fit beside a shifted-window GEMM's CTAs on an SM
// (convolution_integer_sm90a.cu).
template <typename WT>
__global__ void __maxnreg__(32) conv_int_prep_w(const unsigned char* __restrict__ w,
                                const int* __restrict__ w_zp, unsigned char* __restrict__ wp,
                                int* __restrict__ bias, int Cg, int S, int Cgp, int Kp, int x_zp,
                                int Mg, int BM, int tiles_m, int staged, long long ws_m,
                                long long ws_c, long long ws_r, long long ws_s) {
    // A GEMM launched as this grid's dependent may start now: it reads what this grid writes
    // only after its wait for this grid's completion.
    conv::allow_next_grid();
    prep::filter_row<WT>(blockIdx.x, w, w_zp, wp, bias, Cg, S, Cgp, Kp, x_zp, Mg, BM, tiles_m,
                         staged, ws_m, ws_c, ws_r, ws_s);
}

// ------------------------------------------------------------------------------------------
// Input prep: x (N, C, H, W) strided -> xn (N, Hp, Wp, G*Cgp), pixel (h, w) at (h + ph, w + pw);
// padded channels hold z_x. Block: 64 pixels x 64 channel slots through shared memory; 16-byte
// stores. Blocks past the image's pixels (blockIdx.x >= ceil(H * W / 64)) fill 64 cells each of
// the frame around the image (rows [ph, ph + H) x columns [pw, pw + W) of Hp x Wp) with z_x,
// so every tap of the GEMM reads inside the buffer.
// VEC 16 (4): each (n, c) plane is contiguous (W stride 1, H stride W) and 16-byte (4-byte)
// aligned, so phase 1 reads 16 consecutive pixels of one channel per thread as one 16-byte load
// (four 4-byte ones) instead of 16 single-byte gathers; VEC 0: the gathers.
namespace prep {
// Block (bx, by, n) of the input prep (blockDim.x = 256).
template <int VEC>
__device__ __forceinline__ void input_block(
    int bx, int by, long long n, const unsigned char* __restrict__ x,
    unsigned char* __restrict__ xn, int H, int W, int Cg, int Cgp, int slots, int Hp, int Wp,
    int ph, int pw, unsigned zx_byte, long long xs_n, long long xs_c, long long xs_h,
    long long xs_w) {
    constexpr int ROW = 65;  // odd row length: the column gathers below hit distinct banks
    __shared__ unsigned char tile[64 * ROW];
    const int HW = H * W;
    const int pix0 = bx * 64;
    const int slot0 = by * 64;
    const int image_blocks = (HW + 63) >> 6;
    if (bx >= image_blocks) {  // the frame: no tile, no barrier
        int b = (bx - image_blocks) * 64 + (threadIdx.x >> 2);  // border cell
        const int slot = slot0 + 16 * (threadIdx.x & 3);
        const int top = ph * Wp;
        const int side = Wp - W;
        int hq;
        int wq;
        if (b < top) {
            hq = b / Wp;
            wq = b - hq * Wp;
        } else if ((b -= top) < H * side) {
            hq = b / side;
            wq = b - hq * side;
            hq += ph;
            wq = wq < pw ? wq : wq + W;
        } else {
            b -= H * side;
            hq = ph + H + b / Wp;
            wq = b % Wp;
        }
        if (hq < Hp && slot < slots) {
            const unsigned z = zx_byte * 0x01010101u;
            *reinterpret_cast<uint4*>(xn + ((n * Hp + hq) * Wp + wq) * slots + slot) =
                make_uint4(z, z, z, z);
        }
        return;
    }
    if constexpr (VEC != 0) {
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
            if (pix + 16 <= HW && VEC == 16) {
                const uint4 v = *reinterpret_cast<const uint4*>(xp + pix);
                word[0] = v.x;
                word[1] = v.y;
                word[2] = v.z;
                word[3] = v.w;
            } else if (pix + 16 <= HW) {
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    word[k] = *reinterpret_cast<const unsigned*>(xp + pix + 4 * k);
                }
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
}  // namespace prep

template <int VEC>
__global__ void __launch_bounds__(256) conv_int_prep_x(
    const unsigned char* __restrict__ x, unsigned char* __restrict__ xn, int H, int W, int Cg,
    int Cgp, int slots, int Hp, int Wp, int ph, int pw, unsigned zx_byte, long long xs_n,
    long long xs_c, long long xs_h, long long xs_w) {
    prep::input_block<VEC>(blockIdx.x, blockIdx.y, blockIdx.z, x, xn, H, W, Cg, Cgp, slots, Hp,
                           Wp, ph, pw, zx_byte, xs_n, xs_c, xs_h, xs_w);
}

// Both preps in one launch (a call whose filter is not kept prepared): z-slices [0, N) of the
// grid are conv_int_prep_x's blocks, the slices after them one filter row (m) per block.
// Separately, each is a short kernel whose time is mostly latency; side by side they overlap.
template <int VEC, typename WT>
__global__ void __launch_bounds__(256) conv_int_prep_xw(
    const unsigned char* __restrict__ x, unsigned char* __restrict__ xn, int H, int W, int Cg,
    int Cgp, int slots, int Hp, int Wp, int ph, int pw, unsigned zx_byte, long long xs_n,
    long long xs_c, long long xs_h, long long xs_w, int N, int M,
    const unsigned char* __restrict__ w, const int* __restrict__ w_zp,
    unsigned char* __restrict__ wp, int* __restrict__ bias, int S, int Kp, int x_zp, int Mg,
    int BM, int tiles_m, int staged, long long ws_m, long long ws_c, long long ws_r,
    long long ws_s) {
    if (static_cast<int>(blockIdx.z) < N) {
        prep::input_block<VEC>(blockIdx.x, blockIdx.y, blockIdx.z, x, xn, H, W, Cg, Cgp, slots,
                               Hp, Wp, ph, pw, zx_byte, xs_n, xs_c, xs_h, xs_w);
        return;
    }
    const long long m =
        ((blockIdx.z - N) * static_cast<long long>(gridDim.y) + blockIdx.y) * gridDim.x +
        blockIdx.x;
    if (m < M) {
        prep::filter_row<WT>(static_cast<int>(m), w, w_zp, wp, bias, Cg, S, Cgp, Kp, x_zp, Mg, BM,
                             tiles_m, staged, ws_m, ws_c, ws_r, ws_s);
    }
}

}  // namespace dml

#ifdef DMLSERVE_EXPLICIT_INSTANTIATION
template __global__ void dml::conv_int_prep_x<16>(const unsigned char*, unsigned char*, int, int,
                                               int, int, int, int, int, int, int, unsigned,
                                               long long, long long, long long, long long);
template __global__ void dml::conv_int_prep_x<0>(const unsigned char*, unsigned char*, int, int,
                                                int, int, int, int, int, int, int, unsigned,
                                                long long, long long, long long, long long);
template __global__ void dml::conv_int_prep_x<4>(const unsigned char*, unsigned char*, int, int,
                                                int, int, int, int, int, int, int, unsigned,
                                                long long, long long, long long, long long);
template __global__ void dml::conv_int_prep_w<signed char>(const unsigned char*, const int*, unsigned char*,
                                               int*, int, int, int, int, int, int, int, int,
                                               int, long long, long long, long long, long long);
template __global__ void dml::conv_int_prep_xw<0, signed char>(
    const unsigned char*, unsigned char*, int, int, int, int, int, int, int, int, int, unsigned,
    long long, long long, long long, long long, int, int, const unsigned char*, const int*,
    unsigned char*, int*, int, int, int, int, int, int, int, long long, long long, long long,
    long long);
template __global__ void dml::conv_int_prep_xw<4, signed char>(
    const unsigned char*, unsigned char*, int, int, int, int, int, int, int, int, int, unsigned,
    long long, long long, long long, long long, int, int, const unsigned char*, const int*,
    unsigned char*, int*, int, int, int, int, int, int, int, long long, long long, long long,
    long long);
template __global__ void dml::conv_int_prep_xw<16, unsigned char>(
    const unsigned char*, unsigned char*, int, int, int, int, int, int, int, int, int, unsigned,
    long long, long long, long long, long long, int, int, const unsigned char*, const int*,
    unsigned char*, int*, int, int, int, int, int, int, int, long long, long long, long long,
    long long);
#endif
