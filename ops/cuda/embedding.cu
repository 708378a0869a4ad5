// Embedding's backward without float atomics: the ids are radix-sorted with their positions (CUB's
// radix sort is stable, so the repeats of an id form a run in position order), each id's run is
// located, then a block per id and 32 columns (32 groups of 16 bytes where rows allow) sums its
// run's gradient rows in kEmbeddingGradLanes interleaved partial sums (ops/kernels.h), or, where the
// runs are a few rows long, a thread per id and column. Every run and the CPU kernel add the same
// numbers in the same order, so the bits repeat.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <bit>
#include <climits>
#include <vector>

#include "core/cuda/context.h"
#include "core/cuda/launch.cuh"
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

__global__ void positions_kernel(int64_t* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = i;
}

// Marks where each id's run lies in the sorted ids: run_start[id] .. run_end[id] (both zero for
// an id that does not occur). An id out of range (the forward reports those first) is skipped and
// reported as index_select's adjoint reports one.
__global__ void mark_runs_kernel(const int64_t* sorted, const int64_t* order, int64_t n, int64_t rows,
                                 int64_t* run_start, int64_t* run_end, DeviceErrorReport error) {
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < n; p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t id = sorted[p];
    const bool first = p == 0 || sorted[p - 1] != id, last = p == n - 1 || sorted[p + 1] != id;
    if (id < 0 || id >= rows) {
      if (first) report_device_error(error, kIndexAddIndex, order[p], id, rows);
      continue;
    }
    if (first) run_start[id] = p;
    if (last) run_end[id] = p + 1;
  }
}

// A run's summed gradient as the table's row gets it: divided by the run's length under
// scale_grad_by_freq, where an empty run (an absent id, padding_idx) keeps its zero.
template <class T, class Acc>
__device__ T run_gradient(Acc sum, int64_t count, bool scale_by_count) {
  return static_cast<T>(scale_by_count && count > 1 ? sum / static_cast<Acc>(count) : sum);
}

// Block (t, v) sums id v's run over the 32 columns of tile t: thread (column, lane) adds the run's
// rows lane, lane + kEmbeddingGradLanes, ... in order, and the lanes' sums are then added in lane
// order (absent ids and padding_idx get zero). A single thread per element summing a whole run in
// order took 249 us on an H100 for a GPT's 16384 ids over 113 characters: the common characters'
// runs (thousands of rows) are one long chain of dependent additions.
template <class T>
__global__ void sum_runs_kernel(const T* grad, const int64_t* order, const int64_t* run_start, const int64_t* run_end,
                                int64_t rows, int64_t width, int64_t padding_idx, bool scale_by_count,
                                T* grad_weight) {
  using Acc = compute_t<T>;  // as the CPU kernel: the same additions, the same bits
  __shared__ Acc partial[kEmbeddingGradLanes][32];
  const int64_t c = blockIdx.x * int64_t(32) + threadIdx.x;
  const int lane = static_cast<int>(threadIdx.y);
  for (int64_t id = blockIdx.y; id < rows; id += gridDim.y) {
    const int64_t begin = run_start[id], end = id == padding_idx ? begin : run_end[id];
    Acc sum = Acc(0);
    if (c < width) {
      // kBatch rows' loads in flight before their additions, which stay in order: the run of a
      // common character (thousands of rows) is a chain of loads, and this kernel ends the step's
      // backward in char_gpt (42 us on an H100 with the loads four at a time).
      constexpr int kBatch = 16;
      for (int64_t q = begin + lane; q < end; q += int64_t(kEmbeddingGradLanes) * kBatch) {
        Acc v[kBatch];
#pragma unroll
        for (int k = 0; k < kBatch; ++k) {
          const int64_t r = q + int64_t(k) * kEmbeddingGradLanes;
          v[k] = r < end ? static_cast<Acc>(grad[order[r] * width + c]) : Acc(0);
        }
#pragma unroll
        for (int k = 0; k < kBatch; ++k)
          if (q + int64_t(k) * kEmbeddingGradLanes < end) sum += v[k];
      }
    }
    partial[lane][threadIdx.x] = sum;
    __syncthreads();
    if (lane == 0 && c < width) {
      for (int j = 1; j < kEmbeddingGradLanes; ++j) sum += partial[j][threadIdx.x];
      grad_weight[id * width + c] = run_gradient<T>(sum, end - begin, scale_by_count);
    }
    __syncthreads();  // partial is reused by the next id
  }
}

