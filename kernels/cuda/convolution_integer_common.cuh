// Device helpers shared by the CONVOLUTION_INTEGER kernels (convolution_integer.cu and
// convolution_integer_direct.cu): byte widening, cp.async, ldmatrix, mma.sync, dp4a sums.
#ifndef DMLSERVE_CONVOLUTION_INTEGER_COMMON_CUH
#define DMLSERVE_CONVOLUTION_INTEGER_COMMON_CUH

namespace dml {
namespace conv {

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
__device__ __forceinline__ void st_shared16(unsigned dst, unsigned v) {
    asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(dst), "r"(v));
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// d += a * b on m16n8k32; A = filter (row), B = input (col); plain wrap-around accumulate.
#define DML_CI_MMA(ATYPE, BTYPE)                                                              \
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32." ATYPE "." BTYPE                      \
                 ".s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"       \
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])                              \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

template <bool WS, bool XS>
__device__ __forceinline__ void mma_k32(int (&d)[4], const unsigned (&a)[4], unsigned b0,
                                        unsigned b1) {
    if constexpr (WS && XS) {
        DML_CI_MMA("s8", "s8");
    } else if constexpr (WS && !XS) {
        DML_CI_MMA("s8", "u8");
    } else if constexpr (!WS && XS) {
        DML_CI_MMA("u8", "s8");
    } else {
        DML_CI_MMA("u8", "u8");
    }
}
#undef DML_CI_MMA

// Sum of the four bytes of v (as signed or unsigned) added to acc, modulo 2^32.
template <bool SIGNED>
__device__ __forceinline__ int byte_sum(unsigned v, int acc) {
    int r;
    if constexpr (SIGNED) {
        asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(v), "r"(0x01010101), "r"(acc));
    } else {
        asm("dp4a.u32.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(v), "r"(0x01010101), "r"(acc));
    }
    return r;
}

}  // namespace conv
}  // namespace dml

#endif  // DMLSERVE_CONVOLUTION_INTEGER_COMMON_CUH
