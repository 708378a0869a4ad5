// conv2d's weight gradient for 3 x 3 filters at stride 1 in strict float32, NCHW, by Winograd's
// F(3 x 3, 2 x 2): CudaKernels::conv2d_winograd_weight_grad, run by cudnn.cpp where the autotuner
// timed it faster than cuDNN's algorithms (cudnn_autotune.cpp's choose_winograd). The forward and the
// input gradient are conv2d_winograd.cu's.
//
// Each 2 x 2 block of the output gradient g and the 4 x 4 input patch d its windows read add
// A^T [(G g G^T) . (B^T d B)] A to the 3 x 3 filter's gradient: 16 products a block and channel pair
// instead of 36. Summed over every block of the batch, that is 16 GEMMs [K x blocks] x [blocks x C]
// whose reduction is thousands of times longer than their sides. In strict float32 cuDNN's FFT
// algorithm took 375 us at the MNIST CNN's second convolution at batch 512 on an H200
// (docs/benchmarks.md). Here a block owns 32 output and 32 input channels and one slice of the
// blocks, 8 at a time transformed into shared memory (the next 8 loaded while the GEMMs run); each
// half-warp keeps one of the 16 GEMMs in registers (a thread 8 x 8 channel pairs of it), and at the
// end the 16 sums meet in shared memory for the output transform. The slices' 3 x 3 gradients go to
// a float32 workspace, which conv2d_winograd_weight_grad_sum_kernel adds in a fixed order
// (deterministic, no atomics).
#include <algorithm>

#include "core/cuda/launch.cuh"
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

constexpr int kSide = 32;      // a block's output channels, and its input channels
constexpr int kChunk = 8;      // output-gradient blocks transformed into shared memory at a time
constexpr int kBlockThreads = 256;
constexpr int kPitch = kSide + 4;  // a staged row: 32 floats and 4 more, so that staging hits 32 banks
// The sums M [16][kSide][kSumRow] of position xi start kPlane floats apart: with these paddings, the
// output transform's threads read them on 32 different banks.
constexpr int kSumRow = kSide + 1;
constexpr int kPlane = kSide * kSumRow + 4;
constexpr int kStageFloats = 2 * 16 * kChunk * kPitch;
constexpr int kSumFloats = 16 * kPlane;
constexpr size_t kSharedBytes = sizeof(float) * (kStageFloats > kSumFloats ? kStageFloats : kSumFloats);
constexpr int64_t kLeastBlocks = 64;  // output-gradient blocks a slice takes at least

struct WeightGradParams {
  const float* x;   // [N, C, H, W]
  const float* dy;  // [N, K, OH, OW]
  float* partial;   // [slices][K][C][9]
  int channels, height, width, outs, out_h, out_w, pad_h, pad_w;
  int tiles_h, tiles_w, tiles, per_slice;
};

