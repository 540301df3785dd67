// AVERAGE_POOLING / AVERAGE_POOLING1: (N, C, D, H, W) -> pooled, FLOAT32 or FLOAT16 (sums in
// float32), with strides, dilations, asymmetric padding and both IncludePadding rules. The
// launcher maps 1-D and 2-D pooling onto this 3-D form with unit axes.
//
// pool_tiled: one CTA per output tile of one (n, c) plane. It reads the input tile plus its
// halo into shared memory once (zeros in the padding), sums along W into a second buffer,
// then each output sums KD*KH of those partial rows: the separable box sum, so every input
// element is read from global memory once per tile instead of once per tap. Row-level
// index math (offsets, bounds, divisors) is tabulated in shared memory first.
// Window sizes 1, 2 and 3 per axis are template parameters (0 = read from the parameters), so
// the window loops of the common cases unroll completely. A pool_tiled work item covers VT
// consecutive W positions (decodes and table reads shared; the launcher uses VT = 1, which
// measured faster on an H200 than VT = 4).
// pool_rows: one thread per V consecutive outputs along W, no shared memory, one wide load
// per window row where the span is contiguous and aligned. The launcher picks it where windows
// re-read little (non-overlapping windows read each input element at most once; stride 2 with
// window 3 measured faster than the tiles too).
// pool_strip (average_pooling_strip.cu): the sliding-window kernel for overlapping small
// windows.
// pool_direct: one thread per output, the fallback for windows too large for a tile.
#include "average_pooling_common.cuh"

namespace dml {

// Up to VT sums along W of KW taps (stride sw, dilation dw) from `src` into dst[0..count).
template <int VT>
__device__ __forceinline__ void sum_w(const float* src, float* dst, int count, int kw, int sw, int dw) {
#pragma unroll
    for (int e = 0; e < VT; ++e) {
        if (e >= count) break;
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < kw; ++k) s += src[e * sw + k * dw];
        dst[e] = s;
    }
}

