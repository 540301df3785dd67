// PADDING (DML_PADDING1_OPERATOR_DESC): CONSTANT, EDGE, REFLECTION, SYMMETRIC, WRAP on
// tensors of rank 1..8, any dtype (moved as 1/2/4/8-byte words).
//
// Work split: the output is a set of rows (its innermost dim, after the host collapsed
// unpadded contiguous dims); each thread writes one 16-byte chunk of one row, chunks aligned
// to the buffer so full chunks are single 16-byte stores (common.cuh, chunk_span). The outer
// coordinates are decoded once per chunk with multiply-high division, mirrored once per
// chunk, and an interior chunk is one shifted 16-byte copy of the source row. Only chunks
// touching the row's border resolve elements one by one.
#include "common.cuh"

namespace dml {

enum PadMode { PAD_CONSTANT = 0, PAD_EDGE = 1, PAD_REFLECTION = 2, PAD_SYMMETRIC = 3, PAD_WRAP = 4 };

// Mirrors the launcher's NumPy structured dtype field by field (natural alignment).
struct PadParams {
    long long in_stride[8];    // element strides of the collapsed input dims (0 = broadcast)
    long long total_chunks;    // rows * chunks_per_row
    unsigned long long value;  // CONSTANT value, its bytes in the low end
    int in_size[8];
    int out_size[8];
    int pad_lo[8];
    FastDivmod out_div[8];     // division by out_size[d] (outer dims)
    FastDivmod chunk_div;      // division by chunks per row
    int mode;
    int periodic;              // some pad needs more than one fold: use the modular map
    int inner_contiguous;      // in_stride[R-1] == 1: interior chunks are shifted copies
    int unused;
};

// The source index of position j (outside [0, n)) of an axis of size n (SEMANTICS.md §4).
// The closed forms hold while every pad is within one fold; `periodic` selects the
// modular forms otherwise. REFLECTION of a size-1 axis repeats the element.
__device__ __forceinline__ int pad_source(int j, int n, int mode, int periodic) {
    if (mode == PAD_EDGE) return j < 0 ? 0 : n - 1;
    if (mode == PAD_WRAP) {
        if (!periodic) return j < 0 ? j + n : j - n;
        int r = j % n;
        return r < 0 ? r + n : r;
    }
    if (mode == PAD_REFLECTION) {
        if (n == 1) return 0;
        if (!periodic) return j < 0 ? -j : 2 * (n - 1) - j;
        const int period = 2 * (n - 1);
        int r = j % period;
        if (r < 0) r += period;
        return r < n ? r : period - r;
    }
    // PAD_SYMMETRIC
    if (!periodic) return j < 0 ? -1 - j : 2 * n - 1 - j;
    const int period = 2 * n;
    int r = j % period;
    if (r < 0) r += period;
    return r < n ? r : period - 1 - r;
}

template <int BYTES, int R, typename IDX>
__global__ void __launch_bounds__(256)
pad_chunks(const typename Bits<BYTES>::type* __restrict__ x, typename Bits<BYTES>::type* __restrict__ y,
           const PadParams p) {
    typedef typename Bits<BYTES>::type T;
    const int V = Chunk<BYTES>::N;
    const IDX t = (IDX)blockIdx.x * (IDX)blockDim.x + (IDX)threadIdx.x;
    if (t >= (IDX)p.total_chunks) return;

    IDX row, chunk;
    divmod<IDX>(t, p.chunk_div, row, chunk);
    const int width = p.out_size[R - 1];
    const IDX row_start = row * (IDX)width;
    const ChunkSpan span = chunk_span<BYTES, IDX>(row_start, chunk, width);
    if (span.first >= span.end) return;  // the spare chunk of a row that needed one less
    const int c0 = span.c0;

    // Outer coordinates -> source row offset, once per chunk.
    IDX src = 0;
    bool fill = false;
    IDX rest = row;
#pragma unroll
    for (int d = R - 2; d >= 0; --d) {
        IDX o;
        if (d == 0) {
            o = rest;
        } else {
            IDX q;
            divmod<IDX>(rest, p.out_div[d], q, o);
            rest = q;
        }
        int j = (int)o - p.pad_lo[d];
        if ((unsigned)j >= (unsigned)p.in_size[d]) {
            if (p.mode == PAD_CONSTANT) {
                fill = true;
                j = 0;
            } else {
                j = pad_source(j, p.in_size[d], p.mode, p.periodic);
            }
        }
        src += (IDX)j * (IDX)p.in_stride[d];
    }

    const T value = (T)p.value;
    const int lo = p.pad_lo[R - 1];
    const int n = p.in_size[R - 1];
    Chunk<BYTES> c;
    if (fill) {
#pragma unroll
        for (int i = 0; i < V; ++i) c.e[i] = value;
    } else if (p.inner_contiguous && c0 >= lo && c0 + V <= lo + n) {
        c.v = load16_unaligned(reinterpret_cast<const unsigned char*>(x + (src + (IDX)(c0 - lo))));
    } else {
        const IDX step = (IDX)p.in_stride[R - 1];
#pragma unroll
        for (int i = 0; i < V; ++i) {
            if (i >= span.first && i < span.end) {
                int j = c0 + i - lo;
                if ((unsigned)j >= (unsigned)n) {
                    if (p.mode == PAD_CONSTANT) {
                        c.e[i] = value;
                        continue;
                    }
                    j = pad_source(j, n, p.mode, p.periodic);
                }
                c.e[i] = __ldg(x + (src + (IDX)j * step));
            }
        }
    }
    store_span<BYTES>(y + (row_start + (IDX)c0), c, span.first, span.end);
}

}  // namespace dml

#ifdef DMLSERVE_EXPLICIT_INSTANTIATION
template __global__ void dml::pad_chunks<1, 1, int>(const unsigned char*, unsigned char*, const dml::PadParams);
template __global__ void dml::pad_chunks<2, 4, int>(const unsigned short*, unsigned short*, const dml::PadParams);
template __global__ void dml::pad_chunks<4, 4, int>(const unsigned int*, unsigned int*, const dml::PadParams);
template __global__ void dml::pad_chunks<4, 8, long long>(const unsigned int*, unsigned int*, const dml::PadParams);
template __global__ void dml::pad_chunks<8, 3, int>(const unsigned long long*, unsigned long long*, const dml::PadParams);
#endif