template <bool Pairs>
__global__ __launch_bounds__(kBlockThreads, 2) void conv2d_winograd_weight_grad_kernel(WeightGradParams p) {
  extern __shared__ float4 shared4[];
  float* shared = reinterpret_cast<float*>(shared4);
  float* Gs = shared;                          // [16][kChunk][kPitch]: transformed output gradient
  float* Ds = shared + 16 * kChunk * kPitch;   // [16][kChunk][kPitch]: transformed input
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int o0 = blockIdx.x * kSide, i0 = blockIdx.y * kSide, slice = blockIdx.z;
  const int first = slice * p.per_slice, last = min(first + p.per_slice, p.tiles);

  // Staging: thread tid takes block (tid % kChunk) of the chunk, for output channel o0 + tid / kChunk
  // and input channel i0 + tid / kChunk.
  const int t_local = tid % kChunk, c_local = tid / kChunk;
  const int o = o0 + c_local, i = i0 + c_local;
  const int per_image = p.tiles_h * p.tiles_w;
  const int64_t in_plane = int64_t(p.height) * p.width, out_plane = int64_t(p.out_h) * p.out_w;
  float gv[4], d[16];
  const auto load = [&](int t0) {
    const int t = t0 + t_local;
    const bool ok = t < last;
    const int n = ok ? t / per_image : 0, rest = t - n * per_image;
    const int y0 = 2 * (rest / p.tiles_w), x0 = 2 * (rest % p.tiles_w);
    const float* g = p.dy + (int64_t(n) * p.outs + o) * out_plane;
    const bool g_ok = ok && o < p.outs;
    const float* xc = p.x + (int64_t(n) * p.channels + i) * in_plane;
    const bool x_ok = ok && i < p.channels;
    const int iy0 = y0 - p.pad_h, ix0 = x0 - p.pad_w;
    if constexpr (Pairs) {  // even rows and padding: each float2 wholly inside or outside
#pragma unroll
      for (int a = 0; a < 2; ++a) {
        const float2 v = g_ok && y0 + a < p.out_h ? __ldg(reinterpret_cast<const float2*>(g + (y0 + a) * p.out_w + x0))
                                                  : make_float2(0.f, 0.f);
        gv[a * 2] = v.x, gv[a * 2 + 1] = v.y;
      }
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int s = 0; s < 4; s += 2) {
          const int iy = iy0 + r, ix = ix0 + s;
          const float2 v = x_ok && iy >= 0 && iy < p.height && ix >= 0 && ix < p.width
                               ? __ldg(reinterpret_cast<const float2*>(xc + iy * p.width + ix))
                               : make_float2(0.f, 0.f);
          d[r * 4 + s] = v.x, d[r * 4 + s + 1] = v.y;
        }
    } else {
#pragma unroll
      for (int a = 0; a < 2; ++a)
#pragma unroll
        for (int b = 0; b < 2; ++b)
          gv[a * 2 + b] = g_ok && y0 + a < p.out_h && x0 + b < p.out_w ? __ldg(g + (y0 + a) * p.out_w + x0 + b) : 0.f;
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          const int iy = iy0 + r, ix = ix0 + s;
          d[r * 4 + s] =
              x_ok && iy >= 0 && iy < p.height && ix >= 0 && ix < p.width ? __ldg(xc + iy * p.width + ix) : 0.f;
        }
    }
  };
  // G g G^T, G = [1 0; .5 .5; .5 -.5; 0 1], and B^T d B, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 -1 0 1].
  const auto stage = [&] {
    float h[8];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      h[0 + j] = gv[j];
      h[2 + j] = 0.5f * (gv[j] + gv[2 + j]);
      h[4 + j] = 0.5f * (gv[j] - gv[2 + j]);
      h[6 + j] = gv[2 + j];
    }
    float* gs = Gs + t_local * kPitch + c_local;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      gs[(r * 4 + 0) * kChunk * kPitch] = h[r * 2];
      gs[(r * 4 + 1) * kChunk * kPitch] = 0.5f * (h[r * 2] + h[r * 2 + 1]);
      gs[(r * 4 + 2) * kChunk * kPitch] = 0.5f * (h[r * 2] - h[r * 2 + 1]);
      gs[(r * 4 + 3) * kChunk * kPitch] = h[r * 2 + 1];
    }
    float e[16];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      e[0 + j] = d[0 + j] - d[8 + j];
      e[4 + j] = d[4 + j] + d[8 + j];
      e[8 + j] = d[8 + j] - d[4 + j];
      e[12 + j] = d[12 + j] - d[4 + j];
    }
    float* ds = Ds + t_local * kPitch + c_local;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      ds[(r * 4 + 0) * kChunk * kPitch] = e[r * 4 + 0] - e[r * 4 + 2];
      ds[(r * 4 + 1) * kChunk * kPitch] = e[r * 4 + 1] + e[r * 4 + 2];
      ds[(r * 4 + 2) * kChunk * kPitch] = e[r * 4 + 2] - e[r * 4 + 1];
      ds[(r * 4 + 3) * kChunk * kPitch] = e[r * 4 + 3] - e[r * 4 + 1];
    }
  };

  // The GEMMs: half-warp h of warp w sums position xi = 2w + h; its thread (oi, ii) output channels
  // 8 oi .. 8 oi + 7 and input channels 8 ii .. 8 ii + 7: 64 products for every 4 loads. (Input
  // channels ii + 4 m instead, as conv2d_winograd.cu's outputs, would spare the sums' exchange its
  // bank conflicts, but the staging, which runs for every chunk, would then have them.)
  const int xi = 2 * warp + (lane >> 4), oi = (lane >> 2) & 3, ii = lane & 3;
  float acc[8][8];
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int m = 0; m < 8; ++m) acc[j][m] = 0.f;
  if (first < last) load(first);
  for (int t0 = first; t0 < last; t0 += kChunk) {
    stage();
    __syncthreads();
    if (t0 + kChunk < last) load(t0 + kChunk);
    const float4* g4 = reinterpret_cast<const float4*>(Gs + xi * kChunk * kPitch) + 2 * oi;
    const float4* d4 = reinterpret_cast<const float4*>(Ds + xi * kChunk * kPitch) + 2 * ii;
    // Not unrolled: unrolled, the loads run ahead and the kernel spills at two blocks an SM.
#pragma unroll 1
    for (int t = 0; t < kChunk; ++t) {
      const float4 ga = g4[t * kPitch / 4], gb = g4[t * kPitch / 4 + 1];
      const float4 da = d4[t * kPitch / 4], db = d4[t * kPitch / 4 + 1];
      const float uu[8] = {ga.x, ga.y, ga.z, ga.w, gb.x, gb.y, gb.z, gb.w};
      const float vv[8] = {da.x, da.y, da.z, da.w, db.x, db.y, db.z, db.w};
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int m = 0; m < 8; ++m) acc[j][m] = fmaf(uu[j], vv[m], acc[j][m]);
    }
    __syncthreads();
  }

  // The sums M meet in shared memory, then A^T M A, A^T = [1 1 1 0; 0 1 -1 0; 0 1 1 1], is the
  // slice's 3 x 3 gradient of each channel pair.
  float* M = shared;
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int m = 0; m < 8; ++m) M[xi * kPlane + (8 * oi + j) * kSumRow + 8 * ii + m] = acc[j][m];
  __syncthreads();
