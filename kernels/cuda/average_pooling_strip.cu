// AVERAGE_POOLING, the sliding-window kernel for small windows (1..3 per axis, unit
// dilations); the launcher (kernels/cupy_backend/average_pooling.py) picks it for overlapping
// windows, or the kernels of average_pooling.cu.
//
// pool_strip: a group of G lanes owns a span of G*V output columns (V = one 16-byte vector of
// outputs per lane), TY output rows, and walks the outermost axis D through a run of output
// planes: each step reads one input plane's TY rows plus halo (16-byte loads; the W halo comes
// from the neighbour lanes through shuffles), forms the W sums in registers, the H sums of the
// TY rows, and keeps the last KD plane sums in a register ring; when a window's last plane has
// been read, the output plane is the ring's sum. Every input element is read from global
// memory about once (the H halo of the TY rows and the D halo of the runs are re-reads).
//
// pool_bands: the same groups without the walk, for 1-D and 2-D pools: a group owns TY output
// rows (a band) of G*V columns, issues the loads of all the band's input rows before the first
// sum and writes the band. Neighbouring bands re-read the rows they share, from L2 (a plane's
// bands are neighbouring groups of the same or the next CTA); in exchange every group has a
// band's loads in flight at once, the grid is many short CTAs (no wave tail), and nothing is
// carried from row to row.
//
// pool_packed: pool_bands with the band's rows held as loaded (16-byte vectors, FLOAT16 still
// packed) and converted to float only in the sums. A lane's loads are one branch-free run of
// predicated 16-byte loads where its span is aligned and inside the row, so none waits for
// another (in pool_bands a FLOAT16 row's conversion waits for its load before the next row's
// load issues), and packed FLOAT16 rows take half the registers.
#include "average_pooling_common.cuh"

namespace dml {

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

// One input row of a pool_packed band as loaded: the lane's SW 16-byte vectors and the halo
// elements at the ends of the group's span, converted to float (a StripRow) only for the sums.
template <typename T, int V, int KW, int SW, int PW, int G>
struct PackedRow {
    typedef StripRow<V, KW, SW, PW, G> Row;
    uint4 own[SW];
    T edge[Row::EDGE];

