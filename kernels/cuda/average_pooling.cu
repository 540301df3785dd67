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
// pool_strip: the sliding-window form for small windows (1..3 per axis, unit dilations). A
// group of G lanes owns a span of G*V output columns (V = one 16-byte vector of outputs per
// lane), TY output rows, and walks the outermost axis D through a run of output planes: each
// step reads one input plane's TY rows plus halo (16-byte loads; the W halo comes from the
// neighbour lanes through shuffles), forms the W sums in registers, the H sums of the TY rows,
// and keeps the last KD plane sums in a register ring; when a window's last plane has been
// read, the output plane is the ring's sum. Every input element is read from global memory
// about once (the H halo of the TY rows and the D halo of the runs are re-reads).
// pool_direct: one thread per output, the fallback for windows too large for a tile.
#include <cuda_fp16.h>

#include "common.cuh"

namespace dml {

// Mirrors the launcher's NumPy structured dtype field by field (natural alignment).
struct PoolParams {
    long long x_stride_n;     // element strides of the input (0 = broadcast)
    long long x_stride_c;
    long long x_stride[3];    // D, H, W
    long long total;          // CTAs (tiled) or outputs (direct)
    int size[3];              // input D, H, W
    int out[3];               // output D, H, W
    int window[3];
    int stride[3];
    int dilation[3];
    int pad_lo[3];
    int tile[3];              // output tile TD, TH, TW
    int in_tile[3];           // input tile ID, IH, IW
    FastDivmod tiles_div[3];  // division by the tile counts per dim
    FastDivmod out_div[3];    // division by out[d] (direct kernel)
    FastDivmod in_w_div;      // division by IW
    FastDivmod in_wv_div;     // division by ceil(IW / VT): W chunks per input tile row
    FastDivmod tile_w_div;    // division by TW
    FastDivmod tile_wv_div;   // division by ceil(TW / VT): W chunks per output tile row
    FastDivmod channel_div;   // division by C
    int include_padding;
    float taps;               // prod(window), the IncludePadding divisor
    FastDivmod groups_div;    // division by the V-output groups per W row (pool_rows)
    int contiguous;           // pool_rows: W stride 1, stride == window, dilation 1 along W
    FastDivmod strip_div[3];  // pool_strip: division by the D runs, H tiles, W spans per plane
    int run_planes;           // pool_strip: output planes per D run
    int unused;
};

// The window size of axis `d`: the template constant when there is one.
template <int K>
__device__ __forceinline__ int window_of(const PoolParams& p, int d) {
    return K > 0 ? K : p.window[d];
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }

// Taps of a window starting at o*stride - pad that fall inside [0, size) (IncludePadding false).
__device__ __forceinline__ int valid_taps(int o, int stride, int pad, int dilation, int window, int size) {
    const int start = o * stride - pad;
    const int first = start >= 0 ? 0 : (dilation - 1 - start) / dilation;
    const int end = size > start ? imin(window, (size - start + dilation - 1) / dilation) : 0;
    return imax(end - first, 0);
}

__device__ __forceinline__ float divisor(const PoolParams& p, int od, int oh, int ow) {
    if (p.include_padding) return p.taps;
    return (float)(valid_taps(od, p.stride[0], p.pad_lo[0], p.dilation[0], p.window[0], p.size[0]) *
                   valid_taps(oh, p.stride[1], p.pad_lo[1], p.dilation[1], p.window[1], p.size[1]) *
                   valid_taps(ow, p.stride[2], p.pad_lo[2], p.dilation[2], p.window[2], p.size[2]));
}

// Taps of dim d that fall inside the input for window start `start`: the full window in the
// interior, the closed form only at the edges.
__device__ __forceinline__ int taps_inside(const PoolParams& p, int d, int start) {
    const int window = p.window[d], dilation = p.dilation[d], size = p.size[d];
    if (start >= 0 && start + (window - 1) * dilation < size) return window;
    const int first = start >= 0 ? 0 : (dilation - 1 - start) / dilation;
    const int end = size > start ? imin(window, (size - start + dilation - 1) / dilation) : 0;
    return imax(end - first, 0);
}

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
// one 8- or 16-byte load.
template <typename T, typename IDX, int KW_, int V>
__device__ __forceinline__ void add_row(const T* __restrict__ row, int x0, const PoolParams& p,
                                        float (&s)[V]) {
    const int KW = window_of<KW_>(p, 2), SW = p.stride[2], DW = p.dilation[2];
    const int size_w = p.size[2];
    const IDX sw = (IDX)p.x_stride[2];
    const bool inside = x0 >= 0 && x0 + (V - 1) * SW + (KW - 1) * DW < size_w;
    if (inside) {
        constexpr int SPAN_BYTES = KW_ * V * (int)sizeof(T);
        if constexpr (KW_ > 0 && (SPAN_BYTES == 8 || SPAN_BYTES == 16)) {
            const T* src = row + x0;
            if (p.contiguous && ((unsigned long long)src & (SPAN_BYTES - 1)) == 0) {
                typedef typename Bits<SPAN_BYTES == 16 ? 8 : 4>::type Word;  // 8 or 4 bytes
                constexpr int WORDS = SPAN_BYTES / (int)sizeof(Word);
                alignas(16) Word w[WORDS];
                if constexpr (SPAN_BYTES == 16) {
                    const uint4 v = __ldg(reinterpret_cast<const uint4*>(src));
                    w[0] = ((unsigned long long)v.y << 32) | v.x;
                    w[1] = ((unsigned long long)v.w << 32) | v.z;
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

// One thread per V consecutive outputs of a W row, windows that do not overlap: every input
// element is read at most once, so no tile is needed. IDX is int when every input offset,
// output index and thread index fits in 31 bits.
template <typename T, typename IDX, int KD_, int KH_, int KW_, int V>
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

    float divisor = p.taps;
    if (!p.include_padding) {
        divisor = (float)(valid_taps((int)od, p.stride[0], p.pad_lo[0], p.dilation[0], p.window[0], p.size[0]) *
                          valid_taps((int)oh, p.stride[1], p.pad_lo[1], p.dilation[1], p.window[1], p.size[1]));
    }
    const int out_w = p.out[2];
    T* dst = y + (row_index * (IDX)out_w + (IDX)ow0);
    alignas(16) T r[V];
#pragma unroll
    for (int v = 0; v < V; ++v) {
        float d = divisor;
        if (!p.include_padding) {
            d *= (float)valid_taps(ow0 + v, p.stride[2], p.pad_lo[2], p.dilation[2], p.window[2], p.size[2]);
        }
        r[v] = from_float<T>(__fdividef(s[v], d));
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


// The W window sums of one input row for a lane's V outputs (pool_strip): `own` holds the
// lane's SW*V input columns, the halos come from the neighbour lanes (shuffles) or, at the
// ends of the group's span, from `edge` (loaded by the first and last lane).
template <int V, int KW, int SW, int PW, int G>
struct StripRow {
    static constexpr int OWN = SW * V;
    static constexpr int HL = PW;
    static constexpr int HR = KW - PW - SW > 0 ? KW - PW - SW : 0;
    static constexpr int EDGE = HL + HR > 0 ? HL + HR : 1;
    float own[OWN];
    float edge[EDGE];

    __device__ __forceinline__ void sums(int lane, float (&hs)[V]) const {
        float win[HL + OWN + HR];
#pragma unroll
        for (int e = 0; e < OWN; ++e) win[HL + e] = own[e];
#pragma unroll
        for (int h = 0; h < HL; ++h) {
            const float v = __shfl_up_sync(0xffffffffu, own[OWN - HL + h], 1, G);
            win[h] = lane == 0 ? edge[h] : v;
        }
#pragma unroll
        for (int h = 0; h < HR; ++h) {
            const float v = __shfl_down_sync(0xffffffffu, own[h], 1, G);
            win[HL + OWN + h] = lane == G - 1 ? edge[HL + h] : v;
        }
#pragma unroll
        for (int v = 0; v < V; ++v) {
            float s = 0.0f;
#pragma unroll
            for (int k = 0; k < KW; ++k) s += win[HL + v * SW - PW + k];
            hs[v] = s;
        }
    }
};

template <typename T, int V, int KW, int SW, int PW, int G>
__device__ __forceinline__ void strip_load(StripRow<V, KW, SW, PW, G>& r, const T* row, bool in, int ix0,
                                           int lane, int size_w, long long xs_w) {
    typedef StripRow<V, KW, SW, PW, G> Row;
    if (in && xs_w == 1 && ix0 + Row::OWN <= size_w && ((unsigned long long)(row + ix0) & 15) == 0) {
#pragma unroll
        for (int b = 0; b < SW; ++b) {
            const uint4 w = __ldg(reinterpret_cast<const uint4*>(row + ix0) + b);
            const T* e = reinterpret_cast<const T*>(&w);
#pragma unroll
            for (int i = 0; i < V; ++i) r.own[b * V + i] = to_float(e[i]);
        }
    } else {
#pragma unroll
        for (int e = 0; e < Row::OWN; ++e) {
            const int col = ix0 + e;
            r.own[e] = in && col < size_w ? to_float(__ldg(row + (long long)col * xs_w)) : 0.0f;
        }
    }
#pragma unroll
    for (int h = 0; h < Row::EDGE; ++h) r.edge[h] = 0.0f;
    if (lane == 0) {
#pragma unroll
        for (int h = 0; h < Row::HL; ++h) {
            const int col = ix0 - Row::HL + h;
            if (in && col >= 0 && col < size_w) r.edge[h] = to_float(__ldg(row + (long long)col * xs_w));
        }
    }
    if (lane == G - 1) {
#pragma unroll
        for (int h = 0; h < Row::HR; ++h) {
            const int col = ix0 + Row::OWN + h;
            if (in && col < size_w) r.edge[Row::HL + h] = to_float(__ldg(row + (long long)col * xs_w));
        }
    }
}

template <typename T, int KD, int KH, int KW, int SH, int SW, int PW, int TY, int G>
__global__ void __launch_bounds__(256) pool_strip(const T* __restrict__ x, T* __restrict__ y, const PoolParams p) {
    constexpr int V = 16 / (int)sizeof(T);
    constexpr int RY = (TY - 1) * SH + KH;  // input rows of one plane step
    typedef StripRow<V, KW, SW, PW, G> Row;
    constexpr bool PREFETCH = RY * (Row::OWN + Row::EDGE) <= 24;
    constexpr int NEXT = PREFETCH ? RY : 1;
    const int lane = (int)threadIdx.x & (G - 1);
    const long long item = (long long)blockIdx.x * (blockDim.x / G) + threadIdx.x / G;
    const bool valid = item < p.total;

    // item -> (plane, D run, H tile, W span), the W span fastest.
    unsigned rest = valid ? (unsigned)item : 0u, q;
    q = fast_div(rest, p.strip_div[2]);
    const int span = (int)(rest - q * p.strip_div[2].d);
    rest = q;
    q = fast_div(rest, p.strip_div[1]);
    const int tile = (int)(rest - q * p.strip_div[1].d);
    rest = q;
    q = fast_div(rest, p.strip_div[0]);
    const int run = (int)(rest - q * p.strip_div[0].d);
    const unsigned nc = q;
    const unsigned n = fast_div(nc, p.channel_div);
    const unsigned c = nc - n * p.channel_div.d;
    const T* plane = x + ((long long)n * p.x_stride_n + (long long)c * p.x_stride_c);

    const int OD = p.out[0], OH = p.out[1], OW = p.out[2];
    const int ox0 = (span * G + lane) * V;
    const int ix0 = ox0 * SW;
    const int oy0 = tile * TY;
    const int iy0 = oy0 * SH - p.pad_lo[1];
    const int sd = p.stride[0];
    const int od0 = run * p.run_planes;
    const int od1 = imin(od0 + p.run_planes, OD);
    const int z0 = od0 * sd - p.pad_lo[0];
    const int steps = valid ? (od1 - od0 - 1) * sd + KD : 0;
    int warp_steps = steps;
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) warp_steps = imax(warp_steps, __shfl_xor_sync(0xffffffffu, warp_steps, m));

    // The H and W parts of the divisor (IncludePadding false), once per item.
    float div_h[TY], div_w[V];
#pragma unroll
    for (int t = 0; t < TY; ++t) {
        div_h[t] = p.include_padding ? 1.0f
                                     : (float)valid_taps(oy0 + t, SH, p.pad_lo[1], 1, KH, p.size[1]);
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
        div_w[v] = p.include_padding ? 1.0f
                                     : (float)valid_taps(ox0 + v, SW, PW, 1, KW, p.size[2]);
    }

    const long long xs_d = p.x_stride[0], xs_h = p.x_stride[1], xs_w = p.x_stride[2];
    const int ID = p.size[0], IH = p.size[1], IW = p.size[2];
    auto load = [&](Row (&rows)[RY], int s) {
        const int z = z0 + s;
        const bool zin = s < steps && (unsigned)z < (unsigned)ID;
#pragma unroll
        for (int r = 0; r < RY; ++r) {
            const int yy = iy0 + r;
            const bool in = zin && (unsigned)yy < (unsigned)IH;
            strip_load<T>(rows[r], plane + ((long long)z * xs_d + (long long)yy * xs_h), in, ix0, lane, IW, xs_w);
        }
    };

    float ring[KD][TY][V];
#pragma unroll
    for (int k = 0; k < KD; ++k)
#pragma unroll
        for (int t = 0; t < TY; ++t)
#pragma unroll
            for (int v = 0; v < V; ++v) ring[k][t][v] = 0.0f;

    Row cur[RY];
    Row next[NEXT];
    load(cur, 0);
    int emit = KD - 1;  // the step that reads the last window plane of output plane `od`
    int od = od0;
    for (int s = 0; s < warp_steps; ++s) {
        if constexpr (PREFETCH) load(next, s + 1);
        float ps[TY][V];
#pragma unroll
        for (int t = 0; t < TY; ++t)
#pragma unroll
            for (int v = 0; v < V; ++v) ps[t][v] = 0.0f;
#pragma unroll
        for (int r = 0; r < RY; ++r) {
            float hs[V];
            cur[r].sums(lane, hs);
#pragma unroll
            for (int t = 0; t < TY; ++t) {
                if (t * SH <= r && r < t * SH + KH) {
#pragma unroll
                    for (int v = 0; v < V; ++v) ps[t][v] += hs[v];
                }
            }
        }
#pragma unroll
        for (int k = 0; k + 1 < KD; ++k)
#pragma unroll
            for (int t = 0; t < TY; ++t)
#pragma unroll
                for (int v = 0; v < V; ++v) ring[k][t][v] = ring[k + 1][t][v];
#pragma unroll
        for (int t = 0; t < TY; ++t)
#pragma unroll
            for (int v = 0; v < V; ++v) ring[KD - 1][t][v] = ps[t][v];

        if (s == emit) {
            if (s < steps) {
                const float div_d = p.include_padding
                                        ? p.taps
                                        : (float)valid_taps(od, sd, p.pad_lo[0], 1, KD, ID);
#pragma unroll
                for (int t = 0; t < TY; ++t) {
                    const int oy = oy0 + t;
                    if (oy >= OH || ox0 >= OW) continue;
                    alignas(16) T r[V];
#pragma unroll
                    for (int v = 0; v < V; ++v) {
                        float sum = 0.0f;
#pragma unroll
                        for (int k = 0; k < KD; ++k) sum += ring[k][t][v];
                        r[v] = from_float<T>(__fdividef(sum, div_d * div_h[t] * div_w[v]));
                    }
                    T* dst = y + ((((long long)nc * OD + od) * OH + oy) * OW + ox0);
                    if (ox0 + V <= OW && ((unsigned long long)dst & 15) == 0) {
                        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(r);
                    } else {
#pragma unroll
                        for (int v = 0; v < V; ++v) {
                            if (ox0 + v < OW) dst[v] = r[v];
                        }
                    }
                }
            }
            emit += sd;
            ++od;
        }
        if constexpr (PREFETCH) {
#pragma unroll
            for (int r = 0; r < RY; ++r) cur[r] = next[r];
        } else {
            load(cur, s + 1);
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
#define DML_POOL_ROWS(T, IDX, KD, KH, KW, V) \
    template __global__ void dml::pool_rows<T, IDX, KD, KH, KW, V>(const T*, T*, const dml::PoolParams);
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
DML_POOL_ROWS(float, int, 1, 2, 2, 2)
DML_POOL_ROWS(__half, int, 1, 2, 2, 4)
DML_POOL_ROWS(float, int, 1, 3, 3, 2)
DML_POOL_ROWS(float, int, 1, 1, 1, 4)
DML_POOL_ROWS(__half, int, 1, 1, 1, 8)
DML_POOL_ROWS(float, int, 2, 2, 2, 2)
DML_POOL_ROWS(float, long long, 1, 1, 2, 2)
DML_POOL_ROWS(__half, long long, 1, 1, 2, 4)
DML_POOL_ROWS(float, int, 0, 0, 0, 1)
DML_POOL_ROWS(__half, long long, 0, 0, 0, 1)
#define DML_POOL_STRIP(T, KD, KH, KW, SH, SW, PW, TY, G) \
    template __global__ void dml::pool_strip<T, KD, KH, KW, SH, SW, PW, TY, G>(const T*, T*, const dml::PoolParams);
DML_POOL_STRIP(float, 3, 1, 3, 1, 1, 1, 1, 32)
DML_POOL_STRIP(__half, 3, 1, 3, 1, 1, 1, 1, 16)
DML_POOL_STRIP(float, 3, 3, 3, 1, 1, 1, 4, 16)
DML_POOL_STRIP(float, 3, 3, 3, 2, 2, 1, 2, 8)
DML_POOL_STRIP(float, 3, 1, 3, 1, 2, 1, 1, 32)
DML_POOL_STRIP(__half, 2, 2, 1, 2, 1, 0, 4, 4)
DML_POOL_STRIP(float, 1, 1, 2, 1, 1, 1, 1, 2)
template __global__ void dml::pool_direct<float>(const float*, float*, const dml::PoolParams);
template __global__ void dml::pool_direct<__half>(const __half*, __half*, const dml::PoolParams);
#endif
