// conv2d of 3 x 3 filters at stride 1 in strict float32, NCHW, by Winograd's F(2 x 2, 3 x 3) in
// one kernel: CudaKernels::conv2d_winograd, for the forward and, with the filter flipped, for the
// input gradient (cudnn.cpp's run_forward and run_backward, where the autotuner timed it faster than
// cuDNN's algorithms, cudnn_autotune.cpp).
//
// Each 2 x 2 output tile is A^T [(G g G^T) . (B^T d B)] A for its 4 x 4 input patch d: 16 products
// a tile and channel pair instead of 36, summed over the input channels as 16 independent GEMMs
// [tiles x C] x [C x K]. cuDNN's Winograd runs the transforms and the GEMMs as kernels of their own
// through memory (its "non-fused" algorithm). At the MNIST CNN's second convolution (32 -> 64
// channels, 26 x 26) its fused one was not offered, and in strict float32 its FFT algorithms won:
// 247 us forward and 275 us for the input gradient at batch 512 on an H200 (docs/benchmarks.md). Here a first kernel transforms the filter once a call; then a block takes 32
// tiles and 32 output channels; 8 input channels at a time are loaded and transformed into shared
// memory, with their filter rows copied there (the next 8 loaded while the GEMMs run), each
// half-warp keeps one of the 16 GEMMs in registers (a thread 8 tiles x 8 channels of it), and at the
// end the 16 sums of every tile and channel meet in shared memory for the output transform. Products
// and sums are float32; the transforms' factors are 0, +-1 and 1/2, so rounding stays near a direct
// convolution's (the test bounds it by 1e-5 of the terms' magnitudes).
#include "core/cuda/launch.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/mma_ptx.cuh"

