// AVERAGE_POOLING: the pieces of the sliding-window kernels for small windows (1..3 per axis,
// unit dilations) shared by pool_strip (average_pooling_strip.cu) and the band kernels
// (average_pooling_bands.cu): a lane group's rows, work items, divisors, sums and stores.
#pragma once
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
            float s = -0.0f;  // x + -0 is x for every x, so the first add folds away (+0 would not)
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
        for (int v = 0; v < V; ++v) ps[t][v] = -0.0f;  // as in StripRow::sums: the first add folds
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

// Writes a lane's V outputs of one output row (16-byte stores where the row allows).
template <typename T, int V>
__device__ __forceinline__ void strip_write(T* dst, const T (&r)[V], int ox0, int OW) {
    if (ox0 + V <= OW && ((unsigned long long)dst & 15) == 0) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(r);
    } else {
#pragma unroll
        for (int v = 0; v < V; ++v) {
            if (ox0 + v < OW) dst[v] = r[v];
        }
    }
}

// Writes a lane's V outputs of one output row: `sum` over `div_d * div_h * div_w[v]`.
template <typename T, int V>
__device__ __forceinline__ void strip_store(T* dst, const float (&sum)[V], float div_dh, const float (&div_w)[V],
                                            int ox0, int OW) {
    alignas(16) T r[V];
#pragma unroll
    for (int v = 0; v < V; ++v) r[v] = from_float<T>(__fdividef(sum[v], div_dh * div_w[v]));
    strip_write<T, V>(dst, r, ox0, OW);
}

// strip_store for a divisor `d` shared by every output, given as `scale` = __fdividef(1, d):
// `sum * scale` is __fdividef(sum, d) bit for bit (both are sum times the approximate
// reciprocal of d, for 1 <= d < 2^126), without a reciprocal per output.
template <typename T, int V>
__device__ __forceinline__ void strip_store_scaled(T* dst, const float (&sum)[V], float scale, int ox0, int OW) {
    alignas(16) T r[V];
#pragma unroll
    for (int v = 0; v < V; ++v) r[v] = from_float<T>(sum[v] * scale);
    strip_write<T, V>(dst, r, ox0, OW);
}

}  // namespace dml
