// AVERAGE_POOLING, the band kernels for 1-D and 2-D pools with small windows (1..3 per axis,
// unit dilations); the launcher (kernels/cupy_backend/average_pooling.py) picks them for
// overlapping 2-D windows. Lane groups and rows as pool_strip's (average_pooling_strip.cuh).
//
// pool_bands: pool_strip's groups without the walk: a group owns TY output rows (a band) of
// G*V columns, issues the loads of all the band's input rows before the first
// sum and writes the band. Neighbouring bands re-read the rows they share, from L2 (a plane's
// bands are neighbouring groups of the same or the next CTA); in exchange every group has a
// band's loads in flight at once, the grid is many short CTAs (no wave tail), and nothing is
// carried from row to row.
//
// pool_packed: pool_bands with the band's rows held as loaded (16-byte vectors, FLOAT16 still
// packed) and converted to float only in the sums. A lane's loads are one branch-free run of
// predicated 16-byte loads where its span is aligned and inside the row, so none waits for
// another (in pool_bands a FLOAT16 row's conversion waits for its load before the next row's
// load issues), and packed FLOAT16 rows take half the registers. With IncludePadding true the
// one divisor's reciprocal is formed once per lane, not once per output.
#include "average_pooling_strip.cuh"

namespace dml {

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

// FLOAT32 bands load each row at fixed offsets from one stepped pointer and store through one
// stepped pointer (about half the warp instructions of forming every offset per row); FLOAT16
// bands keep the per-row form, under which ptxas holds them in 74 registers (64 at H stride 2)
// where the stepped form took 94 (128): fewer CTAs per SM.
template <typename T> struct Stepped { static constexpr bool value = sizeof(T) == 4; };

// The RY rows of a band from `iy0` down. Where W is contiguous and the lane's span is aligned
// and inside the row (or wholly past its end): with Stepped<T>, one pointer step per row and
// predicated loads at fixed offsets from it (the 16-byte vectors and the halo elements beside
// them); else one predicated 16-byte load per row and halo offsets formed per row. Otherwise
// element loads.
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
    if (Stepped<T>::value && vector) {
        // Which of the lane's loads exist is the same for every row: only the row test varies.
        const bool own = valid && ix0 < IW;
        bool left[Row::HL > 0 ? Row::HL : 1], right[Row::HR > 0 ? Row::HR : 1];
#pragma unroll
        for (int h = 0; h < Row::HL; ++h) left[h] = own && lane == 0 && ix0 - Row::HL + h >= 0;
#pragma unroll
        for (int h = 0; h < Row::HR; ++h) right[h] = own && lane == G - 1 && ix0 + Row::OWN + h < IW;
        const T* row = plane + ((long long)iy0 * xs_h + ix0);
#pragma unroll
        for (int r = 0; r < RY; ++r, row += xs_h) {
            const bool in = (unsigned)(iy0 + r) < (unsigned)IH;
#pragma unroll
            for (int b = 0; b < SW; ++b) {
                rows[r].own[b] = in && own ? __ldg(reinterpret_cast<const uint4*>(row) + b) : make_uint4(0u, 0u, 0u, 0u);
            }
#pragma unroll
            for (int h = 0; h < Row::HL; ++h) rows[r].edge[h] = in && left[h] ? __ldg(row - Row::HL + h) : zero;
#pragma unroll
            for (int h = 0; h < Row::HR; ++h) {
                rows[r].edge[Row::HL + h] = in && right[h] ? __ldg(row + Row::OWN + h) : zero;
            }
            if constexpr (Row::HL + Row::HR == 0) rows[r].edge[0] = zero;
        }
        return;
    }
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

// A if C else B (NVRTC compiles these without the standard headers).
template <bool C, typename A, typename B> struct Pick { typedef A type; };
template <typename A, typename B> struct Pick<false, A, B> { typedef B type; };

// Kernel axes as pool_strip's with a unit D axis (1-D and 2-D pools): item -> (plane, band, span).
// PACKED: the rows as pool_packed holds them, else as pool_bands. EAGER (with PACKED): each
// output row is stored as soon as its last input row is summed, so only the sums of the KH
// rows a window spans and the input rows not yet summed are live (FLOAT16 TY=4: 76 registers
// otherwise, 3 CTAs of 256 per SM).
template <typename T, int KH, int KW, int SH, int SW, int PW, int TY, int G, bool PACKED, bool EAGER = false>
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
    // Output row t of the band: one stepped pointer (Stepped<T>) or its offset formed per row.
    auto out = [&](int t) {
        return Stepped<T>::value ? y + (((long long)it.nc * OH + oy0) * OW + ox0) + (long long)t * OW
                                 : y + (((long long)it.nc * OH + oy0 + t) * OW + ox0);
    };
    if constexpr (PACKED && EAGER) {
        const bool stores = valid && ox0 < OW;
        const float scale = p.include_padding ? __fdividef(1.0f, p.taps) : 1.0f;
        float ps[TY][V];
#pragma unroll
        for (int t = 0; t < TY; ++t)
#pragma unroll
            for (int v = 0; v < V; ++v) ps[t][v] = -0.0f;  // as in strip_plane_sums
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
                if (r != t * SH + KH - 1 || !stores || oy0 + t >= OH) continue;
                if (p.include_padding) {
                    strip_store_scaled<T>(out(t), ps[t], scale, ox0, OW);
                } else {
                    float div_w[V];
#pragma unroll
                    for (int v = 0; v < V; ++v) div_w[v] = (float)valid_taps(ox0 + v, SW, PW, 1, KW, p.size[2]);
                    const float div_h = (float)valid_taps(oy0 + t, SH, p.pad_lo[1], 1, KH, p.size[1]);
                    strip_store<T>(out(t), ps[t], div_h, div_w, ox0, OW);
                }
            }
        }
        return;
    }
    float div_h[TY], div_w[V];
    strip_divisors<TY, V, KH, KW, SH, SW, PW>(p, oy0, ox0, div_h, div_w);
    const float div_d = p.include_padding ? p.taps : 1.0f;
    float ps[TY][V];
    strip_plane_sums<TY, KH, SH, RY, V>(rows, lane, ps);
    if (!valid || ox0 >= OW) return;
    if constexpr (PACKED) {
        if (p.include_padding) {  // every output's divisor is taps: one reciprocal
            const float scale = __fdividef(1.0f, p.taps);
#pragma unroll
            for (int t = 0; t < TY; ++t) {
                if (oy0 + t < OH) strip_store_scaled<T>(out(t), ps[t], scale, ox0, OW);
            }
            return;
        }
    }