    __device__ __forceinline__ void sums(int lane, float (&hs)[V]) const {
        Row r;
#pragma unroll
        for (int b = 0; b < SW; ++b) {
            const T* e = reinterpret_cast<const T*>(&own[b]);
#pragma unroll
            for (int i = 0; i < V; ++i) r.own[b * V + i] = to_float(e[i]);
        }
#pragma unroll
        for (int h = 0; h < Row::EDGE; ++h) r.edge[h] = to_float(edge[h]);
        r.sums(lane, hs);
    }
};

// The RY rows of a band from `iy0` down. Where the lane's span is aligned and inside the row
// (or wholly past its end) every row is a predicated 16-byte load; otherwise element loads.
template <typename T, int RY, int V, int KW, int SW, int PW, int G>
__device__ __forceinline__ void packed_load(PackedRow<T, V, KW, SW, PW, G> (&rows)[RY], const T* plane, int iy0,
                                            bool valid, int ix0, int lane, const PoolParams& p) {
    typedef StripRow<V, KW, SW, PW, G> Row;
    const long long xs_h = p.x_stride[1], xs_w = p.x_stride[2];
    const int IH = p.size[1], IW = p.size[2];
    const unsigned long long first = (unsigned long long)(plane + ix0);
    const bool vector = xs_w == 1 && (ix0 + Row::OWN <= IW || ix0 >= IW) &&
                        ((first | (unsigned long long)xs_h * sizeof(T)) & 15) == 0;
    const T zero = from_float<T>(0.0f);
    // Offsets from a row's start, formed once: the rows below differ by xs_h.
    const long long left = (long long)(ix0 - Row::HL) * xs_w, right = (long long)(ix0 + Row::OWN) * xs_w;
    const T* row = plane + (long long)iy0 * xs_h;
#pragma unroll
    for (int r = 0; r < RY; ++r, row += xs_h) {
        const int yy = iy0 + r;
        const bool in = valid && (unsigned)yy < (unsigned)IH;
        if (vector) {
#pragma unroll
            for (int b = 0; b < SW; ++b) {
                rows[r].own[b] = in && ix0 < IW ? __ldg(reinterpret_cast<const uint4*>(row + ix0) + b)
                                                : make_uint4(0u, 0u, 0u, 0u);
            }
        } else {
#pragma unroll
            for (int b = 0; b < SW; ++b) {
                T* e = reinterpret_cast<T*>(&rows[r].own[b]);
#pragma unroll
                for (int i = 0; i < V; ++i) {
                    const int col = ix0 + b * V + i;
                    e[i] = in && col < IW ? __ldg(row + (long long)col * xs_w) : zero;
                }
            }
        }
#pragma unroll
        for (int h = 0; h < Row::HL; ++h) {
            const int col = ix0 - Row::HL + h;
            rows[r].edge[h] = lane == 0 && in && col >= 0 && col < IW ? __ldg(row + left + h * xs_w) : zero;
        }
#pragma unroll
        for (int h = 0; h < Row::HR; ++h) {
            const int col = ix0 + Row::OWN + h;
            rows[r].edge[Row::HL + h] = lane == G - 1 && in && col < IW ? __ldg(row + right + h * xs_w) : zero;
        }
        if constexpr (Row::HL + Row::HR == 0) rows[r].edge[0] = zero;
    }
}

// A group's work item: (plane nc, D run, H tile, W span), the W span fastest.
struct StripItem {
    unsigned nc;
    int run, tile, span;
};

__device__ __forceinline__ StripItem strip_item(const PoolParams& p, long long item, bool valid) {
    StripItem it;
    unsigned rest = valid ? (unsigned)item : 0u, q;
    q = fast_div(rest, p.strip_div[2]);
    it.span = (int)(rest - q * p.strip_div[2].d);
    rest = q;
    q = fast_div(rest, p.strip_div[1]);
    it.tile = (int)(rest - q * p.strip_div[1].d);
    rest = q;
    q = fast_div(rest, p.strip_div[0]);
    it.run = (int)(rest - q * p.strip_div[0].d);
    it.nc = q;
    return it;
}

// The H and W parts of the divisor (IncludePadding false; 1 with IncludePadding true).
template <int TY, int V, int KH, int KW, int SH, int SW, int PW>
__device__ __forceinline__ void strip_divisors(const PoolParams& p, int oy0, int ox0, float (&div_h)[TY],
                                               float (&div_w)[V]) {
#pragma unroll
    for (int t = 0; t < TY; ++t) {
        div_h[t] = p.include_padding ? 1.0f : (float)valid_taps(oy0 + t, SH, p.pad_lo[1], 1, KH, p.size[1]);
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
        div_w[v] = p.include_padding ? 1.0f : (float)valid_taps(ox0 + v, SW, PW, 1, KW, p.size[2]);
    }
}

// The window sums (H and W) of TY output rows from the RY input rows of one plane.
template <int TY, int KH, int SH, int RY, int V, typename Row>
__device__ __forceinline__ void strip_plane_sums(const Row (&rows)[RY], int lane, float (&ps)[TY][V]) {
#pragma unroll
    for (int t = 0; t < TY; ++t)
#pragma unroll
        for (int v = 0; v < V; ++v) ps[t][v] = 0.0f;
#pragma unroll
    for (int r = 0; r < RY; ++r) {
        float hs[V];
        rows[r].sums(lane, hs);
#pragma unroll
        for (int t = 0; t < TY; ++t) {
            if (t * SH <= r && r < t * SH + KH) {
#pragma unroll
                for (int v = 0; v < V; ++v) ps[t][v] += hs[v];
            }
        }
    }
}

// Writes a lane's V outputs of one output row: `sum` over `div_d * div_h * div_w[v]`
// (16-byte stores where the row allows).
template <typename T, int V>
__device__ __forceinline__ void strip_store(T* dst, const float (&sum)[V], float div_dh, const float (&div_w)[V],
                                            int ox0, int OW) {
    alignas(16) T r[V];
#pragma unroll
    for (int v = 0; v < V; ++v) r[v] = from_float<T>(__fdividef(sum[v], div_dh * div_w[v]));
    if (ox0 + V <= OW && ((unsigned long long)dst & 15) == 0) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(r);
    } else {
#pragma unroll
        for (int v = 0; v < V; ++v) {
            if (ox0 + v < OW) dst[v] = r[v];
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

    const StripItem it = strip_item(p, item, valid);
    const unsigned nc = it.nc;
    const int span = it.span, tile = it.tile, run = it.run;
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

    float div_h[TY], div_w[V];
    strip_divisors<TY, V, KH, KW, SH, SW, PW>(p, oy0, ox0, div_h, div_w);

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
        strip_plane_sums<TY, KH, SH, RY, V>(cur, lane, ps);
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
                    float sum[V];
#pragma unroll
                    for (int v = 0; v < V; ++v) {
                        sum[v] = 0.0f;
#pragma unroll
                        for (int k = 0; k < KD; ++k) sum[v] += ring[k][t][v];
                    }
                    T* dst = y + ((((long long)nc * OD + od) * OH + oy) * OW + ox0);
                    strip_store<T>(dst, sum, div_d * div_h[t], div_w, ox0, OW);
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


// A if C else B (NVRTC compiles these without the standard headers).
template <bool C, typename A, typename B> struct Pick { typedef A type; };
template <typename A, typename B> struct Pick<false, A, B> { typedef B type; };

// Kernel axes as pool_strip's with a unit D axis (1-D and 2-D pools): item -> (plane, band, span).
// PACKED: the rows as pool_packed holds them, else as pool_bands.
template <typename T, int KH, int KW, int SH, int SW, int PW, int TY, int G, bool PACKED>
__device__ __forceinline__ void band(const T* __restrict__ x, T* __restrict__ y, const PoolParams& p) {
    constexpr int V = 16 / (int)sizeof(T);
    constexpr int RY = (TY - 1) * SH + KH;
    const int lane = (int)threadIdx.x & (G - 1);
    const long long item = (long long)blockIdx.x * (blockDim.x / G) + threadIdx.x / G;
    // Groups past the end still run (the W halo shuffles span the warp) but load nothing.
    const bool valid = item < p.total;
    const StripItem it = strip_item(p, item, valid);
    const unsigned n = fast_div(it.nc, p.channel_div);
    const unsigned c = it.nc - n * p.channel_div.d;
    const T* plane = x + ((long long)n * p.x_stride_n + (long long)c * p.x_stride_c);

    const int OH = p.out[1], OW = p.out[2];
    const int ox0 = (it.span * G + lane) * V;
    const int ix0 = ox0 * SW;
    const int oy0 = it.tile * TY;
    const int iy0 = oy0 * SH - p.pad_lo[1];

    typedef StripRow<V, KW, SW, PW, G> Row;
    typedef PackedRow<T, V, KW, SW, PW, G> Packed;
    typename Pick<PACKED, Packed, Row>::type rows[RY];
    if constexpr (PACKED) {
        packed_load<T>(rows, plane, iy0, valid, ix0, lane, p);
    } else {
        const long long xs_h = p.x_stride[1], xs_w = p.x_stride[2];
        const int IH = p.size[1], IW = p.size[2];
#pragma unroll
        for (int r = 0; r < RY; ++r) {
            const int yy = iy0 + r;
            const bool in = valid && (unsigned)yy < (unsigned)IH;
            strip_load<T>(rows[r], plane + (long long)yy * xs_h, in, ix0, lane, IW, xs_w);
        }
    }
    float div_h[TY], div_w[V];
    strip_divisors<TY, V, KH, KW, SH, SW, PW>(p, oy0, ox0, div_h, div_w);
    const float div_d = p.include_padding ? p.taps : 1.0f;
    float ps[TY][V];
    strip_plane_sums<TY, KH, SH, RY, V>(rows, lane, ps);
    if (!valid || ox0 >= OW) return;
#pragma unroll
    for (int t = 0; t < TY; ++t) {
        const int oy = oy0 + t;
        if (oy < OH) strip_store<T>(y + (((long long)it.nc * OH + oy) * OW + ox0), ps[t], div_d * div_h[t], div_w, ox0, OW);
    }
}

template <typename T, int KH, int KW, int SH, int SW, int PW, int TY, int G>
__global__ void __launch_bounds__(256) pool_bands(const T* __restrict__ x, T* __restrict__ y, const PoolParams p) {
    band<T, KH, KW, SH, SW, PW, TY, G, false>(x, y, p);
}

template <typename T, int KH, int KW, int SH, int SW, int PW, int TY, int G>
__global__ void __launch_bounds__(256) pool_packed(const T* __restrict__ x, T* __restrict__ y, const PoolParams p) {
    band<T, KH, KW, SH, SW, PW, TY, G, true>(x, y, p);
}

}  // namespace dml

#ifdef DMLSERVE_EXPLICIT_INSTANTIATION
#define DML_POOL_STRIP(T, KD, KH, KW, SH, SW, PW, TY, G) \
    template __global__ void dml::pool_strip<T, KD, KH, KW, SH, SW, PW, TY, G>(const T*, T*, const dml::PoolParams);
DML_POOL_STRIP(float, 3, 1, 3, 1, 1, 1, 1, 32)
DML_POOL_STRIP(__half, 3, 1, 3, 1, 1, 1, 1, 16)
DML_POOL_STRIP(float, 3, 3, 3, 1, 1, 1, 4, 16)
DML_POOL_STRIP(float, 3, 3, 3, 2, 2, 1, 2, 8)
DML_POOL_STRIP(float, 3, 1, 3, 1, 2, 1, 1, 32)
DML_POOL_STRIP(__half, 2, 2, 1, 2, 1, 0, 4, 4)
DML_POOL_STRIP(float, 1, 1, 2, 1, 1, 1, 1, 2)
#define DML_POOL_BANDS(T, KH, KW, SH, SW, PW, TY, G) \
    template __global__ void dml::pool_bands<T, KH, KW, SH, SW, PW, TY, G>(const T*, T*, const dml::PoolParams);
DML_POOL_BANDS(float, 3, 3, 1, 1, 1, 4, 32)
DML_POOL_BANDS(__half, 3, 3, 1, 1, 1, 4, 16)
DML_POOL_BANDS(float, 3, 3, 2, 2, 1, 2, 16)
DML_POOL_BANDS(float, 1, 2, 1, 1, 1, 1, 2)
#define DML_POOL_PACKED(T, KH, KW, SH, SW, PW, TY, G) \
    template __global__ void dml::pool_packed<T, KH, KW, SH, SW, PW, TY, G>(const T*, T*, const dml::PoolParams);
DML_POOL_PACKED(float, 3, 3, 1, 1, 1, 4, 32)
DML_POOL_PACKED(__half, 3, 3, 1, 1, 1, 4, 16)
DML_POOL_PACKED(float, 3, 3, 2, 2, 1, 2, 16)
DML_POOL_PACKED(float, 1, 2, 1, 1, 1, 1, 2)
#endif