namespace minidl {

namespace {

using namespace cuda;

constexpr int kTiles = 32;    // a block's 2 x 2 output tiles
constexpr int kOuts = 32;     // a block's output channels
constexpr int kChunk = 8;     // input channels transformed into shared memory at a time
constexpr int kBlockThreads = 256;  // 8 warps: two of the 16 GEMMs each, one a half-warp
// The sums M [16][kTiles][kRow] of position xi start kPlane floats apart: with these paddings, the
// threads of a warp write (below) and read them on 32 different banks.
constexpr int kRow = kOuts + 1;
constexpr int kPlane = kTiles * kRow + 4;
constexpr int kStagedFilter = 16 * kChunk * kOuts;  // floats of a chunk's filter block; two buffers
constexpr int kStageFloats = 16 * kChunk * kTiles + 2 * kStagedFilter;
constexpr int kSumFloats = 16 * kPlane;
constexpr size_t kSharedBytes = sizeof(float) * (kStageFloats > kSumFloats ? kStageFloats : kSumFloats);

struct WinogradParams {
  const float* x;       // [N, C, H, W]
  const float* filter;  // G g G^T [16][C][outs_padded], conv2d_winograd_filter_kernel's
  const float* bias;    // [K] or null
  float* y;             // [N, K, OH, OW]
  int n, channels, height, width, outs, outs_padded, out_h, out_w, pad_h, pad_w;
  bool pairs_in;        // x's rows are of even length, start on 8 bytes, and the padding is even:
                        // a patch's row is two float2, each wholly inside or outside the image
  bool pairs_out;       // y's rows are of even length and start on 8 bytes: a tile's row is one float2
  int tiles_h, tiles_w, tiles;
};

// Output o's column among its block's 32: (o % 4) * 8 + o / 4, so that the outputs a thread sums,
// oi + 4 m, are eight adjacent floats.
__host__ __device__ constexpr int out_column(int o) { return (o & 3) * 8 + (o >> 2); }

// G g G^T, G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1], of every (input channel c, output o) pair into
// filter [16][C][outs_padded], o at its column (out_column) of its block of 32, zero past the
// outputs. The taps of (o, c, r, s) are read at o * out_stride + c * in_stride + tap, tap turned
// half a turn where `flip` (the input gradient's filter). Once a call: staged from here, the
// blocks' loads are whole 16-byte rows instead of 9 taps from 32 filters a warp.
__global__ void conv2d_winograd_filter_kernel(const float* __restrict__ weight, float* __restrict__ filter,
                                              int channels, int outs, int outs_padded, int64_t out_stride,
                                              int64_t in_stride, bool flip) {
  wait_for_earlier_kernels();  // the kernel before may write the weight or read the block `filter`
  let_next_kernel_start();     // the main kernel's blocks wait on the SMs for this one's rows
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= channels * outs_padded) return;
  const int c = e / outs_padded, o = e % outs_padded;
  float g[9];
#pragma unroll
  for (int i = 0; i < 9; ++i)
    g[i] = o < outs ? __ldg(weight + o * out_stride + c * in_stride + (flip ? 8 - i : i)) : 0.f;
  float h[12];
#pragma unroll
  for (int j = 0; j < 3; ++j) {
    h[0 + j] = g[j];
    h[3 + j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
    h[6 + j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
    h[9 + j] = g[6 + j];
  }
  float* v = filter + int64_t(c) * outs_padded + (o & ~31) + out_column(o & 31);
  const int64_t position = int64_t(channels) * outs_padded;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[(i * 4 + 0) * position] = h[i * 3];
    v[(i * 4 + 1) * position] = 0.5f * (h[i * 3] + h[i * 3 + 1] + h[i * 3 + 2]);
    v[(i * 4 + 2) * position] = 0.5f * (h[i * 3] - h[i * 3 + 1] + h[i * 3 + 2]);
    v[(i * 4 + 3) * position] = h[i * 3 + 2];
  }
}

template <bool PairsIn>
__global__ __launch_bounds__(kBlockThreads, 2) void conv2d_winograd_kernel(WinogradParams p) {
  extern __shared__ float4 shared4[];
  float* shared = reinterpret_cast<float*>(shared4);
  float* U = shared;                          // [16][kChunk][kTiles]: transformed input
  float* V = shared + 16 * kChunk * kTiles;   // [2][16][kChunk][kOuts]: transformed filter, two chunks
  wait_for_earlier_kernels();  // launched early: the filter kernel's rows
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int o0 = blockIdx.x * kOuts, t0 = blockIdx.y * kTiles;

  // Staging: thread (warp, lane) loads channel c0 + warp of tile t0 + lane, and 16 bytes of each of
  // four rows of the transformed filter's [16][kChunk][kOuts] block.
  const int tile = t0 + lane;
  const int per_image = p.tiles_h * p.tiles_w;
  const int image = tile / per_image, in_image = tile - image * per_image;
  const int iy0 = 2 * (in_image / p.tiles_w) - p.pad_h, ix0 = 2 * (in_image % p.tiles_w) - p.pad_w;
  const bool tile_ok = tile < p.tiles;
  const int64_t plane = int64_t(p.height) * p.width;
  const float* x_tile = p.x + int64_t(tile_ok ? image : 0) * p.channels * plane;
  const int64_t filter_position = int64_t(p.channels) * p.outs_padded;
  // The next chunk's patch and filter rows, loaded while this chunk's GEMMs run.
  float d[16];
  const auto load = [&](int c0) {
    const int c = c0 + warp;
    const bool ok = tile_ok && c < p.channels;
    const float* xc = x_tile + c * plane;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int iy = iy0 + r;
      const bool row_ok = ok && iy >= 0 && iy < p.height;
      if constexpr (PairsIn) {
#pragma unroll
        for (int s = 0; s < 4; s += 2) {
          const int ix = ix0 + s;
          const float2 v = row_ok && ix >= 0 && ix < p.width
                               ? __ldg(reinterpret_cast<const float2*>(xc + iy * p.width + ix))
                               : make_float2(0.f, 0.f);
          d[r * 4 + s] = v.x, d[r * 4 + s + 1] = v.y;
        }
      } else {
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          const int ix = ix0 + s;
          d[r * 4 + s] = row_ok && ix >= 0 && ix < p.width ? __ldg(xc + iy * p.width + ix) : 0.f;
        }
      }
    }
  };
  // The filter's [16][kChunk][kOuts] block of a chunk into buffer `b`, 16 bytes a copy, straight to
  // shared memory (held in registers too, they made the kernel spill).
  const auto load_filter = [&](int c0, int b) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int row = (tid >> 3) + k * (kBlockThreads / 8), xi = row / kChunk, cf = c0 + row % kChunk;
      const bool valid = cf < p.channels;
      const float* from =
          p.filter + (valid ? xi * filter_position + int64_t(cf) * p.outs_padded + o0 + 4 * (tid & 7) : 0);
      const float* to = V + b * kStagedFilter + 4 * (tid + k * kBlockThreads);
      cp_async_16(static_cast<uint32_t>(__cvta_generic_to_shared(to)), from, valid);
    }
    cp_async_commit();
  };
  // B^T d B, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], into shared memory.
  const auto stage = [&] {
    float e[16];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      e[0 + j] = d[0 + j] - d[8 + j];
      e[4 + j] = d[4 + j] + d[8 + j];
      e[8 + j] = d[8 + j] - d[4 + j];
      e[12 + j] = d[4 + j] - d[12 + j];
    }
    float* u = U + warp * kTiles + lane;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      u[(i * 4 + 0) * kChunk * kTiles] = e[i * 4 + 0] - e[i * 4 + 2];
      u[(i * 4 + 1) * kChunk * kTiles] = e[i * 4 + 1] + e[i * 4 + 2];
      u[(i * 4 + 2) * kChunk * kTiles] = e[i * 4 + 2] - e[i * 4 + 1];
      u[(i * 4 + 3) * kChunk * kTiles] = e[i * 4 + 1] - e[i * 4 + 3];
    }
  };

  // The GEMMs: half-warp h of warp w sums position xi = 2w + h; its thread (ti, oi) tiles 8 ti ..
  // 8 ti + 7 and outputs oi, oi + 4, ..., oi + 28: 64 products for every 4 loads of 16 bytes.
  const int xi = 2 * warp + (lane >> 4), ti = (lane >> 2) & 3, oi = lane & 3;
  float acc[8][8];
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int m = 0; m < 8; ++m) acc[j][m] = 0.f;

  load(0);
  load_filter(0, 0);
  for (int c0 = 0, b = 0; c0 < p.channels; c0 += kChunk, b ^= 1) {
    stage();
    cp_async_wait<0>();
    __syncthreads();
    if (c0 + kChunk < p.channels) {
      load(c0 + kChunk);
      load_filter(c0 + kChunk, b ^ 1);
    }
    const float4* u4 = reinterpret_cast<const float4*>(U + xi * kChunk * kTiles) + 2 * ti;
    const float4* v4 = reinterpret_cast<const float4*>(V + b * kStagedFilter + xi * kChunk * kOuts) + 2 * oi;
    // Not unrolled: unrolled, the loads run ahead and the kernel spills at two blocks an SM.
#pragma unroll 1
    for (int c = 0; c < kChunk; ++c) {
      const float4 ua = u4[c * kTiles / 4], ub = u4[c * kTiles / 4 + 1];
      const float4 va = v4[c * kOuts / 4], vb = v4[c * kOuts / 4 + 1];
      const float uu[8] = {ua.x, ua.y, ua.z, ua.w, ub.x, ub.y, ub.z, ub.w};
      const float vv[8] = {va.x, va.y, va.z, va.w, vb.x, vb.y, vb.z, vb.w};
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int m = 0; m < 8; ++m) acc[j][m] = fmaf(uu[j], vv[m], acc[j][m]);
    }
    __syncthreads();
  }

  // The sums M meet in shared memory, then A^T M A, A^T = [1 1 1 0; 0 1 -1 -1]. A store's 32 threads
  // hit banks 8 ti + oi + 4 (xi % 2) (plus a constant): all different.
  float* M = shared;
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int m = 0; m < 8; ++m) M[xi * kPlane + (8 * ti + j) * kRow + oi + 4 * m] = acc[j][m];
  __syncthreads();