#pragma unroll
  for (int round = 0; round < kSide * kSide / kBlockThreads; ++round) {
    const int pair = tid + round * kBlockThreads, in_local = pair % kSide, out_local = pair / kSide;
    const int oo = o0 + out_local, in = i0 + in_local;
    if (oo >= p.outs || in >= p.channels) continue;
    float m[16];
#pragma unroll
    for (int x = 0; x < 16; ++x) m[x] = M[x * kPlane + out_local * kSumRow + in_local];
    float q[12];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      q[j] = m[j] + m[4 + j] + m[8 + j];
      q[4 + j] = m[4 + j] - m[8 + j];
      q[8 + j] = m[4 + j] + m[8 + j] + m[12 + j];
    }
    float* out = p.partial + ((int64_t(slice) * p.outs + oo) * p.channels + in) * 9;
#pragma unroll
    for (int r = 0; r < 3; ++r) {
      out[r * 3 + 0] = q[r * 4] + q[r * 4 + 1] + q[r * 4 + 2];
      out[r * 3 + 1] = q[r * 4 + 1] - q[r * 4 + 2];
      out[r * 3 + 2] = q[r * 4 + 1] + q[r * 4 + 2] + q[r * 4 + 3];
    }
  }
}

// grad_weight [K][C][3][3] (float32, contiguous) = the slices' sum, in slice order.
__global__ void conv2d_winograd_weight_grad_sum_kernel(const float* __restrict__ partial, float* __restrict__ grad,
                                                       int slices, int size) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= size) return;
  float sum = 0.f;
  for (int s = 0; s < slices; ++s) sum += partial[int64_t(s) * size + e];
  grad[e] = sum;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Slices: about two blocks an SM over `share` of the GPU, each at least kLeastBlocks output-gradient
// blocks, a whole number of chunks. Beside the input gradient the MNIST CNN's second convolution
// ran fastest with half the wave where that gradient is cuDNN's (batch 512 in a graph: 545k images/s,
// against 543k at 3/4, 541k at all of it and 484k at 3/8) and with 3/8 of it beside minidl's
// Winograd input gradient (batch 64: 344.5k against 337.3k at 1/2, 341.6k at 5/8, 338.3k at 0.3 and
// 327k at 1/4; H200, docs/benchmarks.md).
int64_t slice_blocks(int device, int64_t tiles, int64_t out_channels, const ConvGeometry& g, double share) {
  const int64_t tiles_2d = ceil_div(out_channels, kSide) * ceil_div(g.channels, kSide);
  const int64_t wave = std::max<int64_t>(1, static_cast<int64_t>(2 * cuda::multiprocessor_count(device) * share));
  const int64_t slices = std::clamp<int64_t>(wave / tiles_2d, 1, std::max<int64_t>(tiles / kLeastBlocks, 1));
  return ceil_div(ceil_div(tiles, slices), kChunk) * kChunk;
}

}  // namespace

