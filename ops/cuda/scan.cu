// Cumulative scans (sum, product, max, min, logaddexp: ops/scan_step.h) over n of an [outer, n, inner]
// view, and cumprod's exact gradient.
//  - inner == 1 (contiguous rows): one block per row, cub::BlockScan over tiles of the row with a
//    running prefix carried from tile to tile.
//  - inner > 1 (a scan over a dim that is not innermost): one thread per (outer, column), walking n
//    sequentially; neighbouring threads read neighbouring columns, so each row is read coalesced.
// float32 accumulates in double, like the CPU kernels; the block scan adds in another order than the
// CPU's sequential loop, so float results agree to rounding, not bit for bit.
#include <cub/block/block_scan.cuh>

#include "ops/cuda/common.cuh"
#include "ops/scan_step.h"
#include "ops/widen_16bit.h"

namespace minidl {

namespace {

using namespace cuda;

constexpr int kScanThreads = 256;

// Called by the first warp with each tile's total: hands out the prefix of the tiles before it.
template <class Acc, ScanOp kOp>
struct RunningPrefix {
  Acc running;
  __device__ Acc operator()(Acc tile_total) {
    const Acc before = running;
    running = ScanStep<Acc, kOp>()(running, tile_total);
    return before;
  }
};

template <class T, ScanOp kOp>
__global__ void scan_rows(const T* x, int64_t rows, int64_t n, bool reverse, T* out) {
  using Acc = AccT<T>;
  using BlockScan = cub::BlockScan<Acc, kScanThreads>;
  __shared__ typename BlockScan::TempStorage temp;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* p = x + row * n;
    T* o = out + row * n;
    RunningPrefix<Acc, kOp> prefix{ScanStep<Acc, kOp>::identity()};
    for (int64_t base = 0; base < n; base += kScanThreads) {
      const int64_t step = base + threadIdx.x;
      const int64_t i = reverse ? n - 1 - step : step;
      Acc v = step < n ? Acc(p[i]) : ScanStep<Acc, kOp>::identity();
      BlockScan(temp).InclusiveScan(v, v, ScanStep<Acc, kOp>(), prefix);
      __syncthreads();  // temp is reused by the next tile
      if (step < n) o[i] = static_cast<T>(v);
    }
  }
}

template <class T, ScanOp kOp>
__global__ void scan_columns(const T* x, int64_t outer, int64_t n, int64_t inner, bool reverse, T* out) {
  using Acc = AccT<T>;
  const int64_t columns = outer * inner;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < columns; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t a = t / inner, c = t - a * inner;
    const int64_t base = a * n * inner + c;
    Acc acc = ScanStep<Acc, kOp>::identity();
    for (int64_t step = 0; step < n; ++step) {
      const int64_t at = base + (reverse ? n - 1 - step : step) * inner;
      acc = ScanStep<Acc, kOp>()(acc, Acc(x[at]));
      out[at] = static_cast<T>(acc);
    }
  }
}

// As the CPU kernel: grad[i] = (product of x before i) * S[i], S[i] = g[i] + x[i+1] * S[i+1].
template <class T>
__global__ void cumprod_backward_columns(const T* x, const T* g, int64_t outer, int64_t n, int64_t inner, T* grad) {
  using Acc = AccT<T>;
  const int64_t columns = outer * inner;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < columns; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t a = t / inner, c = t - a * inner;
    const int64_t base = a * n * inner + c;
    Acc s = 0;
    for (int64_t i = n - 1; i >= 0; --i) {
      const int64_t at = base + i * inner;
      s = Acc(g[at]) + (i + 1 < n ? Acc(x[at + inner]) * s : Acc(0));
      grad[at] = static_cast<T>(s);
    }
    Acc p = 1;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = base + i * inner;
      grad[at] = static_cast<T>(p * Acc(grad[at]));
      p *= Acc(x[at]);
    }
  }
}

template <class T, ScanOp kOp>
void launch_scan(const T* x, int64_t outer, int64_t n, int64_t inner, bool reverse, T* out, cudaStream_t stream) {
  if (inner == 1) {
    scan_rows<T, kOp><<<static_cast<unsigned>(std::min<int64_t>(outer, kMaxBlocks)), kScanThreads, 0, stream>>>(
        x, outer, n, reverse, out);
    CUDA_LAUNCH_CHECK(scan_rows);
  } else {
    scan_columns<T, kOp><<<blocks_for(outer * inner), kThreads, 0, stream>>>(x, outer, n, inner, reverse, out);
    CUDA_LAUNCH_CHECK(scan_columns);
  }
}

}  // namespace

void CudaKernels::scan(ScanOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool reverse,
                       Tensor& out) {
  if (is_reduced_floating(x.dtype())) {  // computed in float32 (ops/widen_16bit.h)
    Widened w(*this);
    Tensor out32 = w.output(out);
    scan(op, w.input(x), outer, n, inner, reverse, out32);
    return w.finish();
  }
  MINIDL_CHECK(op != ScanOp::LogAddExp || is_floating(x.dtype()), "scan: logaddexp needs a floating tensor, got ",
               x.dtype());
  if (outer * n * inner == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_all(x.dtype(), "scan", [&](auto tag) {
    using T = decltype(tag);
    const T* in = ptr<const T>(x);
    T* o = ptr<T>(out);
    switch (op) {
      case ScanOp::Sum: return launch_scan<T, ScanOp::Sum>(in, outer, n, inner, reverse, o, stream_);
      case ScanOp::Prod: return launch_scan<T, ScanOp::Prod>(in, outer, n, inner, reverse, o, stream_);
      case ScanOp::Max: return launch_scan<T, ScanOp::Max>(in, outer, n, inner, reverse, o, stream_);
      case ScanOp::Min: return launch_scan<T, ScanOp::Min>(in, outer, n, inner, reverse, o, stream_);
      case ScanOp::LogAddExp:
        if constexpr (!std::is_integral_v<T>)
          return launch_scan<T, ScanOp::LogAddExp>(in, outer, n, inner, reverse, o, stream_);
        return;
    }
  });
}

void CudaKernels::cumprod_backward(const Tensor& x, const Tensor& grad_out, int64_t outer, int64_t n, int64_t inner,
                                   Tensor& grad_in) {
  if (outer * n * inner == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(x.dtype(), "cumprod_backward", [&](auto tag) {
    using T = decltype(tag);
    cumprod_backward_columns<T><<<blocks_for(outer * inner), kThreads, 0, stream_>>>(
        ptr<const T>(x), ptr<const T>(grad_out), outer, n, inner, ptr<T>(grad_in));
    CUDA_LAUNCH_CHECK(cumprod_backward_columns);
  });
}

}  // namespace minidl
