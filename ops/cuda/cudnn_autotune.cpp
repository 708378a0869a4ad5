// ConvBackend::Auto (ops/backend_setting.h): the first time a convolution shape comes, time cuDNN
// with the fastest of its algorithms against our im2col path, forward and backward in one harness,
// and keep the faster; one log line per shape names the pick and both times. cuDNN's algorithms come
// from its Find queries, which time every one (as cudnn.benchmark), here five times over with each
// algorithm ranked by its median, and the forward's leading few timed again as a step runs them.
// The backward is timed as the op will run it: without the input's gradient at a network's first
// layer, whose input needs none. Timed with it, the two paths came within a few microseconds at the
// MNIST CNN's first layer (about 0.065 ms at batch 64 on an H200), so the pick flipped from run to
// run, and the graphed step ran about 5% slower in the runs that took cuDNN there. A smaller batch
// of a measured shape reuses its choice.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda.h"
#include "core/deterministic.h"
#include "ops/backend_setting.h"
#include "ops/cuda/algorithm_ranking.h"
#include "ops/cuda/cublaslt.h"
#include "ops/cuda/cudnn_plan.h"
#include "ops/cuda/timing.h"

namespace minidl {

using namespace cudnn;

namespace {

// Adds a Find query's results that the plan takes (usable in ops/cuda/cudnn_plan.h): plain float math,
// tensor-op math where the plan allows it (16 bits, or float32 under TF32), no float32 algorithm for
// 16-bit data.
template <class Perf, int kCount>
void add_usable(cuda::AlgorithmRanking<Perf, kCount>& ranking, const Perf* perf, int count, const ConvPlan& p) {
  for (int i = 0; i < count; ++i)
    if (usable(perf, count, i, p)) ranking.add(perf[i]);
}

// The search's buffer `t` (of any shape: the float32 search's are flat) read as `shape` in the
// layout the plan's descriptors give cuDNN: our kernels read the tensor's own layout.
Tensor as_planned(const ConvPlan& p, const Tensor& t, Shape shape) {
  const MemoryFormat format = p.channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  return Tensor::make_view(t, shape, format_strides(shape, format), 0);
}

// Scratch memory straight from cudaMalloc, freed at once: measurement scaffolding, not memory of the
// model (the caching allocator would count it in the peak of whatever step first meets a new shape).
struct Scratch {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit Scratch(size_t n) : bytes(n) {
    if (n) CUDA_CHECK(cudaMalloc(&ptr, n));
  }
  ~Scratch() { cudaFree(ptr); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

// The most workspace any algorithm of the three passes asks for, up to 1 GiB (an algorithm that
// needs more is left out of the search).
size_t search_workspace(cudnnHandle_t handle, const ConvPlan& p) {
  size_t most = 0, bytes = 0;
  for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a)
    if (cudnnGetConvolutionForwardWorkspaceSize(handle, p.x.d, p.w, p.conv, p.y.d, cudnnConvolutionFwdAlgo_t(a),
                                                &bytes) == CUDNN_STATUS_SUCCESS)
      most = std::max(most, bytes);
  for (int a = 0; a < CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT; ++a)
    if (cudnnGetConvolutionBackwardDataWorkspaceSize(handle, p.w, p.y.d, p.conv, p.x.d,
                                                     cudnnConvolutionBwdDataAlgo_t(a), &bytes) == CUDNN_STATUS_SUCCESS)
      most = std::max(most, bytes);
  for (int a = 0; a < CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT; ++a)
    if (cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, p.x.d, p.y.d, p.conv, p.w,
                                                       cudnnConvolutionBwdFilterAlgo_t(a), &bytes) == CUDNN_STATUS_SUCCESS)
      most = std::max(most, bytes);
  return std::min(most, size_t{1} << 30);
}

// 128 MB to overwrite between timed runs, past any L2.
struct L2Flush : Scratch {
  L2Flush() : Scratch(size_t{128} << 20) {}
};

// The median time in ms of `reps` runs of each of `paths` on `stream`, after one uncounted run
// each. The paths run in turns, one run of each a round, so that a slow spell of the GPU falls on
// all alike rather than on one path's runs. Before each run `flush` is overwritten: a step's tensors
// are not in L2 when a convolution reads them, and the MNIST CNN's at batch 64 would fit in the
// H100's 50 MB. Then the stream is held while the run is queued (cuda::StreamHold), so that the
// events time the GPU, not the host's calls: cuDNN's take longer to queue than our kernels. With the
// host in the loop, cuDNN's path at the MNIST CNN's second convolution (batch 64, H200) timed
// 0.17-0.70 ms from process to process, and in one of 14 lost to im2col's 0.30, which made the
// graphed step a third slower. Behind a busy wait of 0.5 ms it timed 0.157-0.164 ms in 14 of 14 on
// an H200, but 1.44 ms in one process of three on an H100, whose host took longer than that to
// queue it (docs/benchmarks.md).
std::vector<float> medians_ms(cudaStream_t stream, const L2Flush& flush, int reps,
                              const std::vector<std::function<void()>>& paths) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  for (const auto& work : paths) work();
  std::vector<std::vector<float>> times(paths.size());
  for (int i = 0; i < reps; ++i) {
    for (size_t j = 0; j < paths.size(); ++j) {
      CUDA_CHECK(cudaMemsetAsync(flush.ptr, i & 1, flush.bytes, stream));
      {
        cuda::StreamHold hold(stream);
        CUDA_CHECK(cudaEventRecord(start, stream));
        paths[j]();
        CUDA_CHECK(cudaEventRecord(stop, stream));
      }
      CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      times[j].push_back(ms);
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::vector<float> medians;
  for (auto& t : times) medians.push_back(cuda::median(std::move(t)));
  return medians;
}

// Find times one forward call at a time, with the host in the loop, so an algorithm of several
// kernels (FFT, Winograd) pays for each launch, which a graphed step hides. The candidates within
// 1.5x of Find's fastest are therefore timed again as a step runs them: four calls back to back on
// the compute stream, in turns (a burst of each, then the next round), so that a slow spell of the
// GPU falls on all alike; the lowest median burst wins. At the MNIST CNN's second convolution (batch
// 64, H200), Find's medians were 69-84 us for FFT, FFT tiling and non-fused Winograd and 88-89 us
// for the implicit GEMM; back to back, 44-49 us and 72 us (docs/benchmarks.md). A burst is queued
// while the stream is held: behind a busy wait of 0.1 ms instead, the non-fused Winograd timed
// 42-45 us in some processes and 69-84 us in others.
const cudnnConvolutionFwdAlgoPerf_t* retime_forward(cudnnHandle_t handle, const ConvPlan& p, const Tensor& x,
                                                     const Tensor& w, Tensor& y, const Scratch& ws,
                                                     const std::vector<const cudnnConvolutionFwdAlgoPerf_t*>& candidates) {
  if (candidates.size() < 2) return candidates.empty() ? nullptr : candidates.front();
  cudaStream_t stream = nullptr;
  CUDNN_CHECK(cudnnGetStream(handle, &stream));
  constexpr int kRounds = 9;
  const float one = 1, zero = 0;
  std::vector<std::vector<float>> bursts(candidates.size());
  for (int round = 0; round < kRounds; ++round) {
    for (size_t i = 0; i < candidates.size(); ++i) {
      bursts[i].push_back(cuda::time_per_call_us(
          stream,
          [&] {
            CUDNN_CHECK(cudnnConvolutionForward(handle, &one, p.x.d, x.raw_data(), p.w, w.raw_data(), p.conv,
                                                candidates[i]->algo, ws.ptr, ws.bytes, &zero, p.y.d, y.raw_data()));
          },
          4, 1));
    }
  }
  std::vector<float> median(candidates.size());
  size_t best = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    median[i] = cuda::median(bursts[i]);
    if (median[i] < median[best]) best = i;
  }
  if (cuda::gemm_tuning_verbose())
    for (size_t i = 0; i < candidates.size(); ++i)
      std::fprintf(stderr, "minidl:   forward algorithm %d: Find median %.1f us, back to back %.1f us%s\n",
                   static_cast<int>(candidates[i]->algo), 1000 * candidates[i]->time, median[i],
                   i == best ? " (taken)" : "");
  return candidates[best];
}

// The median of kRounds bursts of each of `runs` on `stream`, timed as retime_forward times the
// forward: four calls back to back, in turns.
std::vector<float> burst_medians(cudaStream_t stream, const std::vector<std::function<void()>>& runs) {
  constexpr int kRounds = 9;
  std::vector<std::vector<float>> bursts(runs.size());
  for (int round = 0; round < kRounds; ++round)
    for (size_t i = 0; i < runs.size(); ++i) bursts[i].push_back(cuda::time_per_call_us(stream, runs[i], 4, 1));
  std::vector<float> median(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) median[i] = cuda::median(bursts[i]);
  return median;
}

// Runs 0 and 1 are each mode's own algorithm, run 2 + c candidate c, which takes workspace[c]
// bytes. For each mode, the candidate that replaces its algorithm: the fastest within the mode's
// workspace limit (and `most` bytes), and only where it is clearly faster: within 2% the mode's own
// call stays (the same kernel often runs either way). -1 where none does.
std::array<int, 2> replacements(const std::vector<float>& median, const std::vector<size_t>& workspace, size_t most) {
  std::array<int, 2> chosen{-1, -1};
  for (const ConvMode m : {kOpByOp, kInGraph}) {
    size_t best = m;
    for (size_t c = 0; c < workspace.size(); ++c)
      if (workspace[c] <= std::min(conv_workspace_limit(m == kInGraph), most) &&
          median[2 + c] < (best == m ? 0.98f : 1.f) * median[best])
        best = 2 + c;
    if (best >= 2) chosen[m] = static_cast<int>(best - 2);
  }
  return chosen;
}

// Channels-last data on tensor cores (16-bit, or float32 under TF32): the weight gradient's graph-API
// engines (ops/cuda/cudnn_engine.h), and for float32 our TF32 kernel
// (ops/cuda/conv2d_weight_grad_tf32.cu), timed as retime_forward times the forward, against the
// legacy algorithm each mode took; the fastest within the mode's workspace limit replaces it there
// where it is more than 2% faster.
void choose_weight_engine(cudnnHandle_t handle, ConvPlan& p, const ConvGeometry& g, const Tensor& x, const Tensor& dy,
                          Tensor& dw, const Scratch& legacy_ws, ConvAlgorithms (&chosen)[2]) {
  constexpr int kMostEngines = 8;
  // Up to 1 GiB, as search_workspace: each mode's own limit is applied to the timed engines below.
  const size_t limit = std::min(std::max(conv_workspace_limit(false), conv_workspace_limit(true)), size_t{1} << 30);
  std::vector<std::unique_ptr<WeightGradEngine>> engines =
      WeightGradEngine::candidates(handle, x.dtype(), x.size(0), dy.size(1), g, limit, kMostEngines);
  cudaStream_t stream = nullptr;
  CUDNN_CHECK(cudnnGetStream(handle, &stream));
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CudaKernels kernels(device, stream);
  const bool own = CudaKernels::conv2d_weight_grad_tf32_applies(x.dtype(), x.size(0), dy.size(1), g);
  const size_t own_ws = own ? kernels.conv2d_weight_grad_tf32_workspace(x.size(0), dy.size(1), g) : 0;
  if (engines.empty() && !own) return;
  // The engines' own workspace: the legacy search's is sized for the legacy algorithms.
  size_t most = own_ws;
  for (const auto& e : engines) most = std::max(most, e->workspace());
  const Scratch engine_ws(most);
  const float one = 1, zero = 0;
  // Runs 0 and 1: each mode's legacy algorithm; then the engines, then our kernel.
  std::vector<std::function<void()>> runs;
  std::vector<size_t> workspace;  // of each candidate after the legacy runs
  for (const ConvMode m : {kOpByOp, kInGraph}) {
    const ConvAlgorithms& a = chosen[m];
    runs.push_back([&, a] {
      CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle, &one, p.x.d, x.raw_data(), p.y.d, dy.raw_data(), p.conv,
                                                 a.bwd_filter, legacy_ws.ptr, a.bwd_filter_ws, &zero, p.w, dw.raw_data()));
    });
  }
  for (const auto& e : engines) {
    runs.push_back([&, engine = e.get()] { engine->run(handle, x.raw_data(), dy.raw_data(), dw.raw_data(), engine_ws.ptr); });
    workspace.push_back(e->workspace());
  }
  if (own) {
    const int64_t n = x.size(0), k = dy.size(1);
    runs.push_back([&, xl = as_planned(p, x, {n, g.channels, g.height, g.width}),
                    dyl = as_planned(p, dy, {n, k, g.out_h, g.out_w}),
                    dwl = as_planned(p, dw, {k, g.channels, g.kernel_h, g.kernel_w})]() mutable {
      kernels.conv2d_weight_grad_tf32(xl, dyl, g, dwl, engine_ws.ptr);
    });
    workspace.push_back(own_ws);
  }
  const std::vector<float> median = burst_medians(stream, runs);
  std::vector<bool> taken(workspace.size(), false);
  const std::array<int, 2> replacing = replacements(median, workspace, SIZE_MAX);
  for (const ConvMode m : {kOpByOp, kInGraph}) {
    const int c = replacing[m];
    if (c < 0) continue;
    taken[c] = true;
    if (static_cast<size_t>(c) < engines.size()) chosen[m].bwd_filter_engine = engines[c].get();
    else chosen[m].bwd_filter_tf32_kernel = true;
  }
  if (cuda::gemm_tuning_verbose()) {
    std::fprintf(stderr, "minidl:   weight gradient, back to back: legacy algorithm %d %.1f us",
                 static_cast<int>(chosen[kOpByOp].bwd_filter), median[0]);
    for (size_t c = 0; c < workspace.size(); ++c) {
      if (c < engines.size())
        std::fprintf(stderr, ", engine %lld", static_cast<long long>(engines[c]->engine()));
      else
        std::fprintf(stderr, ", minidl's TF32 kernel");
      std::fprintf(stderr, " %.1f us (%.0f MB)%s", median[2 + c], static_cast<double>(workspace[c]) / (1 << 20),
                   taken[c] ? " (taken)" : "");
    }
    std::fprintf(stderr, "\n");
  }
  for (size_t e = 0; e < engines.size(); ++e)
    if (taken[e]) p.engines.push_back(std::move(engines[e]));
}

