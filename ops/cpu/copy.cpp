#include <cstring>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/strided.h"

namespace minidl {

void CpuKernels::copy(const Tensor& src, Tensor& dst) {
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    std::memcpy(dst.raw_data(), src.raw_data(), src.nbytes());
    return;
  }
  dispatch_all(src.dtype(), "copy", [&](auto src_tag) {
    using S = decltype(src_tag);
    dispatch_all(dst.dtype(), "copy", [&](auto dst_tag) {
      using D = decltype(dst_tag);
      const S* s = src.data<S>();
      D* d = dst.data<D>();
      cpu::for_each_row<2>(dst.shape(), {&dst.strides(), &src.strides()}, [&](auto off, int64_t n, auto inc) {
        for (int64_t i = 0; i < n; ++i) d[off[0] + i * inc[0]] = static_cast<D>(s[off[1] + i * inc[1]]);
      });
    });
  });
}

void CpuKernels::fill(Tensor& dst, double value) {
  dispatch_all(dst.dtype(), "fill", [&](auto tag) {
    using T = decltype(tag);
    T* d = dst.data<T>();
    const int64_t n = dst.numel();
    const T v = static_cast<T>(value);
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) d[i] = v;
  });
}

void CpuKernels::index_select(const Tensor& src, const Tensor& index, Tensor& out) {
  const int64_t rows = src.size(0);
  const size_t row_bytes = src.nbytes() / static_cast<size_t>(std::max<int64_t>(rows, 1));
  const int64_t* idx = index.data<int64_t>();
  const char* s = static_cast<const char*>(src.raw_data());
  char* o = static_cast<char*>(out.raw_data());
  const int64_t k = index.numel();
  for (int64_t i = 0; i < k; ++i) {
    MINIDL_CHECK(idx[i] >= 0 && idx[i] < rows, "index_select: index ", idx[i], " is out of range for dimension 0 of size ", rows);
  }
#pragma omp parallel for if (k * static_cast<int64_t>(row_bytes) > (1 << 20))
  for (int64_t i = 0; i < k; ++i) std::memcpy(o + i * row_bytes, s + idx[i] * row_bytes, row_bytes);
}

}  // namespace minidl
