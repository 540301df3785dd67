// AVERAGE_POOLING, the sliding-window kernel for small windows (1..3 per axis, unit
// dilations); the launcher (kernels/cupy_backend/average_pooling.py) picks it for overlapping
// 1-D and 3-D windows, the band kernels (average_pooling_bands.cu) for 2-D ones, or the
// kernels of average_pooling.cu.
//
// pool_strip: a group of G lanes owns a span of G*V output columns (V = one 16-byte vector of
// outputs per lane), TY output rows, and walks the outermost axis D through a run of output
// planes: each step reads one input plane's TY rows plus halo (16-byte loads; the W halo comes
// from the neighbour lanes through shuffles), forms the W sums in registers, the H sums of the
// TY rows, and keeps the last KD plane sums in a register ring; when a window's last plane has
// been read, the output plane is the ring's sum. Every input element is read from global
// memory about once (the H halo of the TY rows and the D halo of the runs are re-reads).
//
// The pieces shared with the band kernels (average_pooling_bands.cu) are in
// average_pooling_strip.cuh.
#include "average_pooling_strip.cuh"

namespace dml {

template <typename T, int KD, int KH, int KW, int SH, int SW, int PW, int TY, int G, bool RING>
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

    // RING: the last KD plane sums, shifted down a slot each step and added up at each emit.
    // Otherwise running sums: part[k] holds the sum of the last k + 1 plane sums (oldest
    // first), so an output is part[KD - 2] + the step's plane sums, added in the ring's order;
    // KD - 1 slots instead of KD, and KD - 1 adds per element and step instead of moves and adds.
    constexpr int SLOTS = RING ? KD : (KD > 1 ? KD - 1 : 1);
    float ring[SLOTS][TY][V];
#pragma unroll
    for (int k = 0; k < SLOTS; ++k)
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
        if constexpr (RING) {
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
        }

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
                        if constexpr (RING) {
                            sum[v] = 0.0f;
#pragma unroll
                            for (int k = 0; k < KD; ++k) sum[v] += ring[k][t][v];
                        } else {
                            sum[v] = KD > 1 ? ring[KD > 1 ? KD - 2 : 0][t][v] + ps[t][v] : ps[t][v];
                        }
                    }
                    T* dst = y + ((((long long)nc * OD + od) * OH + oy) * OW + ox0);
                    strip_store<T>(dst, sum, div_d * div_h[t], div_w, ox0, OW);
                }
            }
            emit += sd;
            ++od;
        }
        if constexpr (!RING) {
#pragma unroll
            for (int k = SLOTS - 1; k > 0; --k)
#pragma unroll
                for (int t = 0; t < TY; ++t)
#pragma unroll
                    for (int v = 0; v < V; ++v) ring[k][t][v] = ring[k - 1][t][v] + ps[t][v];
#pragma unroll
            for (int t = 0; t < TY; ++t)
#pragma unroll
                for (int v = 0; v < V; ++v) ring[0][t][v] = ps[t][v];
        }
        if constexpr (PREFETCH) {
#pragma unroll
            for (int r = 0; r < RY; ++r) cur[r] = next[r];
        } else {
            load(cur, s + 1);
        }
    }
}

}  // namespace dml

#ifdef DMLSERVE_EXPLICIT_INSTANTIATION
#define DML_POOL_STRIP(T, KD, KH, KW, SH, SW, PW, TY, G, RING) \
    template __global__ void dml::pool_strip<T, KD, KH, KW, SH, SW, PW, TY, G, RING>(const T*, T*, const dml::PoolParams);
DML_POOL_STRIP(float, 3, 1, 3, 1, 1, 1, 1, 32, true)
DML_POOL_STRIP(__half, 3, 1, 3, 1, 1, 1, 1, 16, true)
DML_POOL_STRIP(float, 3, 3, 3, 1, 1, 1, 4, 16, true)
DML_POOL_STRIP(float, 3, 3, 3, 2, 2, 1, 2, 8, true)
DML_POOL_STRIP(float, 3, 1, 3, 1, 2, 1, 1, 32, true)
DML_POOL_STRIP(__half, 2, 2, 1, 2, 1, 0, 4, 4, true)
DML_POOL_STRIP(float, 1, 1, 2, 1, 1, 1, 1, 2, true)
DML_POOL_STRIP(float, 3, 1, 3, 1, 1, 1, 1, 32, false)
DML_POOL_STRIP(__half, 3, 1, 3, 1, 1, 1, 1, 16, false)
DML_POOL_STRIP(float, 3, 3, 3, 1, 1, 1, 4, 16, false)
DML_POOL_STRIP(float, 3, 3, 3, 2, 2, 1, 2, 8, false)
DML_POOL_STRIP(float, 3, 1, 3, 1, 2, 1, 1, 32, false)
DML_POOL_STRIP(__half, 2, 2, 1, 2, 1, 0, 4, 4, false)
DML_POOL_STRIP(float, 1, 1, 2, 1, 1, 1, 1, 2, false)
#endif
