// conv2d's weight gradient on TF32 tensor cores, from channels-last float32 data:
// CudaKernels::conv2d_weight_grad_tf32, run by ops/cuda/cudnn.cpp where the autotuner
// (cudnn_autotune.cpp's choose_weight_engine) timed it faster than every cuDNN algorithm and engine.
//
// Why our own: at the MNIST CNN's second convolution (32 -> 64 channels, 3 x 3, batch 512) the
// fastest of cuDNN's TF32 weight gradients, legacy or graph-API, took 221 us on an H200 (49 TFLOP/s:
// a tenth of the TF32 peak), where its bfloat16 one took 62 us. The weight gradient is one GEMM,
// dW [K, R*S*C] = dY^T [K, pixels] * window(x) [pixels, R*S*C], whose reduction (every output pixel
// of the batch) is thousands of times longer than its sides: what it needs is many blocks each
// reducing a slice of the pixels into the whole of a small output tile, then one pass adding the
// slices in a fixed order (deterministic, no atomics).
//
// A block owns 64 output channels and 48 * WN filter columns (tap, input channel) for one slice of
// the output's patches (Patch: up to 64 output pixels of one image), in two groups of WN warps that
// take alternate patches. Each stage brings a patch's rows of dY and the input patch its windows
// cover to shared memory through cp.async, double-buffered per group; warp w of a group multiplies
// the 64 x 48 tile of columns w with mma.sync m16n8k8, reading each window's values where they lie
// in the input patch (operands rounded to TF32, sums in float32). The groups' tiles are added in
// the block, the slices' go to a float32 workspace; conv2d_weight_grad_tf32_sum_kernel adds them
// and writes the gradient in its layout and dtype.
#include <map>
#include <mutex>
#include <utility>

#include "ops/cuda/common.cuh"
#include "ops/cuda/mma_ptx.cuh"

