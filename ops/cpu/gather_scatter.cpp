// Gather and scatter along a dim over an index of any strides, and nonzero. Gather is parallel
// over rows; scatter (and scatter_reduce's product, maximum and minimum) runs in index order on one
// thread, so repeated destinations end as they would in a loop (the last write wins, sums add in
// order) and every run gives the same bits.
#include <vector>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/strided.h"
#include "ops/scan_step.h"

namespace minidl {

namespace {

// src's strides with the one along `dim` zeroed: the offset of q without its dim part.
Strides without_dim(const Strides& strides, int64_t dim) {
  Strides s = strides;
  s[static_cast<size_t>(dim)] = 0;
  return s;
}

void check_index(int64_t value, int64_t limit, const char* what) {
  MINIDL_CHECK(value >= 0 && value < limit, what, ": index ", value, " is out of bounds (expected 0 <= index < ",
               limit, ")");
}

}  // namespace

void CpuKernels::gather(const Tensor& src, int64_t dim, const Tensor& index, Tensor& out) {
  if (out.numel() == 0) return;
  const Strides src_rest = without_dim(src.strides(), dim);
  const Strides out_strides = contiguous_strides(out.shape());
  const int64_t step = src.strides()[static_cast<size_t>(dim)], rows = src.size(dim);
  const int64_t* idx = index.data<int64_t>();
  dispatch_with_bool(src.dtype(), "gather", [&](auto tag) {
    using T = decltype(tag);
    const T* s = src.data<T>();
    T* o = out.data<T>();
    cpu::for_each_row<3>(index.shape(), {&index.strides(), &src_rest, &out_strides}, [&](auto off, int64_t n, auto inc) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t q = idx[off[0] + i * inc[0]];
        check_index(q, rows, "gather");
        o[off[2] + i * inc[2]] = s[off[1] + i * inc[1] + q * step];
      }
    });
  });
}

namespace {

// Calls combine(dst[q], src[p]) for every index position p in index order (q: p with index[p] at
// `dim`), on this thread.
template <class T, class Combine>
void scatter_in_order(const Tensor& src, int64_t dim, const Tensor& index, Tensor& dst, const char* what,
                      Combine combine) {
  const Shape& shape = index.shape();
  const int64_t n = index.numel(), rank = static_cast<int64_t>(shape.size());
  const Strides dst_rest = without_dim(dst.strides(), dim);
  const int64_t step = dst.strides()[static_cast<size_t>(dim)], rows = dst.size(dim);
  const int64_t* idx = index.data<int64_t>();
  const T* s = src.data<T>();
  T* d = dst.data<T>();
  // An odometer over index's shape, keeping the three offsets as it goes.
  std::vector<int64_t> at(static_cast<size_t>(rank), 0);
  int64_t oi = 0, os = 0, od = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t q = idx[oi];
    check_index(q, rows, what);
    combine(d[od + q * step], s[os]);
    for (int64_t k = rank - 1; k >= 0; --k) {
      const auto ks = static_cast<size_t>(k);
      oi += index.strides()[ks];
      os += src.strides()[ks];
      od += dst_rest[ks];
      if (++at[ks] < shape[ks]) break;
      oi -= shape[ks] * index.strides()[ks];
      os -= shape[ks] * src.strides()[ks];
      od -= shape[ks] * dst_rest[ks];
      at[ks] = 0;
    }
  }
}

template <class T, ScanOp kOp>
void scatter_step(const Tensor& src, int64_t dim, const Tensor& index, Tensor& dst) {
  using Acc = compute_t<T>;
  scatter_in_order<T>(src, dim, index, dst, "scatter_reduce", [](T& to, const T& from) {
    to = static_cast<T>(ScanStep<Acc, kOp>()(static_cast<Acc>(to), static_cast<Acc>(from)));
  });
}

}  // namespace

void CpuKernels::scatter(const Tensor& src, int64_t dim, const Tensor& index, Tensor& dst, bool accumulate) {
  if (index.numel() == 0) return;
  if (accumulate) {
    dispatch_all_and_half(dst.dtype(), "scatter_add", [&](auto tag) {
      using T = decltype(tag);
      scatter_in_order<T>(src, dim, index, dst, "scatter_add",
                          [](T& to, const T& from) { to = static_cast<T>(to + from); });
    });
  } else {
    dispatch_with_bool(dst.dtype(), "scatter", [&](auto tag) {
      using T = decltype(tag);
      scatter_in_order<T>(src, dim, index, dst, "scatter", [](T& to, const T& from) { to = from; });
    });
  }
}

void CpuKernels::scatter_reduce(const Tensor& src, int64_t dim, const Tensor& index, Tensor& dst, ScanOp op) {
  MINIDL_CHECK(op == ScanOp::Prod || op == ScanOp::Max || op == ScanOp::Min,
               "scatter_reduce: expected the product, maximum or minimum step");
  if (index.numel() == 0) return;
  dispatch_all_and_half(dst.dtype(), "scatter_reduce", [&](auto tag) {
    using T = decltype(tag);
    if (op == ScanOp::Prod) scatter_step<T, ScanOp::Prod>(src, dim, index, dst);
    else if (op == ScanOp::Max) scatter_step<T, ScanOp::Max>(src, dim, index, dst);
    else scatter_step<T, ScanOp::Min>(src, dim, index, dst);
  });
}

Tensor CpuKernels::nonzero(const Tensor& x) {
  const int64_t n = x.numel(), rank = x.dim();
  std::vector<int64_t> flat;
  dispatch_with_bool(x.dtype(), "nonzero", [&](auto tag) {
    using T = decltype(tag);
    const T* v = x.data<T>();
    for (int64_t i = 0; i < n; ++i)
      if (v[i] != T(0)) flat.push_back(i);
  });
  const auto count = static_cast<int64_t>(flat.size());
  Tensor out = Tensor::empty({count, rank}, kInt64, x.device());
  int64_t* o = out.data<int64_t>();
  for (int64_t r = 0; r < count; ++r) {
    int64_t rem = flat[static_cast<size_t>(r)];
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t size = x.shape()[static_cast<size_t>(d)];
      o[r * rank + d] = rem % size;
      rem /= size;
    }
  }
  return out;
}

}  // namespace minidl
