// Comparisons and where on CUDA: one strided kernel each (broadcast operands have stride 0), with
// 32-bit index math where every offset fits. The comparison is a template parameter, so the
// kernel has no per-element switch.
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

struct Eq { template <class T> __device__ bool operator()(T a, T b) const { return a == b; } };
struct Ne { template <class T> __device__ bool operator()(T a, T b) const { return a != b; } };
struct Lt { template <class T> __device__ bool operator()(T a, T b) const { return a < b; } };
struct Le { template <class T> __device__ bool operator()(T a, T b) const { return a <= b; } };
struct Gt { template <class T> __device__ bool operator()(T a, T b) const { return a > b; } };
struct Ge { template <class T> __device__ bool operator()(T a, T b) const { return a >= b; } };

template <class Fn>
void with_comparison(CompareOp op, Fn&& fn) {
  switch (op) {
    case CompareOp::Eq: return fn(Eq{});
    case CompareOp::Ne: return fn(Ne{});
    case CompareOp::Lt: return fn(Lt{});
    case CompareOp::Le: return fn(Le{});
    case CompareOp::Gt: return fn(Gt{});
    case CompareOp::Ge: return fn(Ge{});
  }
}

template <class T, class Cmp, class Index>
__global__ void compare_kernel(Cmp cmp, const T* a, const T* b, bool* out, Strided<3> m, Index n) {
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < n; i += Index(gridDim.x) * blockDim.x) {
    Index off[3];
    strided_offsets(m, i, off);
    out[off[0]] = cmp(a[off[1]], b[off[2]]);
  }
}

template <class T, class Index>
__global__ void where_kernel(const bool* cond, const T* a, const T* b, T* out, Strided<4> m, Index n) {
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < n; i += Index(gridDim.x) * blockDim.x) {
    Index off[4];
    strided_offsets(m, i, off);
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
}

}  // namespace

void CudaKernels::compare(CompareOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  Strided<3> m = make_strided<3>(out.shape(), {&out.strides(), &a.strides(), &b.strides()});
  const bool small = fits_32bit(m, n);
  dispatch_with_bool(a.dtype(), "compare", [&](auto tag) {
    using T = decltype(tag);
    with_comparison(op, [&](auto cmp) {
      using Cmp = decltype(cmp);
      if (small) {
        compare_kernel<T, Cmp, uint32_t><<<blocks_for(n), kThreads, 0, stream_>>>(
            cmp, ptr<const T>(a), ptr<const T>(b), ptr<bool>(out), m, static_cast<uint32_t>(n));
      } else {
        compare_kernel<T, Cmp, int64_t><<<blocks_for(n), kThreads, 0, stream_>>>(cmp, ptr<const T>(a), ptr<const T>(b),
                                                                                ptr<bool>(out), m, n);
      }
      CUDA_LAUNCH_CHECK(compare_kernel);
    });
  });
}

void CudaKernels::where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  Strided<4> m = make_strided<4>(out.shape(), {&out.strides(), &cond.strides(), &a.strides(), &b.strides()});
  const bool small = fits_32bit(m, n);
  dispatch_with_bool(out.dtype(), "where", [&](auto tag) {
    using T = decltype(tag);
    if (small) {
      where_kernel<T, uint32_t><<<blocks_for(n), kThreads, 0, stream_>>>(
          ptr<const bool>(cond), ptr<const T>(a), ptr<const T>(b), ptr<T>(out), m, static_cast<uint32_t>(n));
    } else {
      where_kernel<T, int64_t><<<blocks_for(n), kThreads, 0, stream_>>>(ptr<const bool>(cond), ptr<const T>(a),
                                                                       ptr<const T>(b), ptr<T>(out), m, n);
    }
    CUDA_LAUNCH_CHECK(where_kernel);
  });
}

}  // namespace minidl