// sum_runs_kernel with V columns a thread (16 bytes of a row a load): block (t, v) sums id v's run
// over the 32 * V columns of tile t, in the same additions and order, so in the same bits. A
// quarter of the blocks and of the load instructions for float32 rows.
template <class T, int V>
__global__ void __launch_bounds__(32 * kEmbeddingGradLanes)
    sum_runs_wide_kernel(const T* grad, const int64_t* order, const int64_t* run_start, const int64_t* run_end,
                         int64_t rows, int64_t width, int64_t padding_idx, bool scale_by_count, T* grad_weight) {
  using Acc = compute_t<T>;
  using Pack = VecPack<T, V>;
  __shared__ Acc partial[kEmbeddingGradLanes][32][V];
  const int64_t c = (blockIdx.x * int64_t(32) + threadIdx.x) * V;  // the thread's first column
  const int lane = static_cast<int>(threadIdx.y);
  for (int64_t id = blockIdx.y; id < rows; id += gridDim.y) {
    const int64_t begin = run_start[id], end = id == padding_idx ? begin : run_end[id];
    Acc sum[V] = {};
    if (c < width) {
      // kBatch rows in flight (64-96 bytes a thread, within 64 registers), and the next batch's row
      // numbers loaded beside them: a long run (a space's 2,600 rows) is one memory round trip a
      // batch rather than two.
      constexpr int kBatch = V >= 8 ? 4 : 6;
      constexpr int64_t kStride = kEmbeddingGradLanes;
      int64_t rows_at[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int64_t r = begin + lane + k * kStride;
        rows_at[k] = r < end ? order[r] : 0;
      }
      for (int64_t q = begin + lane; q < end; q += kStride * kBatch) {
        Pack v[kBatch];
#pragma unroll
        for (int k = 0; k < kBatch; ++k)
          if (q + k * kStride < end) v[k] = *reinterpret_cast<const Pack*>(grad + rows_at[k] * width + c);
#pragma unroll
        for (int k = 0; k < kBatch; ++k) {
          const int64_t r = q + (kBatch + k) * kStride;
          rows_at[k] = r < end ? order[r] : 0;
        }
#pragma unroll
        for (int k = 0; k < kBatch; ++k)
          if (q + k * kStride < end)
#pragma unroll
            for (int e = 0; e < V; ++e) sum[e] += static_cast<Acc>(v[k].v[e]);
      }
    }
#pragma unroll
    for (int e = 0; e < V; ++e) partial[lane][threadIdx.x][e] = sum[e];
    __syncthreads();
    // The block's first 32 * V threads each finish one column, adding its lanes in lane order.
    const int flat = lane * 32 + static_cast<int>(threadIdx.x);
    if (flat < 32 * V) {
      const int owner = flat / V, e = flat % V;
      const int64_t col = (blockIdx.x * int64_t(32) + owner) * V + e;
      if (col < width) {
        Acc total = partial[0][owner][e];
        for (int j = 1; j < kEmbeddingGradLanes; ++j) total += partial[j][owner][e];
        grad_weight[id * width + col] = run_gradient<T>(total, end - begin, scale_by_count);
      }
    }
    __syncthreads();  // partial is reused by the next id
  }
}

// sum_runs_kernel's sums for runs averaging a few rows (a context's positions: one row each), a
// thread per (id, column) forming the lane partial sums one after another and adding them in lane
// order: the same additions, so the same bits (lanes past the run's length hold zero and add
// nothing to a sum that began at +0). At a block of 1,024 threads per id and 32 columns, 256 runs
// of one row of 384 took 18 us on an H200.
template <class T>
__global__ void sum_short_runs_kernel(const T* grad, const int64_t* order, const int64_t* run_start,
                                      const int64_t* run_end, int64_t rows, int64_t width, int64_t padding_idx,
                                      bool scale_by_count, T* grad_weight) {
  using Acc = compute_t<T>;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < rows * width;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t id = e / width, c = e % width;
    const int64_t begin = run_start[id], end = id == padding_idx ? begin : run_end[id];
    const int64_t lanes = std::min<int64_t>(end - begin, kEmbeddingGradLanes);
    Acc sum = Acc(0);
    for (int64_t lane = 0; lane < lanes; ++lane) {
      Acc partial = Acc(0);
      for (int64_t q = begin + lane; q < end; q += kEmbeddingGradLanes)
        partial += static_cast<Acc>(grad[order[q] * width + c]);
      sum = lane == 0 ? partial : sum + partial;
    }
    grad_weight[e] = run_gradient<T>(sum, end - begin, scale_by_count);
  }
}

// Runs of at most this many rows on average take sum_short_runs_kernel.
constexpr int64_t kShortRunRows = 4;