#pragma unroll
  for (int round = 0; round < kTiles * kOuts / kBlockThreads; ++round) {
    const int pair = tid + round * kBlockThreads, t = pair % kTiles, o_local = pair / kTiles;
    const int out_tile = t0 + t, o = o0 + o_local;
    if (out_tile >= p.tiles || o >= p.outs) continue;
    float m[16];
#pragma unroll
    for (int x = 0; x < 16; ++x) m[x] = M[x * kPlane + t * kRow + o_local];
    float q[8];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      q[j] = m[j] + m[4 + j] + m[8 + j];
      q[4 + j] = m[4 + j] - m[8 + j] - m[12 + j];
    }
    const float b = p.bias ? __ldg(p.bias + o) : 0.f;
    const int n = out_tile / per_image, rest = out_tile - n * per_image;
    const int oy = 2 * (rest / p.tiles_w), ox = 2 * (rest % p.tiles_w);
    float* out = p.y + ((int64_t(n) * p.outs + o) * p.out_h + oy) * p.out_w + ox;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      if (oy + i >= p.out_h) break;
      const float y0 = q[i * 4] + q[i * 4 + 1] + q[i * 4 + 2] + b;
      const float y1 = q[i * 4 + 1] - q[i * 4 + 2] - q[i * 4 + 3] + b;
      float* row = out + i * p.out_w;
      if (ox + 1 < p.out_w) {
        if (p.pairs_out)
          *reinterpret_cast<float2*>(row) = make_float2(y0, y1);
        else
          row[0] = y0, row[1] = y1;
      } else {
        row[0] = y0;
      }
    }
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

