// clip_grad_norm_'s 2-norm as torch's foreach path does it, with no host sync: one multi-tensor pass
// of per-block sums of squares whose last block (last_block_of_group) adds them in a fixed order (the
// same bits every run, unlike atomics) and derives the clip coefficient, and one multi-tensor pass
// that scales. The sums are float64 whatever the gradients' dtype, so the order of a float32 sum
// matters little.
#include <algorithm>

#include "core/cuda/context.h"
#include "core/cuda/launch.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/multi_tensor.cuh"

namespace minidl {

namespace {

using namespace cuda;
using namespace cuda::multi_tensor;

// Gradients per launch (one list: under 1 KB of kernel argument).
constexpr int kMaxTensors = 48;
using GradLists = TensorLists<1, kMaxTensors>;

// The block's sum, in thread 0 (kThreads threads).
__device__ double block_sum(double x) {
  __shared__ double warp_sums[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_down_sync(0xffffffffu, x, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = x;
  __syncthreads();
  x = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < kThreads / 32; ++w) x += warp_sums[w];
  return x;
}

// A thread takes kPerThread packs of 16 bytes (V elements), pack u at u * blockDim.x + threadIdx.x of
// its block's chunk: a block reads 16 KB. At 4 KB a block, the float32 sum of a GPT's 10.8M
// gradients ran at half the memory's speed on an H200, and left 10,500 partial sums for one block.
template <class T>
constexpr int kV = 16 / static_cast<int>(sizeof(T));
template <class T>
constexpr int64_t kNormChunk = int64_t(kThreads) * kPerThread * kV<T>;

// The norm from the partial sums of every block of every launch, and the clip coefficient into
// partials[count]: min(1, max_norm / (norm + 1e-6)) in the gradients' dtype as the composed path; a
// NaN norm stays NaN (torch's clamp keeps it), so the gradients become NaN rather than pass
// unclipped.
template <class T>
__device__ void finish_norm(double* partials, int64_t count, T* total_norm, double max_norm) {
  double acc = 0;
#pragma unroll 8
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) {
    const T norm = T(sqrt(acc));
    *total_norm = norm;
    const T coef = T(max_norm) / (norm + T(1e-6));
    partials[count] = static_cast<double>(coef > T(1) ? T(1) : coef);
  }
}

// Blocks a launch of either pass takes at most, each taking every gridDim.x-th chunk: a few an SM.
// A block per chunk took the scale pass 6 us on an H200 only to read a coefficient of 1.
constexpr unsigned kBlocksPerSm = 4;

// Block b of the launch stores its sum at partials[first + b]; the last block of all `count`, in
// whichever launch, finishes the norm (a kernel of its own took 8 us of a GPT's step on an H200,
// one block reading 2,600 sums after the pass). A few blocks an SM, each taking every gridDim.x-th
// chunk: a block per chunk (2,600 for a GPT's 10.8M gradients, each counting itself in one counter)
// took 21 us on an H200, at 44% of the memory's speed.
template <class T>
__global__ void sum_squares_kernel(GradLists list, double* partials, unsigned first, unsigned count,
                                   unsigned* counters, T* total_norm, double max_norm) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  constexpr int V = kV<T>;
  const unsigned chunks = list.block_start[list.count];
  double acc = 0;
  for (unsigned chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
    const int t = tensor_of_chunk(list, chunk);
    const T* __restrict__ g = static_cast<const T*>(list.ptr[0][t]);
    const int64_t n = list.numel[t];
    const int64_t begin = chunk_begin<kNormChunk<T>>(list, t, chunk);
    const bool packed = reinterpret_cast<uintptr_t>(g) % 16 == 0;  // the same for the whole block
#pragma unroll
    for (int u = 0; u < kPerThread; ++u) {
      const int64_t i = begin + (int64_t(u) * blockDim.x + threadIdx.x) * V;
      if (packed && i + V <= n) {
        const VecPack<T, V> p = *reinterpret_cast<const VecPack<T, V>*>(g + i);
#pragma unroll
        for (int k = 0; k < V; ++k) acc += static_cast<double>(p.v[k]) * static_cast<double>(p.v[k]);
      } else {
        for (int64_t k = i; k < i + V && k < n; ++k) acc += static_cast<double>(g[k]) * static_cast<double>(g[k]);
      }
    }
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) partials[first + blockIdx.x] = acc;
  if (last_block_of_group(counters, kGradNormCounter, count)) finish_norm(partials, count, total_norm, max_norm);
}

template <class T>
__global__ void scale_kernel(GradLists list, const double* coef_at) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  constexpr int V = kV<T>;
  const T coef = T(*coef_at);
  // A norm within max_norm leaves the gradients as they are (g * 1 == g): no pass over them, which
  // took 21 us of a GPT's 10.8M gradients on an H200 (torch multiplies by the 1 all the same).
  if (coef == T(1)) return;
  const unsigned chunks = list.block_start[list.count];
  for (unsigned chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
    const int t = tensor_of_chunk(list, chunk);
    T* __restrict__ g = static_cast<T*>(list.ptr[0][t]);
    const int64_t n = list.numel[t];
    const int64_t begin = chunk_begin<kNormChunk<T>>(list, t, chunk);
    if (reinterpret_cast<uintptr_t>(g) % 16 != 0 || begin + kNormChunk<T> > n) {
      for (int64_t i = begin + threadIdx.x; i < begin + kNormChunk<T> && i < n; i += blockDim.x) g[i] *= coef;
      continue;
    }
    // A whole chunk: every load first, then the stores.
    VecPack<T, V> p[kPerThread];
    auto* packs = reinterpret_cast<VecPack<T, V>*>(g + begin);
#pragma unroll
    for (int u = 0; u < kPerThread; ++u) p[u] = packs[u * blockDim.x + threadIdx.x];
#pragma unroll
    for (int u = 0; u < kPerThread; ++u) {
#pragma unroll
      for (int k = 0; k < V; ++k) p[u].v[k] *= coef;
      packs[u * blockDim.x + threadIdx.x] = p[u];
    }
  }
}

}  // namespace