namespace minidl {

namespace {

using namespace cuda;

constexpr int kRows = 64;      // output channels a block makes
constexpr int kWarpCols = 48;  // filter columns a warp makes: 6 products of 8 across, 4 of 16 down
constexpr int kMaxPixels = 64;  // output pixels a stage brings, at most
constexpr int kLdA = kRows + 8;  // floats a pixel's row of dY takes in shared memory
constexpr int kMaxStageFloats = 12 * 1024;  // 48 KB a stage: four stages, one block an SM at least
// Groups of WN warps a block runs, each on every kGroups-th patch of the slice with stages of its
// own, their tiles added at the end. One group of 6 warps an SM issued in 30% of the cycles at the
// MNIST CNN's batch 64 (ncu); two blocks an SM instead would double the slices the sum adds.
constexpr int kGroups = 2;
constexpr int kAccFloats = 4 * 6 * 4;  // a thread's tile: acc[4][6][4]

// A row's length in shared memory is 8 more than a multiple of 32 floats: a fragment's 32 loads,
// (pixel t, column g) for t < 4, g < 8, then fall on 32 different banks.
int channel_pitch(int64_t channels) { return static_cast<int>((channels + 31) / 32 * 32 + 8); }

// A stage: a patch of `rows` output rows by `seg` output columns of one image (whole rows where
// they are short, as MNIST's 24), and the input patch their windows cover, each input pixel's
// channels once. (Gathering each output pixel's window instead, R*S copies of every input pixel,
// moved 4.5 times the bytes, and the weight gradient took 158 us at batch 512.)
struct Patch {
  int rows, seg, pixels, steps;  // pixels: rows * seg; steps: of 8 pixels, the last padded
  int in_rows, in_cols, pitch;   // the input patch, pitch floats an input pixel
  int bands, segs;               // patches down and across an image
  __host__ __device__ int stage_floats() const { return steps * 8 * kLdA + in_rows * in_cols * pitch; }
};

Patch patch_of(const ConvGeometry& g) {
  Patch p{};
  p.seg = static_cast<int>(std::min<int64_t>(g.out_w, kMaxPixels));
  p.rows = static_cast<int>(std::clamp<int64_t>(kMaxPixels / p.seg, 1, g.out_h));
  p.pixels = p.rows * p.seg;
  p.steps = (p.pixels + 7) / 8;
  p.in_rows = static_cast<int>((p.rows - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h + 1);
  p.in_cols = static_cast<int>((p.seg - 1) * g.stride_w + (g.kernel_w - 1) * g.dilation_w + 1);
  p.pitch = channel_pitch(g.channels);
  p.bands = static_cast<int>((g.out_h + p.rows - 1) / p.rows);
  p.segs = static_cast<int>((g.out_w + p.seg - 1) / p.seg);
  return p;
}

// Shared memory: each group's two stages, which the groups' tiles reuse at the end to be added,
// then the tables of pixel and tap offsets.
__host__ __device__ int buffer_floats(const Patch& p, int wn) {
  const int stages = 2 * kGroups * p.stage_floats(), tiles = (kGroups - 1) * kAccFloats * 32 * wn;
  return stages > tiles ? stages : tiles;
}

int smem_bytes(const Patch& p, int wn) { return (buffer_floats(p, wn) + p.steps * 8 + kWarpCols * wn) * 4; }

// Synchronizes the warps of one group only (named barrier 1 + group; 0 is __syncthreads'). The ids
// are constants: a barrier id in a register reserves all 16 of the block's.
static_assert(kGroups == 2, "group_sync names a barrier for each group");
__device__ __forceinline__ void group_sync(int group, int threads) {
  if (group == 0) asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory");
  else asm volatile("bar.sync 2, %0;" ::"r"(threads) : "memory");
}

template <int WN>
__global__ void __launch_bounds__(32 * WN * kGroups)
    conv2d_weight_grad_tf32_kernel(const float* __restrict__ x, const float* __restrict__ dy, float* __restrict__ partials,
                                   int batch, int out_channels, int columns, int splits, Geo<int> g, int channels,
                                   Patch patch) {
  constexpr int kGroupThreads = 32 * WN, kThreads = kGroupThreads * kGroups, kCols = kWarpCols * WN;
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const int stage_floats = patch.stage_floats(), a_floats = patch.steps * 8 * kLdA;
  int* pixel_at = reinterpret_cast<int*>(smem + buffer_floats(patch, WN));  // a pixel's window in the input patch
  int* tap_at = pixel_at + patch.steps * 8;                                 // a column's offset in a window
  const int tiles_n = columns / kCols, tiles = out_channels / kRows * tiles_n;
  // The tiles of one slice are neighbours in launch order: they run together and share the slice's
  // rows in L2.
  const int tile = blockIdx.x % tiles, split = blockIdx.x / tiles;
  const int row0 = tile / tiles_n * kRows, col0 = tile % tiles_n * kCols;
  const int chunks = batch * patch.bands * patch.segs;
  const int first = static_cast<int>(int64_t(chunks) * split / splits);
  const int last = static_cast<int>(int64_t(chunks) * (split + 1) / splits);
  for (int p = threadIdx.x; p < patch.steps * 8; p += kThreads) {
    const int pi = p / patch.seg, pj = p - pi * patch.seg;
    pixel_at[p] = p < patch.pixels ? (pi * g.stride_h * patch.in_cols + pj * g.stride_w) * patch.pitch : 0;
  }
  for (int q = threadIdx.x; q < kCols; q += kThreads) {
    const int col = col0 + q, tap = col / channels, r = tap / g.kernel_w, s = tap - r * g.kernel_w;
    tap_at[q] = (r * g.dilation_h * patch.in_cols + s * g.dilation_w) * patch.pitch + col - tap * channels;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
  const int group = warp / WN, group_warp = warp % WN, t = threadIdx.x % kGroupThreads;
  float* stages = smem + group * 2 * stage_floats;  // this group's two stages
  const int quads = channels / 4, patch_quads = patch.in_rows * patch.in_cols * quads;
  const auto load = [&](int chunk, int stage) {
    float* sa = stages + stage * stage_floats;
    float* sb = sa + a_floats;
    const int segment = chunk % patch.segs, rest = chunk / patch.segs, band = rest % patch.bands, n = rest / patch.bands;
    const int i0 = band * patch.rows, j0 = segment * patch.seg;
    // dY: a row of kRows channels a pixel, zero past the image and in the last step's padding.
    for (int e = t; e < patch.steps * 8 * (kRows / 4); e += kGroupThreads) {
      const int p = e / (kRows / 4), q = e - p * (kRows / 4), pi = p / patch.seg, pj = p - pi * patch.seg;
      const int i = i0 + pi, j = j0 + pj;
      const bool ok = p < patch.pixels && i < g.out_h && j < g.out_w;
      const float* src = ok ? dy + ((int64_t(n) * g.out_h + i) * g.out_w + j) * out_channels + row0 + 4 * q : dy;
      cp_async_16(smem_addr(sa + p * kLdA + 4 * q), src, ok);
    }
    // x: the input patch, zero in the padding.
    const int h0 = i0 * g.stride_h - g.pad_h, w0 = j0 * g.stride_w - g.pad_w;
    for (int e = t; e < patch_quads; e += kGroupThreads) {
      const int pixel = e / quads, q = e - pixel * quads, hr = pixel / patch.in_cols, wc = pixel - hr * patch.in_cols;
      const int h = h0 + hr, w = w0 + wc;
      const bool ok = h >= 0 && h < g.height && w >= 0 && w < g.width;
      const float* src = ok ? x + ((int64_t(n) * g.height + h) * g.width + w) * channels + 4 * q : x;
      cp_async_16(smem_addr(sb + pixel * patch.pitch + 4 * q), src, ok);
    }
  };

  __syncthreads();  // the tables
  int tap[6];
#pragma unroll
  for (int ni = 0; ni < 6; ++ni) tap[ni] = tap_at[group_warp * kWarpCols + ni * 8] + gq;
  float acc[4][6][4] = {};
  // Group `group` takes patches first + group, first + group + kGroups, ...; its barriers are its own.
  if (first + group < last) load(first + group, 0);
  cp_async_commit();
  for (int chunk = first + group, i = 0; chunk < last; chunk += kGroups, ++i) {
    const int stage = i & 1;
    if (chunk + kGroups < last) load(chunk + kGroups, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    group_sync(group, kGroupThreads);
    const float* sa = stages + stage * stage_floats;
    const float* sb = sa + a_floats;
    for (int k = 0; k < patch.steps * 8; k += 8) {
      // A = dY^T (channels x pixels), B = the windows (pixels x columns): PTX's m16n8k8 fragments.
      uint32_t a[4][4], b[6][2];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        const float* col = sa + (k + tq) * kLdA + mi * 16 + gq;
        a[mi][0] = to_tf32(col[0]), a[mi][1] = to_tf32(col[8]);
        a[mi][2] = to_tf32(col[4 * kLdA]), a[mi][3] = to_tf32(col[4 * kLdA + 8]);
      }
      const float* window0 = sb + pixel_at[k + tq];
      const float* window1 = sb + pixel_at[k + tq + 4];
#pragma unroll
      for (int ni = 0; ni < 6; ++ni) b[ni][0] = to_tf32(window0[tap[ni]]), b[ni][1] = to_tf32(window1[tap[ni]]);
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 6; ++ni) mma_1688_tf32(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
    }
    group_sync(group, kGroupThreads);  // the stage is read before the next load overwrites it
  }
  // The groups' tiles are added in group order, through the stages' memory: element i of thread t
  // of group g > 0 at ((g - 1) * kAccFloats + i) * kGroupThreads + t.
  cp_async_wait<0>();
  __syncthreads();
  float* flat = &acc[0][0][0];  // the kAccFloats of acc in order, as registers (the loops unroll)
  if (group > 0) {
#pragma unroll
    for (int i = 0; i < kAccFloats; ++i) smem[((group - 1) * kAccFloats + i) * kGroupThreads + t] = flat[i];
  }
  __syncthreads();
  if (group > 0) return;
  for (int other = 1; other < kGroups; ++other)
#pragma unroll
    for (int i = 0; i < kAccFloats; ++i) flat[i] += smem[((other - 1) * kAccFloats + i) * kGroupThreads + t];
  float* out = partials + int64_t(split) * out_channels * columns;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 6; ++ni) {
      const int r = row0 + mi * 16 + gq, c = col0 + group_warp * kWarpCols + ni * 8 + 2 * tq;
      *reinterpret_cast<float2*>(out + int64_t(r) * columns + c) = make_float2(acc[mi][ni][0], acc[mi][ni][1]);
      *reinterpret_cast<float2*>(out + int64_t(r + 8) * columns + c) = make_float2(acc[mi][ni][2], acc[mi][ni][3]);
    }
}

// The sum reads every slice once; with few threads, each a long chain of loads, it waited on them
// (20 us for 19 MB at batch 512 with 8 threads a quad).
constexpr int kSumGroups = 32;  // threads adding one quad of the output, each every 32nd slice
constexpr int kSumQuads = 8;    // quads a block of the sum takes

// Thread (quad, group) adds slices group, group + 32, ... of its four outputs; the groups' sums are
// then added in group order: the same order every run. Writes KCRS (contiguous) or KRSC
// (channels-last) in G.
template <class G>
__global__ void conv2d_weight_grad_tf32_sum_kernel(const float* __restrict__ partials, int splits, int outputs,
                                                   int columns, int channels, int taps, bool channels_last,
                                                   G* __restrict__ grad_weight) {
  __shared__ float4 sums[kSumGroups][kSumQuads];
  const int quad = blockIdx.x * kSumQuads + threadIdx.x % kSumQuads, group = threadIdx.x / kSumQuads;
  const int quads = outputs / 4;
  float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
  if (quad < quads) {
    const float4* rows = reinterpret_cast<const float4*>(partials);
#pragma unroll 8
    for (int i = group; i < splits; i += kSumGroups) {
      const float4 v = __ldcg(rows + int64_t(i) * quads + quad);
      s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
    }
  }
  sums[group][threadIdx.x % kSumQuads] = s;
  __syncthreads();
  if (group != 0 || quad >= quads) return;
  for (int k = 1; k < kSumGroups; ++k) {
    const float4 v = sums[k][threadIdx.x];
    s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
  }
  const float total[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int e = 4 * quad + u, k = e / columns, col = e - k * columns, tap = col / channels, c = col - tap * channels;
    grad_weight[channels_last ? e : (int64_t(k) * channels + c) * taps + tap] = G(total[u]);
  }
}

// The widest block (48 * WN columns) that divides the filter's columns.
int warps_across(int64_t columns) {
  for (int wn : {6, 3, 2, 1})
    if (columns % (kWarpCols * wn) == 0) return wn;
  return 0;
}

constexpr int kMaxSmem = 2 * kGroups * kMaxStageFloats * 4 + (kMaxPixels + kWarpCols * 6) * 4;

// Blocks an SM of the current device holds, by the runtime's occupancy calculator, asked once per
// device, block width and shared-memory size: the backward asks at every call. The kernel's limit of
// shared memory is raised on each device once (a function attribute is a device's own).
template <int WN>
int blocks_per_sm(int smem) {
  static std::mutex mutex;
  static std::map<std::pair<int, int>, int> known;  // (device, smem) -> blocks
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard lock(mutex);
  const auto found = known.find({device, smem});
  if (found != known.end()) return found->second;
  if (known.lower_bound({device, 0}) == known.lower_bound({device + 1, 0}))
    CUDA_CHECK(cudaFuncSetAttribute(conv2d_weight_grad_tf32_kernel<WN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    kMaxSmem));
  int n = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, conv2d_weight_grad_tf32_kernel<WN>, 32 * WN * kGroups,
                                                           smem));
  return known[{device, smem}] = std::max(n, 1);
}

template <class Fn>
void dispatch_warps(int wn, Fn&& fn) {
  switch (wn) {
    case 6: fn(std::integral_constant<int, 6>{}); break;
    case 3: fn(std::integral_constant<int, 3>{}); break;
    case 2: fn(std::integral_constant<int, 2>{}); break;
    default: fn(std::integral_constant<int, 1>{}); break;
  }
}

// Slices of the patches: one wave of blocks, at least kLeastPatches patches a slice. Each slice
// writes the whole of its tiles for the sum to read: at batch 64 (768 patches of the MNIST CNN's
// second convolution), 264 slices of 3 patches wrote 19 MB, and the sum took 20 us.
// Beside the input gradient, half a wave: with a whole one, the input gradient's blocks (cuDNN's,
// which take most of an SM's shared memory) waited for SMs this kernel left. In the MNIST CNN's TF32
// step at batch 64 (H200) this kernel then took 33.7 us on half the SMs and the input gradient
// 26.0 us beside it, against 36.8 us for the input gradient beside a whole wave; the step went from
// 171.4 to 155.8 us (docs/benchmarks.md).
constexpr int64_t kLeastPatches = 6;
int slices(int device, int64_t batch, int64_t out_channels, const ConvGeometry& g, bool beside) {
  const int64_t columns = g.kernel_h * g.kernel_w * g.channels;
  const int wn = warps_across(columns);
  const Patch patch = patch_of(g);
  int per_sm = 1;
  dispatch_warps(wn, [&](auto w) { per_sm = blocks_per_sm<decltype(w)::value>(smem_bytes(patch, wn)); });
  const int64_t tiles = out_channels / kRows * (columns / (kWarpCols * wn));
  const int64_t chunks = batch * patch.bands * patch.segs;
  const int64_t wave = cuda::multiprocessor_count(device) * int64_t(per_sm) / (beside ? 2 : 1);
  return static_cast<int>(std::clamp<int64_t>(wave / tiles, 1, std::max<int64_t>(chunks / kLeastPatches, 1)));
}

}  // namespace

