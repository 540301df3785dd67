// AVERAGE_POOLING's pool_rows: one thread per V consecutive outputs along W, no shared memory,
// one wide load per window row where the span is contiguous and aligned. The launcher picks it
// where windows re-read little (non-overlapping windows read each input element at most once;
// stride 2 with window 3 measured faster than the tiles too). PoolParams and the shared helpers:
// average_pooling_common.cuh.
#include "average_pooling_common.cuh"

namespace dml {

// Add the V windows of one input row that start at W position `x0` (stride SW, dilation DW,
// KW taps) to s[0..V). Windows wholly inside the row skip the bounds tests; with
// `contiguous` (the V windows tile V*KW adjacent elements) and an aligned start, the span is
// one 8- or 16-byte load, or two 16-byte loads (a 32-byte span, 16-byte aligned).
template <typename T, typename IDX, int KW_, int V>
__device__ __forceinline__ void add_row(const T* __restrict__ row, int x0, const PoolParams& p,
                                        float (&s)[V]) {
    const int KW = window_of<KW_>(p, 2), SW = p.stride[2], DW = p.dilation[2];
    const int size_w = p.size[2];
    const IDX sw = (IDX)p.x_stride[2];
    const bool inside = x0 >= 0 && x0 + (V - 1) * SW + (KW - 1) * DW < size_w;
    if (inside) {
        constexpr int SPAN_BYTES = KW_ * V * (int)sizeof(T);
        if constexpr (KW_ > 0 && (SPAN_BYTES == 8 || SPAN_BYTES == 16 || SPAN_BYTES == 32)) {
            const T* src = row + x0;
            constexpr int ALIGN = SPAN_BYTES < 16 ? SPAN_BYTES : 16;
            if (p.contiguous && ((unsigned long long)src & (ALIGN - 1)) == 0) {
                typedef typename Bits<SPAN_BYTES >= 16 ? 8 : 4>::type Word;  // 8 or 4 bytes
                constexpr int WORDS = SPAN_BYTES / (int)sizeof(Word);
                alignas(16) Word w[WORDS];
                if constexpr (SPAN_BYTES >= 16) {
#pragma unroll
                    for (int b = 0; b < SPAN_BYTES / 16; ++b) {
                        const uint4 v = __ldg(reinterpret_cast<const uint4*>(src) + b);
                        w[2 * b] = ((unsigned long long)v.y << 32) | v.x;
                        w[2 * b + 1] = ((unsigned long long)v.w << 32) | v.z;
                    }
                } else {
                    const uint2 v = __ldg(reinterpret_cast<const uint2*>(src));
                    w[0] = v.x;
                    w[1] = v.y;
                }
                const T* e = reinterpret_cast<const T*>(w);
#pragma unroll
                for (int v = 0; v < V; ++v) {
#pragma unroll
                    for (int k = 0; k < KW; ++k) s[v] += to_float(e[v * KW + k]);
                }
                return;
            }
        }
#pragma unroll
        for (int v = 0; v < V; ++v) {
#pragma unroll
            for (int k = 0; k < KW; ++k) {
                s[v] += to_float(__ldg(row + (IDX)(x0 + v * SW + k * DW) * sw));
            }
        }
        return;
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
#pragma unroll
        for (int k = 0; k < KW; ++k) {
            const int gx = x0 + v * SW + k * DW;
            if ((unsigned)gx < (unsigned)size_w) s[v] += to_float(__ldg(row + (IDX)gx * sw));
        }
    }
}

// The KD x KH window rows of V contiguous windows (p.contiguous) that lie inside the input, when
// every row's span starts 16-byte aligned: all the rows' 16-byte loads issued before any sum
// (the per-row form waits on one row's load at a time behind its bounds branches), the taps
// added in the per-row form's order. False where the geometry does not allow it.
template <typename T, typename IDX, int KD, int KH, int KW, int V>
__device__ __forceinline__ bool add_rows_batched(const T* __restrict__ plane, int z0, int y0, int x0,
                                                 const PoolParams& p, float (&s)[V]) {
    constexpr int SPAN_BYTES = KW * V * (int)sizeof(T);
    if constexpr (KD > 0 && KH > 0 && KW > 0 && (SPAN_BYTES == 16 || SPAN_BYTES == 32)) {
        constexpr int NV = SPAN_BYTES / 16;
        const int dd = p.dilation[0], dh = p.dilation[1];
        const bool inside = p.contiguous && z0 >= 0 && z0 + (KD - 1) * dd < p.size[0] && y0 >= 0 &&
                            y0 + (KH - 1) * dh < p.size[1] && x0 >= 0 && x0 + V * KW <= p.size[2];
        if (!inside) return false;
        const IDX step_d = (IDX)dd * (IDX)p.x_stride[0], step_h = (IDX)dh * (IDX)p.x_stride[1];
        const T* first = plane + ((IDX)z0 * (IDX)p.x_stride[0] + (IDX)y0 * (IDX)p.x_stride[1] + x0);
        const unsigned long long bits = (unsigned long long)first | (unsigned long long)(step_d * (IDX)sizeof(T)) |
                                        (unsigned long long)(step_h * (IDX)sizeof(T));
        if ((bits & 15) != 0) return false;
        uint4 w[KD][KH][NV];
#pragma unroll
        for (int kd = 0; kd < KD; ++kd)
#pragma unroll
            for (int kh = 0; kh < KH; ++kh)
#pragma unroll
                for (int b = 0; b < NV; ++b) {
                    w[kd][kh][b] = __ldg(reinterpret_cast<const uint4*>(first + kd * step_d + kh * step_h) + b);
                }
#pragma unroll
        for (int kd = 0; kd < KD; ++kd)
#pragma unroll
            for (int kh = 0; kh < KH; ++kh) {
                const T* e = reinterpret_cast<const T*>(w[kd][kh]);
#pragma unroll
                for (int v = 0; v < V; ++v)
#pragma unroll
                    for (int k = 0; k < KW; ++k) s[v] += to_float(e[v * KW + k]);
            }
        return true;
    }
    return false;
}

// One thread per V consecutive outputs of a W row, windows that do not overlap: every input
// element is read at most once, so no tile is needed. IDX is int when every input offset,
// output index and thread index fits in 31 bits. BATCH: add_rows_batched where it applies, and
// one reciprocal per thread with IncludePadding true.
template <typename T, typename IDX, int KD_, int KH_, int KW_, int V, bool BATCH>
__global__ void __launch_bounds__(256) pool_rows(const T* __restrict__ x, T* __restrict__ y, const PoolParams p) {
    const long long tl = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (tl >= p.total) return;
    IDX row_index, g, oh, od, rest, n, c;
    divmod<IDX>((IDX)tl, p.groups_div, row_index, g);  // row_index: (plane, od, oh)
    divmod<IDX>(row_index, p.out_div[1], rest, oh);
    divmod<IDX>(rest, p.out_div[0], rest, od);
    divmod<IDX>(rest, p.channel_div, n, c);
    const T* plane = x + (n * (IDX)p.x_stride_n + c * (IDX)p.x_stride_c);
    const int KD = window_of<KD_>(p, 0), KH = window_of<KH_>(p, 1);
    const int ow0 = (int)g * V;
    const int z0 = (int)od * p.stride[0] - p.pad_lo[0];
    const int y0 = (int)oh * p.stride[1] - p.pad_lo[1];
    const int x0 = ow0 * p.stride[2] - p.pad_lo[2];

    float s[V];
#pragma unroll
    for (int v = 0; v < V; ++v) s[v] = 0.0f;
    bool batched = false;
    if constexpr (BATCH) batched = add_rows_batched<T, IDX, KD_, KH_, KW_, V>(plane, z0, y0, x0, p, s);
    if (!batched) {
#pragma unroll
        for (int kd = 0; kd < KD; ++kd) {
            const int z = z0 + kd * p.dilation[0];
            if ((unsigned)z >= (unsigned)p.size[0]) continue;
#pragma unroll
            for (int kh = 0; kh < KH; ++kh) {
                const int yy = y0 + kh * p.dilation[1];
                if ((unsigned)yy >= (unsigned)p.size[1]) continue;
                const T* row = plane + ((IDX)z * (IDX)p.x_stride[0] + (IDX)yy * (IDX)p.x_stride[1]);
                add_row<T, IDX, KW_, V>(row, x0, p, s);
            }
        }
    }

    float divisor = p.taps;
    if (!p.include_padding) {
        divisor = (float)(valid_taps((int)od, p.stride[0], p.pad_lo[0], p.dilation[0], p.window[0], p.size[0]) *
                          valid_taps((int)oh, p.stride[1], p.pad_lo[1], p.dilation[1], p.window[1], p.size[1]));
    }
    const int out_w = p.out[2];
    T* dst = y + (row_index * (IDX)out_w + (IDX)ow0);
    alignas(16) T r[V];
    if (BATCH && p.include_padding) {
        // One divisor for every output: its reciprocal once (`s * scale` is __fdividef(s, taps)
        // bit for bit, as in strip_store_scaled).
        const float scale = __fdividef(1.0f, divisor);
#pragma unroll
        for (int v = 0; v < V; ++v) r[v] = from_float<T>(s[v] * scale);
    } else {
#pragma unroll
        for (int v = 0; v < V; ++v) {
            float d = divisor;
            if (!p.include_padding) {
                d *= (float)valid_taps(ow0 + v, p.stride[2], p.pad_lo[2], p.dilation[2], p.window[2], p.size[2]);
            }
            r[v] = from_float<T>(__fdividef(s[v], d));
        }
    }
    // One 8- or 16-byte store when all V outputs exist and the address allows (the output is
    // packed, so that is most groups whenever out_w * sizeof(T) is a multiple of it).
    constexpr int OUT_BYTES = V * (int)sizeof(T);
    if constexpr (OUT_BYTES == 8 || OUT_BYTES == 16) {
        if (ow0 + V <= out_w && ((unsigned long long)dst & (OUT_BYTES - 1)) == 0) {
            if constexpr (OUT_BYTES == 16) {
                *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(r);
            } else {
                *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(r);
            }
            return;
        }
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
        if (ow0 + v >= out_w) break;
        dst[v] = r[v];
    }
}

}  // namespace dml