// The ids' order and runs, as embedding_backward reads them: plan int64 [n + 2 rows] holding the
// positions in sorted-id order, then run_start, then run_end. Queued on `stream`; the temporaries
// it writes are added to `scratch`, which must outlive that work.
Tensor sort_into_runs(const Tensor& ids, int64_t rows, cudaStream_t stream, int device_index,
                      std::vector<Tensor>& scratch) {
  const int64_t n = ids.numel();
  const Device device = ids.device();
  MINIDL_CHECK(n <= INT32_MAX, "embedding_backward: at most ", INT32_MAX, " ids on CUDA (CUB's item count), got ", n);
  Tensor plan = Tensor::empty({n + 2 * rows}, kInt64, device);
  int64_t* order = ptr<int64_t>(plan);
  int64_t* run_start = order + n;
  int64_t* run_end = run_start + rows;
  CUDA_CHECK(cudaMemsetAsync(run_start, 0, static_cast<size_t>(2 * rows) * sizeof(int64_t), stream));
  if (n == 0) return plan;
  const int items = static_cast<int>(n);
  Tensor positions = Tensor::empty({n}, kInt64, device), sorted = Tensor::empty({n}, kInt64, device);
  positions_kernel<<<blocks_for(n), kThreads, 0, stream>>>(ptr<int64_t>(positions), n);
  CUDA_LAUNCH_CHECK(positions_kernel);
  // Only the bits a valid id can have are sorted: one pass of CUB's radix sort for up to 256 rows
  // (a character vocabulary, a context's positions) where all 64 bits took eight (46 us of a GPT's
  // step on an H200). An id out of range may then land inside a valid id's run, but the forward and
  // mark_runs_kernel report it, so the op fails rather than return that gradient.
  const int end_bit = std::max(1, static_cast<int>(std::bit_width(static_cast<uint64_t>(rows - 1))));
  size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, ptr<const int64_t>(ids), ptr<int64_t>(sorted),
                                             ptr<const int64_t>(positions), order, items, 0, end_bit, stream));
  Tensor temp = Tensor::empty({static_cast<int64_t>((temp_bytes + 7) / 8)}, kInt64, device);
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.raw_data(), temp_bytes, ptr<const int64_t>(ids),
                                             ptr<int64_t>(sorted), ptr<const int64_t>(positions), order, items, 0,
                                             end_bit, stream));
  mark_runs_kernel<<<blocks_for(n), kThreads, 0, stream>>>(ptr<const int64_t>(sorted), order, n, rows, run_start,
                                                           run_end, device_error_report(device_index));
  CUDA_LAUNCH_CHECK(mark_runs_kernel);
  scratch.insert(scratch.end(), {positions, sorted, temp});
  return plan;
}

// out row r = a[ids_a[r]] + b[ids_b[r % period]], V elements a thread (16 bytes where the width and
// the pointers allow), the sum in the compute type and rounded once: the bits of the two lookups
// and their addition, without the lookups' [rows, width] tensors written and read again (a GPT's
// token and position embeddings: 26 us of its step's first stretch on an H200 as a gather and a
// broadcast addition). An id out of range gives a zero row and is reported as index_select's.
template <class T, int V>
__global__ void embedding_add_kernel(const T* a, const int64_t* ids_a, int64_t rows_a, const T* b,
                                     const int64_t* ids_b, int64_t rows_b, int64_t period, T* out,
                                     int64_t packs_per_row, int64_t total_packs, DeviceErrorReport error) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  using C = compute_t<T>;
  using Pack = VecPack<T, V>;
  for (int64_t u = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; u < total_packs;
       u += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = u / packs_per_row, c = u - r * packs_per_row;
    const int64_t ia = ids_a[r], ib = ids_b[r % period];
    const bool ok_a = ia >= 0 && ia < rows_a, ok_b = ib >= 0 && ib < rows_b;
    Pack sum{};
    if (ok_a && ok_b) {
      const Pack pa = reinterpret_cast<const Pack*>(a)[ia * packs_per_row + c];
      const Pack pb = reinterpret_cast<const Pack*>(b)[ib * packs_per_row + c];
#pragma unroll
      for (int e = 0; e < V; ++e) sum.v[e] = static_cast<T>(static_cast<C>(pa.v[e]) + static_cast<C>(pb.v[e]));
    } else if (c == 0) {
      if (!ok_a) report_device_error(error, kIndexSelectIndex, r, ia, rows_a);
      else report_device_error(error, kIndexSelectIndex, r % period, ib, rows_b);
    }
    reinterpret_cast<Pack*>(out)[u] = sum;
  }
}

}  // namespace

