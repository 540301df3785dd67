// Shared device helpers for the dmlserve kernels: element types by size, fast unsigned
// division by run-time constants, and 16-byte chunk stores at any alignment.
//
// Compiles under NVRTC (through CuPy) and nvcc alike: built-in types only, no <cstdint>.
#pragma once

namespace dml {

__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int imax(int a, int b) { return a > b ? a : b; }

// The unsigned integer type of an element of `BYTES` bytes. Pure data movement (padding,
// unfold) dispatches on the element size, not the dtype: one instantiation moves every
// dtype of that width bit-exactly.
template <int BYTES> struct Bits;
template <> struct Bits<1> { typedef unsigned char type; };
template <> struct Bits<2> { typedef unsigned short type; };
template <> struct Bits<4> { typedef unsigned int type; };
template <> struct Bits<8> { typedef unsigned long long type; };

// Division by a run-time constant d >= 1 as multiply-high + add + shift (Granlund-Montgomery,
// as PyTorch's IntDivider<unsigned>). The host computes `mul` and `shift`; valid for
// numerators below 2^31. 64-bit numerators fall back to the hardware sequence. The launchers
// read this struct like their parameter structs: one field per line.
struct FastDivmod {
    unsigned d;
    unsigned mul;
    unsigned shift;
};

__device__ __forceinline__ unsigned fast_div(unsigned n, unsigned mul, unsigned shift) {
    return (__umulhi(n, mul) + n) >> shift;
}
__device__ __forceinline__ unsigned fast_div(unsigned n, const FastDivmod& f) {
    return fast_div(n, f.mul, f.shift);
}
// The same for a non-negative int numerator (below 2^31), as int.
__device__ __forceinline__ int fast_div(int n, unsigned mul, unsigned shift) {
    return static_cast<int>(fast_div(static_cast<unsigned>(n), mul, shift));
}

template <typename IDX>
__device__ __forceinline__ IDX div_of(IDX n, const FastDivmod& f) {
    return (IDX)fast_div((unsigned)n, f);
}
template <>
__device__ __forceinline__ long long div_of<long long>(long long n, const FastDivmod& f) {
    return (long long)((unsigned long long)n / f.d);
}

// q = n / d, r = n % d for 0 <= n (below 2^31 when IDX is 32-bit).
template <typename IDX>
__device__ __forceinline__ void divmod(IDX n, const FastDivmod& f, IDX& q, IDX& r) {
    q = div_of<IDX>(n, f);
    r = n - q * (IDX)f.d;
}

// 16 bytes of elements held in registers; a "chunk" is the unit of work of one thread in
// the movement kernels (4 FLOAT32, 8 FLOAT16, 16 INT8, 2 INT64 ...).
template <int BYTES> union Chunk {
    typedef typename Bits<BYTES>::type T;
    enum { N = 16 / BYTES };
    uint4 v;
    unsigned w[4];
    T e[16 / BYTES];
};

// Store the first `count` elements of `c` at `dst` (element-aligned). A full chunk goes out
// as one 16-byte store when `dst` is 16-byte aligned, else as the widest aligned pieces;
// partial chunks go element by element. Every element in [0, count) is written once.
template <int BYTES>
__device__ __forceinline__ void store_chunk(typename Bits<BYTES>::type* dst, const Chunk<BYTES>& c,
                                            int count) {
    typedef typename Bits<BYTES>::type T;
    const int n = Chunk<BYTES>::N;
    if (count == n) {
        const unsigned long long a = (unsigned long long)dst;
        if ((a & 15) == 0) {
            *reinterpret_cast<uint4*>(dst) = c.v;
            return;
        }
        if ((a & 7) == 0) {
            uint2* p = reinterpret_cast<uint2*>(dst);
            p[0] = make_uint2(c.w[0], c.w[1]);
            p[1] = make_uint2(c.w[2], c.w[3]);
            return;
        }
        if ((a & 3) == 0) {
            unsigned* p = reinterpret_cast<unsigned*>(dst);
#pragma unroll
            for (int i = 0; i < 4; ++i) p[i] = c.w[i];
            return;
        }
    }
#pragma unroll
    for (int i = 0; i < n; ++i) {
        if (i < count) dst[i] = c.e[i];
    }
}

// Chunks of a row are aligned to the buffer, not to the row: chunk j of a row starting at
// element `row_start` covers elements [j*N - m, (j+1)*N - m) of the row, m = row_start % N,
// so every full chunk is one aligned 16-byte store whatever the row length (the first and
// last chunk of a row may be partial). Needs the buffer 16-byte aligned (CuPy allocations
// are 256-byte aligned) and ceil((width + N - 1) / N) chunks per row.
struct ChunkSpan {
    int c0;     // row element of the chunk's first slot (negative: slots before the row)
    int first;  // first slot that lies in the row
    int end;    // one past the last slot that lies in the row
};

template <int BYTES, typename IDX>
__device__ __forceinline__ ChunkSpan chunk_span(IDX row_start, IDX chunk, int width) {
    const int n = Chunk<BYTES>::N;
    ChunkSpan s;
    s.c0 = (int)chunk * n - (int)(row_start & (IDX)(n - 1));
    s.first = imax(0, -s.c0);
    s.end = imin(n, width - s.c0);
    return s;
}

// Chunk `t` (below total_chunks) of a row-chunk kernel: its row, the row's first element and
// the chunk's span; false for the spare chunk of a row that needed one less.
template <int BYTES, typename IDX>
__device__ __forceinline__ bool row_chunk_at(IDX t, const FastDivmod& chunk_div, const int& width,
                                             IDX& row, IDX& row_start, ChunkSpan& span) {
    IDX chunk;
    divmod<IDX>(t, chunk_div, row, chunk);
    row_start = row * (IDX)width;
    span = chunk_span<BYTES, IDX>(row_start, chunk, width);
    return span.first < span.end;
}

// The chunk of this thread in a row-chunk kernel (one thread per chunk of each output row of
// `width` elements, `total_chunks` = rows * chunks per row, `chunk_div` divides by the
// latter): its row, the row's first element and the chunk's span. False where the thread has
// nothing to write: past the last chunk, or the spare chunk of a row that needed one less.
template <int BYTES, typename IDX>
__device__ __forceinline__ bool row_chunk(long long total_chunks, const FastDivmod& chunk_div,
                                          const int& width, IDX& row, IDX& row_start,
                                          ChunkSpan& span) {
    const IDX t = (IDX)blockIdx.x * (IDX)blockDim.x + (IDX)threadIdx.x;
    if (t >= (IDX)total_chunks) return false;
    return row_chunk_at<BYTES, IDX>(t, chunk_div, width, row, row_start, span);
}

// Store slots [first, end) of `c` to `dst` (the address of slot 0): one 16-byte store for a
// full chunk (dst is then 16-byte aligned by construction), else element by element.
template <int BYTES>
__device__ __forceinline__ void store_span(typename Bits<BYTES>::type* dst, const Chunk<BYTES>& c,
                                           int first, int end) {
    const int n = Chunk<BYTES>::N;
    if (first == 0 && end == n) {
#ifdef __CUDA_ARCH__
        // Spelled out: NVVM has split the plain uint4 store into four 4-byte stores in some
        // instances (four store requests per chunk instead of one). `dst` is global memory.
        asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"(c.w[0]), "r"(c.w[1]),
                     "r"(c.w[2]), "r"(c.w[3]));
#else
        *reinterpret_cast<uint4*>(dst) = c.v;
#endif
        return;
    }
#pragma unroll
    for (int i = 0; i < n; ++i) {
        if (i >= first && i < end) dst[i] = c.e[i];
    }
}