// At stride 1 the input gradient is also the forward convolution of the output gradient with the
// flipped filter (ConvPlan::flipped), and cuDNN's forward kernels may be the faster: at the MNIST
// CNN's second convolution in TF32 on an H200, its input-gradient kernel took about 32 us at batch 64
// where its forward of the same size took 16 (docs/benchmarks.md); in strict float32 its FFT input
// gradient races its Winograd and FFT forwards. Every dtype but float64 (whose plans serve tests, not
// speed): the forward's algorithms are found, then the filter's flip and the leading ones are timed
// as retime_forward times the forward, against each mode's input-gradient algorithm; the fastest
// within the mode's workspace limit replaces it where it is more than 2% faster.
void choose_data_path(cudnnHandle_t handle, ConvPlan& p, const ConvGeometry& g, const Tensor& w, const Tensor& dy,
                      Tensor& dx, const Scratch& ws, ConvAlgorithms (&chosen)[2]) {
  const int64_t n = dy.size(0), k = dy.size(1);
  if (!make_flipped(p, w.dtype(), n, k)) return;
  const FlippedConv& f = *p.flipped;
  const MemoryFormat format = p.channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  const Tensor wl = as_planned(p, w, {k, g.channels, g.kernel_h, g.kernel_w});
  Tensor flipped = Tensor::empty({g.channels, k, g.kernel_h, g.kernel_w}, w.dtype(), w.device(), format);
  cudaStream_t stream = nullptr;
  CUDNN_CHECK(cudnnGetStream(handle, &stream));
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CudaKernels kernels(device, stream);
  kernels.conv2d_flip_filter(wl, flipped);
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  cuda::AlgorithmRanking<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> ranking;
  constexpr int kFindRounds = 4;  // the first not counted, as in find_fastest
  for (int round = 0; round < kFindRounds; ++round) {
    int found = 0;
    CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(handle, f.x.d, dy.raw_data(), f.w, flipped.raw_data(), f.conv,
                                                       f.y.d, dx.raw_data(), CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found,
                                                       perf, ws.ptr, ws.bytes));
    if (round > 0) add_usable(ranking, perf, found, p);
  }
  std::vector<const cudnnConvolutionFwdAlgoPerf_t*> candidates =
      ranking.near_fastest(std::max(conv_workspace_limit(false), conv_workspace_limit(true)), 1.5f);
  if (candidates.empty()) return;
  const float one = 1, zero = 0;
  // Runs 0 and 1: each mode's input-gradient algorithm; then the flip and each forward candidate.
  std::vector<std::function<void()>> runs;
  for (const ConvMode m : {kOpByOp, kInGraph}) {
    const ConvAlgorithms& a = chosen[m];
    runs.push_back([&, a] {
      CUDNN_CHECK(cudnnConvolutionBackwardData(handle, &one, p.w, w.raw_data(), p.y.d, dy.raw_data(), p.conv,
                                               a.bwd_data, ws.ptr, a.bwd_data_ws, &zero, p.x.d, dx.raw_data()));
    });
  }
  std::vector<size_t> workspace;
  for (const auto* c : candidates) {
    size_t bytes = 0;
    CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle, f.x.d, f.w, f.conv, f.y.d, c->algo, &bytes));
    workspace.push_back(bytes);
    runs.push_back([&, algo = c->algo, bytes] {
      kernels.conv2d_flip_filter(wl, flipped);
      CUDNN_CHECK(cudnnConvolutionForward(handle, &one, f.x.d, dy.raw_data(), f.w, flipped.raw_data(), f.conv, algo,
                                          ws.ptr, bytes, &zero, f.y.d, dx.raw_data()));
    });
  }
  const std::vector<float> median = burst_medians(stream, runs);
  std::vector<bool> taken(candidates.size(), false);
  const std::array<int, 2> replacing = replacements(median, workspace, ws.bytes);
  for (const ConvMode m : {kOpByOp, kInGraph}) {
    const int c = replacing[m];
    if (c < 0) continue;
    taken[c] = true;
    chosen[m].bwd_data_by_forward = true;
    chosen[m].bwd_data_fwd = candidates[c]->algo;
    chosen[m].bwd_data_ws = workspace[c];
  }
  if (cuda::gemm_tuning_verbose()) {
    std::fprintf(stderr, "minidl:   input gradient, back to back: algorithm %d %.1f us",
                 static_cast<int>(chosen[kOpByOp].bwd_data), median[0]);
    for (size_t c = 0; c < candidates.size(); ++c)
      std::fprintf(stderr, ", flipped filter's forward algorithm %d %.1f us (%.0f MB)%s",
                   static_cast<int>(candidates[c]->algo), median[2 + c],
                   static_cast<double>(workspace[c]) / (1 << 20), taken[c] ? " (taken)" : "");
    std::fprintf(stderr, "\n");
  }
}