bool CudaKernels::embedding_add(const Tensor& a, const Tensor& ids_a, const Tensor& b, const Tensor& ids_b,
                                Tensor& out) {
  const int64_t n = ids_a.numel(), period = ids_b.numel(), width = a.size(1);
  if (n == 0 || width == 0) return true;
  cuda::DeviceGuard guard(device_);
  bool done = false;
  dispatch_floating_and_half(a.dtype(), "embedding_add", [&](auto tag) {
    using T = decltype(tag);
    auto launch = [&](auto v) {
      constexpr int V = decltype(v)::value;
      const int64_t packs_per_row = width / V, total = n * packs_per_row;
      launch_early("embedding_add_kernel", embedding_add_kernel<T, V>, blocks_for(total), kThreads, 0, stream_,
                   ptr<const T>(a), ptr<const int64_t>(ids_a), a.size(0), ptr<const T>(b), ptr<const int64_t>(ids_b),
                   b.size(0), period, ptr<T>(out), packs_per_row, total, cuda::device_error_report(device_));
      done = true;
    };
    constexpr int kWide = 16 / static_cast<int>(sizeof(T));
    if (width % kWide == 0 && aligned_to(16, {a.raw_data(), b.raw_data(), out.raw_data()}))
      launch(std::integral_constant<int, kWide>{});
    else
      launch(std::integral_constant<int, 1>{});
  });
  return done;
}

Tensor CudaKernels::embedding_backward_plan(const Tensor& ids, int64_t rows) {
  if (rows == 0) return Tensor();
  cuda::DeviceGuard guard(device_);
  // On the side stream, after what the compute stream has queued (the ids); it joins when the
  // backward reads the plan (or sooner: core/cuda/side_stream.cpp), and keeps its temporaries and
  // the ids alive until then.
  const cudaStream_t side = cuda::fork_side_stream(device_, stream_);
  std::vector<Tensor> reads{ids};
  Tensor plan = sort_into_runs(ids, rows, side, device_, reads);
  cuda::join_side_stream_later(device_, std::move(reads), {plan.impl().storage->data()});
  return plan;
}

void CudaKernels::embedding_backward(const Tensor& grad, const Tensor& ids, const Tensor& given_plan,
                                     int64_t padding_idx, bool scale_grad_by_freq, Tensor& grad_weight) {
  const int64_t n = ids.numel(), rows = grad_weight.size(0), width = grad_weight.size(1);
  if (grad_weight.numel() == 0) return;
  cuda::DeviceGuard guard(device_);
  MINIDL_CHECK(!given_plan.defined() || given_plan.numel() == n + 2 * rows, "embedding_backward: expected a plan of ",
               n + 2 * rows, " entries for ", n, " ids and ", rows, " rows, got ", given_plan.numel());
  std::vector<Tensor> scratch;  // freed after the sums are queued, on this stream
  Tensor plan = given_plan;
  if (!plan.defined()) plan = sort_into_runs(ids, rows, stream_, device_, scratch);
  else if (cuda::side_stream_writes(device_, plan.impl().storage->data())) cuda::join_side_stream(device_);
  const int64_t* order = ptr<const int64_t>(plan);
  const int64_t* run_start = order + n;
  const int64_t* run_end = run_start + rows;
  dispatch_floating_and_half(grad.dtype(), "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    if (n <= kShortRunRows * rows) {
      sum_short_runs_kernel<T><<<blocks_for(rows * width), kThreads, 0, stream_>>>(
          ptr<const T>(grad), order, run_start, run_end, rows, width, padding_idx, scale_grad_by_freq,
          ptr<T>(grad_weight));
      CUDA_LAUNCH_CHECK(sum_short_runs_kernel);
      return;
    }
    constexpr int V = 16 / static_cast<int>(sizeof(T));
    if (width % V == 0 && aligned_to(16, {grad.raw_data()})) {
      const dim3 grid(static_cast<unsigned>((width / V + 31) / 32),
                      static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
      sum_runs_wide_kernel<T, V><<<grid, dim3(32, kEmbeddingGradLanes), 0, stream_>>>(
          ptr<const T>(grad), order, run_start, run_end, rows, width, padding_idx, scale_grad_by_freq,
          ptr<T>(grad_weight));
      CUDA_LAUNCH_CHECK(sum_runs_wide_kernel);
      return;
    }
    const dim3 grid(static_cast<unsigned>((width + 31) / 32), static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
    sum_runs_kernel<T><<<grid, dim3(32, kEmbeddingGradLanes), 0, stream_>>>(
        ptr<const T>(grad), order, run_start, run_end, rows, width, padding_idx, scale_grad_by_freq,
        ptr<T>(grad_weight));
    CUDA_LAUNCH_CHECK(sum_runs_kernel);
  });
}

}  // namespace minidl