// Shared memory: float in_tile[ID*IH*IW], float row_sums[ID*IH*TW], then (8-byte aligned)
// long long in_row[ID*IH] (input offset of each tile row, -1 outside the input),
// long long out_row[TD*TH] (output offset of each tile row in the plane, -1 past the end),
// int sums_row[TD*TH] (index of the row's first window row in row_sums), float
// row_divisor[TD*TH] (the D x H part of the divisor). Per-row work is done once per row
// here, so the per-element loops are a fast division, a table read and the memory access.
template <typename T, int KD_, int KH_, int KW_, int VT>
__global__ void __launch_bounds__(256) pool_tiled(const T* __restrict__ x, T* __restrict__ y, const PoolParams p) {
    float* smem = dynamic_smem<float>();
    const int TD = p.tile[0], TH = p.tile[1], TW = p.tile[2];
    const int ID = p.in_tile[0], IH = p.in_tile[1], IW = p.in_tile[2];
    const int in_rows = ID * IH, out_rows = TD * TH;
    float* in_tile = smem;
    float* row_sums = in_tile + in_rows * IW;
    // The 8-byte tables start at an even float count (dynamic shared memory is 16-byte aligned).
    long long* in_row = reinterpret_cast<long long*>(smem + ((in_rows * (IW + TW) + 1) & ~1));
    long long* out_row = in_row + in_rows;
    int* sums_row = reinterpret_cast<int*>(out_row + out_rows);
    float* row_divisor = reinterpret_cast<float*>(sums_row + out_rows);

    // CTA -> (plane, tile d, tile h, tile w).
    unsigned rest = blockIdx.x;
    unsigned tz, ty, tx, q;
    q = fast_div(rest, p.tiles_div[2]); tx = rest - q * p.tiles_div[2].d; rest = q;
    q = fast_div(rest, p.tiles_div[1]); ty = rest - q * p.tiles_div[1].d; rest = q;
    q = fast_div(rest, p.tiles_div[0]); tz = rest - q * p.tiles_div[0].d; rest = q;
    const unsigned n = fast_div(rest, p.channel_div);
    const unsigned c = rest - n * p.channel_div.d;
    const T* plane = x + ((long long)n * p.x_stride_n + (long long)c * p.x_stride_c);
    T* out_plane = y + (long long)rest * ((long long)p.out[0] * p.out[1] * p.out[2]);

    const int od0 = (int)tz * TD, oh0 = (int)ty * TH, ow0 = (int)tx * TW;
    const int z0 = od0 * p.stride[0] - p.pad_lo[0];
    const int y0 = oh0 * p.stride[1] - p.pad_lo[1];
    const int x0 = ow0 * p.stride[2] - p.pad_lo[2];

    // 0. Row tables.
    for (int r = threadIdx.x; r < in_rows; r += blockDim.x) {
        const int iz = r / IH, iy = r - iz * IH;
        const int gz = z0 + iz, gy = y0 + iy;
        in_row[r] = ((unsigned)gz < (unsigned)p.size[0] && (unsigned)gy < (unsigned)p.size[1])
                        ? (long long)gz * p.x_stride[0] + (long long)gy * p.x_stride[1]
                        : -1ll;
    }
    for (int r = threadIdx.x; r < out_rows; r += blockDim.x) {
        const int od = r / TH, oh = r - od * TH;
        const int gd = od0 + od, gh = oh0 + oh;
        const bool inside = gd < p.out[0] && gh < p.out[1];
        out_row[r] = inside ? ((long long)gd * p.out[1] + gh) * p.out[2] : -1ll;
        sums_row[r] = (od * p.stride[0] * IH + oh * p.stride[1]) * TW;
        row_divisor[r] = p.include_padding
                             ? p.taps
                             : (float)(taps_inside(p, 0, gd * p.stride[0] - p.pad_lo[0]) *
                                       taps_inside(p, 1, gh * p.stride[1] - p.pad_lo[1]));
    }
    __syncthreads();

    // 1. Input tile + halo -> shared memory (zeros in the padding). A thread takes chunks of
    //    VT consecutive W positions of one tile row (one decode and table read per chunk),
    //    LOADS chunks at a time so 8 independent loads are in flight.
    constexpr int LOADS = VT >= 8 ? 1 : 8 / VT;
    const int IWV = (int)p.in_wv_div.d;
    const int in_chunks = in_rows * IWV;
    const int size_w = p.size[2];
    const int stride_w = (int)p.x_stride[2];  // the launcher checks W offsets fit in int
    for (int base = threadIdx.x; base < in_chunks; base += LOADS * blockDim.x) {
        float v[LOADS][VT];
        int at[LOADS], left[LOADS];  // tile index of the chunk, elements of it inside the row
#pragma unroll
        for (int u = 0; u < LOADS; ++u) {
            const int j = base + u * (int)blockDim.x;
            left[u] = 0;
            at[u] = 0;
#pragma unroll
            for (int e = 0; e < VT; ++e) v[u][e] = 0.0f;
            if (j < in_chunks) {
                const unsigned r = fast_div((unsigned)j, p.in_wv_div);
                const int ix = (j - (int)(r * (unsigned)IWV)) * VT;
                at[u] = (int)r * IW + ix;
                left[u] = IW - ix;
                const long long off = in_row[r];
                if (off >= 0) {
                    const T* src = plane + off;
#pragma unroll
                    for (int e = 0; e < VT; ++e) {
                        const int gx = x0 + ix + e;
                        if (e < left[u] && (unsigned)gx < (unsigned)size_w) {
                            v[u][e] = to_float(__ldg(src + gx * stride_w));
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int u = 0; u < LOADS; ++u) {
#pragma unroll
            for (int e = 0; e < VT; ++e) {
                if (e < left[u]) in_tile[at[u] + e] = v[u][e];
            }
        }
    }
    __syncthreads();

    // 2. Sums along W for every input row of the tile, VT consecutive outputs per item.
    const int KW = window_of<KW_>(p, 2), SW = p.stride[2], DW = p.dilation[2];
    const int TWV = (int)p.tile_wv_div.d;
    const int sums_items = in_rows * TWV;
    for (int i = threadIdx.x; i < sums_items; i += blockDim.x) {
        const unsigned r = fast_div((unsigned)i, p.tile_wv_div);
        const int ow = (i - (int)(r * (unsigned)TWV)) * VT;
        const float* src = in_tile + r * IW + ow * SW;
        float* dst = row_sums + r * TW + ow;
        // Unit stride and dilation (the common case) as constants: neighbouring windows then
        // share their loads (VT + KW - 1 reads for VT sums).
        if (SW == 1 && DW == 1) {
            sum_w<VT>(src, dst, TW - ow, KW, 1, 1);
        } else {
            sum_w<VT>(src, dst, TW - ow, KW, SW, DW);
        }
    }
    __syncthreads();

    // 3. Sums over D and H of the row sums, divided, written along W.
    const int KD = window_of<KD_>(p, 0), KH = window_of<KH_>(p, 1);
    const int step_d = p.dilation[0] * IH * TW, step_h = p.dilation[1] * TW;
    const int out_w = p.out[2];
    const int out_items = out_rows * TWV;
    for (int i = threadIdx.x; i < out_items; i += blockDim.x) {
        const unsigned r = fast_div((unsigned)i, p.tile_wv_div);
        const int ow = (i - (int)(r * (unsigned)TWV)) * VT;
        const int gw = ow0 + ow;
        const long long off = out_row[r];
        if (off < 0 || gw >= out_w) continue;
        const float* src = row_sums + sums_row[r] + ow;
        const float row_div = row_divisor[r];
        T* dst = out_plane + (off + gw);
#pragma unroll
        for (int e = 0; e < VT; ++e) {
            if (ow + e >= TW || gw + e >= out_w) break;
            float s = 0.0f;
#pragma unroll
            for (int kd = 0; kd < KD; ++kd) {
                const float* plane_rows = src + e + kd * step_d;
#pragma unroll
                for (int kh = 0; kh < KH; ++kh) s += plane_rows[kh * step_h];
            }
            float divisor = row_div;
            if (!p.include_padding) divisor *= (float)taps_inside(p, 2, (gw + e) * SW - p.pad_lo[2]);
            dst[e] = from_float<T>(__fdividef(s, divisor));
        }
    }
}

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


template <typename T>
__global__ void __launch_bounds__(256) pool_direct(const T* __restrict__ x, T* __restrict__ y, const PoolParams p) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= p.total) return;
    long long rest = t;
    const int ow = (int)(rest % p.out[2]); rest /= p.out[2];
    const int oh = (int)(rest % p.out[1]); rest /= p.out[1];
    const int od = (int)(rest % p.out[0]); rest /= p.out[0];
    const long long n = rest / p.channel_div.d, c = rest % p.channel_div.d;
    const T* plane = x + (n * p.x_stride_n + c * p.x_stride_c);
    float s = 0.0f;
    for (int kd = 0; kd < p.window[0]; ++kd) {
        const int z = od * p.stride[0] - p.pad_lo[0] + kd * p.dilation[0];
        if ((unsigned)z >= (unsigned)p.size[0]) continue;
        for (int kh = 0; kh < p.window[1]; ++kh) {
            const int yy = oh * p.stride[1] - p.pad_lo[1] + kh * p.dilation[1];
            if ((unsigned)yy >= (unsigned)p.size[1]) continue;
            const T* src = plane + (long long)z * p.x_stride[0] + (long long)yy * p.x_stride[1];
            for (int kw = 0; kw < p.window[2]; ++kw) {
                const int xx = ow * p.stride[2] - p.pad_lo[2] + kw * p.dilation[2];
                if ((unsigned)xx < (unsigned)p.size[2]) s += to_float(src[(long long)xx * p.x_stride[2]]);
            }
        }
    }
    y[t] = from_float<T>(s / divisor(p, od, oh, ow));
}

}  // namespace dml

#ifdef DMLSERVE_EXPLICIT_INSTANTIATION
#define DML_POOL_TILED(T, KD, KH, KW, VT) \
    template __global__ void dml::pool_tiled<T, KD, KH, KW, VT>(const T*, T*, const dml::PoolParams);
#define DML_POOL_ROWS(T, IDX, KD, KH, KW, V, BATCH) \
    template __global__ void dml::pool_rows<T, IDX, KD, KH, KW, V, BATCH>(const T*, T*, const dml::PoolParams);
DML_POOL_TILED(float, 0, 0, 0, 1)
DML_POOL_TILED(__half, 0, 0, 0, 1)
DML_POOL_TILED(float, 0, 0, 0, 4)
DML_POOL_TILED(__half, 0, 0, 0, 4)
DML_POOL_TILED(float, 1, 3, 3, 4)
DML_POOL_TILED(__half, 1, 3, 3, 4)
DML_POOL_TILED(float, 1, 3, 3, 1)
DML_POOL_TILED(float, 1, 2, 2, 4)
DML_POOL_TILED(float, 1, 1, 3, 4)
DML_POOL_TILED(float, 3, 3, 3, 4)
DML_POOL_TILED(float, 3, 3, 3, 1)
DML_POOL_TILED(float, 2, 3, 1, 4)
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
template __global__ void dml::pool_direct<float>(const float*, float*, const dml::PoolParams);
template __global__ void dml::pool_direct<__half>(const __half*, __half*, const dml::PoolParams);
#endif
