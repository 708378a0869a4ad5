// GEMM on Eigen: row-major maps over our storage, no copies; transposes are Eigen expressions.
// Eigen parallelizes one large product across OpenMP threads; a batch of small ones is split
// across threads instead.
#include <Eigen/Core>

#include "ops/cpu/cpu_kernels.h"

namespace minidl {

namespace {

template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <class T>
void gemm_one(const T* a, int64_t a_rows, int64_t a_cols, bool trans_a, const T* b, int64_t b_rows, int64_t b_cols,
              bool trans_b, T* c, int64_t m, int64_t n, T alpha, T beta) {
  Eigen::Map<const Matrix<T>> A(a, a_rows, a_cols), B(b, b_rows, b_cols);
  Eigen::Map<Matrix<T>> C(c, m, n);
  if (beta == T(0)) {
    if (!trans_a && !trans_b) C.noalias() = alpha * A * B;
    else if (trans_a && !trans_b) C.noalias() = alpha * A.transpose() * B;
    else if (!trans_a && trans_b) C.noalias() = alpha * A * B.transpose();
    else C.noalias() = alpha * A.transpose() * B.transpose();
  } else {
    if (beta != T(1)) C *= beta;
    if (!trans_a && !trans_b) C.noalias() += alpha * A * B;
    else if (trans_a && !trans_b) C.noalias() += alpha * A.transpose() * B;
    else if (!trans_a && trans_b) C.noalias() += alpha * A * B.transpose();
    else C.noalias() += alpha * A.transpose() * B.transpose();
  }
}

}  // namespace

void CpuKernels::gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, double alpha,
                      double beta) {
  const bool batched = c.dim() == 3;
  const int64_t batch = batched ? c.size(0) : 1;
  const int64_t m = c.size(-2), n = c.size(-1);
  const int64_t a_rows = a.size(-2), a_cols = a.size(-1), b_rows = b.size(-2), b_cols = b.size(-1);
  const int64_t a_step = a.dim() == 3 ? a_rows * a_cols : 0;  // a 2-D operand is shared by the batch
  const int64_t b_step = b.dim() == 3 ? b_rows * b_cols : 0;
  dispatch_floating(c.dtype(), "gemm", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = c.data<T>();
    auto one = [&](int64_t i) {
      gemm_one<T>(pa + i * a_step, a_rows, a_cols, trans_a, pb + i * b_step, b_rows, b_cols, trans_b, pc + i * m * n,
                  m, n, static_cast<T>(alpha), static_cast<T>(beta));
    };
    if (batch == 1) {
      one(0);
      return;
    }
    // Many small products: one per thread. Inside a parallel region Eigen runs single-threaded.
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < batch; ++i) one(i);
  });
}

}  // namespace minidl
