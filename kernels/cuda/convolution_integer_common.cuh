// Device helpers shared by the CONVOLUTION_INTEGER kernels (convolution_integer*.cu): byte
// widening, cp.async, ldmatrix, mma.sync, a 4x4 byte transpose, dp4a sums; mma.sync and the
// sums also have host forms, for a CPU emulation of the kernels.
#ifndef DMLSERVE_CONVOLUTION_INTEGER_COMMON_CUH
#define DMLSERVE_CONVOLUTION_INTEGER_COMMON_CUH

namespace dml {
namespace conv {

// zw_all of the kernels that take one filter zero point as an argument: read them per channel.
constexpr int PER_CHANNEL = -2147483647 - 1;

// The kernels take the operands' element types (signed char / unsigned char, from the dtype
// table) and move bytes as unsigned char; these give the signedness.
template <typename T> struct is_signed_byte { static constexpr bool value = T(-1) < T(0); };

// Bytes arrive as unsigned char; the signedness is a template flag.
template <bool SIGNED>
__device__ __forceinline__ int widen(unsigned char b) {
    return SIGNED ? static_cast<int>(static_cast<signed char>(b)) : static_cast<int>(b);
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned long long a;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
    return static_cast<unsigned>(a);
}

// Programmatic dependent launch (sm_90 and later; a launch that allows it may start this grid
// while the grid before it in the stream still runs): wait for that grid to complete and its
// writes to be visible; let the grid after this one start (its CTAs then wait in turn).
// Without the launch attribute, and before sm_90, both do nothing.
__device__ __forceinline__ void wait_prior_grid() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_next_grid() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
// The start of a kernel that reads and writes only after the grid ahead of it completes (so
// that it may be launched as that grid's programmatic dependent whatever it reads): the wait,
// then the next grid let in, whose CTAs take SMs as this grid's leave.
__device__ __forceinline__ void dependent_start() {
    wait_prior_grid();
    allow_next_grid();
}

// 16-byte global->shared copy; src_bytes = 0 fills the destination with zeros.
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
// 4-byte global->shared copy through L1; src_bytes = 0 fills the destination with zeros.
__device__ __forceinline__ void cp_async4(unsigned dst, const void* src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes));
}
// sm_90's bulk copies shared->global (addresses and size 16-byte multiples), committed as a
// group of this thread's; wait_read: this thread's copies have read their shared memory (it
// may be written again). The kernels that use them run on sm_90 and later only.
__device__ __forceinline__ void bulk_store(void* dst, unsigned src, unsigned bytes) {
#if __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst),
                 "r"(src), "r"(bytes)
                 : "memory");
