// The special functions of UnaryOp (erfc, erfinv, lgamma, digamma, polygamma, ndtri and the Bessel
// functions) on CUDA, in a kernel of their own: Eigen's series (ops/special_functions.h, the same code
// the CPU runs) are long, and inside the elementwise kernel's switch they would raise the register
// count, and lower the occupancy, of every other op that runs through it.
#include "ops/cuda/special_math.h"

#include "ops/cuda/common.cuh"
#include "ops/special_functions.h"

namespace minidl::cuda {

namespace {

template <class T, class C>
__global__ void special_unary_kernel(UnaryOp op, const T* x, T* out, int64_t n, C scalar) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = static_cast<T>(special_fn::apply<C>(op, static_cast<C>(x[i]), scalar));
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