bool CudaKernels::conv2d_winograd_applies(DType dtype, int64_t batch, int64_t out_channels, const ConvGeometry& g) {
  if (dtype != DType::Float32 || g.kernel_h != 3 || g.kernel_w != 3 || g.stride_h != 1 || g.stride_w != 1 ||
      g.dilation_h != 1 || g.dilation_w != 1 || g.pad_h > 2 || g.pad_w > 2)
    return false;
  const int64_t tiles = batch * ceil_div(g.out_h, 2) * ceil_div(g.out_w, 2);
  // Both directions' tiles, sizes and offsets in 32 bits; the grid's y dimension up to 65,535.
  const int64_t in_tiles = batch * ceil_div(g.height, 2) * ceil_div(g.width, 2);
  const int64_t largest = std::max(batch * g.channels * g.height * g.width, batch * out_channels * g.out_h * g.out_w);
  return tiles > 0 && std::max(tiles, in_tiles) <= int64_t{65535} * kTiles && largest < (int64_t{1} << 31) &&
         out_channels * g.channels * 9 < (int64_t{1} << 31);
}

void CudaKernels::conv2d_winograd(const Tensor& x, const Tensor& weight, const Tensor* bias, int64_t pad_h,
                                  int64_t pad_w, bool input_gradient, Tensor& y) {
  MINIDL_CHECK(x.dtype() == DType::Float32 && weight.dtype() == DType::Float32 && y.dtype() == DType::Float32,
               "conv2d_winograd: expected float32, got ", x.dtype(), ", ", weight.dtype(), " and ", y.dtype());
  MINIDL_CHECK(x.dim() == 4 && weight.dim() == 4 && y.dim() == 4 && weight.size(2) == 3 && weight.size(3) == 3 &&
                   x.is_contiguous() && weight.is_contiguous() && y.is_contiguous(),
               "conv2d_winograd: expected contiguous NCHW data and a contiguous 3 x 3 filter, got x ", x.shape(),
               ", weight ", weight.shape(), ", y ", y.shape());
  // The forward: weight [K, C, 3, 3]; the input gradient: weight is the forward's [C', K', 3, 3],
  // read flipped with its channel axes swapped, x the output gradient [N, C', ...] and y [N, K', ...].
  const int64_t outs = input_gradient ? weight.size(1) : weight.size(0);
  const int64_t ins = input_gradient ? weight.size(0) : weight.size(1);
  MINIDL_CHECK(x.size(1) == ins && y.size(0) == x.size(0) && y.size(1) == outs &&
                   y.size(2) == x.size(2) + 2 * pad_h - 2 && y.size(3) == x.size(3) + 2 * pad_w - 2,
               "conv2d_winograd: x ", x.shape(), ", weight ", weight.shape(), " and padding ", pad_h, " x ", pad_w,
               " do not make y ", y.shape());
  MINIDL_CHECK(!bias || (bias->dtype() == DType::Float32 && bias->numel() == outs && bias->is_contiguous()),
               "conv2d_winograd: expected a contiguous float32 bias of ", outs, " values");
  if (y.numel() == 0) return;
  cuda::DeviceGuard guard(device_);
  WinogradParams p{};
  p.n = static_cast<int>(x.size(0));
  p.channels = static_cast<int>(ins);
  p.height = static_cast<int>(x.size(2));
  p.width = static_cast<int>(x.size(3));
  p.outs = static_cast<int>(outs);
  p.outs_padded = static_cast<int>(ceil_div(outs, kOuts) * kOuts);
  p.out_h = static_cast<int>(y.size(2));
  p.out_w = static_cast<int>(y.size(3));
  p.pad_h = static_cast<int>(pad_h);
  p.pad_w = static_cast<int>(pad_w);
  p.tiles_h = static_cast<int>(ceil_div(p.out_h, 2));
  p.tiles_w = static_cast<int>(ceil_div(p.out_w, 2));
  const int64_t tiles = int64_t(p.n) * p.tiles_h * p.tiles_w;
  MINIDL_CHECK(ceil_div(tiles, kTiles) <= 65535 && y.numel() < (int64_t{1} << 31) && x.numel() < (int64_t{1} << 31),
               "conv2d_winograd: ", tiles, " tiles of y ", y.shape(), " exceed the kernel's 32-bit sizes");
  p.tiles = static_cast<int>(tiles);
  // The transformed filter, from the caching allocator: its reuse is ordered on this stream.
  Tensor filter = Tensor::empty({16 * ins * p.outs_padded}, DType::Float32, y.device());
  const int pairs = p.channels * p.outs_padded;
  // Both kernels start early (core/cuda/launch.cuh): the filter's few blocks and the main kernel's
  // launch overlap the kernels before them instead of leaving the GPU idle between.
  launch_early("conv2d_winograd_filter_kernel", conv2d_winograd_filter_kernel, dim3(blocks_for(pairs)),
               dim3(kThreads), 0, stream_, ptr<const float>(weight), ptr<float>(filter), p.channels, p.outs,
               p.outs_padded, input_gradient ? int64_t{9} : ins * 9, input_gradient ? outs * 9 : int64_t{9},
               input_gradient);
  p.x = ptr<const float>(x);
  p.filter = ptr<const float>(filter);
  p.bias = bias ? ptr<const float>(*bias) : nullptr;
  p.y = ptr<float>(y);
  p.pairs_in = p.width % 2 == 0 && p.pad_w % 2 == 0 && reinterpret_cast<uintptr_t>(p.x) % 8 == 0;
  p.pairs_out = p.out_w % 2 == 0 && reinterpret_cast<uintptr_t>(p.y) % 8 == 0;
  const dim3 grid(static_cast<unsigned>(ceil_div(outs, kOuts)), static_cast<unsigned>(ceil_div(tiles, kTiles)));
  const auto launch = [&](auto kernel) {
    // Per device, so set at every launch (as attention.cu's): a host call, no stream work.
    CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSharedBytes)));
    launch_early("conv2d_winograd_kernel", kernel, grid, dim3(kBlockThreads), kSharedBytes, stream_, p);
  };
  if (p.pairs_in)
    launch(conv2d_winograd_kernel<true>);
  else
    launch(conv2d_winograd_kernel<false>);
}

}  // namespace minidl
