#include <cstring>
#include <type_traits>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/strided.h"
#include "ops/widen_16bit.h"

namespace minidl {

namespace {

// A floating value goes to a narrow integer through int64, as PyTorch's conversion does: it
// truncates toward zero, and an out-of-range value wraps the same way on every run instead of
// being undefined.
template <class D, class S>
D convert(S value) {
  if constexpr (is_16bit_float_v<S>) {  // through float32, so that it truncates as a float does
    return convert<D>(static_cast<float>(value));
  } else if constexpr (is_16bit_float_v<D>) {
    return D(static_cast<float>(value));  // as c10's conversions: a double rounds to float first
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D> && !std::is_same_v<D, bool> &&
                !std::is_same_v<D, int64_t>) {
    return static_cast<D>(static_cast<int64_t>(value));
  } else {
    return static_cast<D>(value);
  }
}

void check_indices(const int64_t* idx, int64_t k, int64_t rows) {
  for (int64_t i = 0; i < k; ++i) {
    MINIDL_CHECK(idx[i] >= 0 && idx[i] < rows, "index_select: index ", idx[i], " at position ", i,
                 " is out of range for a dimension of size ", rows, " (expected 0 <= index < ", rows, ")");
  }
}

}  // namespace

void CpuKernels::copy(const Tensor& src, Tensor& dst) {
  if (dst.numel() == 0) return;  // an empty tensor may have no storage, and memcpy wants real pointers
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    std::memcpy(dst.raw_data(), src.raw_data(), src.nbytes());
    return;
  }
  dispatch_with_bool(src.dtype(), "copy", [&](auto src_tag) {
    using S = decltype(src_tag);
    dispatch_with_bool(dst.dtype(), "copy", [&](auto dst_tag) {
      using D = decltype(dst_tag);
      const S* s = src.data<S>();
      D* d = dst.data<D>();
      cpu::for_each_row<2>(dst.shape(), {&dst.strides(), &src.strides()}, [&](auto off, int64_t n, auto inc) {
        for (int64_t i = 0; i < n; ++i) d[off[0] + i * inc[0]] = convert<D>(s[off[1] + i * inc[1]]);
      });
    });
  });
}

void CpuKernels::fill(Tensor& dst, double value) {
  dispatch_with_bool(dst.dtype(), "fill", [&](auto tag) {
    using T = decltype(tag);
    T* d = dst.data<T>();
    const int64_t n = dst.numel();
    const T v = convert<T>(value);
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) d[i] = v;
  });
}

void CpuKernels::arange(Tensor& dst, double start, double step) {
  dispatch_all_and_half(dst.dtype(), "arange", [&](auto tag) {
    using T = decltype(tag);
    T* d = dst.data<T>();
    const int64_t n = dst.numel();
    for (int64_t i = 0; i < n; ++i) d[i] = convert<T>(start + static_cast<double>(i) * step);
  });
}

void CpuKernels::index_select(const Tensor& src, int64_t dim, const Tensor& index, Tensor& out) {
  const IndexGeometry g = index_geometry(src.shape(), dim, index.numel());
  const int64_t* idx = index.data<int64_t>();
  check_indices(idx, g.k, g.rows);
  // Whole slices are contiguous runs of `inner` elements: one memcpy each, dtype-agnostic.
  const size_t run = static_cast<size_t>(g.inner) * element_size(src.dtype());
  const char* s = static_cast<const char*>(src.raw_data());
  char* o = static_cast<char*>(out.raw_data());
  const int64_t runs = g.outer * g.k;
#pragma omp parallel for if (runs * static_cast<int64_t>(run) > (1 << 20))
  for (int64_t r = 0; r < runs; ++r) {
    const int64_t a = r / g.k, i = r - a * g.k;
    std::memcpy(o + r * run, s + (a * g.rows + idx[i]) * run, run);
  }
}

void CpuKernels::index_add(const Tensor& src, int64_t dim, const Tensor& index, Tensor& dst) {
  if (is_reduced_floating(dst.dtype())) {  // accumulated in float32, rounded once (ops/widen_16bit.h)
    Widened w(*this);
    Tensor dst32 = w.output(dst);
    index_add(w.input(src), dim, index, dst32);
    return w.finish();
  }
  const IndexGeometry g = index_geometry(dst.shape(), dim, index.numel());
  const int64_t* idx = index.data<int64_t>();
  check_indices(idx, g.k, g.rows);
  dispatch_floating(dst.dtype(), "index_add", [&](auto tag) {
    using T = decltype(tag);
    const T* s = src.data<T>();
    T* d = dst.data<T>();
    // Repeated indices write the same destination slice: parallel over `outer` only, where the
    // slices of different threads never meet.
#pragma omp parallel for if (g.outer > 1 && g.outer * g.k * g.inner > 32768)
    for (int64_t a = 0; a < g.outer; ++a)
      for (int64_t i = 0; i < g.k; ++i) {
        const T* from = s + (a * g.k + i) * g.inner;
        T* to = d + (a * g.rows + idx[i]) * g.inner;
        for (int64_t c = 0; c < g.inner; ++c) to[c] += from[c];
      }
  });
}

}  // namespace minidl