#pragma unroll
    for (int t = 0; t < TY; ++t) {
        if (oy0 + t < OH) strip_store<T>(out(t), ps[t], div_d * div_h[t], div_w, ox0, OW);
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

// pool_packed storing each output row as soon as it is summed (band's EAGER).
template <typename T, int KH, int KW, int SH, int SW, int PW, int TY, int G>
__global__ void __launch_bounds__(256) pool_eager(const T* __restrict__ x, T* __restrict__ y, const PoolParams p) {
    band<T, KH, KW, SH, SW, PW, TY, G, true, true>(x, y, p);
}

}  // namespace dml

#ifdef DMLSERVE_EXPLICIT_INSTANTIATION
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
DML_POOL_PACKED(__half, 3, 3, 2, 2, 1, 2, 16)
DML_POOL_PACKED(float, 1, 2, 1, 1, 1, 1, 2)
#define DML_POOL_EAGER(T, KH, KW, SH, SW, PW, TY, G) \
    template __global__ void dml::pool_eager<T, KH, KW, SH, SW, PW, TY, G>(const T*, T*, const dml::PoolParams);
DML_POOL_EAGER(float, 3, 3, 1, 1, 1, 4, 32)
DML_POOL_EAGER(__half, 3, 3, 1, 1, 1, 4, 16)
DML_POOL_EAGER(float, 3, 3, 2, 2, 1, 2, 16)
DML_POOL_EAGER(__half, 3, 3, 2, 2, 1, 2, 16)
DML_POOL_EAGER(float, 1, 2, 1, 1, 1, 1, 2)
#endif
