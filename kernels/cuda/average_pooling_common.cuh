// Shared by the AVERAGE_POOLING kernels (average_pooling*.cu): the
// parameter struct and the divisor arithmetic.
#pragma once
#include <cuda_fp16.h>

#include "common.cuh"

namespace dml {

// The launcher reads this struct into its NumPy structured dtype (natural alignment): one
// field per line, `type name;` or `type name[count];`.
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

}  // namespace dml