size_t CudaKernels::conv2d_winograd_weight_grad_workspace(int64_t batch, int64_t out_channels, const ConvGeometry& g,
                                                          double wave_share) const {
  cuda::DeviceGuard guard(device_);
  const int64_t tiles = batch * ceil_div(g.out_h, 2) * ceil_div(g.out_w, 2);
  if (tiles == 0) return 0;
  const int64_t slices = ceil_div(tiles, slice_blocks(device_, tiles, out_channels, g, wave_share));
  return static_cast<size_t>(slices * out_channels * g.channels * 9) * sizeof(float);
}

void CudaKernels::conv2d_winograd_weight_grad(const Tensor& x, const Tensor& grad_out, const ConvGeometry& g,
                                              Tensor& grad_weight, void* workspace, double wave_share) {
  const int64_t batch = x.size(0), outs = grad_out.size(1);
  MINIDL_CHECK(conv2d_winograd_applies(x.dtype(), batch, outs, g) && grad_out.dtype() == kFloat32 &&
                   grad_weight.dtype() == kFloat32,
               "conv2d_winograd_weight_grad: expected float32 data of a geometry it takes, got ", x.dtype(), ", ",
               grad_out.dtype(), " and ", grad_weight.dtype());
  MINIDL_CHECK(x.is_contiguous() && grad_out.is_contiguous() && grad_weight.is_contiguous() &&
                   grad_weight.numel() == outs * g.channels * 9 && grad_out.size(0) == batch &&
                   grad_out.size(2) == g.out_h && grad_out.size(3) == g.out_w,
               "conv2d_winograd_weight_grad: expected contiguous NCHW x, grad_out [", batch, ", ", outs, ", ", g.out_h,
               ", ", g.out_w, "] and grad_weight [", outs, ", ", g.channels, ", 3, 3], got ", grad_out.shape(),
               " and ", grad_weight.shape());
  if (grad_weight.numel() == 0) return;
  cuda::DeviceGuard guard(device_);
  WeightGradParams p{};
  p.x = ptr<const float>(x);
  p.dy = ptr<const float>(grad_out);
  p.partial = static_cast<float*>(workspace);
  p.channels = static_cast<int>(g.channels);
  p.height = static_cast<int>(g.height);
  p.width = static_cast<int>(g.width);
  p.outs = static_cast<int>(outs);
  p.out_h = static_cast<int>(g.out_h);
  p.out_w = static_cast<int>(g.out_w);
  p.pad_h = static_cast<int>(g.pad_h);
  p.pad_w = static_cast<int>(g.pad_w);
  p.tiles_h = static_cast<int>(ceil_div(g.out_h, 2));
  p.tiles_w = static_cast<int>(ceil_div(g.out_w, 2));
  const int64_t tiles = batch * p.tiles_h * p.tiles_w;
  if (tiles == 0) {
    grad_weight.zero_();
    return;
  }
  p.tiles = static_cast<int>(tiles);
  p.per_slice = static_cast<int>(slice_blocks(device_, tiles, outs, g, wave_share));
  const int slices = static_cast<int>(ceil_div(tiles, p.per_slice));
  const dim3 grid(static_cast<unsigned>(ceil_div(outs, kSide)), static_cast<unsigned>(ceil_div(g.channels, kSide)),
                  static_cast<unsigned>(slices));
  const auto launch = [&](auto kernel) {
    CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSharedBytes)));
    kernel<<<grid, kBlockThreads, kSharedBytes, stream_>>>(p);
    CUDA_LAUNCH_CHECK(conv2d_winograd_weight_grad_kernel);
  };
  // Whole float2 rows: even widths and padding, 8-byte aligned data.
  const bool pairs = g.width % 2 == 0 && g.out_w % 2 == 0 && g.pad_w % 2 == 0 &&
                     reinterpret_cast<uintptr_t>(p.x) % 8 == 0 && reinterpret_cast<uintptr_t>(p.dy) % 8 == 0;
  if (pairs)
    launch(conv2d_winograd_weight_grad_kernel<true>);
  else
    launch(conv2d_winograd_weight_grad_kernel<false>);
  const int size = static_cast<int>(grad_weight.numel());
  // Not started early, unlike the step's other short kernels: beside the input gradient its waiting
  // blocks held SM slots that kernel needed (docs/ARCHITECTURE.md, docs/benchmarks.md).
  conv2d_winograd_weight_grad_sum_kernel<<<blocks_for(size), kThreads, 0, stream_>>>(p.partial, ptr<float>(grad_weight),
                                                                                   slices, size);
  CUDA_LAUNCH_CHECK(conv2d_winograd_weight_grad_sum_kernel);
}

}  // namespace minidl