// Strict float32 NCHW, 3 x 3 at stride 1: our Winograd kernels (CudaKernels::conv2d_winograd and
// conv2d_winograd_weight_grad), whose transforms stay in shared memory, against each mode's three
// passes as chosen so far (cuDNN's FFT and Winograd algorithms run their transforms as passes through
// memory). Timed as retime_forward times the forward; ours replaces a mode's pick where it is more
// than 2% faster.
void choose_winograd(cudnnHandle_t handle, ConvPlan& p, const ConvGeometry& g, const Tensor& x, const Tensor& w,
                     Tensor& y, Tensor& dx, Tensor& dw, const Scratch& ws, ConvAlgorithms (&chosen)[2]) {
  const int64_t n = x.size(0), k = y.size(1);
  if (p.tensor_ops || p.channels_last || !CudaKernels::conv2d_winograd_applies(x.dtype(), n, k, g)) return;
  cudaStream_t stream = nullptr;
  CUDNN_CHECK(cudnnGetStream(handle, &stream));
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CudaKernels kernels(device, stream);
  const Tensor xs = as_planned(p, x, {n, g.channels, g.height, g.width});
  const Tensor wl = as_planned(p, w, {k, g.channels, g.kernel_h, g.kernel_w});
  Tensor ys = as_planned(p, y, {n, k, g.out_h, g.out_w});
  Tensor dxs = as_planned(p, dx, {n, g.channels, g.height, g.width});
  Tensor dwl = as_planned(p, dw, {k, g.channels, g.kernel_h, g.kernel_w});
  const Scratch weight_ws(kernels.conv2d_winograd_weight_grad_workspace(n, k, g));
  const float one = 1, zero = 0;
  Tensor flipped;
  // Runs 0 and 1: each mode's pick; run 2: ours.
  std::vector<std::function<void()>> forward, data, weight;
  for (const ConvMode m : {kOpByOp, kInGraph}) {
    const ConvAlgorithms a = chosen[m];
    forward.push_back([&, a] {
      CUDNN_CHECK(cudnnConvolutionForward(handle, &one, p.x.d, x.raw_data(), p.w, w.raw_data(), p.conv, a.fwd, ws.ptr,
                                          a.fwd_ws, &zero, p.y.d, y.raw_data()));
    });
    data.push_back([&, a] {
      if (a.bwd_data_by_forward) {
        if (!flipped.defined())
          flipped = Tensor::empty({g.channels, k, g.kernel_h, g.kernel_w}, w.dtype(), w.device());
        kernels.conv2d_flip_filter(wl, flipped);
        CUDNN_CHECK(cudnnConvolutionForward(handle, &one, p.flipped->x.d, y.raw_data(), p.flipped->w,
                                            flipped.raw_data(), p.flipped->conv, a.bwd_data_fwd, ws.ptr,
                                            a.bwd_data_ws, &zero, p.flipped->y.d, dx.raw_data()));
      } else {
        CUDNN_CHECK(cudnnConvolutionBackwardData(handle, &one, p.w, w.raw_data(), p.y.d, y.raw_data(), p.conv,
                                                 a.bwd_data, ws.ptr, a.bwd_data_ws, &zero, p.x.d, dx.raw_data()));
      }
    });
    weight.push_back([&, a] {
      CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle, &one, p.x.d, x.raw_data(), p.y.d, y.raw_data(), p.conv,
                                                 a.bwd_filter, ws.ptr, a.bwd_filter_ws, &zero, p.w, dw.raw_data()));
    });
  }
  forward.push_back([&] { kernels.conv2d_winograd(xs, wl, nullptr, g.pad_h, g.pad_w, false, ys); });
  data.push_back([&] { kernels.conv2d_winograd(ys, wl, nullptr, 2 - g.pad_h, 2 - g.pad_w, true, dxs); });
  weight.push_back([&] { kernels.conv2d_winograd_weight_grad(xs, ys, g, dwl, weight_ws.ptr); });
  const std::vector<float> fwd_median = burst_medians(stream, forward), data_median = burst_medians(stream, data),
                           weight_median = burst_medians(stream, weight);
  // The weight gradient's workspace is not cuDNN's: the mode's limit is applied to it alone.
  const std::array<int, 2> fwd_by = replacements(fwd_median, {0}, SIZE_MAX),
                            data_by = replacements(data_median, {0}, SIZE_MAX),
                            weight_by = replacements(weight_median, {weight_ws.bytes}, SIZE_MAX);
  for (const ConvMode m : {kOpByOp, kInGraph}) {
    if (fwd_by[m] == 0) chosen[m].fwd_by_winograd = true, chosen[m].fwd_ws = 0;
    if (data_by[m] == 0) chosen[m].bwd_data_by_winograd = true, chosen[m].bwd_data_ws = 0;
    // The weight gradient's workspace is the kernel's own (reported in the log line; run_backward
    // asks the kernel again, for the blocks it takes beside the input gradient).
    if (weight_by[m] == 0) chosen[m].bwd_filter_by_winograd = true, chosen[m].bwd_filter_ws = weight_ws.bytes;
  }
  if (cuda::gemm_tuning_verbose()) {
    const auto line = [&](const char* pass, const std::vector<float>& median, bool taken) {
      std::fprintf(stderr, "minidl:   %s, back to back: %.1f us, minidl's Winograd %.1f us%s\n", pass, median[0],
                   median[2], taken ? " (taken)" : "");
    };
    line("forward", fwd_median, chosen[kOpByOp].fwd_by_winograd);
    line("input gradient", data_median, chosen[kOpByOp].bwd_data_by_winograd);
    line("weight gradient", weight_median, chosen[kOpByOp].bwd_filter_by_winograd);
  }
}

