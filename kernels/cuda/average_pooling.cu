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
// pool_rows (average_pooling_rows.cu): one thread per V consecutive outputs along W, no
// shared memory, for windows that re-read little.
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
template __global__ void dml::pool_direct<float>(const float*, float*, const dml::PoolParams);
template __global__ void dml::pool_direct<__half>(const __half*, __half*, const dml::PoolParams);
#endif
