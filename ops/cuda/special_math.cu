// The special functions of UnaryOp (erfc, erfinv, lgamma, digamma, polygamma, ndtri and the Bessel
// functions) on CUDA, in a kernel of their own: Eigen's series (ops/special_functions.h, the same code
// the CPU runs) are long, and inside the elementwise kernel's switch they would raise the register
// count, and lower the occupancy, of every other op that runs through it.
#include "ops/cuda/special_math.h"

#include "ops/cuda/common.cuh"
#include "ops/special_functions.h"

namespace minidl::cuda {

namespace {

template <class C>
__device__ C special_of(UnaryOp op, C x, C scalar) {
  switch (op) {
    case UnaryOp::Erfc: return special_fn::erfc(x);
    case UnaryOp::Erfinv:
      if constexpr (std::is_same_v<C, float>) return ::erfinvf(x);
      else return ::erfinv(x);
    case UnaryOp::Lgamma: return special_fn::lgamma(x);
    case UnaryOp::Digamma: return special_fn::digamma(x);
    case UnaryOp::Polygamma: return special_fn::polygamma(scalar, x);
    case UnaryOp::Ndtri: return special_fn::ndtri(x);
    case UnaryOp::I0: return special_fn::i0(x);
    case UnaryOp::I0e: return special_fn::i0e(x);
    case UnaryOp::I1: return special_fn::i1(x);
    case UnaryOp::I1e: return special_fn::i1e(x);
    default: return x;  // is_special_unary keeps the others away
  }
}

template <class T, class C>
__global__ void special_unary_kernel(UnaryOp op, const T* x, T* out, int64_t n, C scalar) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = static_cast<T>(special_of<C>(op, static_cast<C>(x[i]), scalar));
}

}  // namespace

void special_unary(UnaryOp op, const Tensor& x, Tensor& out, double scalar, cudaStream_t stream) {
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_floating_and_half(x.dtype(), "special function", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    special_unary_kernel<T, C><<<blocks_for(n), kThreads, 0, stream>>>(op, ptr<const T>(x), ptr<T>(out), n,
                                                                        static_cast<C>(scalar));
    CUDA_LAUNCH_CHECK(special_unary_kernel);
  });
}

}  // namespace minidl::cuda