// Times every algorithm of the three passes and keeps the fastest of each within the workspace
// limit of each mode (op by op, in a graph); false when a pass has none. The Ex queries run on our
// buffers, written before: the plain ones allocate their own and read them unwritten, which
// compute-sanitizer's initcheck reports.
bool find_fastest(cudnnHandle_t handle, ConvPlan& p, const ConvGeometry& g, const Tensor& x, const Tensor& w, Tensor& y,
                  Tensor& gx, Tensor& gw) {
  cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  cudnnConvolutionBwdDataAlgoPerf_t bwd_data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  cudnnConvolutionBwdFilterAlgoPerf_t bwd_filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  cuda::AlgorithmRanking<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> fwd_rank;
  cuda::AlgorithmRanking<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> bwd_data_rank;
  cuda::AlgorithmRanking<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> bwd_filter_rank;
  int nf = 0, nd = 0, nw = 0;
  const Scratch ws(search_workspace(handle, p));
  // y is the forward's output, then the backward passes' incoming gradient: written either way.
  // The first round is not counted: its times include one-time costs (CUDA loads a kernel's module
  // on its first launch).
  constexpr int kRounds = 6;
  for (int round = 0; round < kRounds; ++round) {
    CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(handle, p.x.d, x.raw_data(), p.w, w.raw_data(), p.conv, p.y.d,
                                                       y.raw_data(), CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &nf, fwd, ws.ptr,
                                                       ws.bytes));
    CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(handle, p.w, w.raw_data(), p.y.d, y.raw_data(), p.conv,
                                                            p.x.d, gx.raw_data(), CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                            &nd, bwd_data, ws.ptr, ws.bytes));
    CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        handle, p.x.d, x.raw_data(), p.y.d, y.raw_data(), p.conv, p.w, gw.raw_data(),
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &nw, bwd_filter, ws.ptr, ws.bytes));
    if (round == 0) continue;
    add_usable(fwd_rank, fwd, nf, p);
    add_usable(bwd_data_rank, bwd_data, nd, p);
    add_usable(bwd_filter_rank, bwd_filter, nw, p);
  }
  if (cuda::gemm_tuning_verbose()) {
    const auto list = [](const char* pass, const auto& ranking) {
      std::fprintf(stderr, "minidl:   %s medians:", pass);
      for (const auto* r : ranking.near_fastest(SIZE_MAX, 1e9f))
        std::fprintf(stderr, " algorithm %d %.1f us (%.0f MB)", static_cast<int>(r->algo), 1000 * r->time,
                     static_cast<double>(r->memory) / (1 << 20));
      std::fprintf(stderr, "\n");
    };
    list("forward", fwd_rank);
    list("input gradient", bwd_data_rank);
    list("weight gradient", bwd_filter_rank);
  }
  ConvAlgorithms chosen[2];
  const cudnnConvolutionFwdAlgoPerf_t* forward[2] = {nullptr, nullptr};
  std::vector<const cudnnConvolutionFwdAlgoPerf_t*> candidates[2];
  for (const ConvMode m : {kOpByOp, kInGraph}) {
    const size_t limit = conv_workspace_limit(m == kInGraph);
    candidates[m] = fwd_rank.near_fastest(limit, 1.5f);
    forward[m] = m == kInGraph && candidates[m] == candidates[kOpByOp]
                     ? forward[kOpByOp]
                     : retime_forward(handle, p, x, w, y, ws, candidates[m]);
    if (!use_algorithms(handle, p, forward[m], bwd_data_rank.fastest(limit), bwd_filter_rank.fastest(limit), chosen[m]))
      return false;
  }
  if (w.dtype() != kFloat64) choose_data_path(handle, p, g, w, y, gx, ws, chosen);
  choose_winograd(handle, p, g, x, w, y, gx, gw, ws, chosen);
  if (p.tensor_ops && p.channels_last) choose_weight_engine(handle, p, g, x, y, gw, ws, chosen);
  for (const ConvMode m : {kOpByOp, kInGraph}) p.mode[m].algorithms = chosen[m];
  return true;
}