bool CudaKernels::clip_grad_norm_multi(std::vector<Tensor>& grads, double max_norm, Tensor& total_norm) {
  const DType dtype = grads.empty() ? kFloat32 : grads[0].dtype();
  if (dtype != kFloat32 && dtype != kFloat64) return false;  // the composed path serves the rest
  cuda::DeviceGuard guard(device_);
  dispatch_floating(dtype, "clip_grad_norm_multi", [&](auto tag) {
    using T = decltype(tag);
    // Every list first: the scratch below takes one partial sum per block of them all.
    std::vector<GradLists> lists;
    std::vector<unsigned> grids;  // the sum's blocks in each launch
    const unsigned most_blocks = static_cast<unsigned>(multiprocessor_count(device_)) * kBlocksPerSm;
    unsigned total_blocks = 0;
    for_each_list<1, kMaxTensors, kNormChunk<T>>(
        grads.size(),
        [&](size_t i) -> TensorEntry<1> {
          const int64_t n = grads[i].numel();
          if (n == 0) return {};
          return {{ptr<T>(grads[i])}, n};
        },
        [&](const GradLists& l, unsigned blocks) {
          lists.push_back(l);
          grids.push_back(std::min(blocks, most_blocks));
          total_blocks += grids.back();
        });
    // One partial sum per block of every list, then the coefficient; from the stream's pool, so
    // inside a capture the buffer is the graph's.
    Tensor scratch = Tensor::empty({static_cast<int64_t>(total_blocks) + 1}, kFloat64, grads[0].device());
    double* partials = ptr<double>(scratch);
    unsigned* counters = block_counters(device_, stream_);
    unsigned offset = 0;
    for (size_t i = 0; i < lists.size(); ++i) {
      launch_early("sum_squares_kernel", sum_squares_kernel<T>, grids[i], kThreads, 0, stream_, lists[i], partials,
                   offset, total_blocks, counters, ptr<T>(total_norm), max_norm);
      offset += grids[i];
    }
    for (const GradLists& l : lists) {
      launch_early("scale_kernel", scale_kernel<T>, std::min(l.block_start[l.count], most_blocks), kThreads, 0,
                   stream_, l, static_cast<const double*>(partials + total_blocks));
    }
  });
  return true;
}

}  // namespace minidl