bool CudaKernels::conv2d_weight_grad_tf32_applies(DType dtype, int64_t batch, int64_t out_channels,
                                                  const ConvGeometry& g) {
  const int64_t columns = g.kernel_h * g.kernel_w * g.channels;
  // Eight columns of a warp's product lie in one tap: channels a multiple of 8.
  return dtype == kFloat32 && g.channels % 8 == 0 && out_channels % kRows == 0 && warps_across(columns) > 0 &&
         patch_of(g).stage_floats() <= kMaxStageFloats && batch > 0 &&
         batch * g.out_h * g.out_w * out_channels < (int64_t{1} << 31) &&
         batch * g.height * g.width * g.channels < (int64_t{1} << 31);
}

size_t CudaKernels::conv2d_weight_grad_tf32_workspace(int64_t batch, int64_t out_channels, const ConvGeometry& g,
                                                      bool beside) const {
  cuda::DeviceGuard guard(device_);
  const int64_t columns = g.kernel_h * g.kernel_w * g.channels;
  return static_cast<size_t>(slices(device_, batch, out_channels, g, beside)) * out_channels * columns * sizeof(float);
}

void CudaKernels::conv2d_weight_grad_tf32(const Tensor& x, const Tensor& grad_out, const ConvGeometry& g,
                                          Tensor& grad_weight, void* workspace, bool beside) {
  const int64_t batch = x.size(0), out_channels = grad_out.size(1);
  MINIDL_CHECK(conv2d_weight_grad_tf32_applies(x.dtype(), batch, out_channels, g) && grad_out.dtype() == kFloat32,
               "conv2d_weight_grad_tf32: expected float32 data of a geometry it takes, got ", dtype_name(x.dtype()));
  MINIDL_CHECK(x.is_contiguous(MemoryFormat::ChannelsLast) && grad_out.is_contiguous(MemoryFormat::ChannelsLast),
               "conv2d_weight_grad_tf32: expected x and grad_out channels-last");
  const bool channels_last = !grad_weight.is_contiguous() && grad_weight.is_contiguous(MemoryFormat::ChannelsLast);
  MINIDL_CHECK(grad_weight.is_contiguous() || channels_last,
               "conv2d_weight_grad_tf32: expected grad_weight contiguous or channels-last");
  cuda::DeviceGuard guard(device_);
  const int64_t columns = g.kernel_h * g.kernel_w * g.channels;
  const int wn = warps_across(columns), splits = slices(device_, batch, out_channels, g, beside);
  const int64_t tiles = out_channels / kRows * (columns / (kWarpCols * wn));
  const Patch patch = patch_of(g);
  float* partials = static_cast<float*>(workspace);
  dispatch_warps(wn, [&](auto w) {
    constexpr int WN = decltype(w)::value;
    const int smem = smem_bytes(patch, WN);
    blocks_per_sm<WN>(smem);  // raises the kernel's shared memory limit on this device
    conv2d_weight_grad_tf32_kernel<WN><<<static_cast<unsigned>(tiles * splits), 32 * WN * kGroups, smem, stream_>>>(
        ptr<const float>(x), ptr<const float>(grad_out), partials, static_cast<int>(batch),
        static_cast<int>(out_channels), static_cast<int>(columns), splits, Geo<int>(g), static_cast<int>(g.channels),
        patch);
  });
  CUDA_CHECK(cudaGetLastError());
  const int outputs = static_cast<int>(out_channels * columns);
  const unsigned sum_blocks = static_cast<unsigned>((outputs / 4 + kSumQuads - 1) / kSumQuads);
  dispatch_floating_and_half(grad_weight.dtype(), "conv2d_weight_grad_tf32", [&](auto tag) {
    using G = decltype(tag);
    conv2d_weight_grad_tf32_sum_kernel<G><<<sum_blocks, kSumGroups * kSumQuads, 0, stream_>>>(
        partials, splits, outputs, static_cast<int>(columns), static_cast<int>(g.channels),
        static_cast<int>(g.kernel_h * g.kernel_w), channels_last, ptr<G>(grad_weight));
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace minidl
