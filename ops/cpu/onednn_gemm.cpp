// Float32 GEMM on oneDNN (dnnl_sgemm). Its JIT kernels made the MLP's training step at batch 512
// 11% faster than Eigen's in minidl's own grid of blocks (ops/cpu/matmul.cpp): 90.7k -> 101k
// img/s with `bench --model mlp --batch-size 512` on 2 AVX-512 cores (docs/benchmarks.md).
//
// minidl's CPU results must not depend on the thread count, and oneDNN may split a product's depth
// across threads (one of the MLP's products gave other bits on 1 than on 2 threads). So it always
// runs on one fixed team, the machine's cores, whatever set_num_threads says, as the convolutions'
// weight gradient does (ops/cpu/onednn_conv.cpp).
#include "ops/cpu/onednn_gemm.h"

#if MINIDL_WITH_ONEDNN

#include <dnnl.h>
#include <omp.h>

#include "core/error.h"

namespace minidl {

bool onednn_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  static const int kThreads = omp_get_num_procs();
  const int previous = omp_get_max_threads();
  omp_set_num_threads(kThreads);
  const dnnl_status_t status =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  omp_set_num_threads(previous);
  MINIDL_CHECK(status == dnnl_success, "gemm on oneDNN: dnnl_sgemm failed with status ", static_cast<int>(status),
               " for ", m, " x ", k, " by ", k, " x ", n);
  return true;
}

}  // namespace minidl

#else

namespace minidl {

bool onednn_sgemm(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t, float,
                  float*, int64_t) {
  return false;
}

}  // namespace minidl

#endif