// 16 bytes at any byte address `src` whose 16 bytes all belong to the source buffer, as
// loaded: one aligned 16-byte load, or the aligned 4-byte words that contain at least one of
// those bytes (so no read leaves the buffer). Nothing here waits on the loads; words16_value
// puts the bytes into place, so a thread can issue several chunks' loads before it uses any.
// ALIGN: the alignment `src` is known to have (4 or more: no byte shift within a word).
struct Words16 {
    uint4 v;      // the aligned words from src & ~3 (the 16 bytes themselves when sh == 0)
    unsigned w4;  // the word after them (read only when sh != 0)
    unsigned sh;  // src's bit offset in its word
};

template <int ALIGN = 1>
__device__ __forceinline__ Words16 load16_words(const unsigned char* src) {
    const unsigned long long a = (unsigned long long)src;
    Words16 r;
    r.sh = 0;
    r.w4 = 0;
    if ((a & 15) == 0) {
        r.v = __ldg(reinterpret_cast<const uint4*>(src));
        return r;
    }
    const unsigned* base = reinterpret_cast<const unsigned*>(a & ~3ull);
    r.v = make_uint4(__ldg(base), __ldg(base + 1), __ldg(base + 2), __ldg(base + 3));
    if (ALIGN < 4) {
        r.sh = (unsigned)(a & 3) * 8u;
        if (r.sh != 0) r.w4 = __ldg(base + 4);
    }
    return r;
}

__device__ __forceinline__ uint4 words16_value(const Words16& r) {
    if (r.sh == 0) return r.v;
    return make_uint4(__funnelshift_r(r.v.x, r.v.y, r.sh), __funnelshift_r(r.v.y, r.v.z, r.sh),
                      __funnelshift_r(r.v.z, r.v.w, r.sh), __funnelshift_r(r.v.w, r.w4, r.sh));
}

// load16_words and words16_value in one.
__device__ __forceinline__ uint4 load16_unaligned(const unsigned char* src) {
    return words16_value(load16_words(src));
}

// Whether load16_unaligned(src) stays inside the buffer that starts at `base` and ends `end`
// bytes later: its aligned 4-byte words may run up to 3 bytes past the 16 it returns, which
// is past the buffer only in the last word of a buffer whose size is not a multiple of 4.
template <typename T>
__device__ __forceinline__ bool words_within(const T* src, const T* base, long long end) {
    const unsigned long long a = (unsigned long long)src;
    const unsigned long long last_word_end = (a + 16 + 3) & ~3ull;
    return last_word_end <= (unsigned long long)base + (unsigned long long)end;
}

// The block's dynamic shared memory (16-byte aligned), as T.
template <typename T>
__device__ __forceinline__ T* dynamic_smem() {
    extern __shared__ __align__(16) unsigned char dml_smem[];
    return reinterpret_cast<T*>(dml_smem);
}

// 16 bytes from shared memory at any byte address: the aligned 4-byte words that hold them,
// funnel-shifted into place (the word after the 16 bytes is read when `src` is unaligned).
__device__ __forceinline__ uint4 shared_load16(const unsigned char* src) {
    const unsigned long long a = (unsigned long long)src;
    const unsigned* w = reinterpret_cast<const unsigned*>(a & ~3ull);
    const unsigned sh = (unsigned)(a & 3) * 8u;
    const unsigned w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
    if (sh == 0) return make_uint4(w0, w1, w2, w3);
    const unsigned w4 = w[4];
    return make_uint4(__funnelshift_r(w0, w1, sh), __funnelshift_r(w1, w2, sh),
                      __funnelshift_r(w2, w3, sh), __funnelshift_r(w3, w4, sh));
}

}  // namespace dml