// A smaller batch of a geometry measured before (an epoch's last, partial batch) takes that batch's
// verdicts and algorithms: measuring again would cost more than the steps it serves. False, leaving
// `p` unmeasured, when there is none or cuDNN refuses its algorithms at this batch.
bool adopt_larger_batch(cudnnHandle_t handle, ConvPlan& p, int device, DType dtype, int64_t batch,
                        int64_t out_channels, const ConvGeometry& g, bool input_grad) {
  const ConvPlan* big = measured_with_larger_batch(device, dtype, batch, out_channels, g, input_grad);
  if (!big) return false;
  ConvAlgorithms chosen[2];
  for (const ConvMode m : {kOpByOp, kInGraph}) {
    chosen[m] = big->mode[m].faster[input_grad] == 1 ? big->mode[m].algorithms : p.mode[m].algorithms;
    chosen[m].bwd_filter_engine = nullptr;  // a graph-API plan is made for its batch alone
    chosen[m].bwd_data_by_forward = false;     // as are the flipped filter's descriptors
    if (!workspace_sizes(handle, p, chosen[m])) return false;
  }
  for (const ConvMode m : {kOpByOp, kInGraph}) {
    p.mode[m].algorithms = chosen[m];
    p.mode[m].faster[input_grad] = big->mode[m].faster[input_grad];
  }
  const auto path = [&](ConvMode m) { return p.mode[m].faster[input_grad] ? "cuDNN" : "im2col"; };
  const bool same = p.mode[kOpByOp].faster[input_grad] == p.mode[kInGraph].faster[input_grad];
  std::fprintf(stderr,
               "minidl: conv2d [%lld, %lld, %lld, %lld] * [%lld, %lld, %lld, %lld]: %s%s%s, as measured for a larger "
               "batch\n",
               static_cast<long long>(batch), static_cast<long long>(g.channels), static_cast<long long>(g.height),
               static_cast<long long>(g.width), static_cast<long long>(out_channels),
               static_cast<long long>(g.channels), static_cast<long long>(g.kernel_h),
               static_cast<long long>(g.kernel_w), path(kOpByOp), same ? "" : " op by op, ",
               same ? "" : (std::string(path(kInGraph)) + " in a CUDA graph").c_str());
  return true;
}

}  // namespace