#endif
}
__device__ __forceinline__ void bulk_commit() {
#if __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void bulk_wait_read() {
#if __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}
// Ordinary and cp.async writes to shared memory, made visible to the async proxy (bulk
// copies, the warpgroup MMA's reads).
__device__ __forceinline__ void fence_proxy_async() {
#if __CUDA_ARCH__ >= 900
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void st_shared16(unsigned dst, unsigned v) {
    asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(dst), "r"(v));
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// M("s8" or "u8", "s8" or "u8"): the PTX byte types of two operands, signed where AS and BS
// (compile-time flags); for the MMA instructions, whose types are part of their names.
#define DML_CONV_BYTE_TYPES(M, AS, BS)  \
    if constexpr ((AS) && (BS)) {        \
        M("s8", "s8");                   \
    } else if constexpr ((AS) && !(BS)) { \
        M("s8", "u8");                   \
    } else if constexpr (!(AS) && (BS)) { \
        M("u8", "s8");                   \
    } else {                             \
        M("u8", "u8");                   \
    }

// d += a * b on m16n8k32; A = filter (row), B = input (col); plain wrap-around accumulate.
#define DML_CI_MMA(ATYPE, BTYPE)                                                              \
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32." ATYPE "." BTYPE                      \
                 ".s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"       \
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])                              \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

// The four bytes of a (signed where AS) dotted with b's (signed where BS), modulo 2^32.
template <bool AS, bool BS>
__device__ __forceinline__ unsigned dot4(unsigned a, unsigned b) {
    unsigned sum = 0u;
    for (int i = 0; i < 4; ++i) {
        const int ab = AS ? static_cast<int>(static_cast<signed char>(a >> (8 * i)))
                          : static_cast<int>((a >> (8 * i)) & 0xff);
        const int bb = BS ? static_cast<int>(static_cast<signed char>(b >> (8 * i)))
                          : static_cast<int>((b >> (8 * i)) & 0xff);
        sum += static_cast<unsigned>(ab * bb);
    }
    return sum;
}

template <bool WS, bool XS>
__device__ __forceinline__ void mma_k32(int (&d)[4], const unsigned (&a)[4], unsigned b0,
                                        unsigned b1) {
#ifndef __CUDA_ARCH__
    // Host build (a CPU emulation of the kernels): the same sums from the warp's fragments.
    // Lane (g, t) holds A rows g, g + 8 and B column g at k 4t.. (+16); it forms D rows g,
    // g + 8 at columns 2t, 2t + 1.
    const int lane = static_cast<int>(threadIdx.x & 31);
    const int g = lane >> 2;
    const int t = lane & 3;
    unsigned acc[4] = {static_cast<unsigned>(d[0]), static_cast<unsigned>(d[1]),
                       static_cast<unsigned>(d[2]), static_cast<unsigned>(d[3])};
    for (int kw = 0; kw < 8; ++kw) {  // k = 4 kw .. 4 kw + 3
        const int src = kw & 3;
        const bool upper = kw >= 4;
        const unsigned a0 = __shfl_sync(0xffffffffu, upper ? a[2] : a[0], 4 * g + src);
        const unsigned a1 = __shfl_sync(0xffffffffu, upper ? a[3] : a[1], 4 * g + src);
        const unsigned c0 = __shfl_sync(0xffffffffu, upper ? b1 : b0, 8 * t + src);
        const unsigned c1 = __shfl_sync(0xffffffffu, upper ? b1 : b0, 8 * t + 4 + src);
        acc[0] += dot4<WS, XS>(a0, c0);
        acc[1] += dot4<WS, XS>(a0, c1);
        acc[2] += dot4<WS, XS>(a1, c0);
        acc[3] += dot4<WS, XS>(a1, c1);
    }
    for (int i = 0; i < 4; ++i) d[i] = static_cast<int>(acc[i]);
#else
    DML_CONV_BYTE_TYPES(DML_CI_MMA, WS, XS)
#endif
}
#undef DML_CI_MMA

// 4 words of 4 bytes, in[i] = (row i, columns 0..3) -> out[j] = (rows 0..3, column j).
__device__ __forceinline__ void transpose4(const unsigned (&in)[4], unsigned (&out)[4]) {
    const unsigned t0 = __byte_perm(in[0], in[1], 0x5140);  // r0c0 r1c0 r0c1 r1c1
    const unsigned t1 = __byte_perm(in[0], in[1], 0x7362);  // r0c2 r1c2 r0c3 r1c3
    const unsigned t2 = __byte_perm(in[2], in[3], 0x5140);
    const unsigned t3 = __byte_perm(in[2], in[3], 0x7362);
    out[0] = __byte_perm(t0, t2, 0x5410);
    out[1] = __byte_perm(t0, t2, 0x7632);
    out[2] = __byte_perm(t1, t3, 0x5410);
    out[3] = __byte_perm(t1, t3, 0x7632);
}

// Sum of the four bytes of v (as signed or unsigned) added to acc, modulo 2^32.
template <bool SIGNED>
__device__ __forceinline__ int byte_sum(unsigned v, int acc) {
#ifndef __CUDA_ARCH__
    return static_cast<int>(static_cast<unsigned>(acc) + dot4<SIGNED, false>(v, 0x01010101u));
#else
    int r;
    if constexpr (SIGNED) {
        asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(v), "r"(0x01010101), "r"(acc));
    } else {
        asm("dp4a.u32.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(v), "r"(0x01010101), "r"(acc));
    }
    return r;
#endif
}

// Filter row m's zero point (0 past M); zw_all is the shared one, or PER_CHANNEL.
__device__ __forceinline__ unsigned row_zw(const int* __restrict__ w_zp, int zw_all, int m,
                                           int M) {
    return m >= M ? 0u : static_cast<unsigned>(zw_all == PER_CHANNEL ? w_zp[m] : zw_all);
}

// A filter row's constant terms in sum (x - z_x)(w - z_w) = sum x w - z_w sum x + bias:
// bias = C z_x z_w - z_x sum w (mod 2^32).
__device__ __forceinline__ unsigned row_bias(int C, int x_zp, unsigned zw, int w_sum) {
    const unsigned zx = static_cast<unsigned>(x_zp);
    return static_cast<unsigned>(C) * zx * zw - zx * static_cast<unsigned>(w_sum);
}

}  // namespace conv
}  // namespace dml

#endif  // DMLSERVE_CONVOLUTION_INTEGER_COMMON_CUH