#ifdef DMLSERVE_EXPLICIT_INSTANTIATION
#define DML_POOL_ROWS(T, IDX, KD, KH, KW, V, BATCH) \
    template __global__ void dml::pool_rows<T, IDX, KD, KH, KW, V, BATCH>(const T*, T*, const dml::PoolParams);
DML_POOL_ROWS(float, int, 1, 2, 2, 2, false)
DML_POOL_ROWS(__half, int, 1, 2, 2, 4, false)
DML_POOL_ROWS(float, int, 1, 3, 3, 2, false)
DML_POOL_ROWS(float, int, 1, 1, 1, 4, false)
DML_POOL_ROWS(__half, int, 1, 1, 1, 8, false)
DML_POOL_ROWS(float, int, 2, 2, 2, 2, false)
DML_POOL_ROWS(float, long long, 1, 1, 2, 2, false)
DML_POOL_ROWS(__half, long long, 1, 1, 2, 4, false)
DML_POOL_ROWS(float, int, 0, 0, 0, 1, false)
DML_POOL_ROWS(__half, long long, 0, 0, 0, 1, false)
DML_POOL_ROWS(float, int, 1, 2, 2, 2, true)
DML_POOL_ROWS(__half, int, 1, 2, 2, 8, true)
DML_POOL_ROWS(float, int, 2, 2, 2, 2, true)
DML_POOL_ROWS(float, int, 1, 1, 1, 4, true)
DML_POOL_ROWS(__half, long long, 1, 1, 2, 8, true)
#endif