bool CudaKernels::conv2d_cudnn_is_faster(DType dtype, int64_t batch, int64_t out_channels, const ConvGeometry& g,
                                         bool input_grad) {
  // Timings vary from run to run, and so would the pick: deterministic mode takes im2col, untimed.
  if (is_deterministic()) return false;
  cuda::DeviceGuard guard(device_);
  cudnnHandle_t handle = cudnn_handle(device_);
  ConvPlan& p = conv_plan(device_, handle, dtype, batch, out_channels, g);
  if (!p.ok) return false;
  const ConvMode mode = conv_mode(stream_);
  const int& faster = p.mode[mode].faster[input_grad];
  if (faster >= 0) return faster == 1;
  // bfloat16 / float16 inside a graph capture: cuDNN on its heuristics' algorithms until measured.
  if (is_reduced_floating(dtype) && mode == kInGraph) return true;
  // Timing needs the device to run now: inside a graph capture, keep im2col and measure later (a
  // measurement op by op settles the verdicts of both modes).
  if (mode == kInGraph) return false;

  // One measurement at a time (conv_plan takes the plans' lock itself).
  static std::mutex measuring;
  std::lock_guard lock(measuring);
  if (faster >= 0) return faster == 1;
  if (adopt_larger_batch(handle, p, device_, dtype, batch, out_channels, g, input_grad)) return faster == 1;
  if (is_reduced_floating(dtype)) {
    // bfloat16 / float16: cuDNN, on its fastest algorithms where the search finds them (else its
    // heuristics'). The im2col path would compute in float32 (ops/conv2d_core.h), not a 16-bit
    // contender worth timing; cuDNN's tensor-op kernels are what PyTorch runs.
    if (p.found < 0) {
      const Device dev = Device::cuda(device_);
      Tensor x = Tensor::empty({batch, g.channels, g.height, g.width}, dtype, dev);
      Tensor gx = Tensor::empty(x.shape(), dtype, dev);
      Tensor w = Tensor::empty({out_channels, g.channels, g.kernel_h, g.kernel_w}, dtype, dev);
      Tensor gw = Tensor::empty(w.shape(), dtype, dev);
      Tensor out = Tensor::empty({batch, out_channels, g.out_h, g.out_w}, dtype, dev);
      for (Tensor* t : {&x, &w, &out, &gx, &gw}) fill(*t, 0.5);
      p.found = find_fastest(handle, p, g, x, w, out, gx, gw) ? 1 : 0;
    }
    for (const ConvMode m : {kOpByOp, kInGraph}) p.mode[m].faster[input_grad] = 1;
    return true;
  }
  // Both paths on the same scratch tensors, as ops/conv2d.cpp runs them: forward with the bias, the
  // input gradient where the op computes one, and the weight and bias gradients (by our reductions on
  // either path).
  const int64_t k = g.channels * g.kernel_h * g.kernel_w, l = g.out_h * g.out_w, o = out_channels;
  const Device dev = Device::cuda(device_);
  Tensor x = Tensor::empty({batch, g.channels, g.height, g.width}, dtype, dev), gx = Tensor::empty(x.shape(), dtype, dev);
  Tensor w = Tensor::empty({o, k}, dtype, dev), gw = Tensor::empty({o, k}, dtype, dev);
  Tensor cols = Tensor::empty({batch, k, l}, dtype, dev);
  Tensor gcols = input_grad ? Tensor::empty({batch, k, l}, dtype, dev) : Tensor();
  Tensor out = Tensor::empty({batch, o, l}, dtype, dev), per_sample = Tensor::empty({batch, o, k}, dtype, dev);
  Tensor bias = Tensor::empty({o}, dtype, dev), gb = Tensor::empty({o}, dtype, dev), gb_rows = Tensor::empty({batch, o}, dtype, dev);
  // The gradients too: some algorithms scale their output by beta = 0 first, reading it.
  for (Tensor* t : {&x, &w, &out, &bias, &gx, &gw}) fill(*t, 0.5);
  // The search times the input's gradient too: its algorithm then serves both verdicts.
  if (p.found < 0) p.found = find_fastest(handle, p, g, x, w, out, gx, gw) ? 1 : 0;
  const Tensor bias_view = Tensor::make_view(bias, {batch, o, l}, {0, 1, 0}, 0);
  const L2Flush flush;
  const auto bias_grad = [&] {
    reduce(ReduceOp::Sum, out, batch * o, l, 1, gb_rows, nullptr);
    reduce(ReduceOp::Sum, gb_rows, 1, batch, o, gb, nullptr);
  };
  // Each mode's algorithms (the second only where they differ from the first) and im2col, in turns.
  std::vector<std::function<void()>> paths;
  Tensor w4 = Tensor::make_view(w, {o, g.channels, g.kernel_h, g.kernel_w}, contiguous_strides({o, g.channels, g.kernel_h, g.kernel_w}), 0);
  Tensor gw4 = Tensor::make_view(gw, w4.shape(), w4.strides(), 0);
  Tensor out4 = Tensor::make_view(out, {batch, o, g.out_h, g.out_w}, contiguous_strides({batch, o, g.out_h, g.out_w}), 0);
  const bool modes_differ = !p.mode[kInGraph].algorithms.same_as(p.mode[kOpByOp].algorithms);
  const Tensor x_planned = as_planned(p, x, x.shape()), out_planned = as_planned(p, out4, out4.shape());
  if (p.found == 1) {
    for (const ConvMode m : {kOpByOp, kInGraph}) {
      if (m == kInGraph && !modes_differ) break;
      paths.push_back([&, m] {
        const ConvAlgorithms& a = p.mode[m].algorithms;
        run_forward(handle, device_, p, a, x, w4, &bias, out4);
        run_backward(handle, device_, p, a, out_planned, x_planned, w4, input_grad ? &gx : nullptr, &gw4, nullptr,
                     false);
        bias_grad();
      });
    }
  }
  paths.push_back([&] {
    im2col(x, g, cols);
    gemm(w, false, cols, false, out, 1, 0);
    binary(BinaryOp::Add, out, bias_view, out);
    if (input_grad) {
      gemm(w, true, out, false, gcols, 1, 0);
      col2im(gcols, g, gx);
    }
    gemm(out, false, cols, true, per_sample, 1, 0);
    reduce(ReduceOp::Sum, per_sample, 1, batch, o * k, gw, nullptr);
    bias_grad();
  });
  const std::vector<float> ms = medians_ms(stream_, flush, 7, paths);
  const float im2col_ms = ms.back();
  float cudnn_ms[2] = {-1, -1};
  if (p.found == 1) cudnn_ms[kOpByOp] = ms[0], cudnn_ms[kInGraph] = modes_differ ? ms[1] : ms[0];
  // im2col keeps its columns for the backward, whose input gradient makes as many again: past the
  // workspace limit cuDNN is taken even where im2col is faster. One log line where both modes
  // agree, else one for each.
  const auto mb = [](size_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
  for (const ConvMode m : {kOpByOp, kInGraph}) {
    const bool im2col_fits = (input_grad ? 2 : 1) * cols.nbytes() <= conv_workspace_limit(m == kInGraph);
    p.mode[m].faster[input_grad] = cudnn_ms[m] >= 0 && (cudnn_ms[m] < im2col_ms || !im2col_fits) ? 1 : 0;
  }
  const bool same = p.mode[kOpByOp].faster[input_grad] == p.mode[kInGraph].faster[input_grad] &&
                    (p.mode[kOpByOp].faster[input_grad] == 0 ||
                     p.mode[kOpByOp].algorithms.same_as(p.mode[kInGraph].algorithms));
  for (const ConvMode m : {kOpByOp, kInGraph}) {
    if (m == kInGraph && same) break;
    const ConvAlgorithms& a = p.mode[m].algorithms;
    // The passes on our Winograd kernels, where the cuDNN path runs them (their numbers are then the
    // cuDNN algorithms they replaced).
    std::string ours;
    for (const auto& [taken, pass] : {std::pair{a.fwd_by_winograd, "the forward"},
                                      std::pair{a.bwd_data_by_winograd, "the input gradient"},
                                      std::pair{a.bwd_filter_by_winograd, "the weight gradient"}})
      if (taken) ours += std::string(ours.empty() ? "; minidl's Winograd for " : ", ") + pass;
    std::fprintf(stderr,
                 "minidl: conv2d [%lld, %lld, %lld, %lld] * [%lld, %lld, %lld, %lld]%s: %s (cuDNN algorithms %d/%d/%d "
                 "%.3f ms with %.0f/%.0f/%.0f MB of workspace, im2col %.3f ms with %.0f MB of columns, forward and %s, "
                 "L2 flushed%s)\n",
                 static_cast<long long>(batch), static_cast<long long>(g.channels), static_cast<long long>(g.height),
                 static_cast<long long>(g.width), static_cast<long long>(o), static_cast<long long>(g.channels),
                 static_cast<long long>(g.kernel_h), static_cast<long long>(g.kernel_w),
                 same ? "" : m == kOpByOp ? " op by op" : " in a CUDA graph",
                 p.mode[m].faster[input_grad] ? "cuDNN" : "im2col", static_cast<int>(a.fwd),
                 static_cast<int>(a.bwd_data), static_cast<int>(a.bwd_filter), cudnn_ms[m], mb(a.fwd_ws),
                 mb(a.bwd_data_ws), mb(a.bwd_filter_ws), im2col_ms, mb(cols.nbytes()),
                 input_grad ? "backward" : "the weight's gradient", ours.c_str());
  }
  return faster == 1;
}

}  // namespace minidl
